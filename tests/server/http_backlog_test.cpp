// The server's listening socket takes many connections at once before it accepts any (issue 53:
// 64 benchmark clients connecting together; cpp-httplib 0.11 listens with a backlog of 5, and
// connections past the accept queue were dropped or reset). Linux only (the second listen()).
#include "http_server.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <vector>

namespace tern::server {
namespace {

TEST(HttpBacklog, SixtyFourClientsConnectBeforeTheFirstAccept) {
    HttpOptions options;
    options.port = 0;
    HttpServer server(options);
    server.bind();  // listening, and never accepting: every connection waits in the queue
    const int port = server.bound_port();
    ASSERT_GT(port, 0);

    constexpr int    n = 64;
    std::vector<int> fds;
    sockaddr_in      addr{};
    addr.sin_family = AF_INET;
    addr.sin_port   = htons(static_cast<uint16_t>(port));
    ASSERT_EQ(inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr), 1);
    for (int i = 0; i < n; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        ASSERT_GE(fd, 0);
        fds.push_back(fd);
        const int rc = ::connect(fd, reinterpret_cast<const sockaddr *>(&addr), sizeof addr);
        ASSERT_TRUE(rc == 0 || errno == EINPROGRESS) << "connect " << i << ": errno " << errno;
    }
    // A connection whose handshake the kernel completed (it is in the accept queue) is writable with
    // no error; one dropped for a full queue stays pending (its SYN is retried after a second).
    int connected = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    std::vector<bool> done(n, false);
    while (connected < n && std::chrono::steady_clock::now() < until) {
        std::vector<pollfd> p;
        std::vector<int>    which;
        for (int i = 0; i < n; ++i) {
            if (!done[i]) {
                p.push_back({fds[i], POLLOUT, 0});
                which.push_back(i);
            }
        }
        if (::poll(p.data(), p.size(), 100) <= 0) continue;
        for (size_t j = 0; j < p.size(); ++j) {
            if (p[j].revents == 0) continue;
            int err = 0;
            socklen_t len = sizeof err;
            ::getsockopt(p[j].fd, SOL_SOCKET, SO_ERROR, &err, &len);
            EXPECT_EQ(err, 0) << "connection " << which[j] << " failed";
            done[which[j]] = true;
            ++connected;
        }
    }
    for (const int fd : fds) ::close(fd);
    EXPECT_EQ(connected, n) << "connections the listening socket queued before the first accept";
}

}  // namespace
}  // namespace tern::server
