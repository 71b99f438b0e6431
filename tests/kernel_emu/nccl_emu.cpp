// NCCL for the kernel emulation: the calls src/dist/nccl_communicator.cpp makes, over the emulated
// CUDA runtime, so that the NCCL communicator runs on the CPU with several ranks. Ranks are
// processes (mpirun -np W, as on a host with W GPUs) meeting in a POSIX shared-memory segment
// that the unique id names; each collective is stream work (cuda_emu::enqueue), so it runs when
// its stream does and a capturing stream records it into the graph (a replay runs it again).
// Ranks deposit their data in slots of the segment a chunk at a time and every rank reduces the
// slots in rank order (16-bit types summed in fp32 and rounded once). As the engine creates them,
// communicators are non-blocking: init reports ncclInProgress until every rank has attached, and
// each call ncclInProgress once. ncclGroupStart/End hold the calls until the group ends.
// Stricter than NCCL: ranks issuing different collectives (kind, count, type, operation, root)
// fail with ncclInvalidUsage naming both instead of hanging or mixing data; a rank left waiting
// for its peers fails after BERT_EMU_NCCL_TIMEOUT_S (default 60) with ncclRemoteError, and so do
// the ranks still waiting with it (a blocking init too); buffers outside device allocations, and
// calls before a non-blocking init has completed, are refused.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <nccl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/half.h"
#include "cuda_runtime_emu.h"

namespace {

constexpr int kMaxRanks = 8;
constexpr size_t kSlotBytes = size_t{1} << 20;  // each rank's share of a chunk

enum class Kind : int { all_reduce, reduce, broadcast, reduce_scatter, all_gather };

// One collective as a rank issued it: the ranks' calls must agree.
struct Call {
  Kind kind = Kind::all_reduce;
  ncclDataType_t type = ncclFloat;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  size_t count = 0;
  bool operator==(const Call& o) const {
    return kind == o.kind && type == o.type && op == o.op && root == o.root && count == o.count;
  }
};

// The shared-memory segment: a central barrier, the first error, each rank's call, the slots.
struct Shared {
  std::atomic<int> attached;
  std::atomic<uint32_t> arrived, phase;
  std::atomic<int> failed;  // ncclResult_t of the first failure any rank saw (0: none)
  Call calls[kMaxRanks];
  unsigned char slots[kMaxRanks][kSlotBytes];
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "the barrier's atomics must work across processes");

double timeout_seconds() {
  const char* env = std::getenv("BERT_EMU_NCCL_TIMEOUT_S");
  return env != nullptr ? std::atof(env) : 60.0;
}

size_t type_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::all_reduce: return "ncclAllReduce";
    case Kind::reduce: return "ncclReduce";
    case Kind::broadcast: return "ncclBroadcast";
    case Kind::reduce_scatter: return "ncclReduceScatter";
    case Kind::all_gather: return "ncclAllGather";
  }
  return "?";
}

std::string describe(const Call& c) {
  return std::string(kind_name(c.kind)) + " of " + std::to_string(c.count) + " elements (type " +
         std::to_string(static_cast<int>(c.type)) + ", op " + std::to_string(static_cast<int>(c.op)) + ", root " +
         std::to_string(c.root) + ")";
}

double load(const void* p, ncclDataType_t type) {
  switch (type) {
    case ncclFloat32: return *static_cast<const float*>(p);
    case ncclFloat64: return *static_cast<const double*>(p);
    case ncclBfloat16: return bert::bf16_bits_to_float(*static_cast<const uint16_t*>(p));
    case ncclFloat16: return bert::fp16_bits_to_float(*static_cast<const uint16_t*>(p));
    case ncclInt32: return *static_cast<const int32_t*>(p);
    case ncclInt64: return static_cast<double>(*static_cast<const int64_t*>(p));
    default: return 0;
  }
}

