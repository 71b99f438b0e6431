"""Inference throughput of a fine-tuned sequence classifier or extractive-QA model: the engine (an
inference session through the Python binding, bert_infer) next to PyTorch eval mode (transformers'
BertForSequenceClassification or BertForQuestionAnswering, as the checkpoint's `architectures`
says, loaded from the same weights via `bert-ckpt export-hf`), in the same process, same threads,
same batches of full-length sequences (every token real). For each (threads, seq) the two are
timed in alternation, `--rounds` times each (so a change in the machine's load hits both), and
the median is kept. Prints one JSON line per (threads, seq, engine), one with the ratio and the
largest logit difference between the two (QA: start and end logits), and the load average.

    PYTHONPATH=bindings/python BERTENGINE_NATIVE_DIR=build/tests/bindings /usr/bin/python3 \
        samples/finetune/infer_vs_torch.py --checkpoint quickstart/order_finetune/final.h5 --seq 128 384

`--init bert-tiny --task question_answering` times a randomly initialised model of that preset
and head instead of a checkpoint (throughput does not depend on the weights' values).
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import torch
import transformers

import bertengine

TASKS = {"BertForSequenceClassification": "sequence_classification",
         "BertForQuestionAnswering": "question_answering"}


def cpu_model():
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def seconds_per_call(fn, reps):
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def random_checkpoint(model, task, path):
    """A checkpoint of `model` (a preset name) with a freshly initialised `task` head."""
    cfg = {"model": model, "task": {"type": task, "num_labels": 2}, "train": {"micro_batch": 1, "threads": 1},
           "data": {"max_seq_length": 128, "max_predictions_per_seq": 0}}
    with bertengine.Session(cfg) as s:
        s.checkpoint(path)


def torch_logits(model, task, tensors):
    out = model(**tensors)
    if task == "question_answering":  # as bert_infer returns them: [B, 2, S]
        return torch.stack([out.start_logits, out.end_logits], dim=1)
    return out.logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="a fine-tuned checkpoint (its task picks the head)")
    source.add_argument("--init", metavar="PRESET", help="a randomly initialised model, e.g. bert-tiny")
    ap.add_argument("--task", choices=sorted(TASKS.values()), default="question_answering", help="the head for --init")
    ap.add_argument("--bert-ckpt", default="build/src/tools/bert-ckpt")
    ap.add_argument("--seq", type=int, nargs="+", default=[128])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3, help="calls per timing")
    ap.add_argument("--rounds", type=int, default=5, help="alternating timings of engine and PyTorch")
    ap.add_argument("--threads", type=int, nargs="+", default=[os.cpu_count()])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = args.checkpoint or os.path.join(folder, "init.h5")
        if args.init:
            random_checkpoint(args.init, args.task, checkpoint)
        subprocess.run([args.bert_ckpt, "export-hf", checkpoint, folder], check=True, capture_output=True)
        hf_config = json.load(open(os.path.join(folder, "config.json")))
        architecture = hf_config["architectures"][0]
        if architecture not in TASKS:
            raise SystemExit(f"{checkpoint}: a {architecture} checkpoint; this benchmark times {sorted(TASKS)}")
        task = TASKS[architecture]
        model = getattr(transformers, architecture).from_pretrained(folder).eval()
        labels = len(hf_config["id2label"])
        rng = np.random.default_rng(0)
        for threads in args.threads:
            torch.set_num_threads(threads)
            for seq in args.seq:
                cfg = {"model": hf_config, "task": {"type": task, "num_labels": labels}, "mode": "inference",
                       "train": {"init_checkpoint": checkpoint, "micro_batch": args.batch, "threads": threads},
                       "data": {"max_seq_length": seq, "max_predictions_per_seq": 0}}
                ids = rng.integers(5, hf_config["vocab_size"], (args.batch, seq), dtype=np.int32)
                batch = {"input_ids": ids, "segment_ids": np.zeros_like(ids), "input_mask": np.ones_like(ids)}
                tensors = {"input_ids": torch.from_numpy(ids.astype(np.int64)),
                           "token_type_ids": torch.zeros(ids.shape, dtype=torch.int64),
                           "attention_mask": torch.ones(ids.shape, dtype=torch.int64)}
                with bertengine.Session(cfg) as s, torch.no_grad():
                    engine_logits = s.infer(batch)  # also the warm-up of each
                    peer_logits = torch_logits(model, task, tensors).numpy()
                    engine_s, peer_s = [], []
                    for _ in range(args.rounds):
                        engine_s.append(seconds_per_call(lambda: s.infer(batch), args.reps))
                        peer_s.append(seconds_per_call(lambda: torch_logits(model, task, tensors), args.reps))
                engine_rate = args.batch / statistics.median(engine_s)
                peer_rate = args.batch / statistics.median(peer_s)
                common = {"task": task, "seq": seq, "batch": args.batch, "threads": threads, "cpu": cpu_model(),
                          "layers": hf_config["num_hidden_layers"], "hidden": hf_config["hidden_size"]}
                print(json.dumps(common | {"engine": "bertengine", "sequences_per_second": round(engine_rate, 1)}))
                print(json.dumps(common | {"engine": f"PyTorch {torch.__version__} eval (transformers {transformers.__version__})",
                                           "sequences_per_second": round(peer_rate, 1)}))
                print(json.dumps({"task": task, "seq": seq, "threads": threads,
                                  "engine_over_pytorch": round(engine_rate / peer_rate, 2),
                                  "max_abs_logit_difference": float(np.abs(engine_logits - peer_logits).max()),
                                  "load_average": [round(x, 2) for x in os.getloadavg()]}), flush=True)


if __name__ == "__main__":
    main()
