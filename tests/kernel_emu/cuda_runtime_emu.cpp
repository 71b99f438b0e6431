// The CUDA runtime calls the CUDA backend (src/backend/cuda) makes, on the host, for running it
// in the kernel emulation: one device (BERT_EMU_DEVICES sets more; each reported as compute
// capability 9.0, each thread with its own current one, a kernel launch failing on another
// device's stream), host memory as device memory, streams that run everything at once in order
// (BERT_EMU_DEFER_STREAMS=1: streams that run their work only once something orders it, see
// StreamState), events between streams. Allocations are tracked so the cuBLASLt emulation can
// check that each matrix it touches lies inside one of them, and so the traffic counters can
// tell device bytes from others. Stream capture: while a stream captures, its work (kernels,
// GEMMs, async copies and memsets, arguments bound by value) and that of the streams forked from
// it by events is recorded instead of run, and cudaGraphLaunch runs the recorded work in order;
// as on a GPU, waiting for a capturing stream, allocating or freeing during a global- or
// thread-local-mode capture, ending a capture with a forked stream not joined back, or a wait
// across the capture's boundary fails and invalidates the capture.
#include "cuda_runtime_emu.h"

#include "racecheck.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <functional>
#include <utility>
#include <iterator>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

namespace cuda_emu {
namespace {

// Kernel footprints are counted in 32-byte sectors, the unit in which a GPU's memory system moves
// data (a kernel that skips some elements of a sector still moves the sector).
constexpr size_t kSector = 32;

// One live allocation and, once a counted kernel touched it, its footprint stamps: the epoch
// (launch) that last loaded / stored each sector (sectors counted from the allocation's start,
// which is 256-byte aligned).
struct Allocation {
  size_t bytes = 0;
  std::vector<uint32_t> read_epoch, write_epoch;
  std::vector<DeviceByte> race;  // racecheck.h's shadow, once a counted kernel touched it
};

std::map<const char*, Allocation>& allocations() {
  static std::map<const char*, Allocation> live;
  return live;
}

int g_stream_count = 0;
uint32_t g_epoch = 0;
// The last allocation an access hit, and the last gap between allocations one missed.
const char* g_hit_lo = nullptr;
const char* g_hit_hi = nullptr;
Allocation* g_hit = nullptr;
const char* g_gap_lo = nullptr;
const char* g_gap_hi = nullptr;

void forget_lookups() { g_hit_lo = g_hit_hi = g_gap_lo = g_gap_hi = nullptr; }

// Pinned host buffers (cudaMallocHost): start -> bytes. A capture records copies to and from
// these only: a graph reads host memory when it runs, and this runtime, stricter than CUDA's
// rules for pageable memory, refuses capturing a copy whose host side could be gone by then.
std::map<const char*, size_t>& pinned() {
  static std::map<const char*, size_t> buffers;
  return buffers;
}
bool is_pinned(const void* first, size_t bytes) {
  const auto* lo = static_cast<const char*>(first);
  auto it = pinned().upper_bound(lo);
  if (it == pinned().begin()) return false;
  --it;
  return lo >= it->first && lo + bytes <= it->first + it->second;
}

// The capture in progress (one at a time), if any: begun on `stream`, joined by the streams
// that waited on an event recorded in it (`forked`: whether each has captured work that the
// origin stream has not waited for since; ending the capture then fails, as CUDA's does).
struct Capture {
  bool active = false, invalidated = false;
  cudaStream_t stream = nullptr;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  uint64_t serial = 0;  // which capture of the program (events recorded in it name it)
  std::vector<std::function<void()>> work;
  std::map<cudaStream_t, bool> forked;
  std::map<cudaStream_t, uint64_t> recorded;  // work items each stream has recorded
};
Capture g_capture;
bool capturing(cudaStream_t stream) {
  return g_capture.active && (stream == g_capture.stream || g_capture.forked.count(stream) != 0);
}

// Streams made by cudaStreamCreate*: their device, whether the legacy default stream orders
// them (created without cudaStreamNonBlocking) and, with BERT_EMU_DEFER_STREAMS=1, the work
// waiting to run. Deferred work runs only when something orders it: a synchronisation or query
// of its stream, a stream waiting on an event recorded after it, a copy with pageable host
// memory on its stream (synchronous on a GPU), the legacy default stream (blocking streams
// only), or cudaDeviceSynchronize. So a missing event wait between two streams, or a host read
// before a synchronisation, gives wrong results here as it may on a GPU.
struct StreamState {
  int device = 0;
  bool blocking = true;
  std::deque<std::function<void()>> pending;
  uint64_t issued = 0, done = 0;  // deferred work items queued, and run, so far
};
std::mutex g_streams_mutex;
std::map<cudaStream_t, StreamState>& streams() {
  static std::map<cudaStream_t, StreamState> all;
  return all;
}
StreamState* stream_state(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(g_streams_mutex);
  const auto it = streams().find(stream);
  return it == streams().end() ? nullptr : &it->second;
}
bool defer_streams() {
  static const bool on = [] {
    const char* env = std::getenv("BERT_EMU_DEFER_STREAMS");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  return on;
}
// Runs `stream`'s deferred work up to item `upto` (all of it by default), in order.
void run_pending(cudaStream_t stream, uint64_t upto = UINT64_MAX) {
  StreamState* s = stream_state(stream);
  while (s != nullptr && s->done < upto && !s->pending.empty()) {
    std::function<void()> work = std::move(s->pending.front());
    s->pending.pop_front();
    work();
    ++s->done;
  }
}
// Runs every stream's deferred work (`blocking_only`: the streams the legacy default stream orders).
void run_all_pending(bool blocking_only = false) {
  std::vector<cudaStream_t> all;
  {
    std::lock_guard<std::mutex> lock(g_streams_mutex);
    for (const auto& [stream, state] : streams())
      if (!state.pending.empty() && (state.blocking || !blocking_only)) all.push_back(stream);
  }
  for (cudaStream_t stream : all) run_pending(stream);
}

// Devices: how many (BERT_EMU_DEVICES, 1 to 8; default 1), each thread's current one and whether
// its context is current (a thread starts with none; cudaSetDevice, or the first launch or stream
// on the thread, binds the device's; the driver's cuCtxSetCurrent can unbind it again while the
// runtime keeps its device), the device each stream was created on, and each thread's pending
// launch error.
int device_count() {
  static const int count = [] {
    const char* env = std::getenv("BERT_EMU_DEVICES");
    const int n = env ? std::atoi(env) : 1;
    return n >= 1 && n <= 8 ? n : 1;
  }();
  return count;
}
thread_local int t_device = 0;
thread_local bool t_context = false;
CUcontext context_of(int device) { return reinterpret_cast<CUcontext>(static_cast<uintptr_t>(0x1000 + device)); }
CUresult get_current_context(CUcontext* context) {
  *context = t_context ? context_of(t_device) : nullptr;
  return CUDA_SUCCESS;
}
CUresult set_current_context(CUcontext context) {
  t_context = context != nullptr;
  if (context != nullptr) t_device = static_cast<int>(reinterpret_cast<uintptr_t>(context) - 0x1000);
  return CUDA_SUCCESS;
}
thread_local cudaError_t t_launch_error = cudaSuccess;
cudaError_t g_sticky_error = cudaSuccess;  // set_sticky_error: the device is unusable

// A call the runtime refuses while a global- or thread-local-mode capture is in progress (it
// would wait for or change device state outside the graph; this runtime has one thread, the
// capturing one): invalidates the capture.
bool refused_by_capture() {
  if (!g_capture.active || g_capture.mode == cudaStreamCaptureModeRelaxed) return false;
  g_capture.invalidated = true;
  return true;
}

}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
  if (capturing(stream)) {
    g_capture.work.push_back(std::move(work));
    ++g_capture.recorded[stream];
    if (stream != g_capture.stream) g_capture.forked[stream] = true;
    return;
  }
  if (stream == nullptr) {
    run_all_pending(/*blocking_only=*/true);  // the legacy default stream waits for the blocking streams
  } else if (StreamState* s = defer_streams() ? stream_state(stream) : nullptr) {
    s->pending.push_back(std::move(work));
    ++s->issued;
    return;
  }
  work();
}

bool launch_allowed(cudaStream_t stream) {
  t_context = true;                    // the runtime binds the thread's device
  if (stream == nullptr) return true;  // the default stream: the current device's
  const StreamState* s = stream_state(stream);
  if (s == nullptr || s->device == t_device) return true;
  t_launch_error = cudaErrorInvalidResourceHandle;
  return false;
}

Traffic& traffic() {
  static Traffic counters;
  return counters;
}

bool inside_allocation(const void* first, const void* last) {
  const auto* lo = static_cast<const char*>(first);
  const auto* hi = static_cast<const char*>(last);
  auto it = allocations().upper_bound(lo);
  if (it == allocations().begin()) return false;
  --it;
  return lo >= it->first && hi < it->first + it->second.bytes;
}

void set_sticky_error(cudaError_t error) { g_sticky_error = error; }

void begin_launch() {
  ++traffic().kernel_launches;
  ++g_epoch;
}

void note_access(const void* address, size_t bytes, bool write) {
  const auto* p = static_cast<const char*>(address);
  const auto* shared = reinterpret_cast<const char*>(shared_memory());
  if (p >= shared && p < shared + kSharedMemoryBytes) {
    check_shared_access(static_cast<size_t>(p - shared), bytes, write);
    return;
  }
  if (p >= g_gap_lo && p < g_gap_hi) return;
  if (!(p >= g_hit_lo && p < g_hit_hi)) {
    auto& live = allocations();
    auto next = live.upper_bound(p);
    const char* gap_hi = next == live.end() ? reinterpret_cast<const char*>(UINTPTR_MAX) : next->first;
    if (next == live.begin() || p >= std::prev(next)->first + std::prev(next)->second.bytes) {
      g_gap_lo = next == live.begin() ? nullptr
                                      : std::prev(next)->first + std::prev(next)->second.bytes;
      g_gap_hi = gap_hi;
      return;
    }
    auto it = std::prev(next);
    g_hit_lo = it->first;
    g_hit_hi = it->first + it->second.bytes;
    g_hit = &it->second;
  }
  std::vector<uint32_t>& epochs = write ? g_hit->write_epoch : g_hit->read_epoch;
  if (epochs.empty()) epochs.assign((g_hit->bytes + kSector - 1) / kSector, 0);
  const size_t first = static_cast<size_t>(p - g_hit_lo) / kSector;
  const size_t last = std::min((static_cast<size_t>(p - g_hit_lo) + bytes - 1) / kSector, epochs.size() - 1);
  int64_t fresh = 0;
  for (size_t g = first; g <= last; ++g) {
    if (epochs[g] != g_epoch) {
      epochs[g] = g_epoch;
      fresh += kSector;
    }
  }
  (write ? traffic().write_bytes : traffic().read_bytes) += fresh;
  check_device_access(g_hit->race, g_hit->bytes, static_cast<size_t>(p - g_hit_lo), bytes, write, g_epoch);
}

}  // namespace cuda_emu

