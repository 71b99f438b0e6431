// The memory-access hooks GCC's -fsanitize=thread instrumentation calls before every load and
// store, defined here (no ThreadSanitizer runtime is linked) to feed cuda_emu::note_access: the
// kernels of emu_kernels_counted are compiled with that instrumentation, so the emulator sees
// each byte a kernel loads or stores. Everything else a hook may be asked is a no-op.
#include <cstddef>
#include <cstdint>

#include "cuda_runtime_emu.h"

namespace {

void load(const void* p, size_t n) { cuda_emu::note_access(p, n, false); }
void store(const void* p, size_t n) { cuda_emu::note_access(p, n, true); }

}  // namespace

extern "C" {

void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

#define BERT_ACCESS_HOOKS(N)                                                   \
  void __tsan_read##N(void* p) { load(p, N); }                                 \
  void __tsan_write##N(void* p) { store(p, N); }                               \
  void __tsan_unaligned_read##N(const void* p) { load(p, N); }                 \
  void __tsan_unaligned_write##N(void* p) { store(p, N); }                     \
  void __tsan_volatile_read##N(void* p) { load(p, N); }                        \
  void __tsan_volatile_write##N(void* p) { store(p, N); }
BERT_ACCESS_HOOKS(1)
BERT_ACCESS_HOOKS(2)
BERT_ACCESS_HOOKS(4)
BERT_ACCESS_HOOKS(8)
BERT_ACCESS_HOOKS(16)
#undef BERT_ACCESS_HOOKS

void __tsan_read_range(void* p, size_t n) { load(p, n); }
void __tsan_write_range(void* p, size_t n) { store(p, n); }

}  // extern "C"
