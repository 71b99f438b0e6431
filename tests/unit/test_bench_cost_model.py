"""bert-bench --cost-model from the command line, on bert-tiny: the fused attention replaces the
reference attention's kernels (fewer launches, the JSON says so), the prediction reports the real
tokens' share of the full-length sequences, the fused attention recorded in CUDA graphs (--graphed
1) takes less time than launched call by call, an A100 (no fused-attention rate known) is
refused by name with exit status 1, and length bins (a mix of steps, not one) with exit status 2."""
import json
import subprocess
import sys


def bench(binary: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, "--cost-model", *args[:1], "--model", "bert-tiny", "--precision", "bf16",
                           "--seq", "64", "--batch", "8", *args[1:]], capture_output=True, text=True)


def summary(run: subprocess.CompletedProcess) -> dict:
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> int:
    binary = sys.argv[1]
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
    bins = bench(binary, "h100", "--data", "bins", "--length-bins", "1")
    assert bins.returncode == 2 and "give it one bin, --data DIR/bin_K" in bins.stderr, bins.stderr
    print(f"reference {reference['launches']} launches, fused {fused['launches']}; "
          f"real tokens {100 * fused['real_token_share']:.1f}%; fused step "
          f"{1e3 * fused['predicted_step_seconds']:.3f} ms, graphed {1e3 * graphed['predicted_step_seconds']:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
