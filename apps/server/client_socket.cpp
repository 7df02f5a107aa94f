// Client hang-up detection on Linux: match the socket by address, poll for POLLRDHUP.
#include "client_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

namespace tern::server {
namespace {

bool endpoint_of(const sockaddr_storage & a, std::string & host, int & port) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
        const auto * s = reinterpret_cast<const sockaddr_in *>(&a);
        if (!inet_ntop(AF_INET, &s->sin_addr, buf, sizeof buf)) return false;
        port = ntohs(s->sin_port);
    } else if (a.ss_family == AF_INET6) {
        const auto * s = reinterpret_cast<const sockaddr_in6 *>(&a);
        if (!inet_ntop(AF_INET6, &s->sin6_addr, buf, sizeof buf)) return false;
        port = ntohs(s->sin6_port);
    } else {
        return false;
    }
    host = buf;
    return true;
}

}  // namespace

int find_client_socket(const std::string & remote_addr, int remote_port, int local_port) {
    DIR * dir = opendir("/proc/self/fd");
    if (!dir) return -1;
    int found = -1;
    while (dirent * e = readdir(dir)) {
        char *     end = nullptr;
        const long fd  = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd < 0) continue;
        struct stat st {};
        if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        sockaddr_storage peer{}, local{};
        socklen_t        lp = sizeof peer, ll = sizeof local;
        if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr *>(&peer), &lp) != 0) continue;
        if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr *>(&local), &ll) != 0) continue;
        std::string peer_host, local_host;
        int         peer_port = -1, port = -1;
        if (!endpoint_of(peer, peer_host, peer_port) || !endpoint_of(local, local_host, port)) continue;
        if (peer_port == remote_port && port == local_port && peer_host == remote_addr) {
            found = static_cast<int>(fd);
            break;
        }
    }
    closedir(dir);
    return found;
}

bool client_gone(int fd) {
    if (fd < 0) return false;
    pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        char c;
        const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0;
    }
    return false;
}

}  // namespace tern::server