void store(void* p, double v, ncclDataType_t type) {
  switch (type) {
    case ncclFloat32: *static_cast<float*>(p) = static_cast<float>(v); break;
    case ncclFloat64: *static_cast<double*>(p) = v; break;
    case ncclBfloat16: *static_cast<uint16_t*>(p) = bert::float_to_bf16_bits(static_cast<float>(v)); break;
    case ncclFloat16: *static_cast<uint16_t*>(p) = bert::float_to_fp16_bits(static_cast<float>(v)); break;
    case ncclInt32: *static_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
    case ncclInt64: *static_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
    default: break;
  }
}

thread_local std::string t_last_error;  // ncclGetLastError(nullptr)

}  // namespace

// The communicator NCCL's header leaves opaque.
struct ncclComm {
  int rank = 0, nranks = 0;
  bool blocking = true;
  std::string name;  // of the shared-memory segment
  Shared* shared = nullptr;
  ncclResult_t state = ncclSuccess;  // ncclInProgress until every rank attached; an error for good
  bool report_in_progress = false;   // the next ncclCommGetAsyncError says ncclInProgress once
  std::string last_error;

  void fail(ncclResult_t result, std::string message) {
    if (state == ncclSuccess || state == ncclInProgress) {
      state = result;
      last_error = std::move(message);
      int none = 0;
      shared->failed.compare_exchange_strong(none, static_cast<int>(result));
    }
  }

  // Waits until every rank has arrived; false (the communicator failed) on a peer's failure or
  // after the timeout.
  bool barrier(const char* where) {
    Shared& s = *shared;
    const uint32_t phase = s.phase.load();
    if (s.arrived.fetch_add(1) + 1 == static_cast<uint32_t>(nranks)) {
      s.arrived.store(0);
      s.phase.fetch_add(1);
      return true;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds());
    for (int spins = 0; s.phase.load() == phase; ++spins) {
      if (const int failed = s.failed.load(); failed != 0) {
        fail(static_cast<ncclResult_t>(failed), std::string("another rank failed while rank ") + std::to_string(rank) +
                                                    " waited in " + where);
        return false;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        fail(ncclRemoteError, "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " waited " +
                                  std::to_string(timeout_seconds()) + " s in " + where + " for the other ranks");
        return false;
      }
      if (spins > 1000) usleep(100);
      else sched_yield();
    }
    return true;
  }

  // Runs one collective (stream work): the ranks agree on the call, then per chunk each deposits
  // its part of `contribution` elements of `send` and `consume` reads the slots.
  void run(const Call& call, const void* send, size_t contribution,
           const std::function<void(size_t first, size_t n)>& consume) {
    if (state != ncclSuccess) return;  // a failed communicator does nothing
    shared->calls[rank] = call;
    if (!barrier(kind_name(call.kind))) return;
    for (int r = 0; r < nranks; ++r) {
      if (!(shared->calls[r] == call)) {
        fail(ncclInvalidUsage, "rank " + std::to_string(rank) + " issued " + describe(call) + " while rank " +
                                   std::to_string(r) + " issued " + describe(shared->calls[r]));
        return;  // every rank finds the mismatch, and each fails
      }
    }
    const size_t bytes = type_bytes(call.type), per_chunk = kSlotBytes / bytes;
    for (size_t first = 0; first < contribution; first += per_chunk) {
      const size_t n = std::min(per_chunk, contribution - first);
      if (call.kind != Kind::broadcast || rank == call.root)
        std::memcpy(shared->slots[rank], static_cast<const char*>(send) + first * bytes, n * bytes);
      if (!barrier(kind_name(call.kind))) return;
      consume(first, n);
      if (!barrier(kind_name(call.kind))) return;
    }
    barrier(kind_name(call.kind));  // the calls may change once every rank has read them
  }

