"""What ranking SQuAD's n-best over padding cost (issue #36, item 1), on one fine-tuned model: the
dev windows as Hugging Face's squad_convert_examples_to_features makes them (equal to the engine's,
tests/oracle/test_squad.py), the engine's start/end logits (bert_infer: 0 at padding positions),
and HF's compute_predictions_logits run twice on the same logits: as they come (the n-best taken
over all positions, so padding's 0 crowds out real spans whose logits are negative: the engine's
old behaviour) and with padding masked (the n-best over the window's real positions: Google's and
HF's semantics, the engine's now). Prints EM/F1 (the official rules) and the empty answers of each.

usage: PYTHONPATH=bindings/python BERTENGINE_NATIVE_DIR=build/tests/bindings /usr/bin/python3 \
         samples/finetune/nbest_padding_effect.py --checkpoint CKPT --dev DEV.json --vocab VOCAB \
         [--seq 128 --doc-stride 64 --max-query-length 32]"""
import argparse
import json
import os
import tempfile

import h5py
import numpy as np
from transformers import BertTokenizer
from transformers.data.metrics.squad_metrics import compute_predictions_logits, squad_evaluate
from transformers.data.processors.squad import SquadResult, SquadV1Processor, squad_convert_examples_to_features

import bertengine


def engine_logits(checkpoint, features, seq):
    with h5py.File(checkpoint, "r") as f:
        saved = json.loads(f["metadata/config"][()].decode())
    config = {"model": saved["model"], "task": saved["task"], "mode": "inference",
              "train": {"init_checkpoint": checkpoint, "micro_batch": 64},
              "data": {"max_seq_length": seq, "max_predictions_per_seq": 0}}
    with bertengine.Session(config) as s:
        out = []
        for begin in range(0, len(features), 64):
            chunk = features[begin:begin + 64]
            batch = {"input_ids": np.array([f.input_ids for f in chunk]),
                     "segment_ids": np.array([f.token_type_ids for f in chunk]),
                     "input_mask": np.array([f.attention_mask for f in chunk])}
            out.append(s.infer(batch))  # [B, 2, S]
    return np.concatenate(out)


def scored(examples, features, logits, tokenizer, mask_padding, work):
    results = []
    for i, f in enumerate(features):
        start, end = logits[i, 0].copy(), logits[i, 1].copy()
        if mask_padding:
            pad = np.array(f.attention_mask) == 0
            start[pad] = end[pad] = -1e9
        results.append(SquadResult(f.unique_id, start.tolist(), end.tolist()))
    predictions = compute_predictions_logits(
        examples, features, results, n_best_size=20, max_answer_length=30, do_lower_case=True,
        output_prediction_file=os.path.join(work, "p.json"), output_nbest_file=os.path.join(work, "n.json"),
        output_null_log_odds_file=None, verbose_logging=False, version_2_with_negative=False,
        null_score_diff_threshold=0.0, tokenizer=tokenizer)
    metrics = squad_evaluate(examples, predictions)
    empty = sum(1 for text in predictions.values() if text in ("", "empty"))
    return metrics["exact"], metrics["f1"], empty


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--dev", required=True)
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--doc-stride", type=int, default=64)
    ap.add_argument("--max-query-length", type=int, default=32)
    a = ap.parse_args()
    tokenizer = BertTokenizer(a.vocab, do_lower_case=True)
    examples = SquadV1Processor().get_dev_examples(os.path.dirname(os.path.abspath(a.dev)), os.path.basename(a.dev))
    features = squad_convert_examples_to_features(examples, tokenizer, a.seq, a.doc_stride, a.max_query_length,
                                                  is_training=False, return_dataset=False, threads=1)
    logits = engine_logits(a.checkpoint, features, a.seq)
    with tempfile.TemporaryDirectory() as work:
        for name, mask in (("n-best over every position (padding 0: before)", False),
                           ("n-best over the real positions (now)", True)):
            em, f1, empty = scored(examples, features, logits, tokenizer, mask, work)
            print(f"{name}: EM {em:.2f}, F1 {f1:.2f}, {empty} of {len(examples)} answers empty")


if __name__ == "__main__":
    main()
