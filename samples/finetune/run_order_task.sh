#!/usr/bin/env bash
# The fine-tuning run of README.md ("Fine-tuning and inference"): builds the word-order task from
# wikitext-2's validation text, pretrains bert-tiny for 300 steps on the quickstart's
# python3.11-doc shards (made by samples/quickstart.sh) unless a checkpoint exists, fine-tunes it
# with bert-finetune, predicts the dev file with bert-predict, and compares inference throughput
# with PyTorch eval mode. Needs a build with the tests (BUILD, default build: the tools and the
# Python binding), transformers, and the quickstart's shards and vocabulary in WORK.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/src/tools
WORK=${WORK:-quickstart}
TEXT=${TEXT:-../shared/data/wikitext2-valid.txt}
mkdir -p "$WORK/ckpt_tiny"

/usr/bin/python3 samples/finetune/make_order_task.py "$TEXT" "$WORK/order_task"
if [ ! -f "$WORK/ckpt_tiny/final.h5" ]; then
  cat > "$WORK/pretrain_tiny.json" <<JSON
{"model": {"preset": "bert-tiny", "vocab_size": 8000},
 "train": {"micro_batch": 32, "steps": 300, "lr": 0.01, "warmup_proportion": 0.05, "log_every": 10},
 "data": {"train_dir": "$WORK/shards/train", "max_seq_length": 128, "max_predictions_per_seq": 20},
 "checkpoint": {"dir": "$WORK/ckpt_tiny", "every": 100}}
JSON
  "$BIN/bert-train" "$WORK/pretrain_tiny.json" --output "$WORK/ckpt_tiny/final.h5"
fi
sed "s#quickstart/#$WORK/#g" samples/finetune/order_task.json > "$WORK/order_task.json"
"$BIN/bert-finetune" "$WORK/order_task.json"
"$BIN/bert-predict" --model "$WORK/order_finetune/final.h5" --task sst-2 --vocab "$WORK/vocab.txt" \
  --input "$WORK/order_task/dev.tsv" --output "$WORK/order_predictions.tsv" --max-seq-length 64
PYTHONPATH=bindings/python BERTENGINE_NATIVE_DIR=${BUILD:-build}/tests/bindings /usr/bin/python3 \
  samples/finetune/infer_vs_torch.py --checkpoint "$WORK/order_finetune/final.h5" --seq 128 384 --threads 2
