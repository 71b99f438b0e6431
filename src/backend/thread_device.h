// ThreadDevice: a host thread's CUDA context, kept across a call into the engine. A host may call
// a session from any of its threads (Go moves goroutines between OS threads; Python threads may
// share a session), and CUDA's current device belongs to the calling thread: each call makes the
// session's GPU current and the thread's own context current again when it returns (none if it
// had none: no context is made on a GPU the host never used), so the engine changes nothing in
// its host. For a CPU session (or a build without CUDA) it does nothing.
#pragma once

namespace bert {

class ThreadDevice {
 public:
  // With `gpu`, saves the calling thread's current context and makes `device` current (device < 0:
  // keeps it, for work that picks its device itself, like creating a session).
  ThreadDevice(bool gpu, int device);
  ~ThreadDevice();  // the saved context current again
  ThreadDevice(const ThreadDevice&) = delete;
  ThreadDevice& operator=(const ThreadDevice&) = delete;

 private:
  bool saved_ = false;
  void* context_ = nullptr;  // the thread's CUcontext (null: none)
};

}  // namespace bert
