// The one-rank communicator: with a single rank, sums, means, maxima and broadcasts are the
// identity, so each collective returns immediately.
#include "dist/communicator.h"

namespace bert {
namespace {

class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return "local"; }
  bool is_local() const override { return true; }
  void allreduce_sum(float*, int64_t) override {}
  void allreduce_host(float*, int64_t, ReduceOp) override {}
  void broadcast(float*, int64_t) override {}
  void allreduce_sum_host(double*, int64_t) override {}
  void reduce_scatter_sum(float*, const std::vector<int64_t>&) override {}
  void all_gather(float*, const std::vector<int64_t>&) override {}
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() { return std::make_unique<LocalCommunicator>(); }

}  // namespace bert
