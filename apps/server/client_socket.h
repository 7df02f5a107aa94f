// Whether the client of a request is still connected. cpp-httplib 0.11 does not tell a handler
// that its client went away (a write fails only after the peer's reset arrives), so the server finds
// the request's socket by its addresses (/proc/self/fd, getpeername) and polls it for a hang-up.
#pragma once

#include <string>

namespace tern::server {

// The descriptor of this process's TCP socket connected from remote_addr:remote_port to local
// port local_port, or -1 when none is found (then the client counts as connected).
int find_client_socket(const std::string & remote_addr, int remote_port, int local_port);

// True when the peer has closed the connection or reset it (pending request bytes count as open).
bool client_gone(int fd);

}  // namespace tern::server
