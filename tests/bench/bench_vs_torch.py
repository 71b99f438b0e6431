#!/usr/bin/env python3
"""Training throughput of bertengine's CPU backend next to PyTorch, measured in the same run on
the same machine (a benchmark: prints numbers, asserts none).

Both sides do the same work per step: forward, backward and a DLE LAMB step (the peer uses
tests/oracle/reference_optim.py) of BertForPreTraining in fp32 (the peer is the Hugging Face
definition in tests/oracle/torch_bert.py), MLM logits only at the masked positions (as DLE and
MLPerf compute them), on the same thread count. Cases:
  - padded, equal work: synthetic batches padded to the sequence length on both sides
    (bert-small micro-batch 16 and bert-base micro-batch 8, sequence 128);
  - real data (--shards DIR, made by `bert-prep shards` from real text, sequence 512, micro-batch
    8): the engine drops the padding (data.unpad), the peer runs the padded batches.
Engine and peer runs alternate (--rounds), each in its own process; the median is reported.
The machine's SGEMM rate is measured in the same run through the engine's GEMM (bench_sgemm,
2048³) and through PyTorch's (torch.mm, its BLAS); model GFLOP/s are given as a share of the
former. --native-build adds the engine of a -Dnative=true build next to the default one.

usage: /usr/bin/python3 tests/bench/bench_vs_torch.py --build build [--native-build build-native]
         [--cases small,base,real] [--threads 1,2] [--shards DIR] [--real-model bert-small]
         [--steps 3] [--rounds 2]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PRESETS = {"bert-tiny": (2, 128, 2), "bert-mini": (4, 256, 4), "bert-small": (4, 512, 8),
           "bert-medium": (8, 512, 8), "bert-base": (12, 768, 12), "bert-large": (24, 1024, 16)}
VOCAB = 30522


def training_flops_per_sequence(model, seq, predictions):
    """bert-bench's definition: 3 x forward, dense layers + attention + MLM head at the masks."""
    layers, hidden, _ = PRESETS[model]
    dense = 2.0 * (4 * hidden * hidden + 2 * hidden * 4 * hidden)
    attention = 2.0 * 2.0 * seq * hidden
    forward = layers * seq * (dense + attention) + predictions * 2.0 * (hidden * hidden + hidden * VOCAB)
    return 3.0 * forward


def predictions_for(seq):
    return 80 if seq >= 512 else seq * 20 // 128


# ---- the peer, run in a child process (python3 bench_vs_torch.py peer ...) -----------------

