#!/usr/bin/env python3
"""Training throughput of bertengine's CPU backend next to PyTorch on the same machine, model,
batch and thread count, measured in the same run (a benchmark: prints numbers, asserts none).

The peer is tests/oracle/torch_bert.py (the Hugging Face BertForPreTraining definition) in fp32
with the DLE LAMB of tests/oracle/reference_optim.py, so both sides do the same work: forward,
backward and a LAMB step on padded batches, MLM logits only at masked positions in the engine
and at every position in the HF definition (as HF computes them).

usage: /usr/bin/python3 tests/bench/bench_vs_torch.py --bert-bench build/src/tools/bert-bench
         [--model bert-base] [--batch 8] [--seq 128] [--steps 3] [--threads N]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import reference_optim  # noqa: E402
import torch_bert  # noqa: E402

PRESETS = {"bert-tiny": (2, 128, 2), "bert-mini": (4, 256, 4), "bert-small": (4, 512, 8),
           "bert-medium": (8, 512, 8), "bert-base": (12, 768, 12), "bert-large": (24, 1024, 16)}


def torch_run(model_name, batch, seq, steps, threads, predictions):
    layers, hidden, heads = PRESETS[model_name]
    torch.set_num_threads(threads)
    cfg = torch_bert.BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                                num_attention_heads=heads, intermediate_size=4 * hidden,
                                max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu",
                                hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    model = torch_bert.BertForPreTraining(cfg)
    model.init_weights()
    model.train()
    optim = reference_optim.Lamb(model.named_parameters())
    rng = np.random.default_rng(0)
    data = torch_bert.batch_tensors(torch_bert.random_batch(rng, batch, seq, predictions, 30522))

    def one_step():
        model.zero_grad(set_to_none=True)
        loss = model(**data)[0]
        loss.backward()
        optim.step({n: p.grad for n, p in model.named_parameters()}, 1e-4)

    one_step()  # warmup
    t0 = time.perf_counter()
    for _ in range(steps):
        one_step()
    seconds = (time.perf_counter() - t0) / steps
    return {"peer": "pytorch " + torch.__version__, "threads": threads, "step_seconds": seconds,
            "sequences_per_second": batch / seconds, "tokens_per_second": batch * seq / seconds,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bert-bench", required=True)
    ap.add_argument("--model", default="bert-base", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    predictions = 80 if args.seq >= 512 else args.seq * 20 // 128
    engine = subprocess.run([args.bert_bench, "--model", args.model, "--batch", str(args.batch), "--seq",
                             str(args.seq), "--steps", str(args.steps), "--threads", str(args.threads),
                             "--predictions", str(predictions)], check=True, capture_output=True, text=True)
    ours = json.loads(engine.stdout.strip().splitlines()[-1])
    peer = torch_run(args.model, args.batch, args.seq, args.steps, args.threads, predictions)
    print("bertengine:", json.dumps(ours))
    print("pytorch:   ", json.dumps(peer))
    print(f"{args.model} batch {args.batch} seq {args.seq}, {args.threads} threads: bertengine "
          f"{ours['sequences_per_second']:.2f} seq/s, PyTorch {peer['sequences_per_second']:.2f} seq/s "
          f"({ours['sequences_per_second'] / peer['sequences_per_second']:.2f}x); peak RSS "
          f"{ours['peak_rss_mib']:.0f} vs {peer['peak_rss_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
