#!/usr/bin/env bash
# The main job, end to end on a fresh Debian 12 machine: install dependencies, build, learn a
# WordPiece vocabulary and write DLE-format shards from real English text (the Python
# documentation sources of Debian's python3.11-doc), pretrain a small BERT on the CPU with a
# progress line, evaluate it on held-out documents, save a checkpoint (plus a Hugging Face export),
# and plot the run's metrics log.
set -euo pipefail
cd "$(dirname "$0")/.."

bash samples/install_deps.sh

BUILD=build-quickstart
if [ ! -d "$BUILD" ]; then
  # No -march flag needed: the CPU kernels are chosen at run time for this machine.
  meson setup "$BUILD" --buildtype=release -Dcuda=disabled -Dtests=false
fi
ninja -C "$BUILD"

CORPUS=${CORPUS:-/usr/share/doc/python3.11/html/_sources}
WORK=quickstart
mkdir -p "$WORK/ckpt"

echo "== 1/5 learn a WordPiece vocabulary from $CORPUS"
[ -f "$WORK/vocab.txt" ] || "$BUILD/src/tools/bert-prep" vocab --size 8000 --output "$WORK/vocab.txt" "$CORPUS"

echo "== 2/5 write pretraining shards (NSP pairs, 15% masking with 80/10/10)"
[ -d "$WORK/shards/train" ] || "$BUILD/src/tools/bert-prep" shards --vocab "$WORK/vocab.txt" --output "$WORK/shards" \
  --documents file --sentences split --dupe-factor 2 --max-seq-length 128 --max-predictions 20 "$CORPUS"
"$BUILD/src/tools/bert-prep" inspect --vocab "$WORK/vocab.txt" --samples 1 "$WORK/shards/train/shard_00000.hdf5" | head -20

echo "== 3/5 pretrain (config: samples/configs/quickstart.json; Ctrl-C checkpoints and stops, rerun resumes)"
"$BUILD/src/tools/bert-train" samples/configs/quickstart.json --resume

echo "== 4/5 the checkpoint, and its Hugging Face export"
"$BUILD/src/tools/bert-ckpt" inspect "$WORK/ckpt/final.h5" | head -5
"$BUILD/src/tools/bert-ckpt" export-hf "$WORK/ckpt/final.h5" "$WORK/hf"
echo "== 5/5 plot the metrics log (loss, eval accuracy, learning rate, throughput)"
/usr/bin/python3 src/tools/plot_metrics.py --output "$WORK/metrics.png" --title "quickstart: bert-mini on python3.11-doc" "$WORK/metrics.json"
echo "done: weights in $WORK/ckpt/final.h5, Hugging Face folder in $WORK/hf, plot in $WORK/metrics.png"
