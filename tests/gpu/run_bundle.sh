#!/usr/bin/env bash
# Runs on the GPU machine, from a bundle made by pack_bundle.sh: unpacks its payload.tar.xz, sets the
# library path (the bundle's lib/ first, then CUDA's libraries from NVIDIA's pip packages of the
# python3 on PATH, BERT_CUDA_LIBS, /usr/local/cuda), checks that every library resolves, then runs
#   tests: the GPU suite, cheap independent programs first, the fused-attention tests in filtered
#          shards, the end-to-end run, NCCL last;
#   bench: the benchmark table (bench_gpu.sh) and the op profile of BERT-large phase 1 and 2;
#   all:   both;
#   sanitize: a second command: compute-sanitizer's memcheck on a few filtered tests of every
#          kernel family (out-of-bounds and misaligned accesses, leaks) and racecheck (shared
#          memory hazards) on the reductions, layer norm, softmax and the attention kernels.
# The machine brings back at most 8 files, and a command may run 10 minutes: so LOG_DIR gets three
# files, written as the run goes (a command cut off still brings back what ran):
#   summary.txt   a line per program (passed / skipped / FAILED / not run) and "N passed, N failed,
#                 N skipped, N not run" last;
#   run.log       every program's whole output, after a header naming it;
#   versions.txt  the GPU, the driver, the CUDA libraries as they resolved and their packages.
# The whole run keeps to DEADLINE_S seconds (default 420); each program gets its own budget, cut to
# what is left, and is stopped with SIGABRT at its end (a hang shows a backtrace where the runtime
# prints one). A program that skips (exit 77, "no CUDA device") while nvidia-smi sees a GPU failed.
#
# usage: [DEADLINE_S=420] bash run_bundle.sh BUNDLE_DIR LOG_DIR [tests|bench|all|sanitize]
set -uo pipefail
BUNDLE="$(cd "$1" && pwd)"
LOGS="$2"
MODE="${3:-all}"
DEADLINE_S="${DEADLINE_S:-420}"
mkdir -p "$LOGS"
LOGS="$(cd "$LOGS" && pwd)"
SUMMARY="$LOGS/summary.txt" RUNLOG="$LOGS/run.log" VERSIONS="$LOGS/versions.txt"
: > "$SUMMARY"
: > "$RUNLOG"
: > "$VERSIONS"
say() { echo "$*" | tee -a "$SUMMARY"; }

nvidia_lib_dirs() {
  python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
dirs = sorted({os.path.dirname(p) for r in roots for p in glob.glob(os.path.join(r, "**", "lib*.so*"), recursive=True)})
print(":".join(dirs))
PY
}
# The programs and libraries travel compressed (pack_bundle.sh); unpacked once, next to it (with
# Python's tarfile where the machine has no xz).
if [ ! -d "$BUNDLE/bin" ] && [ -f "$BUNDLE/payload.tar.xz" ]; then
  if command -v xz >/dev/null && [ -z "${BERT_NO_XZ:-}" ]; then
    tar -C "$BUNDLE" -xJf "$BUNDLE/payload.tar.xz"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$BUNDLE/payload.tar.xz" "$BUNDLE"
  fi || { say "cannot unpack $BUNDLE/payload.tar.xz"; exit 1; }
fi
export LD_LIBRARY_PATH="$BUNDLE/lib:$(nvidia_lib_dirs):${BERT_CUDA_LIBS:-}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"