  // out[i] = op over the ranks' slots, element `first + i` of a chunk starting at `first`.
  void reduce_slots(void* out, size_t slot_offset, size_t n, const Call& call) const {
    const size_t bytes = type_bytes(call.type);
    for (size_t i = 0; i < n; ++i) {
      const size_t at = (slot_offset + i) * bytes;
      double acc = load(shared->slots[0] + at, call.type);
      for (int r = 1; r < nranks; ++r) {
        const double v = load(shared->slots[r] + at, call.type);
        if (call.op == ncclMax) acc = std::max(acc, v);
        else if (call.type == ncclFloat32 || call.type == ncclBfloat16 || call.type == ncclFloat16)
          acc = static_cast<float>(static_cast<float>(acc) + static_cast<float>(v));  // fp32 sums
        else acc += v;
      }
      if (call.op == ncclAvg) acc /= nranks;
      store(static_cast<char*>(out) + i * bytes, acc, call.type);
    }
  }
};

namespace {

// Checks a call's arguments, then enqueues `work` on `stream` (or holds it until ncclGroupEnd).
thread_local int t_group_depth = 0;
thread_local std::vector<std::function<void()>> t_grouped;

bool on_device(const void* p, size_t count, ncclDataType_t type) {
  if (count == 0) return true;
  const char* c = static_cast<const char*>(p);
  return p != nullptr && cuda_emu::inside_allocation(c, c + count * type_bytes(type) - 1);
}

ncclResult_t issue(ncclComm_t comm, const Call& call, const void* send, size_t send_count, const void* recv,
                   size_t recv_count, cudaStream_t stream, std::function<void()> work) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (type_bytes(call.type) == 0 || call.root < 0 || call.root >= comm->nranks) {
    comm->last_error = std::string(kind_name(call.kind)) + ": a type or root this emulation has no rule for";
    return ncclInvalidArgument;
  }
  if (!on_device(send, send_count, call.type) || !on_device(recv, recv_count, call.type)) {
    comm->last_error = std::string(kind_name(call.kind)) + ": a buffer outside device memory";
    return ncclInvalidArgument;
  }
  if (comm->state == ncclInProgress) {  // NCCL: no operation before the communicator is ready
    comm->last_error = std::string(kind_name(call.kind)) +
                       " before the communicator finished initialising (ncclCommGetAsyncError said ncclInProgress)";
    return ncclInvalidUsage;
  }
  if (comm->state != ncclSuccess) return comm->state;
  auto enqueue = [stream, work = std::move(work)] { cuda_emu::enqueue(stream, work); };
  if (t_group_depth > 0) {
    t_grouped.push_back(enqueue);
  } else {
    enqueue();
  }
  comm->report_in_progress = !comm->blocking;
  return comm->blocking ? ncclSuccess : ncclInProgress;
}

}  // namespace

