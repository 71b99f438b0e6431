#!/usr/bin/env bash
# The extractive question-answering run of README.md ("Fine-tuning and inference"): builds the
# cloze QA task from wikitext-2's validation text in SQuAD v1.1 format (make_qa_task.py, which also
# scores two trivial baselines), pretrains bert-tiny for 500 steps on python3.11-doc shards made
# with the BERT uncased vocabulary (unless that checkpoint exists), fine-tunes it with bert-finetune
# (samples/finetune/qa_task.json: task squad, seq 128, doc stride 64, max query 32, AdamW 2e-3 with
# warmup and linear decay, 6 epochs; EM/F1 on dev each epoch), predicts the dev file with
# bert-predict and scores its predictions.json with bert-squad-eval.
# BUILD names the build directory (default build); VOCAB the BERT uncased vocabulary.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/src/tools
WORK=${WORK:-quickstart}
TEXT=${TEXT:-../shared/data/wikitext2-valid.txt}
VOCAB=${VOCAB:-../shared/data/bert-uncased-vocab.txt}
CORPUS=${CORPUS:-/usr/share/doc/python3.11/html/_sources}
mkdir -p "$WORK/ckpt_tiny_bert_vocab"

/usr/bin/python3 samples/finetune/make_qa_task.py "$TEXT" "$WORK/qa_task"
if [ ! -f "$WORK/ckpt_tiny_bert_vocab/final.h5" ]; then
  [ -d "$WORK/shards_bert_vocab/train" ] || "$BIN/bert-prep" shards --vocab "$VOCAB" --output "$WORK/shards_bert_vocab" \
    --documents file --sentences split --dupe-factor 2 --max-seq-length 128 --max-predictions 20 "$CORPUS"
  cat > "$WORK/pretrain_tiny_bert_vocab.json" <<JSON
{"model": {"preset": "bert-tiny", "vocab_size": 30522},
 "train": {"micro_batch": 32, "steps": 500, "lr": 0.01, "warmup_proportion": 0.05, "log_every": 20},
 "data": {"train_dir": "$WORK/shards_bert_vocab/train", "max_seq_length": 128, "max_predictions_per_seq": 20},
 "checkpoint": {"dir": "$WORK/ckpt_tiny_bert_vocab", "every": 250}}
JSON
  "$BIN/bert-train" "$WORK/pretrain_tiny_bert_vocab.json" --output "$WORK/ckpt_tiny_bert_vocab/final.h5"
fi
sed -e "s#quickstart/#$WORK/#g" -e "s#../shared/data/bert-uncased-vocab.txt#$VOCAB#" samples/finetune/qa_task.json \
  > "$WORK/qa_task.json"
"$BIN/bert-finetune" "$WORK/qa_task.json"
"$BIN/bert-predict" --model "$WORK/qa_finetune/final.h5" --task squad --vocab "$VOCAB" --input "$WORK/qa_task/dev.json" \
  --output "$WORK/qa_predictions" --max-seq-length 128 --doc-stride 64 --max-query-length 32
echo "bert-squad-eval: $("$BIN/bert-squad-eval" "$WORK/qa_task/dev.json" "$WORK/qa_predictions/predictions.json")"
echo "baselines (make_qa_task.py): $(tr -d '\n' < "$WORK/qa_task/baselines.json")"