def peer_main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--shards", default="")
    args = ap.parse_args(argv)
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
    import reference_optim
    import torch_bert

    torch.set_num_threads(args.threads)
    layers, hidden, heads = PRESETS[args.model]
    cfg = torch_bert.BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers,
                                num_attention_heads=heads, intermediate_size=4 * hidden,
                                max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu",
                                hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    model = torch_bert.BertForPreTraining(cfg)
    model.train()
    optim = reference_optim.Lamb(model.named_parameters())
    P = predictions_for(args.seq)

    if args.shards:
        import h5py
        files = sorted(f for f in os.listdir(args.shards) if f.endswith((".hdf5", ".h5")))
        with h5py.File(os.path.join(args.shards, files[0]), "r") as f:
            n = (args.steps + 1) * args.batch
            arrays = {k: np.asarray(f[k][:n]) for k in ("input_ids", "segment_ids", "input_mask",
                                                          "masked_lm_positions", "masked_lm_ids",
                                                          "next_sentence_labels")}
        batches = [{k: v[i * args.batch:(i + 1) * args.batch] for k, v in arrays.items()}
                   for i in range(args.steps + 1)]
    else:
        rng = np.random.default_rng(0)
        batches = [torch_bert.random_batch(rng, args.batch, args.seq, P, VOCAB)] * (args.steps + 1)

    def tensors(b):
        pos = np.asarray(b["masked_lm_positions"], np.int64)
        ids = np.asarray(b["masked_lm_ids"], np.int64)
        rows, labels = [], []
        for s in range(pos.shape[0]):  # DLE: the first 0 ends a sample's masks
            for j in range(pos.shape[1]):
                if pos[s, j] == 0:
                    break
                rows.append(s * args.seq + pos[s, j])
                labels.append(ids[s, j])
        t = lambda a: torch.as_tensor(np.asarray(a, np.int64))
        return dict(input_ids=t(b["input_ids"]), token_type_ids=t(b["segment_ids"]),
                    attention_mask=t(b["input_mask"]), rows=t(rows), labels=t(labels),
                    nsp=t(b["next_sentence_labels"]).reshape(-1))

    def one_step(d):
        model.zero_grad(set_to_none=True)
        seq_out, pooled = model.bert(d["input_ids"], d["token_type_ids"], d["attention_mask"])
        masked = seq_out.reshape(-1, hidden).index_select(0, d["rows"])  # MLM only at the masks
        mlm = torch.nn.functional.cross_entropy(model.cls.predictions(masked), d["labels"])
        nsp = torch.nn.functional.cross_entropy(model.cls.seq_relationship(pooled), d["nsp"])
        (mlm + nsp).backward()
        optim.step({n: p.grad for n, p in model.named_parameters()}, 1e-4)

    prepared = [tensors(b) for b in batches]
    one_step(prepared[0])  # warm-up
    t0 = time.perf_counter()
    for d in prepared[1:]:
        one_step(d)
    seconds = (time.perf_counter() - t0) / args.steps
    real_tokens = sum(int(d["attention_mask"].sum()) for d in prepared[1:]) / args.steps
    print(json.dumps({"sequences_per_second": args.batch / seconds, "step_seconds": seconds,
                      "real_tokens_per_second": real_tokens / seconds,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def sgemm_main(argv):
    """python3 bench_vs_torch.py sgemm THREADS: PyTorch's SGEMM rate (its BLAS), as JSON."""
    import torch
    torch.set_num_threads(int(argv[0]))
    n, reps = 2048, 5
    a, b = torch.rand(n, n), torch.rand(n, n)
    torch.mm(a, b)
    best = min(_timed(lambda: torch.mm(a, b)) for _ in range(reps))
    print(json.dumps({"sgemm_gflops": 2.0 * n ** 3 / best * 1e-9}))


def _timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


# ---- the driver -------------------------------------------------------------------------

def run_json(cmd, threads=None):
    # The peer's BLAS (Debian's OpenBLAS, pthreads) sizes its own pool from the environment, not
    # from torch.set_num_threads: both are held to the case's thread count.
    env = dict(os.environ)
    if threads is not None:
        env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def engine_cmd(build, case, threads, steps, shards, unpad):
    cmd = [os.path.join(build, "src", "tools", "bert-bench"), "--model", case["model"], "--batch",
           str(case["batch"]), "--seq", str(case["seq"]), "--steps", str(steps), "--threads", str(threads),
           "--predictions", str(predictions_for(case["seq"]))]
    if shards:
        cmd += ["--data", shards, "--unpad", "1" if unpad else "0"]
    return cmd


def peer_cmd(case, threads, steps, shards, python=sys.executable):
    cmd = [python, os.path.abspath(__file__), "peer", "--model", case["model"], "--batch",
           str(case["batch"]), "--seq", str(case["seq"]), "--threads", str(threads), "--steps", str(steps)]
    if shards:
        cmd += ["--shards", shards]
    return cmd


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def cpu_flags():
    """The CPU's AVX and AMX flags, sorted, as one string."""
    return " ".join(sorted({f for f in open("/proc/cpuinfo").read().split() if f.startswith(("avx", "amx"))}))


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "peer":
        return peer_main(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "sgemm":
        return sgemm_main(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="the default build's directory")
    ap.add_argument("--native-build", default="", help="a -Dnative=true build, timed next to the default one")
    ap.add_argument("--cases", default="small,base,real")
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}")
    ap.add_argument("--shards", default="", help="DLE shards of real text at sequence 512 (the real-data case)")
    ap.add_argument("--real-model", default="bert-small")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    cases = {"small": {"model": "bert-small", "batch": 16, "seq": 128},
             "base": {"model": "bert-base", "batch": 8, "seq": 128},
             "real": {"model": args.real_model, "batch": 8, "seq": 512}}
    builds = [("default", args.build)] + ([("native", args.native_build)] if args.native_build else [])
    print(f"CPU: {cpu_model()} ({os.cpu_count()} cores; {cpu_flags()})")
    sgemm = os.path.join(args.build, "tests", "unit", "bench_sgemm")
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        ours_rate = run_json([sgemm, "--threads", str(threads)])["sgemm_gflops"]
        peer_rate = run_json([sys.executable, os.path.abspath(__file__), "sgemm", str(threads)], threads)["sgemm_gflops"]
        print(f"\n{threads} thread(s): SGEMM 2048³ engine (oneDNN) {ours_rate:.1f} GFLOP/s, "
              f"PyTorch (its BLAS) {peer_rate:.1f} GFLOP/s")
        for name in args.cases.split(","):
            case = cases[name]
            shards = args.shards if name == "real" else ""
            if name == "real" and not shards:
                print("  real: skipped (no --shards DIR)")
                continue
            variants = [(b, path, True) for b, path in builds]
            if name == "real":
                variants.append(("default padded", args.build, False))
            results = {label: [] for label, _, _ in variants}
            peer_runs = []
            for _ in range(args.rounds):  # engine and peer alternate
                for label, path, unpad in variants:
                    results[label].append(run_json(engine_cmd(path, case, threads, args.steps, shards, unpad)))
                peer_runs.append(run_json(peer_cmd(case, threads, args.steps, shards), threads))
            peer_sps = median_of(peer_runs, "sequences_per_second")
            flops = training_flops_per_sequence(case["model"], case["seq"], predictions_for(case["seq"]))
            print(f"  {name}: {case['model']} micro-batch {case['batch']} seq {case['seq']}"
                  + (" (real data)" if shards else " (padded)"))
            print(f"    {'':<28} {'seq/s':>8} {'GFLOP/s':>8} {'of SGEMM':>9} {'vs peer':>8} {'RSS MiB':>8}")
            for label, runs in results.items():
                sps = median_of(runs, "sequences_per_second")
                gflops = sps * flops * 1e-9
                share = "" if shards else f"{gflops / ours_rate:9.0%}"
                shown = "" if shards else f"{gflops:8.1f}"  # real data: FLOPs depend on the lengths
                print(f"    {'bertengine ' + label:<28} {sps:8.2f} {shown:>8} {share:>9} "
                      f"{sps / peer_sps:7.2f}x {median_of(runs, 'peak_rss_mib'):8.0f}")
                rows.append({"case": name, "threads": threads, "engine": label, "sequences_per_second": sps,
                             "peer_sequences_per_second": peer_sps, "ratio": sps / peer_sps,
                             "model_gflops": gflops, "sgemm_gflops": ours_rate})
            peer_gflops = peer_sps * flops * 1e-9
            peer_share = "" if shards else f"{peer_gflops / peer_rate:9.0%}"
            print(f"    {'PyTorch (padded)':<28} {peer_sps:8.2f} {peer_gflops:8.1f} {peer_share:>9} "
                  f"{1:7.2f}x {median_of(peer_runs, 'peak_rss_mib'):8.0f}")
    print(json.dumps({"cpu": cpu_model(), "rows": rows}))


if __name__ == "__main__":
    main()