say "bundle: $(head -n 1 "$BUNDLE/MANIFEST")"
gpu_seen=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  gpu_seen=1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/gpu: /' | tee -a "$SUMMARY"
fi
{
  echo "== nvidia-smi"; nvidia-smi 2>&1 || echo "(no nvidia-smi)"
  echo "== the CUDA libraries as they resolve"
  ldd "$BUNDLE"/bin/* 2>/dev/null | grep -E 'libcuda\.|libcudart|libcublas|libcudnn|libnccl|libnvrtc|libnvJitLink' | sort -u
  echo "== NVIDIA's Python packages"; python3 -m pip list 2>/dev/null | grep -i -E '^(nvidia|torch)' || echo "(none)"
  echo "== nvcc"; nvcc --version 2>/dev/null | tail -n 1 || echo "(no nvcc)"
} >> "$VERSIONS" 2>&1
missing=$(for f in "$BUNDLE"/bin/*; do ldd "$f"; done | grep "not found" | sort -u)
if [ -n "$missing" ]; then
  say "libraries not found (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):"
  say "$missing"
  say "0 passed, 1 failed, 0 skipped, 0 not run"
  exit 3
fi

passed=0 failed=0 skipped=0 not_run=0
output_from=1  # run.log's line where the last program's header is
# run NAME BUDGET_S COMMAND...: one program, its output appended to run.log after a header.
run() {
  local name="$1" budget="$2"
  shift 2
  local left=$((DEADLINE_S - SECONDS - 5))
  if [ "$left" -lt 10 ]; then
    not_run=$((not_run + 1)); say "$name: not run (the run's ${DEADLINE_S} s deadline)"; return
  fi
  local limit=$((budget < left ? budget : left)) t0=$SECONDS rc=0
  output_from=$(($(wc -l < "$RUNLOG") + 2))  # after the blank line before the header
  printf '\n===== %s (limit %d s): %s\n' "$name" "$limit" "$*" >> "$RUNLOG"
  timeout -s ABRT -k 10 "$limit" "$@" >> "$RUNLOG" 2>&1 || rc=$?
  printf '===== %s: exit %d after %d s\n' "$name" "$rc" "$((SECONDS - t0))" >> "$RUNLOG"
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1)); say "$name: passed ($((SECONDS - t0)) s)"
  elif [ "$rc" = 77 ] && [ "$gpu_seen" = 0 ]; then
    skipped=$((skipped + 1)); say "$name: skipped (no GPU)"
  else
    failed=$((failed + 1))
    local why="exit $rc"
    [ "$rc" = 124 ] && why="stopped at its ${limit} s limit"
    [ "$rc" = 77 ] && why="skipped (exit 77) though nvidia-smi sees a GPU"
    say "$name: FAILED, $why ($((SECONDS - t0)) s); its last lines:"
    tail -n +"$output_from" "$RUNLOG" | grep -v '^===== ' | tail -n 15 | sed 's/^/    /' | tee -a "$SUMMARY"
  fi
}

if [ "$MODE" = tests ] || [ "$MODE" = all ]; then
  bin="$BUNDLE/bin"
  run probe 60 "$bin/gpu_probe"
  grep -E '^(versions|device|backend)' "$RUNLOG" >> "$VERSIONS"
  run cuda_without_device 30 "$bin/gpu_cuda_without_device"
  run cuda_casts 90 "$bin/gpu_cuda_casts"
  run weight_mirror 60 "$bin/gpu_weight_mirror"
  run cuda_ops_vs_cpu 120 "$bin/gpu_cuda_ops_vs_cpu"
  run cuda_graphs 120 "$bin/gpu_cuda_graphs"
  for shard in 'FusedAttention.Bf16*:FusedAttention.Fp16*' 'FusedAttention.VariableLength*' \
               'FusedAttention.Dropout*:FusedAttention.MaskCheck*' \
               'FusedAttention.SixteenBit*:FusedAttention.ABackward*'; do
    run "fused_attention[$shard]" 90 "$bin/gpu_fused_attention" --gtest_filter="$shard"
  done
  # Whatever the shards above did not name (a test added later) runs here.
  run "fused_attention[rest]" 60 "$bin/gpu_fused_attention" \
    --gtest_filter='-FusedAttention.Bf16*:FusedAttention.Fp16*:FusedAttention.VariableLength*:FusedAttention.Dropout*:FusedAttention.MaskCheck*:FusedAttention.SixteenBit*:FusedAttention.ABackward*'
  run e2e_capi 180 "$bin/gpu_e2e_capi"
  run nccl_gpu 90 "$bin/dist_nccl_gpu"
fi

if [ "$MODE" = sanitize ]; then
  bin="$BUNDLE/bin"
  # On PATH, in the CUDA toolkit, or in NVIDIA's pip package (nvidia-cuda-sanitizer-api).
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null ||
    python3 -c 'import glob, nvidia; print(next(iter(sorted(p for r in nvidia.__path__ for p in glob.glob(r + "/**/compute-sanitizer", recursive=True))), ""))' 2>/dev/null || true)
  if [ -z "$sanitizer" ] || [ ! -x "$sanitizer" ]; then
    say "compute-sanitizer: not found on this machine (PATH, /usr/local/cuda/bin, NVIDIA's pip packages)"
  else
    say "compute-sanitizer: $sanitizer"
    kernels='CudaVsCpu.EmbeddingForwardAndBackwardAreExact:CudaVsCpu.LayerNormForwardBackward:CudaVsCpu.ResidualLayerNormForwardBackward:CudaVsCpu.DropoutMasksMatchTheCpuExactly:CudaVsCpu.AttentionPaddedAndVariableLength:CudaVsCpu.SoftmaxCrossEntropyWithPaddingAndIgnoredRows:CudaVsCpu.SegmentSumOfSquaresIsDeterministic:CudaVsCpu.AdamDirectionApplyUpdateAndScale'
    run memcheck[ops] 150 "$sanitizer" --tool memcheck --leak-check full --error-exitcode 1 "$bin/gpu_cuda_ops_vs_cpu" --gtest_filter="$kernels"
    run memcheck[casts,16bit] 120 "$sanitizer" --tool memcheck --error-exitcode 1 "$bin/gpu_cuda_casts"
    run memcheck[fused_attention] 120 "$sanitizer" --tool memcheck --error-exitcode 1 "$bin/gpu_fused_attention" --gtest_filter='FusedAttention.Bf16*:FusedAttention.VariableLength*'
    run racecheck[ops] 150 "$sanitizer" --tool racecheck --error-exitcode 1 "$bin/gpu_cuda_ops_vs_cpu" --gtest_filter="$kernels"
  fi
fi

if [ "$MODE" = bench ] || [ "$MODE" = all ]; then
  run bench_table 300 bash "$BUNDLE/scripts/bench_gpu.sh" "$BUNDLE"
  tail -n +"$output_from" "$RUNLOG" | grep -v '^=====' >> "$SUMMARY"
  # BERT-large phase 1 (seq 128, batch 64) and phase 2 (seq 512, batch 16), bf16, fused attention.
  run profile_phase1 120 "$BUNDLE/bin/bench_op_profile" --device cuda --model bert-large --seq 128 --batch 64 --precision bf16 --fused-attention 1 --steps 3 --warmup 2
  run profile_phase2 120 "$BUNDLE/bin/bench_op_profile" --device cuda --model bert-large --seq 512 --batch 16 --precision bf16 --fused-attention 1 --steps 3 --warmup 2
fi
say "$passed passed, $failed failed, $skipped skipped, $not_run not run"
[ "$failed" = 0 ] && [ "$not_run" = 0 ]
