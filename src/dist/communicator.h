// Communicator: the collectives data-parallel training needs, behind one interface
// (local = one rank; MPI for CPU ranks; NCCL for GPU ranks). Buffers passed to the gradient
// collectives are backend memory; the *_host variants take host memory. Every collective
// either completes or throws Error(distributed) naming the operation (after dist.timeout_s
// when a peer stops answering); a communicator that failed once refuses further calls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bert {

enum class ReduceOp { sum, mean, max };

// The precision gradients travel in. Low-precision sums are taken of values pre-divided by
// the world size (so fp16 does not overflow) and multiplied back after the reduction.
enum class WirePrecision { fp32, bf16, fp16 };
WirePrecision parse_wire_precision(const std::string& name);
const char* wire_precision_name(WirePrecision wire);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Rank among the processes of this machine (picks the GPU); 0 for the local communicator.
  virtual int local_rank() const { return 0; }
  virtual std::string name() const = 0;
  // True for the one-rank communicator, whose collectives do nothing (no gradient buckets).
  virtual bool is_local() const { return false; }
  // In-place sum over ranks of n floats in backend memory.
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  // Starts an in-place sum over ranks of n floats of backend memory once the work queued on
  // `stream` (Ops::native_stream(); null for the CPU) is done, and returns without waiting,
  // so gradient buckets reduce while the backward pass goes on. Every rank starts the same
  // buckets in the same order. finish_allreduce_sums() waits for all started sums; the data
  // must not be touched in between. This default reduces at once (fp32 only).
  virtual void start_allreduce_sum(float* data, int64_t n, WirePrecision wire, void* stream);
  virtual void finish_allreduce_sums() {}
  // Queues on `stream` a wait for every started sum and returns without waiting on the host, so
  // the sums become part of that stream's work and may be recorded with it (a CUDA graph);
  // wait_for_stream() then waits for them. This default waits on the host at once.
  virtual void join_allreduce_sums(void* stream) {
    (void)stream;
    finish_allreduce_sums();
  }
  // Waits on the host for the work queued on `stream`, sums joined into it or replayed with it
  // included; throws Error(distributed) after dist.timeout_s when a peer never takes part in them.
  // This default (sums that completed when joined) waits for nothing.
  virtual void wait_for_stream(void* stream) { (void)stream; }
  // In-place reduction over ranks of n floats in host memory.
  virtual void allreduce_host(float* data, int64_t n, ReduceOp op) = 0;
  // Copies rank 0's n floats (backend memory) to every rank.
  virtual void broadcast(float* data, int64_t n) = 0;
  // In-place sum over ranks of n doubles in host memory (per-tensor norms of a sharded optimizer).
  virtual void allreduce_sum_host(double* data, int64_t n) = 0;
  // Reduce-scatter in place over backend memory split into consecutive ranges, counts[r] floats
  // for rank r (counts has world_size() entries): afterwards this rank's range holds the sum over
  // ranks of that range; the rest of data is unspecified. This default all-reduces the whole
  // buffer (correct, at twice the traffic) for communicators without a reduce-scatter.
  virtual void reduce_scatter_sum(float* data, const std::vector<int64_t>& counts);
  // All-gather in place: every rank's range (as for reduce_scatter_sum) is copied to all ranks.
  virtual void all_gather(float* data, const std::vector<int64_t>& counts) = 0;
  // Every rank's `text`, indexed by rank (checkpoints gather the data cursors with it).
  // The single-rank default returns {text}; multi-rank communicators override it.
  virtual std::vector<std::string> allgather_text(const std::string& text) { return {text}; }
};

// The single-rank communicator: every collective completes locally.
std::unique_ptr<Communicator> make_local_communicator();

}  // namespace bert