extern "C" {

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) { return comm != nullptr ? comm->last_error.c_str() : t_last_error.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::atomic<int> serial{0};
  const std::string name = "/bert-emu-nccl-" + std::to_string(getpid()) + "-" + std::to_string(++serial) + "-" +
                           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, name.data(), std::min(name.size(), sizeof(id->internal) - 1));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks) {
    t_last_error = "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ": this emulation takes 1 to " +
                   std::to_string(kMaxRanks) + " ranks";
    return ncclInvalidArgument;
  }
  auto comm = std::make_unique<ncclComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->blocking = config == nullptr || config->blocking != 0;
  comm->name.assign(id.internal, strnlen(id.internal, sizeof(id.internal)));
  const int fd = shm_open(comm->name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, sizeof(Shared)) != 0) {
    t_last_error = "shm_open/ftruncate " + comm->name + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return ncclSystemError;
  }
  void* map = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    t_last_error = "mmap " + comm->name + ": " + std::strerror(errno);
    return ncclSystemError;
  }
  comm->shared = static_cast<Shared*>(map);  // zero-filled by ftruncate: a valid initial state
  comm->shared->attached.fetch_add(1);
  comm->state = ncclInProgress;
  *out = comm.release();
  if (!(*out)->blocking) return ncclInProgress;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds());
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) {
    if (std::chrono::steady_clock::now() > deadline) {
      (*out)->fail(ncclRemoteError, "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " waited " +
                                        std::to_string(timeout_seconds()) + " s in ncclCommInitRank for the other ranks");
      shm_unlink((*out)->name.c_str());  // leave no segment behind
      return ncclRemoteError;
    }
    ncclCommGetAsyncError(*out, &state);
  }
  return state;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (comm->state == ncclInProgress) {  // init: done once every rank has attached
    if (comm->shared->attached.load() >= comm->nranks) {
      shm_unlink(comm->name.c_str());  // every rank has it mapped; the first to get here removes the name
      comm->state = ncclSuccess;
    } else {
      usleep(1000);
    }
  } else if (const int failed = comm->shared->failed.load(); failed != 0 && comm->state == ncclSuccess) {
    comm->fail(static_cast<ncclResult_t>(failed), "another rank's communicator failed");
  }
  *state = comm->state;
  if (comm->state == ncclSuccess && std::exchange(comm->report_in_progress, false)) *state = ncclInProgress;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return comm != nullptr ? ncclSuccess : ncclInvalidArgument; }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (comm->state == ncclInProgress) shm_unlink(comm->name.c_str());  // a peer never came: leave no segment
  munmap(comm->shared, sizeof(Shared));
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return ncclInvalidUsage;
  if (--t_group_depth == 0) {
    for (const auto& enqueue : t_grouped) enqueue();
    t_grouped.clear();
  }
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  const Call call{Kind::all_reduce, type, op, 0, count};
  return issue(comm, call, send, count, recv, count, stream, [=] {
    comm->run(call, send, count, [=](size_t first, size_t n) {
      comm->reduce_slots(static_cast<char*>(recv) + first * type_bytes(type), 0, n, call);
    });
  });
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  const Call call{Kind::reduce, type, op, root, count};
  const bool is_root = comm != nullptr && comm->rank == root;
  return issue(comm, call, send, count, recv, is_root ? count : 0, stream, [=] {
    comm->run(call, send, count, [=](size_t first, size_t n) {
      if (is_root) comm->reduce_slots(static_cast<char*>(recv) + first * type_bytes(type), 0, n, call);
    });
  });
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  const Call call{Kind::broadcast, type, ncclSum, root, count};
  const bool is_root = comm != nullptr && comm->rank == root;
  return issue(comm, call, send, is_root ? count : 0, recv, count, stream, [=] {
    comm->run(call, send, count, [=](size_t first, size_t n) {
      const size_t bytes = type_bytes(type);
      std::memmove(static_cast<char*>(recv) + first * bytes, comm->shared->slots[root], n * bytes);
    });
  });
}

// recv (count elements) = the sum of every rank's elements [rank·count, (rank+1)·count) of send.
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  const Call call{Kind::reduce_scatter, type, op, 0, count};
  const size_t total = comm != nullptr ? count * comm->nranks : 0;
  return issue(comm, call, send, total, recv, count, stream, [=] {
    const size_t mine = count * comm->rank;
    comm->run(call, send, total, [=](size_t first, size_t n) {
      const size_t lo = std::max(first, mine), hi = std::min(first + n, mine + count);
      if (lo < hi)
        comm->reduce_slots(static_cast<char*>(recv) + (lo - mine) * type_bytes(type), lo - first, hi - lo, call);
    });
  });
}

// recv (count · nranks elements): rank r's send in elements [r·count, (r+1)·count).
ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  const Call call{Kind::all_gather, type, ncclSum, 0, count};
  const size_t total = comm != nullptr ? count * comm->nranks : 0;
  return issue(comm, call, send, count, recv, total, stream, [=] {
    comm->run(call, send, count, [=](size_t first, size_t n) {
      const size_t bytes = type_bytes(type);
      for (int r = 0; r < comm->nranks; ++r)
        std::memmove(static_cast<char*>(recv) + (r * count + first) * bytes, comm->shared->slots[r], n * bytes);
    });
  });
}

}  // extern "C"
