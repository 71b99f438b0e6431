"""Inference throughput of a fine-tuned sequence classifier: the engine (an inference session
through the Python binding, bert_infer) next to PyTorch eval mode (transformers'
BertForSequenceClassification loaded from the same weights via `bert-ckpt export-hf`), in the
same process, same threads, same batches of full-length sequences (every token real). Prints
one JSON line per (seq, engine) and the largest logit difference between the two.

    PYTHONPATH=bindings/python BERTENGINE_NATIVE_DIR=build/tests/bindings /usr/bin/python3 \
        samples/finetune/infer_vs_torch.py --checkpoint quickstart/order_finetune/final.h5 --seq 128 384
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np
import torch
import transformers

import bertengine


def cpu_model():
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def timed(fn, reps):
    fn()  # warm-up
    t0 = time.perf_counter()
    for _ in range(reps):
        out = fn()
    return (time.perf_counter() - t0) / reps, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--bert-ckpt", default="build/src/tools/bert-ckpt")
    ap.add_argument("--seq", type=int, nargs="+", default=[128])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([args.bert_ckpt, "export-hf", args.checkpoint, folder], check=True, capture_output=True)
        hf_config = json.load(open(os.path.join(folder, "config.json")))
        model = transformers.BertForSequenceClassification.from_pretrained(folder).eval()
    labels = len(hf_config["id2label"])
    rng = np.random.default_rng(0)
    for seq in args.seq:
        cfg = {"model": hf_config, "task": {"type": "sequence_classification", "num_labels": labels},
               "mode": "inference",
               "train": {"init_checkpoint": args.checkpoint, "micro_batch": args.batch, "threads": args.threads},
               "data": {"max_seq_length": seq, "max_predictions_per_seq": 0}}
        ids = rng.integers(5, hf_config["vocab_size"], (args.batch, seq), dtype=np.int32)
        batch = {"input_ids": ids, "segment_ids": np.zeros_like(ids), "input_mask": np.ones_like(ids)}
        with bertengine.Session(cfg) as s:
            engine_s, engine_logits = timed(lambda: s.infer(batch), args.reps)
        tensors = {"input_ids": torch.from_numpy(ids.astype(np.int64)),
                   "token_type_ids": torch.zeros(ids.shape, dtype=torch.int64),
                   "attention_mask": torch.ones(ids.shape, dtype=torch.int64)}
        with torch.no_grad():
            torch_s, torch_out = timed(lambda: model(**tensors).logits, args.reps)
        common = {"seq": seq, "batch": args.batch, "threads": args.threads, "cpu": cpu_model(),
                  "layers": hf_config["num_hidden_layers"], "hidden": hf_config["hidden_size"]}
        print(json.dumps(common | {"engine": "bertengine", "sequences_per_second": round(args.batch / engine_s, 1)}))
        print(json.dumps(common | {"engine": f"PyTorch {torch.__version__} eval (transformers {transformers.__version__})",
                                   "sequences_per_second": round(args.batch / torch_s, 1)}))
        print(json.dumps({"seq": seq, "max_abs_logit_difference": float(np.abs(engine_logits - torch_out.numpy()).max())}))


if __name__ == "__main__":
    main()