// The graph types the runtime headers leave opaque: the recorded work, in order.
struct CUgraph_st {
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};
// An event: the stream it was last recorded on and how much of that stream's work it marks
// (deferred items issued, or items recorded into capture number `capture`; 0: none).
struct CUevent_st {
  cudaStream_t stream = nullptr;
  uint64_t capture = 0;
  uint64_t position = 0;
};

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = cuda_emu::device_count();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= cuda_emu::device_count()) return cudaErrorInvalidDevice;
  cuda_emu::t_device = device;
  cuda_emu::t_context = true;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = cuda_emu::t_device;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  if (device < 0 || device >= cuda_emu::device_count()) return cudaErrorInvalidDevice;
  if (attr == cudaDevAttrComputeCapabilityMajor) *value = 9;
  else if (attr == cudaDevAttrComputeCapabilityMinor) *value = 0;
  else return cudaErrorInvalidValue;  // not emulated: the caller should learn it asked
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  // A distinct non-null handle per stream; nothing dereferences it.
  *stream = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(++cuda_emu::g_stream_count));
  std::lock_guard<std::mutex> lock(cuda_emu::g_streams_mutex);
  cuda_emu::StreamState& s = cuda_emu::streams()[*stream];
  s.device = cuda_emu::t_device;
  s.blocking = (flags & cudaStreamNonBlocking) == 0;
  cuda_emu::t_context = true;
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  cuda_emu::run_pending(stream);  // as on a GPU, queued work still runs
  std::lock_guard<std::mutex> lock(cuda_emu::g_streams_mutex);
  return cuda_emu::streams().erase(stream) == 1 ? cudaSuccess : cudaErrorInvalidResourceHandle;
}
cudaError_t cudaDeviceSynchronize(void) {
  if (cuda_emu::refused_by_capture()) return cudaErrorStreamCaptureUnsupported;
  cuda_emu::run_all_pending();
  return cuda_emu::g_sticky_error;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cuda_emu::g_sticky_error != cudaSuccess) return cuda_emu::g_sticky_error;
  if (cuda_emu::capturing(stream) || cuda_emu::refused_by_capture()) {
    cuda_emu::g_capture.invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  cuda_emu::run_pending(stream);
  ++cuda_emu::traffic().stream_syncs;
  return cudaSuccess;
}
// A stream with deferred work reports it not ready once; the work has run by the next query.
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (cuda_emu::g_sticky_error != cudaSuccess) return cuda_emu::g_sticky_error;
  if (cuda_emu::capturing(stream) || cuda_emu::refused_by_capture()) {
    cuda_emu::g_capture.invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  const cuda_emu::StreamState* s = cuda_emu::stream_state(stream);
  const bool busy = s != nullptr && !s->pending.empty();
  cuda_emu::run_pending(stream);
  return busy ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  if (cuda_emu::g_capture.active) return cudaErrorIllegalState;  // one capture at a time here
  cuda_emu::run_pending(stream);  // what the stream queued before belongs to no graph
  static uint64_t captures = 0;
  cuda_emu::g_capture = cuda_emu::Capture{true, false, stream, mode, ++captures, {}, {}, {}};
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  cuda_emu::Capture& c = cuda_emu::g_capture;
  if (!c.active || stream != c.stream) return cudaErrorIllegalState;
  const bool unjoined = std::any_of(c.forked.begin(), c.forked.end(), [](const auto& f) { return f.second; });
  const bool invalidated = c.invalidated || unjoined;
  *graph = invalidated ? nullptr : new CUgraph_st{std::move(c.work)};
  c = cuda_emu::Capture{};
  return unjoined ? cudaErrorStreamCaptureUnjoined : invalidated ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* status) {
  *status = !cuda_emu::capturing(stream)    ? cudaStreamCaptureStatusNone
            : cuda_emu::g_capture.invalidated ? cudaStreamCaptureStatusInvalidated
                                              : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = new CUevent_st{};
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
// The event marks the work `stream` has queued so far: deferred work items, or, while the stream
// captures, the work it has recorded into the graph.
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  const cuda_emu::StreamState* s = cuda_emu::stream_state(stream);
  event->stream = stream;
  const bool captured = cuda_emu::capturing(stream);
  event->capture = captured ? cuda_emu::g_capture.serial : 0;
  event->position = captured ? cuda_emu::g_capture.recorded[stream] : s != nullptr ? s->issued : 0;
  return cudaSuccess;
}
// Waiting on an event recorded in the capture forks `stream` into it, or, on the origin stream
// with nothing recorded on the event's stream since, joins that stream back; a captured stream may
// not wait on work outside the graph, nor any stream on an event of an ended capture. Otherwise
// the wait is a work item of its own when `stream` is deferred, or done now.
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  cuda_emu::Capture& c = cuda_emu::g_capture;
  const bool current = event->capture != 0 && c.active && event->capture == c.serial;
  if ((event->capture != 0 && !current) || (event->capture == 0 && cuda_emu::capturing(stream))) {
    if (c.active) c.invalidated = true;
    return cudaErrorStreamCaptureIsolation;
  }
  if (current) {
    if (!cuda_emu::capturing(stream)) {
      c.forked[stream] = false;
    } else if (stream == c.stream) {
      const auto joined = c.forked.find(event->stream);
      if (joined != c.forked.end() && event->position == c.recorded[event->stream]) joined->second = false;
    }
    return cudaSuccess;
  }
  const cudaStream_t source = event->stream;
  const uint64_t position = event->position;
  cuda_emu::enqueue(stream, [source, position] { cuda_emu::run_pending(source, position); });
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (graph == nullptr) return cudaErrorInvalidValue;
  *exec = new CUgraphExec_st{graph->work};
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return cudaErrorInvalidValue;
  for (const auto& work : exec->work) cuda_emu::enqueue(stream, work);
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (cuda_emu::refused_by_capture()) return cudaErrorStreamCaptureUnsupported;
  const size_t rounded = (bytes + 255) / 256 * 256;
  *ptr = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
  if (*ptr == nullptr) return cudaErrorMemoryAllocation;
  std::memset(*ptr, 0xcd, rounded);  // device memory starts as garbage, not zeros
  cuda_emu::allocations()[static_cast<const char*>(*ptr)].bytes = bytes;
  cuda_emu::forget_lookups();
  return cudaSuccess;
}
cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  if (cuda_emu::refused_by_capture()) return cudaErrorStreamCaptureUnsupported;
  if (cuda_emu::allocations().erase(static_cast<const char*>(ptr)) == 0)
    return cudaErrorInvalidValue;
  cuda_emu::forget_lookups();
  std::free(ptr);
  return cudaSuccess;
}

