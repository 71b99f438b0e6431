// OpSyncCheck: a debug observer (Ops::add_observer; train.debug_sync in a session's config) that
// waits for the backend after every call and turns a failure found then (a GPU kernel's illegal
// address, a sticky CUDA error) into an error naming the call that queued the failing work,
// instead of the later call that happened to wait. It serialises the GPU and the host: a
// diagnosis switch, not for training runs.
#pragma once

#include "backend/ops.h"

namespace bert {

class OpSyncCheck final : public OpObserver {
 public:
  void before(Ops& ops, const char* op) override;
  void after(Ops& ops, const char* op) override;
};

}  // namespace bert
