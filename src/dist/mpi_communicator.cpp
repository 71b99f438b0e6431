// The MPI communicator (CPU ranks; Open MPI). Every collective is non-blocking (MPI_I*) and
// polled with MPI_Test against dist.timeout_s on a duplicate of MPI_COMM_WORLD whose error
// handler returns errors, so a dead or silent peer makes the survivors throw
// Error(distributed) naming the operation instead of hanging. The library initialises MPI
// itself only when the host has not, and finalises it only then, when the host calls
// bert_finalize (never from an exit hook; not after a failed collective: MPI_Finalize would
// wait for the dead peer). Gradient buckets are started with MPI_Iallreduce
// and completed together; in bf16/fp16 they travel as 16-bit words summed by a user-defined
// MPI operation that adds in fp32 and rounds back, as NCCL does.
#define OMPI_SKIP_MPICXX 1  // the C API of MPI only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/log.h"
#include "dist/deadline.h"
#include "dist/launch.h"

#define BERT_MPI_CHECK(call)                                                                   \
  do {                                                                                         \
    const int bert_mpi_rc_ = (call);                                                           \
    if (bert_mpi_rc_ != MPI_SUCCESS) ::bert::mpi_fail(#call, __FILE__, __LINE__, bert_mpi_rc_); \
  } while (0)

namespace bert {

[[noreturn]] void mpi_fail(const char* call, const char* file, int line, int rc);

namespace {

std::mutex g_init_mutex;  // guards the two below and MPI's initialisation
bool g_we_initialized = false;
int g_live_communicators = 0;
std::atomic<bool> g_collective_failed{false};

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, len);
}

// Initialises MPI unless the host (or an earlier session) did, and counts the communicator.
void enter_mpi() {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) fail(Code::distributed, "MPI was already finalised in this process (bert_finalize or the host)");
  if (!initialized) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) fail(Code::distributed, "MPI_Init_thread failed: ", mpi_error_text(rc));
    g_we_initialized = true;
  }
  ++g_live_communicators;
}

void leave_mpi() {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  --g_live_communicators;
}

// A communicator's hold on MPI: taken first, given back last (after MPI_Comm_free), also when
// the constructor throws.
struct MpiUse {
  MpiUse() { enter_mpi(); }
  ~MpiUse() { leave_mpi(); }
  MpiUse(const MpiUse&) = delete;
  MpiUse& operator=(const MpiUse&) = delete;
};

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

// Element-wise sums of 16-bit floats for MPI_Iallreduce (user-defined, commutative).
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = FromFloat(ToFloat(a[i]) + ToFloat(b[i]));
}

MPI_Op wire_sum_op(WirePrecision wire) {
  static MPI_Op ops[2] = {MPI_OP_NULL, MPI_OP_NULL};
  MPI_Op& op = ops[wire == WirePrecision::bf16 ? 0 : 1];
  if (op == MPI_OP_NULL) {
    MPI_User_function* fn = wire == WirePrecision::bf16 ? &sum_16bit<bf16_bits_to_float, float_to_bf16_bits>
                                                        : &sum_16bit<fp16_bits_to_float, float_to_fp16_bits>;
    if (MPI_Op_create(fn, 1, &op) != MPI_SUCCESS) fail(Code::distributed, "MPI_Op_create for the 16-bit gradient sum failed");
  }
  return op;
}

// A started gradient bucket: its requests and, for a 16-bit wire, the words on the wire.
struct PendingSum {
  float* data = nullptr;
  int64_t n = 0;
  WirePrecision wire = WirePrecision::fp32;
  std::vector<uint16_t> words;
};

