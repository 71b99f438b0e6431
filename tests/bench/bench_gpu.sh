#!/usr/bin/env bash
# GPU throughput table for the closing notes of the CUDA work: bert-bench on one GPU for
# BERT-base and BERT-large at sequence lengths 128 and 512, in bf16 and fp16, with the reference
# and the cuDNN fused attention, each also with CUDA graphs (each micro-batch replayed), printing
# sequences/s, model TFLOP/s, MFU against PEAK_TFLOPS (default 789: the bf16 8192³ GEMM measured
# on the lent H100/H200, 769-798 TFLOP/s, not the datasheet's 989) and peak
# GPU memory. Where BUILD/data holds real sequences (a bundle from tests/gpu/pack_bundle.sh:
# wikitext-2 as seq-512 shards and their length bins), BERT-large phase 2 (seq 512, batch 16,
# bf16) runs on them too: packed (data.unpad), and from the length bins without and with CUDA
# graphs (each batch padded to its length bin), after 20 warm-up steps that record each bin's
# graphs. BERT-large with fused attention and graphs also runs 8 micro-batches per optimizer step
# (batch "64x8", "16x8"), as DLE's phases accumulate gradients. A benchmark: it measures, it
# asserts nothing.
#
# usage: [MODELS="bert-large"] bash tests/bench/bench_gpu.sh [BUILD_DIR | BUNDLE_DIR] [PEAK_TFLOPS]
# (MODELS: a subset of the models, where one device command cannot run the whole table)
set -euo pipefail
BUILD="${1:-build}"
PEAK="${2:-789}"
BENCH="$BUILD/src/tools/bert-bench"
[ -x "$BENCH" ] || BENCH="$BUILD/bin/bert-bench"  # a bundle from tests/gpu/pack_bundle.sh
[ -x "$BENCH" ] || { echo "no bert-bench in $BUILD: build first (meson setup $BUILD && ninja -C $BUILD)" >&2; exit 2; }
ERR="$(mktemp)"
DATA="$BUILD/data"

# row MODEL SEQ BATCH PRECISION LABEL [bert-bench options...]: one line of the table.
row() {
  local model=$1 seq=$2 batch=$3 precision=$4 label=$5 line
  shift 5
  line=$("$BENCH" --device cuda --model "$model" --seq "$seq" --batch "$batch" --precision "$precision" \
           --peak-tflops "$PEAK" "$@" 2>"$ERR") || {
    printf "%-11s %4s %5s %-9s %-24s failed: %s\n" "$model" "$seq" "$batch" "$precision" "$label" "$(tail -n 1 "$ERR")"
    return 0
  }
  python3 - "$line" "$label" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
batch = f"{r['batch']}" + (f"x{r['accumulation']}" if r['accumulation'] > 1 else "")
print(f"{r['model']:<11} {r['seq']:>4} {batch:>5} {r['precision']:<9} {sys.argv[2]:<24} {r['sequences_per_second']:>10.1f} "
      f"{r['model_tflops']:>9.1f} {r['mfu']:>6.1%} {r['memory']['peak_backend_mib'] / 1024:>10.2f}")
PY
}

printf "%-11s %4s %5s %-9s %-24s %10s %9s %6s %10s\n" model seq batch precision "attention (data)" "seq/s" "TFLOP/s" MFU "peak GiB"
for model in ${MODELS:-bert-base bert-large}; do
  for seq in 128 512; do
    batch=$([ "$seq" = 128 ] && echo 64 || echo 16)
    for precision in bf16 fp16; do
      for variant in reference reference+graphs fused fused+graphs; do
        fused=$([[ "$variant" == fused* ]] && echo 1 || echo 0)
        graphed=$([[ "$variant" == *+graphs ]] && echo 1 || echo 0)
        row "$model" "$seq" "$batch" "$precision" "$variant" --fused-attention "$fused" --graphed "$graphed" \
          --steps 10 --warmup 3
      done
    done
  done
done
# Gradient accumulation as DLE's phases run (8 micro-batches per optimizer step): the steady state.
if [[ " ${MODELS:-bert-large} " == *" bert-large "* ]]; then
  for seq in 128 512; do
    batch=$([ "$seq" = 128 ] && echo 64 || echo 16)
    row bert-large "$seq" "$batch" bf16 "fused+graphs" --fused-attention 1 --graphed 1 --accumulation 8 \
      --steps 3 --warmup 2
  done
fi
if [ -d "$DATA/real512/train" ] && [ -d "$DATA/bins512/bin_0" ]; then
  real=(--steps 30 --warmup 20 --unpad 1)
  row bert-large 512 16 bf16 "reference (packed)" --fused-attention 0 --data "$DATA/real512/train" "${real[@]}"
  row bert-large 512 16 bf16 "fused (packed)" --fused-attention 1 --data "$DATA/real512/train" "${real[@]}"
  row bert-large 512 16 bf16 "fused (bins)" --fused-attention 1 --data "$DATA/bins512" --length-bins 1 "${real[@]}"
  row bert-large 512 16 bf16 "fused+graphs (bins)" --fused-attention 1 --graphed 1 --data "$DATA/bins512" \
    --length-bins 1 "${real[@]}"
else
  echo "(no real sequences in $DATA: the real-data rows are left out)"
fi
rm -f "$ERR"
