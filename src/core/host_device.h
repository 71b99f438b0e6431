// BERT_HD: a function the CPU code and the CUDA kernels share (compiled for both by nvcc; plain
// inline for the host compiler), so both compute the same bits.
#pragma once

#if defined(__CUDACC__)
#define BERT_HD __host__ __device__ __forceinline__
#else
#define BERT_HD inline
#endif
