// The NCCL communicator (GPU ranks). The communicator is created non-blocking, so every call
// returns at once and completion is polled (cudaStreamQuery + ncclCommGetAsyncError) against
// dist.timeout_s; on a timeout or an asynchronous error the communicator is aborted
// (ncclCommAbort) and the call throws Error(distributed) naming the operation. Collectives run
// on the communicator's own stream after the device has finished the backend's queued work.
// Gradient buckets instead start without blocking: the communicator's stream waits on an event
// recorded on the backend's stream, so the sums overlap the rest of the backward pass; in
// bf16/fp16 each bucket is cast into a wire buffer, summed in that type and cast back. Joined
// buckets (join_allreduce_sums) make the backend's stream wait for the communicator's with a
// second event, so a CUDA graph recorded on the backend's stream holds the sums too; the host
// then polls the backend's stream against the same deadline (wait_for_stream).
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "dist/deadline.h"
#include "dist/launch.h"
#include "dist/tcp_rendezvous.h"
#include "dist/wire_space.h"
#include "kernels/cast.h"

#define BERT_NCCL_CHECK(call)                                                                          \
  do {                                                                                                 \
    const ncclResult_t bert_nccl_rc_ = (call);                                                         \
    if (bert_nccl_rc_ != ncclSuccess && bert_nccl_rc_ != ncclInProgress) {                             \
      ::bert::fail(::bert::Code::distributed, #call, " failed at ", __FILE__, ":", __LINE__, ": ",     \
                   ncclGetErrorString(bert_nccl_rc_));                                                 \
    }                                                                                                  \
  } while (0)

#define BERT_CUDART_CHECK(call)                                                                        \
  do {                                                                                                 \
    const cudaError_t bert_cuda_rc_ = (call);                                                          \
    if (bert_cuda_rc_ != cudaSuccess) {                                                                \
      ::bert::fail(::bert::Code::backend, #call, " failed at ", __FILE__, ":", __LINE__, ": ",         \
                   cudaGetErrorString(bert_cuda_rc_));                                                 \
    }                                                                                                  \
  } while (0)

