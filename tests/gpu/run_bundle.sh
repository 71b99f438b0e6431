#!/usr/bin/env bash
# Runs on the GPU machine, from a bundle made by pack_bundle.sh: unpacks its lib.tar.xz, sets
# the library path (the bundle's lib/ first, then CUDA's libraries from NVIDIA's pip packages of the python3 on PATH,
# BERT_CUDA_LIBS, /usr/local/cuda), checks that every library resolves, then runs
#   tests: the GPU suite (ops vs CPU, casts, weight mirror, fused attention, end to end, NCCL);
#   bench: the benchmark table (bench_gpu.sh) and the op profile of BERT-large phase 1 and 2;
#   all:   both.
# Every log goes into LOG_DIR; LOG_DIR/summary.txt ends with "N passed, N failed, N skipped".
#
# usage: bash run_bundle.sh BUNDLE_DIR LOG_DIR [tests|bench|all]
set -uo pipefail
BUNDLE="$(cd "$1" && pwd)"
LOGS="$2"
MODE="${3:-all}"
mkdir -p "$LOGS"
LOGS="$(cd "$LOGS" && pwd)"
SUMMARY="$LOGS/summary.txt"
: > "$SUMMARY"
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
# The libraries travel compressed (pack_bundle.sh); unpacked once, next to it.
if [ ! -d "$BUNDLE/lib" ] && [ -f "$BUNDLE/lib.tar.xz" ]; then
  tar -C "$BUNDLE" -xJf "$BUNDLE/lib.tar.xz" || { say "cannot unpack $BUNDLE/lib.tar.xz"; exit 1; }
fi
export LD_LIBRARY_PATH="$BUNDLE/lib:$(nvidia_lib_dirs):${BERT_CUDA_LIBS:-}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"

say "bundle: $(head -n 1 "$BUNDLE/MANIFEST")"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/gpu: /' | tee -a "$SUMMARY"
missing=$(for f in "$BUNDLE"/bin/*; do ldd "$f"; done | grep "not found" | sort -u)
if [ -n "$missing" ]; then
  say "libraries not found (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):"
  say "$missing"
  say "0 passed, 1 failed, 0 skipped"
  exit 3
fi
for lib in libcudart libcublasLt libcudnn.so libnccl libnvrtc.so; do
  ldd "$BUNDLE/bin/gpu_cuda_ops_vs_cpu" "$BUNDLE/bin/dist_nccl_gpu" | grep -m1 "$lib" | awk '{print "resolved: " $1 " -> " $3}' | tee -a "$SUMMARY"
done

passed=0 failed=0 skipped=0
run_test() {  # name, timeout seconds, command...
  local name="$1" limit="$2"
  shift 2
  local t0=$SECONDS rc=0
  timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1 || rc=$?
  case $rc in
    0) passed=$((passed + 1)); say "$name: passed ($((SECONDS - t0)) s)" ;;
    77) skipped=$((skipped + 1)); say "$name: skipped ($(tail -n 1 "$LOGS/$name.log"))" ;;
    *) failed=$((failed + 1)); say "$name: FAILED, exit $rc ($((SECONDS - t0)) s); last lines:"; tail -n 15 "$LOGS/$name.log" | sed 's/^/    /' | tee -a "$SUMMARY" ;;
  esac
}

if [ "$MODE" = tests ] || [ "$MODE" = all ]; then
  for t in cuda_without_device cuda_ops_vs_cpu cuda_casts weight_mirror fused_attention cuda_graphs e2e_capi; do
    run_test "$t" 600 "$BUNDLE/bin/gpu_$t" --gtest_output="xml:$LOGS/$t.xml"
  done
  run_test nccl_gpu 300 "$BUNDLE/bin/dist_nccl_gpu" --gtest_output="xml:$LOGS/nccl_gpu.xml"
fi

if [ "$MODE" = bench ] || [ "$MODE" = all ]; then
  bash "$BUNDLE/scripts/bench_gpu.sh" "$BUNDLE" 2>&1 | tee "$LOGS/bench_table.txt" | tee -a "$SUMMARY"
  # BERT-large phase 1 (seq 128, batch 64) and phase 2 (seq 512, batch 16), bf16, fused attention.
  run_test profile_phase1 300 "$BUNDLE/bin/bench_op_profile" --device cuda --model bert-large --seq 128 --batch 64 --precision bf16 --fused-attention 1 --steps 3 --warmup 2
  run_test profile_phase2 300 "$BUNDLE/bin/bench_op_profile" --device cuda --model bert-large --seq 512 --batch 16 --precision bf16 --fused-attention 1 --steps 3 --warmup 2
  for p in profile_phase1 profile_phase2; do
    [ -s "$LOGS/$p.log" ] && { say "--- $p"; sed -n '1,20p' "$LOGS/$p.log" | tee -a "$SUMMARY" >/dev/null; }
  done
fi
say "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
