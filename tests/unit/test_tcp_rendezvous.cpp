// The NCCL bootstrap's TCP rendezvous: rank 0's payload reaches every peer over loopback,
// peers that start before rank 0 listens retry, and a missing rank 0 or a silent listener
// end in Error(distributed) naming host:port within the timeout.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/tcp_rendezvous.h"

namespace bert {
namespace {

// A free TCP port on loopback (bound, read back, released).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(TcpRendezvous, EveryPeerGetsRankZerosPayloadEvenWhenItConnectsFirst) {
  const int port = free_port();
  std::string payload(128, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7 + 3);
  std::vector<std::future<std::string>> peers;
  for (int rank = 1; rank < 4; ++rank) {
    peers.push_back(std::async(std::launch::async,
                               [&, rank] { return share_from_rank0_over_tcp("127.0.0.1", port, rank, 4, "", 10); }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the peers are already retrying
  EXPECT_EQ(share_from_rank0_over_tcp("localhost", port, 0, 4, payload, 10), payload);
  for (auto& p : peers) EXPECT_EQ(p.get(), payload);
}

TEST(TcpRendezvous, NoRankZeroTimesOutNamingTheAddress) {
  const int port = free_port();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    share_from_rank0_over_tcp("127.0.0.1", port, 1, 2, "", 0.5);
    FAIL() << "no error without rank 0";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::distributed);
    const std::string m = e.what();
    EXPECT_NE(m.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << m;
    EXPECT_NE(m.find("rank 0 never accepted a connection"), std::string::npos) << m;
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(waited, 3.0);
}

TEST(TcpRendezvous, RankZeroTimesOutWhenAPeerNeverComes) {
  const int port = free_port();
  try {
    share_from_rank0_over_tcp("127.0.0.1", port, 0, 2, "id", 0.3);
    FAIL() << "no error without the peer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::distributed);
    EXPECT_NE(std::string(e.what()).find("waiting for rank 1 to connect (never came)"), std::string::npos) << e.what();
  }
}

// Of four ranks, 1 and 3 come: rank 0 names 2, the one that never connected.
TEST(TcpRendezvous, RankZeroNamesTheRanksThatNeverCame) {
  const int port = free_port();
  std::vector<std::future<void>> peers;
  for (int rank : {1, 3}) {
    peers.push_back(std::async(std::launch::async, [&, rank] {
      EXPECT_EQ(share_from_rank0_over_tcp("127.0.0.1", port, rank, 4, "", 10), "id");
    }));
  }
  try {
    share_from_rank0_over_tcp("127.0.0.1", port, 0, 4, "id", 1.0);
    FAIL() << "no error without rank 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("waiting for rank 2 to connect (never came)"), std::string::npos) << e.what();
  }
  for (auto& p : peers) p.get();
}

// A raw client that connects to rank 0 (retrying until it listens) and announces `rank`.
std::thread announce(int port, uint32_t rank) {
  return std::thread([port, rank] {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    for (int attempt = 0; attempt < 200; ++attempt) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
        const uint32_t wire = htonl(rank);
        ::send(fd, &wire, sizeof wire, MSG_NOSIGNAL);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 0 reads it meanwhile
        ::close(fd);
        return;
      }
      ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
}

TEST(TcpRendezvous, RankZeroRefusesAnnouncedRanksOutsideTheWorldOrTwice) {
  for (const auto& [ranks, message] : {std::pair<std::vector<uint32_t>, std::string>{{7}, "a peer announced rank 7, outside 1..2"},
                                       {{0}, "a peer announced rank 0, outside 1..2"},
                                       {{1, 1}, "rank 1 connected twice (two processes with one rank?)"}}) {
    const int port = free_port();
    std::vector<std::thread> peers;
    for (uint32_t r : ranks) peers.push_back(announce(port, r));
    try {
      share_from_rank0_over_tcp("127.0.0.1", port, 0, 3, "id", 5);
      ADD_FAILURE() << "no error for " << message;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::distributed);
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
    for (std::thread& t : peers) t.join();
  }
}

TEST(TcpRendezvous, AForeignListenerIsRefused) {
  const int port = free_port();
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  std::thread server([&] {
    const int c = ::accept(listener, nullptr, nullptr);
    const char junk[] = "HTTP/1.1 200 OK\r\n\r\n";
    ::send(c, junk, sizeof junk - 1, MSG_NOSIGNAL);
    ::close(c);
  });
  try {
    share_from_rank0_over_tcp("127.0.0.1", port, 1, 2, "", 5);
    FAIL() << "a foreign listener was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a bertengine rank 0"), std::string::npos) << e.what();
  }
  server.join();
  ::close(listener);
}

TEST(TcpRendezvous, PortOutOfRangeIsAConfigError) {
  try {
    share_from_rank0_over_tcp("127.0.0.1", 70000, 1, 2, "", 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::config);
  }
}

}  // namespace
}  // namespace bert
