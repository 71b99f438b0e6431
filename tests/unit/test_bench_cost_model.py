"""bert-bench --cost-model from the command line, on bert-tiny: the fused attention replaces the
reference attention's kernels (fewer launches, the JSON says so), the prediction reports the real
tokens' share of the full-length sequences, the fused attention recorded in CUDA graphs (--graphed
1) takes less time than launched call by call, an A100 (no fused-attention rate known) is
refused by name with exit status 1. With --length-bins 1 (bert-prep bins of synthetic text) each
bin's step is predicted and the mix is their average weighted by the bins' sequences. With --world 8
the gradient's ring all-reduce (over a slow 20 GB/s link, so that it matters for bert-tiny, in
buckets of 1 MB) moves 2(W-1)/W of the fp32 gradient (half that with a bf16 wire), overlaps the
backward pass (exposed less than all of it), and adds exactly its exposed part to the one-GPU step,
launched and graphed; a sharded optimizer's collectives (after the backward pass) are all exposed;
bad --wire-precision values exit 1 with the config's message. --accumulation N shares one optimizer
step among N micro-batches: each one past the first adds the same time; a measured CPU run counts
batch x N sequences per step. --cost-model h200 (rates measured on a lent H200) predicts BERT-large's
rows measured there within 15%.

usage: test_bench_cost_model.py BERT_BENCH BERT_PREP"""
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path


def bench(binary: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, "--cost-model", *args[:1], "--model", "bert-tiny", "--precision", "bf16",
                           "--seq", "64", "--batch", "8", *args[1:]], capture_output=True, text=True)


def summary(run: subprocess.CompletedProcess) -> dict:
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def binned_shards(prep: str, work: Path) -> Path:
    """Synthetic documents of 1 to 12 sentences, as seq-64 shards split into 4 length bins."""
    rng = random.Random(7)
    words = [f"w{i}" for i in range(300)]
    docs = ["\n".join(" ".join(rng.choices(words, k=rng.randint(3, 14))) for _ in range(rng.randint(1, 12)))
            for _ in range(120)]
    (work / "corpus.txt").write_text("\n\n".join(docs) + "\n")
    def run(*args: str) -> None:
        done = subprocess.run([prep, *args], capture_output=True, text=True)
        assert done.returncode == 0, (args, done.stderr)
    run("vocab", "--size", "400", "--output", str(work / "vocab.txt"), str(work / "corpus.txt"))
    run("shards", "--vocab", str(work / "vocab.txt"), "--output", str(work / "shards"), "--max-seq-length", "64",
        "--max-predictions", "10", "--dupe-factor", "1", "--shards", "1", "--eval-fraction", "0",
        str(work / "corpus.txt"))
    run("bins", "--output", str(work / "bins"), "--max-seq-length", "64", "--max-predictions", "10",
        *map(str, sorted((work / "shards" / "train").glob("*.hdf5"))))
    return work / "bins"