class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(const LaunchPlan& plan) : timeout_s_(plan.timeout_s) {
    BERT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    BERT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_));
    // The duplicate is made non-blocking too: a peer that never arrives times out here as well.
    std::vector<MPI_Request> reqs(2);
    start("communicator creation", [&] {
      BERT_MPI_CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &reqs[0]));
      BERT_MPI_CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &roll_call_comm_, &reqs[1]));
    });
    wait("communicator creation", 0, reqs);
    roll_call_ready_ = true;
    BERT_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    BERT_MPI_CHECK(MPI_Comm_set_errhandler(roll_call_comm_, MPI_ERRORS_RETURN));
    local_rank_ = plan.local_rank;
    if (rank_ != plan.rank || world_ != plan.world_size) {
      MPI_Comm_free(&comm_);
      MPI_Comm_free(&roll_call_comm_);
      fail(Code::config, "distributed setup from ", plan.source, " says rank ", plan.rank, " of ", plan.world_size,
           ", but MPI_COMM_WORLD has this process as rank ", rank_, " of ", world_,
           " (launch one process per rank with mpirun/srun, or leave rank and world_size at -1)");
    }
  }

  ~MpiCommunicator() override {
    if (broken_) return;  // freeing could wait for the lost peer
    MPI_Comm_free(&comm_);
    MPI_Comm_free(&roll_call_comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  int local_rank() const override { return local_rank_; }
  std::string name() const override { return "mpi"; }

  // The CPU backend's memory is host memory, so gradients reduce like host buffers.
  void allreduce_sum(float* data, int64_t n) override { reduce("allreduce_sum", data, n, ReduceOp::sum); }

  void start_allreduce_sum(float* data, int64_t n, WirePrecision wire, void*) override {
    auto p = std::make_unique<PendingSum>();
    p->data = data;
    p->n = n;
    p->wire = wire;
    const float pre = 1.0f / static_cast<float>(world_);
    if (wire != WirePrecision::fp32) {
      p->words.resize(n);
      for (int64_t i = 0; i < n; ++i) {
        p->words[i] = wire == WirePrecision::bf16 ? float_to_bf16_bits(data[i] * pre) : float_to_fp16_bits(data[i] * pre);
      }
    }
    start("allreduce_sum (bucket)", [&] {
      if (wire == WirePrecision::fp32) {
        post_iallreduce(data, n, MPI_FLOAT, MPI_SUM, pending_reqs_);
      } else {
        post_iallreduce(p->words.data(), n, MPI_UINT16_T, wire_sum_op(wire), pending_reqs_);
      }
    });
    pending_elems_ += n;
    pending_.push_back(std::move(p));
    int flag = 0;  // drives MPI's progress engine so earlier buckets move while backward goes on
    const int rc = MPI_Testall(static_cast<int>(pending_reqs_.size()), pending_reqs_.data(), &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      const std::string why = mpi_error_text(rc);
      mark_broken(why);
      fail(Code::distributed, "MPI allreduce_sum (bucket) on rank ", rank_, " of ", world_, " failed: ", why,
           " (a peer rank probably died)");
    }
  }

  void finish_allreduce_sums() override {
    std::vector<std::unique_ptr<PendingSum>> done = std::move(pending_);
    std::vector<MPI_Request> reqs = std::move(pending_reqs_);
    const int64_t n = pending_elems_;
    pending_.clear();
    pending_reqs_.clear();
    pending_elems_ = 0;
    if (!reqs.empty()) wait("allreduce_sum (buckets)", n, reqs);
    for (const auto& p : done) {
      if (p->wire == WirePrecision::fp32) continue;
      const float post = static_cast<float>(world_);
      for (int64_t i = 0; i < p->n; ++i) {
        p->data[i] = (p->wire == WirePrecision::bf16 ? bf16_bits_to_float(p->words[i]) : fp16_bits_to_float(p->words[i])) * post;
      }
    }
  }

  void allreduce_host(float* data, int64_t n, ReduceOp op) override {
    reduce(op == ReduceOp::max ? "allreduce_host(max)" : op == ReduceOp::mean ? "allreduce_host(mean)"
                                                                               : "allreduce_host(sum)",
           data, n, op);
    if (op == ReduceOp::mean) {
      for (int64_t i = 0; i < n; ++i) data[i] /= static_cast<float>(world_);
    }
  }

  void broadcast(float* data, int64_t n) override {
    std::vector<MPI_Request> reqs;
    start("broadcast", [&] {
      for (int64_t done = 0; done < n;) {
        const int count = static_cast<int>(std::min<int64_t>(n - done, kMaxCount));
        reqs.emplace_back();
        BERT_MPI_CHECK(MPI_Ibcast(data + done, count, MPI_FLOAT, 0, comm_, &reqs.back()));
        done += count;
      }
    });
    wait("broadcast", n, reqs);
  }

  void allreduce_sum_host(double* data, int64_t n) override {
    std::vector<MPI_Request> reqs;
    start("allreduce_sum_host", [&] { post_iallreduce(data, n, MPI_DOUBLE, MPI_SUM, reqs); });
    wait("allreduce_sum_host", n, reqs);
  }

  // MPI_Ireduce_scatter with MPI_IN_PLACE leaves this rank's sum at the front of the buffer; it
  // moves to the rank's own range afterwards.
  void reduce_scatter_sum(float* data, const std::vector<int64_t>& counts) override {
    std::vector<int> ints = int_counts("reduce_scatter_sum", counts);
    int64_t offset = 0, n = 0;
    for (int r = 0; r < world_; ++r) {
      if (r < rank_) offset += counts[r];
      n += counts[r];
    }
    std::vector<MPI_Request> reqs(1);
    start("reduce_scatter_sum", [&] {
      BERT_MPI_CHECK(MPI_Ireduce_scatter(MPI_IN_PLACE, data, ints.data(), MPI_FLOAT, MPI_SUM, comm_, &reqs[0]));
    });
    wait("reduce_scatter_sum", n, reqs);
    if (offset > 0) std::memmove(data + offset, data, static_cast<size_t>(counts[rank_]) * sizeof(float));
  }

  void all_gather(float* data, const std::vector<int64_t>& counts) override {
    std::vector<int> ints = int_counts("all_gather", counts);
    std::vector<int> offsets(world_, 0);
    for (int r = 1; r < world_; ++r) offsets[r] = offsets[r - 1] + ints[r - 1];
    std::vector<MPI_Request> reqs(1);
    start("all_gather", [&] {
      BERT_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, ints.data(), offsets.data(), MPI_FLOAT,
                                     comm_, &reqs[0]));
    });
    wait("all_gather", offsets.back() + ints.back(), reqs);
  }

  std::vector<std::string> allgather_text(const std::string& text) override {
    int length = static_cast<int>(text.size());
    std::vector<int> lengths(world_);
    std::vector<MPI_Request> reqs(1);
    start("allgather_text", [&] { BERT_MPI_CHECK(MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm_, &reqs[0])); });
    wait("allgather_text", 1, reqs);
    std::vector<int> offsets(world_, 0);
    for (int r = 1; r < world_; ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
    std::string all(static_cast<size_t>(offsets.back() + lengths.back()), '\0');
    start("allgather_text", [&] {
      BERT_MPI_CHECK(MPI_Iallgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                                     comm_, &reqs[0]));
    });
    wait("allgather_text", static_cast<int64_t>(all.size()), reqs);
    std::vector<std::string> out(world_);
    for (int r = 0; r < world_; ++r) out[r] = all.substr(offsets[r], lengths[r]);
    return out;
  }

 private:
  static constexpr int64_t kMaxCount = INT_MAX / 2;  // MPI counts are int: long buffers go in chunks
  static constexpr double kRollCallSeconds = 1.5;     // how long a timed-out rank listens for its peers

  void reduce(const char* what, float* data, int64_t n, ReduceOp op) {
    std::vector<MPI_Request> reqs;
    start(what, [&] { post_iallreduce(data, n, MPI_FLOAT, mpi_op(op), reqs); });
    wait(what, n, reqs);
  }

  // In-place MPI_Iallreduce of n elements of T, in chunks of at most kMaxCount; appends the
  // requests to reqs.
  template <typename T>
  void post_iallreduce(T* data, int64_t n, MPI_Datatype type, MPI_Op op, std::vector<MPI_Request>& reqs) {
    for (int64_t done = 0; done < n;) {
      const int count = static_cast<int>(std::min<int64_t>(n - done, kMaxCount));
      reqs.emplace_back();
      BERT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data + done, count, type, op, comm_, &reqs.back()));
      done += count;
    }
  }

  template <typename F>
  void start(const char* what, F&& body) {
    if (broken_) {
      fail(Code::distributed, "MPI ", what, " on rank ", rank_, " of ", world_,
           ": the communicator failed earlier (", broken_reason_, "); create a new session");
    }
    try {
      body();
    } catch (const Error& e) {
      mark_broken(e.what());
      fail(Code::distributed, "MPI ", what, " on rank ", rank_, " of ", world_, " failed: ", e.what());
    }
  }

  void wait(const char* what, int64_t n, std::vector<MPI_Request>& reqs) {
    Deadline deadline(timeout_s_);
    for (;;) {
      int done = 0;
      const int rc = MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) {
        const std::string why = mpi_error_text(rc);
        mark_broken(why);
        fail(Code::distributed, "MPI ", what, size_text(n), " on rank ", rank_, " of ", world_, " failed after ",
             deadline.elapsed(), " s: ", why, " (a peer rank probably died)");
      }
      if (done) return;
      if (deadline.expired()) {
        mark_broken("timeout");
        fail(Code::distributed, "MPI ", what, size_text(n), " on rank ", rank_, " of ", world_, " timed out after ",
             deadline.timeout(), " s (dist.timeout_s): ", silent_peers());
      }
      deadline.pause();
    }
  }

  // After a collective timed out: which peers still answer. This rank posts its number to every
  // other rank on a communicator of its own and listens for theirs for kRollCallSeconds; the
  // survivors of one collective time out within moments of each other and hear each other, a
  // rank that died, hangs or is elsewhere in the program does not answer.
  std::string silent_peers() {
    if (!roll_call_ready_) return "a peer rank died, stopped answering, or never created its session";
    constexpr int kTag = 1;
    std::vector<int> answer(world_, -1);
    std::vector<MPI_Request> sends(world_, MPI_REQUEST_NULL), receives(world_, MPI_REQUEST_NULL);
    for (int r = 0; r < world_; ++r) {
      if (r == rank_) continue;
      MPI_Isend(&rank_, 1, MPI_INT, r, kTag, roll_call_comm_, &sends[r]);
      MPI_Irecv(&answer[r], 1, MPI_INT, r, kTag, roll_call_comm_, &receives[r]);
    }
    std::vector<bool> heard(world_, false);
    heard[rank_] = true;
    Deadline deadline(std::min(kRollCallSeconds, timeout_s_));
    while (std::find(heard.begin(), heard.end(), false) != heard.end() && !deadline.expired()) {
      for (int r = 0; r < world_; ++r) {
        int flag = 0;
        if (!heard[r] && receives[r] != MPI_REQUEST_NULL && MPI_Test(&receives[r], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
            flag) {
          heard[r] = answer[r] == r;
        }
      }
      deadline.pause();
    }
    for (std::vector<MPI_Request>* pending : {&sends, &receives}) {
      for (MPI_Request& q : *pending) {
        if (q == MPI_REQUEST_NULL) continue;
        MPI_Cancel(&q);
        MPI_Request_free(&q);
      }
    }
    std::string silent;
    int count = 0;
    for (int r = 0; r < world_; ++r) {
      if (!heard[r]) silent += (count++ ? ", " : "") + std::to_string(r);
    }
    if (count == 0) return "every rank answered a roll call after it, so a peer skipped this collective or is late";
    char window[32];
    std::snprintf(window, sizeof window, "%.1f", deadline.timeout());
    return std::string(count == 1 ? "rank " : "ranks ") + silent + " did not answer a roll call within " + window +
           " s after it (died, hung, or elsewhere in the program)";
  }

  // Per-rank counts as MPI's ints (one per rank, their total within an int).
  std::vector<int> int_counts(const char* what, const std::vector<int64_t>& counts) const {
    BERT_CHECK(static_cast<int>(counts.size()) == world_, Code::invalid_argument, "MPI ", what, ": ", counts.size(),
               " counts for ", world_, " ranks");
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    BERT_CHECK(total <= INT_MAX, Code::unsupported, "MPI ", what, " of ", total, " elements: more than MPI's int counts");
    return std::vector<int>(counts.begin(), counts.end());
  }

  static std::string size_text(int64_t n) { return n > 0 ? " of " + std::to_string(n) + " elements" : ""; }

  void mark_broken(const std::string& reason) {
    broken_ = true;
    broken_reason_ = reason;
    g_collective_failed.store(true);
  }

  MpiUse use_;  // first member: MPI is held before and after everything below
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm roll_call_comm_ = MPI_COMM_NULL;  // silent_peers() only
  bool roll_call_ready_ = false;              // both communicators made
  int rank_ = 0, world_ = 1, local_rank_ = 0;
  std::vector<std::unique_ptr<PendingSum>> pending_;
  std::vector<MPI_Request> pending_reqs_;
  int64_t pending_elems_ = 0;
  double timeout_s_;
  bool broken_ = false;
  std::string broken_reason_;
};

}  // namespace

void finalize_distributed() {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (!g_we_initialized) return;
  if (g_live_communicators > 0) {
    fail(Code::invalid_argument, "bert_finalize: ", g_live_communicators,
         " session(s) still use MPI; destroy them first");
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (g_collective_failed.load()) {
    log_message(log_warning, "MPI is left unfinalised: a collective failed, and MPI_Finalize would wait for the lost peer");
    return;
  }
  const int rc = MPI_Finalize();
  if (rc != MPI_SUCCESS) fail(Code::distributed, "MPI_Finalize failed: ", mpi_error_text(rc));
}

[[noreturn]] void mpi_fail(const char* call, const char* file, int line, int rc) {
  fail(Code::distributed, call, " failed at ", file, ":", line, ": ", mpi_error_text(rc));
}

bool mpi_built() { return true; }

std::unique_ptr<Communicator> make_mpi_communicator(const LaunchPlan& plan) {
  return std::make_unique<MpiCommunicator>(plan);
}

}  // namespace bert
