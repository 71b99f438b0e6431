// What the emulated CUDA runtime (cuda_runtime_emu.cpp) offers the other emulation files.
#pragma once

namespace cuda_emu {

// Whether bytes first..last (inclusive) lie inside one live cudaMalloc allocation.
bool inside_allocation(const void* first, const void* last);

}  // namespace cuda_emu
