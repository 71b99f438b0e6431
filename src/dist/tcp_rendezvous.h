// A one-shot TCP rendezvous: rank 0 hands a small payload (NCCL's unique id) to every other
// rank at host:port, as torchrun's store would, without touching the process environment.
// Every wait is bounded by the deadline; a peer that never comes, a port in use or a
// wrong-protocol answer throws Error(distributed) naming host:port.
#pragma once

#include <string>

namespace bert {

// Rank 0: listens on `port` (every interface), sends `payload` to world_size - 1 peers, returns
// it. Other ranks: connect to host:port (retrying until rank 0 listens), return what it sent.
std::string share_from_rank0_over_tcp(const std::string& host, int port, int rank, int world_size,
                                      const std::string& payload, double timeout_s);

}  // namespace bert
