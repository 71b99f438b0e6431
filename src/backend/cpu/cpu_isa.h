// The instruction sets the CPU backend's hand-vectorised loops are compiled for, picked at run
// time (GCC target_clones): x86-64-v4 (AVX-512 F, VL, BW, DQ, CD: every AVX-512 CPU since
// Skylake-SP and Zen 4), AVX2, and the baseline, so the default build needs no -march flag and
// runs on any x86-64. x86-64-v4 rather than plain AVX-512F: with only AVX-512F the compiler
// lacks the narrow-lane moves it needs (Philox's uniforms ran at the AVX2 clone's speed, 1.4 ns
// each on Zen 4, against 0.7 ns with x86-64-v4).
#pragma once

#define BERT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
// The same clones with no contraction of a * b + c into one fused multiply-add, so their results
// are the baseline's bit for bit on every instruction set (the optimizer's loops: a step's weights
// do not depend on the CPU they were computed on).
#define BERT_CPU_CLONES_EXACT \
  __attribute__((target_clones("arch=x86-64-v4", "avx2", "default"), optimize("fp-contract=off")))