// Pinned host memory is ordinary host memory here.
cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  *ptr = std::malloc(bytes == 0 ? 1 : bytes);
  if (*ptr == nullptr) return cudaErrorMemoryAllocation;
  cuda_emu::pinned()[static_cast<const char*>(*ptr)] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* ptr) {
  cuda_emu::pinned().erase(static_cast<const char*>(ptr));
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  const bool device_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool device_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (bytes == 0) return cudaSuccess;
  const char* d = static_cast<const char*>(dst);
  const char* s = static_cast<const char*>(src);
  if ((device_dst && !cuda_emu::inside_allocation(d, d + bytes - 1)) ||
      (device_src && !cuda_emu::inside_allocation(s, s + bytes - 1)))
    return cudaErrorInvalidValue;
  const void* host = !device_dst ? dst : !device_src ? src : nullptr;
  if (host != nullptr && cuda_emu::capturing(stream) && !cuda_emu::is_pinned(host, bytes)) {
    cuda_emu::g_capture.invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  auto copy = [=] {
    std::memmove(dst, src, bytes);
    cuda_emu::Traffic& t = cuda_emu::traffic();
    const auto n = static_cast<int64_t>(bytes);
    if (device_dst && device_src) {
      ++t.device_copies;
      t.read_bytes += n;
      t.write_bytes += n;
    } else {
      ++t.host_copies;
      (device_dst ? t.host_to_device_bytes : t.device_to_host_bytes) += n;
    }
  };
  // With pageable host memory the copy is synchronous: it runs after the stream's queued work.
  if (host != nullptr && stream != nullptr && !cuda_emu::is_pinned(host, bytes) && !cuda_emu::capturing(stream)) {
    cuda_emu::run_pending(stream);
    copy();
  } else {
    cuda_emu::enqueue(stream, copy);
  }
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind) {
  if (cuda_emu::refused_by_capture()) return cudaErrorStreamCaptureUnsupported;
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  const char* p = static_cast<const char*>(ptr);
  if (!cuda_emu::inside_allocation(p, p + bytes - 1)) return cudaErrorInvalidValue;
  cuda_emu::enqueue(stream, [=] {
    std::memset(ptr, value, bytes);
    ++cuda_emu::traffic().device_copies;
    cuda_emu::traffic().write_bytes += static_cast<int64_t>(bytes);
  });
  return cudaSuccess;
}

// The driver's context calls ThreadDevice looks up through the runtime.
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  *fn = nullptr;
  if (std::strcmp(symbol, "cuCtxGetCurrent") == 0) *fn = reinterpret_cast<void*>(&cuda_emu::get_current_context);
  if (std::strcmp(symbol, "cuCtxSetCurrent") == 0) *fn = reinterpret_cast<void*>(&cuda_emu::set_current_context);
  if (status) *status = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

// A launch either ran, threw, or was refused (another device's stream): that error is pending.
// A sticky error is never cleared.
cudaError_t cudaGetLastError(void) {
  if (cuda_emu::g_sticky_error != cudaSuccess) return cuda_emu::g_sticky_error;
  return std::exchange(cuda_emu::t_launch_error, cudaSuccess);
}
const char* cudaGetErrorString(cudaError_t error) {
  if (error == cudaSuccess) return "no error";
  if (error == cudaErrorIllegalAddress) return "an illegal memory access was encountered";
  if (error == cudaErrorStreamCaptureUnsupported) return "operation not permitted when stream is capturing";
  if (error == cudaErrorStreamCaptureInvalidated) return "operation failed due to a previous error during capture";
  if (error == cudaErrorStreamCaptureUnjoined) return "capture sequence contains a fork that was not joined to the primary stream";
  if (error == cudaErrorStreamCaptureIsolation) return "dependency created on uncaptured work in another stream";
  if (error == cudaErrorNotReady) return "device not ready";
  return error == cudaErrorInvalidResourceHandle ? "invalid resource handle" : "emulated CUDA error";
}

}  // extern "C"
