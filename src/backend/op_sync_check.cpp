// OpSyncCheck: synchronise before and after each observed call (see the header).
#include "backend/op_sync_check.h"

#include "core/error.h"

namespace bert {
namespace {

void synchronize_naming(Ops& ops, const char* when, const char* op) {
  try {
    ops.synchronize();
  } catch (const Error& e) {
    fail(e.code(), "train.debug_sync: the backend failed ", when, " ", op, ": ", e.what());
  }
}

}  // namespace

// Work queued before the call is waited for first, so a failure is never blamed on this one.
void OpSyncCheck::before(Ops& ops, const char* op) { synchronize_naming(ops, "before", op); }

void OpSyncCheck::after(Ops& ops, const char* op) { synchronize_naming(ops, "in", op); }

}  // namespace bert