def check_length_bins(binary: str, prep: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        bins = binned_shards(prep, Path(tmp))
        mix = summary(bench(binary, "h100", "--fused-attention", "1", "--unpad", "1", "--data", str(bins),
                            "--length-bins", "1"))
    per_bin = mix["length_bins"]
    assert len(per_bin) >= 2, per_bin
    sequences = sum(b["sequences"] for b in per_bin)
    expected = sum(b["sequences"] * b["predicted_step_seconds"] for b in per_bin) / sequences
    assert abs(mix["predicted_step_seconds"] - expected) <= 1e-12 * expected, (mix, expected)
    steps = [b["predicted_step_seconds"] for b in per_bin]
    shares = [b["real_token_share"] for b in per_bin]
    assert all(a < b for a, b in zip(shares, shares[1:])), "bins of longer sequences: %s" % shares
    assert all(a < b for a, b in zip(steps, steps[1:])), "packed, longer bins take longer steps: %s" % steps
    assert abs(mix["predicted_sequences_per_second"] - 8 / expected) <= 1e-9 * (8 / expected)
    no_data = subprocess.run([binary, "--length-bins", "1"], capture_output=True, text=True)
    assert no_data.returncode == 2 and "--length-bins 1 needs --data DIR" in no_data.stderr, no_data.stderr
    return (f"{len(per_bin)} bins of {sequences} sequences: steps "
            + " / ".join(f"{1e3 * t:.3f}" for t in steps) + f" ms, mix {1e3 * expected:.3f} ms")


def check_world(binary: str) -> str:
    link = 20e9
    lines = []
    for graphed in ("0", "1"):
        one = summary(bench(binary, "h100", "--graphed", graphed))
        eight = summary(bench(binary, "h100", "--graphed", graphed, "--world", "8", "--link-gbs", "20",
                              "--bucket-mb", "1"))
        ring = 2 * 7 / 8 * 4 * eight["parameters"] / link
        collective, exposed = eight["collective_seconds"], eight["exposed_collective_seconds"]
        # Launched, each bucket also pays a launch (4 us); graphed, none.
        assert ring * (1 - 1e-9) <= collective <= ring * (1 + 1e-9) + (0 if graphed == "1" else 1e-4), (collective, ring)
        assert 0 < exposed < collective, (exposed, collective)
        step_one, step_eight = one["predicted_step_seconds"], eight["predicted_step_seconds"]
        assert abs(step_eight - step_one - exposed) <= 1e-9, (step_eight, step_one, exposed)
        lines.append(f"graphed {graphed}: all-reduce {1e3 * collective:.3f} ms, exposed {1e3 * exposed:.3f} ms")
    bf16 = summary(bench(binary, "h100", "--graphed", "1", "--world", "8", "--link-gbs", "20", "--bucket-mb", "1",
                         "--wire-precision", "bf16"))
    # Half the link bytes, plus the casts before and after (6 bytes per element each, at 3.35 TB/s).
    expected = ring / 2 + 12 * bf16["parameters"] / 3.35e12
    assert abs(bf16["collective_seconds"] - expected) <= 1e-9 * expected, (bf16["collective_seconds"], expected)
    sharded = summary(bench(binary, "h100", "--world", "8", "--link-gbs", "20", "--shard-optimizer", "1"))
    assert abs(sharded["exposed_collective_seconds"] - sharded["collective_seconds"]) <= 1e-12, sharded
    # A wire precision that does not exist, and a 16-bit wire with the (fp32) sharded optimizer: the config's messages.
    bad = bench(binary, "h100", "--world", "8", "--wire-precision", "fp8")
    assert bad.returncode == 1 and "config key 'dist.wire_precision' = \"fp8\" is not one of: fp32, bf16, fp16" in bad.stderr, bad.stderr
    bad = bench(binary, "h100", "--world", "8", "--wire-precision", "bf16", "--shard-optimizer", "1")
    assert bad.returncode == 1 and "'dist.shard_optimizer' = true reduce-scatters gradients in fp32" in bad.stderr, bad.stderr
    return "; ".join(lines)


# BERT-large in bf16 with the fused attention, sequences/s measured on a lent H200 (2026-11-29,
# tests/bench/bench_gpu.sh; README "Measured on a GPU"): the launched rows of phase 1 and 2 are those
# whose op profiles calibrated the h200 model; CUDA graphs and gradient accumulation were not fitted.
H200_MEASURED = [
    (("--seq", "128", "--batch", "64"), 1333.8),
    (("--seq", "512", "--batch", "16"), 310.8),
    (("--seq", "128", "--batch", "64", "--graphed", "1"), 1360.3),
    (("--seq", "512", "--batch", "16", "--graphed", "1"), 315.8),
    (("--seq", "128", "--batch", "64", "--graphed", "1", "--accumulation", "8"), 1499.4),
]


def check_h200(binary: str) -> str:
    ratios = []
    for args, measured in H200_MEASURED:
        run = subprocess.run([binary, "--cost-model", "h200", "--model", "bert-large", "--precision", "bf16",
                              "--fused-attention", "1", *args], capture_output=True, text=True)
        predicted = summary(run)["predicted_sequences_per_second"]
        assert abs(predicted / measured - 1) <= 0.15, (args, predicted, measured)
        ratios.append(f"{predicted / measured:.2f}")
    return "predicted / measured " + ", ".join(ratios)


def main() -> int:
    binary, prep = sys.argv[1], sys.argv[2]
    reference = summary(bench(binary, "h100"))
    fused = summary(bench(binary, "h100", "--fused-attention", "1"))
    assert reference["fused_attention"] is False and fused["fused_attention"] is True, (reference, fused)
    assert fused["launches"] < reference["launches"], (fused["launches"], reference["launches"])
    # Synthetic sequences hold between half and all of their 64 positions.
    assert 0.5 <= fused["real_token_share"] <= 1.0, fused["real_token_share"]
    assert fused["real_token_share"] == reference["real_token_share"]
    a100 = bench(binary, "a100", "--fused-attention", "1")
    assert a100.returncode == 1 and "no fused attention rate is known for device 'a100'" in a100.stderr, a100.stderr
    graphed = summary(bench(binary, "h100", "--fused-attention", "1", "--graphed", "1"))
    assert graphed["graphed"] is True and graphed["fused_attention"] is True, graphed
    assert graphed["predicted_step_seconds"] < fused["predicted_step_seconds"], (graphed, fused)
    print(f"reference {reference['launches']} launches, fused {fused['launches']}; "
          f"real tokens {100 * fused['real_token_share']:.1f}%; fused step "
          f"{1e3 * fused['predicted_step_seconds']:.3f} ms, graphed {1e3 * graphed['predicted_step_seconds']:.3f} ms")
    # Micro-batches per step share one optimizer step: each one past the first adds the same time
    # (four take less than four one-micro-batch steps), and the step counts their sequences.
    def accumulate(n: int) -> dict:
        return summary(bench(binary, "h100", "--fused-attention", "1", "--graphed", "1", "--accumulation", str(n)))
    accumulated = accumulate(4)
    one, two, four = graphed["predicted_step_seconds"], accumulate(2)["predicted_step_seconds"], \
        accumulated["predicted_step_seconds"]
    assert one < two < four < 4 * one, (one, two, four)
    assert abs((four - one) - 3 * (two - one)) < 1e-6 * four, (one, two, four)
    assert abs(accumulated["predicted_sequences_per_second"] - 4 * 8 / four) < 1e-6 * 32 / four, accumulated
    assert accumulated["model_flops"] == 4 * graphed["model_flops"], (accumulated, graphed)
    assert 0.5 <= accumulated["real_token_share"] <= 1.0, accumulated  # of all 32 sequences
    bad = bench(binary, "h100", "--accumulation", "0")
    assert bad.returncode == 2 and "error: --accumulation expects an integer in [1, 65536], got '0'" in bad.stderr, bad.stderr
    print(f"accumulation 4: step {1e3 * four:.3f} ms against {1e3 * one:.3f} ms for one micro-batch")
    # Measured (CPU) too: a step is 3 micro-batches of 4, so each step counts 12 sequences.
    measured = subprocess.run([binary, "--model", "bert-tiny", "--batch", "4", "--accumulation", "3", "--seq", "32",
                               "--steps", "2", "--warmup", "1", "--threads", "1"], capture_output=True, text=True)
    assert measured.returncode == 0, measured.stderr
    r = json.loads(measured.stdout.strip().splitlines()[-1])
    assert r["accumulation"] == 3 and r["batch"] == 4, r
    assert abs(r["sequences_per_second"] * r["step_seconds"] - 12) < 1e-6, r
    print("length bins: " + check_length_bins(binary, prep))
    print("world 8: " + check_world(binary))
    print("h200: " + check_h200(binary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