namespace bert {
namespace {

static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes, "NCCL's unique id is kNcclUniqueIdBytes bytes");

NcclUniqueId to_bytes(const ncclUniqueId& id) {
  NcclUniqueId out;
  std::memcpy(out.data(), &id, kNcclUniqueIdBytes);
  return out;
}

// Without an id from the host: NCCL's own bootstrap when the host set NCCL_COMM_ID (every rank
// then computes the same id); else rank 0's id handed over TCP at MASTER_ADDR:MASTER_PORT + 1
// (torchrun's variables; its own store holds MASTER_PORT); else, under an MPI launcher, over MPI.
ncclUniqueId bootstrap_id(const LaunchPlan& plan) {
  ncclUniqueId id;
  if (plan.nccl_unique_id) {
    std::memcpy(&id, plan.nccl_unique_id->data(), kNcclUniqueIdBytes);
    return id;
  }
  if (std::getenv("NCCL_COMM_ID") || plan.world_size == 1) {
    BERT_NCCL_CHECK(ncclGetUniqueId(&id));
    return id;
  }
  std::string mine;
  if (plan.rank == 0) {
    BERT_NCCL_CHECK(ncclGetUniqueId(&id));
    mine.assign(reinterpret_cast<const char*>(&id), kNcclUniqueIdBytes);
  }
  std::string shared;
  const char* master = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (master && port) {
    shared = share_from_rank0_over_tcp(master, std::atoi(port) + 1, plan.rank, plan.world_size, mine, plan.timeout_s);
  } else if (mpi_built()) {
    LaunchPlan mpi_plan = plan;
    mpi_plan.backend = DistBackend::mpi;
    shared = make_mpi_communicator(mpi_plan)->allgather_text(mine)[0];
  } else {
    fail(Code::config, "NCCL with ", plan.world_size, " ranks needs a bootstrap: pass bert_dist.nccl_unique_id, ",
         "or set NCCL_COMM_ID (or MASTER_ADDR/MASTER_PORT), or launch with mpirun");
  }
  if (shared.size() != kNcclUniqueIdBytes) {
    fail(Code::distributed, "NCCL bootstrap: rank 0's id has ", shared.size(), " bytes, not ", kNcclUniqueIdBytes);
  }
  std::memcpy(&id, shared.data(), kNcclUniqueIdBytes);
  return id;
}

class NcclCommunicator : public Communicator {
 public:
  explicit NcclCommunicator(const LaunchPlan& plan)
      : rank_(plan.rank), world_(plan.world_size), local_rank_(plan.local_rank), timeout_s_(plan.timeout_s) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      fail(Code::unsupported, "the NCCL backend needs a CUDA device, and none is visible to rank ", rank_);
    }
    BERT_CUDART_CHECK(cudaSetDevice(local_rank_ % devices));
    BERT_CUDART_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    BERT_CUDART_CHECK(cudaEventCreateWithFlags(&backend_done_, cudaEventDisableTiming));
    BERT_CUDART_CHECK(cudaEventCreateWithFlags(&sums_done_, cudaEventDisableTiming));
    const ncclUniqueId id = bootstrap_id(plan);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    BERT_NCCL_CHECK(ncclCommInitRankConfig(&comm_, world_, id, rank_, &config));
    wait_ready("ncclCommInitRank", 0);
    // Warm-up (as MLPerf submissions do): NCCL sets up its channels and buffers on a
    // communicator's first collective, so one small all-reduce here keeps that out of step 1.
    float* one = static_cast<float*>(scratch(sizeof(float)));
    BERT_CUDART_CHECK(cudaMemsetAsync(one, 0, sizeof(float), stream_));
    run("warm-up allreduce", 1, [&] { return ncclAllReduce(one, one, 1, ncclFloat, ncclSum, comm_, stream_); });
  }

  ~NcclCommunicator() override {
    if (comm_) {
      if (broken_) {
        ncclCommAbort(comm_);
      } else {
        ncclCommFinalize(comm_);
        ncclResult_t state = ncclInProgress;
        Deadline deadline(timeout_s_);
        while (state == ncclInProgress && !deadline.expired()) {
          ncclCommGetAsyncError(comm_, &state);
          deadline.pause();
        }
        if (state == ncclSuccess) {
          ncclCommDestroy(comm_);
        } else {
          ncclCommAbort(comm_);
        }
      }
    }
    if (scratch_) cudaFree(scratch_);
    if (wire_) cudaFree(wire_);
    if (backend_done_) cudaEventDestroy(backend_done_);
    if (sums_done_) cudaEventDestroy(sums_done_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  int local_rank() const override { return local_rank_; }
  std::string name() const override { return "nccl"; }

  void allreduce_sum(float* data, int64_t n) override {
    run("allreduce_sum", n, [&] { return ncclAllReduce(data, data, n, ncclFloat, ncclSum, comm_, stream_); });
  }

  void start_allreduce_sum(float* data, int64_t n, WirePrecision wire, void* backend_stream) override {
    const char* what = "allreduce_sum (bucket)";
    check_usable(what);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    BERT_CUDART_CHECK(cudaStreamIsCapturing(static_cast<cudaStream_t>(backend_stream), &capture));
    BERT_CUDART_CHECK(cudaEventRecord(backend_done_, static_cast<cudaStream_t>(backend_stream)));
    BERT_CUDART_CHECK(cudaStreamWaitEvent(stream_, backend_done_, 0));
    if (wire == WirePrecision::fp32) {
      enqueue(what, n, [&] { return ncclAllReduce(data, data, n, ncclFloat, ncclSum, comm_, stream_); });
    } else {
      const kernels::LowPrecision kind = wire == WirePrecision::bf16 ? kernels::LowPrecision::bf16 : kernels::LowPrecision::fp16;
      void* words = wire_words(n, capture != cudaStreamCaptureStatusNone);
      kernels::cast_to_lowp(words, data, n, 1.0f / static_cast<float>(world_), kind, stream_);
      const ncclDataType_t type = wire == WirePrecision::bf16 ? ncclBfloat16 : ncclFloat16;
      enqueue(what, n, [&] { return ncclAllReduce(words, words, n, type, ncclSum, comm_, stream_); });
      kernels::cast_from_lowp(data, words, n, static_cast<float>(world_), kind, stream_);
    }
    pending_elems_ += n;
  }

  void finish_allreduce_sums() override {
    if (pending_elems_ == 0) return;
    wait_ready("allreduce_sum (buckets)", end_of_step_sums());
    settle_wire();
  }

  void join_allreduce_sums(void* backend_stream) override {
    if (pending_elems_ == 0) return;
    BERT_CUDART_CHECK(cudaEventRecord(sums_done_, stream_));
    BERT_CUDART_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(backend_stream), sums_done_, 0));
    joined_elems_ = end_of_step_sums();
  }

  void wait_for_stream(void* backend_stream) override {
    wait_ready("allreduce_sum (buckets joined to the backend's stream)", joined_elems_,
               static_cast<cudaStream_t>(backend_stream));
    settle_wire();
  }

  void allreduce_host(float* data, int64_t n, ReduceOp op) override {
    float* dev = static_cast<float*>(scratch(n * sizeof(float)));
    BERT_CUDART_CHECK(cudaMemcpyAsync(dev, data, n * sizeof(float), cudaMemcpyHostToDevice, stream_));
    const ncclRedOp_t nccl_op = op == ReduceOp::max ? ncclMax : op == ReduceOp::mean ? ncclAvg : ncclSum;
    run("allreduce_host", n, [&] { return ncclAllReduce(dev, dev, n, ncclFloat, nccl_op, comm_, stream_); });
    BERT_CUDART_CHECK(cudaMemcpy(data, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  }

  void allreduce_sum_host(double* data, int64_t n) override {
    double* dev = static_cast<double*>(scratch(n * sizeof(double)));
    BERT_CUDART_CHECK(cudaMemcpyAsync(dev, data, n * sizeof(double), cudaMemcpyHostToDevice, stream_));
    run("allreduce_sum_host", n, [&] { return ncclAllReduce(dev, dev, n, ncclDouble, ncclSum, comm_, stream_); });
    BERT_CUDART_CHECK(cudaMemcpy(data, dev, n * sizeof(double), cudaMemcpyDeviceToHost));
  }

  // Ranges of unequal size: one ncclReduce (all-gather: ncclBroadcast) per rank's range, rooted
  // at that rank, in one group; equal ranges use NCCL's in-place reduce-scatter / all-gather.
  void reduce_scatter_sum(float* data, const std::vector<int64_t>& counts) override {
    const std::vector<int64_t> offsets = range_offsets("reduce_scatter_sum", counts);
    run("reduce_scatter_sum", offsets.back(), [&] {
      if (equal_ranges(counts))
        return ncclReduceScatter(data, data + offsets[rank_], counts[0], ncclFloat, ncclSum, comm_, stream_);
      ncclGroupStart();
      for (int r = 0; r < world_; ++r)
        ncclReduce(data + offsets[r], data + offsets[r], counts[r], ncclFloat, ncclSum, r, comm_, stream_);
      return ncclGroupEnd();
    });
  }

  void all_gather(float* data, const std::vector<int64_t>& counts) override {
    const std::vector<int64_t> offsets = range_offsets("all_gather", counts);
    run("all_gather", offsets.back(), [&] {
      if (equal_ranges(counts))
        return ncclAllGather(data + offsets[rank_], data, counts[0], ncclFloat, comm_, stream_);
      ncclGroupStart();
      for (int r = 0; r < world_; ++r)
        ncclBroadcast(data + offsets[r], data + offsets[r], counts[r], ncclFloat, r, comm_, stream_);
      return ncclGroupEnd();
    });
  }

  void broadcast(float* data, int64_t n) override {
    run("broadcast", n, [&] { return ncclBroadcast(data, data, n, ncclFloat, 0, comm_, stream_); });
  }

  // Lengths first, then every rank's text padded to the longest.
  std::vector<std::string> allgather_text(const std::string& text) override {
    int64_t* lengths = static_cast<int64_t*>(scratch(world_ * sizeof(int64_t)));
    const int64_t mine = static_cast<int64_t>(text.size());
    BERT_CUDART_CHECK(cudaMemcpyAsync(lengths + rank_, &mine, sizeof(mine), cudaMemcpyHostToDevice, stream_));
    run("allgather_text", 1, [&] { return ncclAllGather(lengths + rank_, lengths, 1, ncclInt64, comm_, stream_); });
    std::vector<int64_t> host_lengths(world_);
    BERT_CUDART_CHECK(cudaMemcpy(host_lengths.data(), lengths, world_ * sizeof(int64_t), cudaMemcpyDeviceToHost));
    int64_t longest = 1;
    for (int64_t l : host_lengths) longest = std::max(longest, l);
    char* bytes = static_cast<char*>(scratch(world_ * longest));
    BERT_CUDART_CHECK(cudaMemcpyAsync(bytes + rank_ * longest, text.data(), text.size(), cudaMemcpyHostToDevice, stream_));
    run("allgather_text", longest,
        [&] { return ncclAllGather(bytes + rank_ * longest, bytes, longest, ncclChar, comm_, stream_); });
    std::string all(world_ * longest, '\0');
    BERT_CUDART_CHECK(cudaMemcpy(all.data(), bytes, all.size(), cudaMemcpyDeviceToHost));
    std::vector<std::string> out(world_);
    for (int r = 0; r < world_; ++r) out[r] = all.substr(r * longest, host_lengths[r]);
    return out;
  }

 private:
  // offsets[r] = first element of rank r's range; offsets[world] = the total.
  std::vector<int64_t> range_offsets(const char* what, const std::vector<int64_t>& counts) const {
    BERT_CHECK(static_cast<int>(counts.size()) == world_, Code::invalid_argument, "NCCL ", what, ": ", counts.size(),
               " counts for ", world_, " ranks");
    std::vector<int64_t> offsets(world_ + 1, 0);
    for (int r = 0; r < world_; ++r) offsets[r + 1] = offsets[r] + counts[r];
    return offsets;
  }

  static bool equal_ranges(const std::vector<int64_t>& counts) {
    return std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == counts[0]; });
  }

  void* scratch(size_t bytes) {
    if (bytes > scratch_bytes_) {
      if (scratch_) BERT_CUDART_CHECK(cudaFree(scratch_));
      scratch_ = nullptr;
      BERT_CUDART_CHECK(cudaMalloc(&scratch_, bytes));
      scratch_bytes_ = bytes;
    }
    return scratch_;
  }

  // The step's buckets are all started: the wire space is free for the next step's. Returns how
  // many elements they sum.
  int64_t end_of_step_sums() {
    const int64_t n = pending_elems_;
    pending_elems_ = 0;
    wire_space_.end_step();
    return n;
  }

  // 16-bit wire words for a bucket of n elements (WireSpace's policy; `capturing`: the backend's
  // stream is recording a CUDA graph).
  void* wire_words(int64_t n, bool capturing) {
    const WireSpace::Slice slice = wire_space_.take(static_cast<size_t>(n) * 2, capturing);
    if (slice.grow_to > 0) {
      if (pending_elems_ > 0) wait_ready("allreduce_sum (buckets)", pending_elems_);
      grow_wire(slice.grow_to);
    }
    return static_cast<char*>(wire_) + slice.offset;
  }

  // The host has waited for every sum: the buffer takes the largest step before a graph holds it.
  void settle_wire() {
    if (const size_t bytes = wire_space_.settled(); bytes > 0) grow_wire(bytes);
  }

  void grow_wire(size_t bytes) {
    if (wire_) BERT_CUDART_CHECK(cudaFree(wire_));
    wire_ = nullptr;
    BERT_CUDART_CHECK(cudaMalloc(&wire_, bytes));
  }

  void check_usable(const char* what) const {
    if (broken_) {
      fail(Code::distributed, "NCCL ", what, " on rank ", rank_, " of ", world_,
           ": the communicator was aborted after an earlier failure; create a new session");
    }
  }

  // Issues one NCCL call on the non-blocking communicator and waits (with the deadline) until
  // NCCL has enqueued it; the collective itself may still be running on stream_.
  template <typename F>
  void enqueue(const char* what, int64_t n, F&& call) {
    const ncclResult_t rc = call();
    if (rc != ncclSuccess && rc != ncclInProgress) {
      broken_ = true;
      fail(Code::distributed, "NCCL ", what, " of ", n, " elements on rank ", rank_, " of ", world_,
           " failed: ", ncclGetErrorString(rc));
    }
    Deadline deadline(timeout_s_);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) {
        broken_ = true;
        fail(Code::distributed, "NCCL ", what, " of ", n, " elements on rank ", rank_, " of ", world_, " failed: ",
             ncclGetErrorString(state), " (", ncclGetLastError(comm_), ")");
      }
      if (deadline.expired()) {
        broken_ = true;
        fail(Code::distributed, "NCCL ", what, " of ", n, " elements on rank ", rank_, " of ", world_,
             " could not be enqueued within ", deadline.timeout(), " s (dist.timeout_s)");
      }
      deadline.pause();
    }
  }

  // Enqueues one collective after the backend's pending work and waits for it with a deadline.
  template <typename F>
  void run(const char* what, int64_t n, F&& call) {
    check_usable(what);
    BERT_CUDART_CHECK(cudaDeviceSynchronize());
    enqueue(what, n, call);
    wait_ready(what, n);
  }

  // Waits until `stream` (the communicator's own by default) has run its work and NCCL reports
  // no error, with the deadline.
  void wait_ready(const char* what, int64_t n, cudaStream_t stream = nullptr) {
    if (stream == nullptr) stream = stream_;
    Deadline deadline(timeout_s_);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        broken_ = true;
        fail(Code::distributed, "NCCL ", what, " of ", n, " elements on rank ", rank_, " of ", world_, " failed: ",
             ncclGetErrorString(state), " (", ncclGetLastError(comm_), ")");
      }
      if (state == ncclSuccess) {
        const cudaError_t q = cudaStreamQuery(stream);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) {
          broken_ = true;
          fail(Code::backend, "NCCL ", what, " on rank ", rank_, ": ", cudaGetErrorString(q));
        }
      }
      if (deadline.expired()) {
        broken_ = true;
        fail(Code::distributed, "NCCL ", what, " of ", n, " elements on rank ", rank_, " of ", world_,
             " timed out after ", deadline.timeout(),
             " s (dist.timeout_s): a peer rank died, stopped answering, or skipped this collective (NCCL does "
             "not tell which; the other ranks' logs and the launcher's exit codes do)");
      }
      deadline.pause();
    }
  }

  int rank_, world_, local_rank_;
  double timeout_s_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t backend_done_ = nullptr;
  cudaEvent_t sums_done_ = nullptr;  // the buckets' sums, for join_allreduce_sums
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  void* wire_ = nullptr;  // 16-bit gradient words of the buckets in flight
  WireSpace wire_space_;  // its slices and size
  int64_t pending_elems_ = 0;
  int64_t joined_elems_ = 0;  // elements the last joined buckets sum (for messages)
  bool broken_ = false;
};

}  // namespace

bool nccl_built() { return true; }

std::unique_ptr<Communicator> make_nccl_communicator(const LaunchPlan& plan) {
  return std::make_unique<NcclCommunicator>(plan);
}

NcclUniqueId nccl_unique_id() {
  ncclUniqueId id;
  BERT_NCCL_CHECK(ncclGetUniqueId(&id));
  return to_bytes(id);
}

}  // namespace bert
