// TCP rendezvous for the NCCL bootstrap (see tcp_rendezvous.h). A peer first sends its rank
// (4 bytes, big-endian), so that rank 0 can name the ranks that never came; rank 0 answers with a
// fixed magic, a 4-byte big-endian length and the payload. Sockets are non-blocking and polled
// against one deadline; sends use MSG_NOSIGNAL so a vanished peer cannot raise SIGPIPE in the
// host.
#include "dist/tcp_rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/deadline.h"

namespace bert {
namespace {

constexpr char kMagic[8] = {'b', 'e', 'r', 't', 'r', 'd', 'v', '1'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + 4;
constexpr size_t kMaxPayloadBytes = 1 << 16;
constexpr int kConnectRetryMs = 50;

// Closes the socket when it goes out of scope.
struct Socket {
  int fd = -1;
  explicit Socket(int f) : fd(f) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

class Rendezvous {
 public:
  Rendezvous(std::string host, int port, double timeout_s)
      : host_(std::move(host)), port_(port), deadline_(timeout_s) {}

  [[noreturn]] void fail_with(const std::string& what, int err = 0) const {
    fail(Code::distributed, "NCCL bootstrap over TCP at ", host_, ":", port_, ": ", what,
         err ? std::string(" (") + std::strerror(err) + ")" : std::string());
  }

  int remaining_ms() const {
    const double left = deadline_.timeout() - deadline_.elapsed();
    return left <= 0 ? 0 : static_cast<int>(left * 1000) + 1;
  }

  // Waits until fd is ready for `events`, or fails once the deadline has passed.
  void wait_for(int fd, short events, const char* what) const {
    while (true) {
      pollfd p{fd, events, 0};
      const int ms = remaining_ms();
      if (ms == 0) fail_with(std::string("timed out after ") + std::to_string(deadline_.timeout()) + " s " + what);
      const int rc = ::poll(&p, 1, ms);
      if (rc > 0) return;
      if (rc < 0 && errno != EINTR) fail_with(what, errno);
    }
  }

  void send_all(int fd, const std::string& bytes) const {
    size_t sent = 0;
    while (sent < bytes.size()) {
      wait_for(fd, POLLOUT, "sending the id");
      const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) fail_with("sending the id", errno);
      if (n > 0) sent += static_cast<size_t>(n);
    }
  }

  std::string receive(int fd, size_t count, const char* what) const {
    std::string out(count, '\0');
    size_t got = 0;
    while (got < count) {
      wait_for(fd, POLLIN, what);
      const ssize_t n = ::recv(fd, out.data() + got, count - got, 0);
      if (n == 0) fail_with(std::string("the connection closed while ") + what);
      if (n < 0 && errno != EAGAIN && errno != EINTR) fail_with("receiving the id", errno);
      if (n > 0) got += static_cast<size_t>(n);
    }
    return out;
  }

  // The ranks of 1..world-1 not yet in `joined`, as "rank 3" / "ranks 2, 5".
  static std::string missing_ranks(const std::vector<bool>& joined) {
    std::string list;
    int count = 0;
    for (size_t r = 1; r < joined.size(); ++r) {
      if (!joined[r]) list += (count++ ? ", " : "") + std::to_string(r);
    }
    return (count == 1 ? "rank " : "ranks ") + list;
  }

  // A connected peer's rank: 4 bytes, big-endian, within 1..world-1 and not seen before.
  int peer_rank(int fd, const std::vector<bool>& joined) const {
    const std::string bytes = receive(fd, sizeof(uint32_t), "waiting for a connected peer's rank");
    uint32_t rank = 0;
    std::memcpy(&rank, bytes.data(), sizeof rank);
    rank = ntohl(rank);
    if (rank == 0 || rank >= joined.size()) {
      fail_with("a peer announced rank " + std::to_string(rank) + ", outside 1.." + std::to_string(joined.size() - 1));
    }
    if (joined[rank]) fail_with("rank " + std::to_string(rank) + " connected twice (two processes with one rank?)");
    return static_cast<int>(rank);
  }

  std::string serve(const std::string& payload, int world) const {
    if (payload.size() > kMaxPayloadBytes) fail_with("payload too large");
    Socket listener(::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (listener.fd < 0) fail_with("socket()", errno);
    const int on = 1, off = 0;
    ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    ::setsockopt(listener.fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);  // IPv4 peers too
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port_));
    if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      fail_with("rank 0 cannot listen on port " + std::to_string(port_), errno);
    }
    if (::listen(listener.fd, world) != 0) fail_with("listen()", errno);
    std::string message(kMagic, sizeof kMagic);
    const uint32_t length = htonl(static_cast<uint32_t>(payload.size()));
    message.append(reinterpret_cast<const char*>(&length), sizeof length);
    message += payload;
    std::vector<bool> joined(static_cast<size_t>(world), false);
    for (int served = 1; served < world;) {
      wait_for(listener.fd, POLLIN, ("waiting for " + missing_ranks(joined) + " to connect (never came)").c_str());
      Socket peer(::accept4(listener.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (peer.fd < 0) {
        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) continue;
        fail_with("accept()", errno);
      }
      const int rank = peer_rank(peer.fd, joined);
      send_all(peer.fd, message);
      joined[static_cast<size_t>(rank)] = true;
      ++served;
    }
    return payload;
  }

  // One connection attempt to any address of host:port; -1 if refused or unreachable for now.
  int try_connect() const {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &found);
    if (rc != 0) fail_with(std::string("cannot resolve the host: ") + ::gai_strerror(rc));
    int connected = -1;
    for (addrinfo* a = found; a && connected < 0; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        connected = fd;
      } else if (errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof err;
        if (::poll(&p, 1, std::min(remaining_ms(), 1000)) > 0 &&
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
          connected = fd;
        }
      }
      if (connected != fd) ::close(fd);
    }
    ::freeaddrinfo(found);
    return connected;
  }

  std::string fetch(int rank) const {
    int fd = -1;
    while ((fd = try_connect()) < 0) {
      if (remaining_ms() == 0) {
        fail_with("timed out after " + std::to_string(deadline_.timeout()) + " s: rank 0 never accepted a connection");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kConnectRetryMs));
    }
    Socket peer(fd);
    const uint32_t announced = htonl(static_cast<uint32_t>(rank));
    send_all(peer.fd, std::string(reinterpret_cast<const char*>(&announced), sizeof announced));
    const std::string header = receive(peer.fd, kHeaderBytes, "waiting for rank 0's id");
    if (std::memcmp(header.data(), kMagic, sizeof kMagic) != 0) fail_with("the listener is not a bertengine rank 0");
    uint32_t length = 0;
    std::memcpy(&length, header.data() + sizeof kMagic, sizeof length);
    length = ntohl(length);
    if (length > kMaxPayloadBytes) fail_with("announced payload of " + std::to_string(length) + " bytes is too large");
    return receive(peer.fd, length, "waiting for rank 0's id");
  }

 private:
  std::string host_;
  int port_;
  Deadline deadline_;
};

}  // namespace

std::string share_from_rank0_over_tcp(const std::string& host, int port, int rank, int world_size,
                                      const std::string& payload, double timeout_s) {
  if (port <= 0 || port > 65535) {
    fail(Code::config, "NCCL bootstrap over TCP: port ", port, " (MASTER_PORT + 1) is not a TCP port");
  }
  Rendezvous r(host, port, timeout_s);
  return rank == 0 ? r.serve(payload, world_size) : r.fetch(rank);
}

}  // namespace bert
