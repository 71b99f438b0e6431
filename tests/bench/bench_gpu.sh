#!/usr/bin/env bash
# GPU throughput table for the closing notes of the CUDA work: bert-bench on one GPU for
# BERT-base and BERT-large at sequence lengths 128 and 512, in bf16 and fp16, with the reference
# and the cuDNN fused attention, each also with CUDA graphs (each micro-batch replayed), printing sequences/s, model TFLOP/s, MFU against PEAK_TFLOPS
# (default 989: H100 SXM dense bf16) and peak GPU memory. A benchmark: it measures, it asserts nothing.
#
# usage: [MODELS="bert-large"] bash tests/bench/bench_gpu.sh [BUILD_DIR | BUNDLE_DIR] [PEAK_TFLOPS]
# (MODELS: a subset of the models, where one device command cannot run the whole table)
set -euo pipefail
BUILD="${1:-build}"
PEAK="${2:-989}"
BENCH="$BUILD/src/tools/bert-bench"
[ -x "$BENCH" ] || BENCH="$BUILD/bin/bert-bench"  # a bundle from tests/gpu/pack_bundle.sh
[ -x "$BENCH" ] || { echo "no bert-bench in $BUILD: build first (meson setup $BUILD && ninja -C $BUILD)" >&2; exit 2; }
ERR="$(mktemp)"

printf "%-11s %4s %5s %-9s %-16s %10s %9s %6s %10s\n" model seq batch precision attention "seq/s" "TFLOP/s" MFU "peak GiB"
for model in ${MODELS:-bert-base bert-large}; do
  for seq in 128 512; do
    batch=$([ "$seq" = 128 ] && echo 64 || echo 16)
    for precision in bf16 fp16; do
      for variant in reference reference+graphs fused fused+graphs; do
        fused=$([[ "$variant" == fused* ]] && echo 1 || echo 0)
        graphed=$([[ "$variant" == *+graphs ]] && echo 1 || echo 0)
        line=$("$BENCH" --device cuda --model "$model" --seq "$seq" --batch "$batch" --precision "$precision" \
                 --fused-attention "$fused" --graphed "$graphed" --steps 10 --warmup 3 --peak-tflops "$PEAK" 2>"$ERR") || {
          printf "%-11s %4s %5s %-9s %-16s failed: %s\n" "$model" "$seq" "$batch" "$precision" "$variant" "$(tail -n 1 "$ERR")"
          continue
        }
        python3 - "$line" "$variant" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
print(f"{r['model']:<11} {r['seq']:>4} {r['batch']:>5} {r['precision']:<9} {sys.argv[2]:<16} {r['sequences_per_second']:>10.1f} "
      f"{r['model_tflops']:>9.1f} {r['mfu']:>6.1%} {r['memory']['peak_backend_mib'] / 1024:>10.2f}")
PY
      done
    done
  done
done
rm -f "$ERR"
