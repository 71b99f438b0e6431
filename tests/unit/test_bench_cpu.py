"""tests/bench/bench_cpu.py --short still works (CI's check of the CPU benchmark; it asserts no
timing): every part runs, each row it prints is a positive measurement, the engine and its peers
ran the same model (fp32 logits equal ONNX Runtime's within 1e-5, bf16 within 1e-2 where the CPU
has bf16), batch 1 is timed call by call (p50 <= p99), the machine section names a reference
SGEMM and each training row the reference timed in its own rounds, which its share is of;
--native-build adds the second build's training rows with their ratio to the default's (the same
build directory stands in for it here); case 'real' without --shards is refused by name. Skips
(77) without transformers in /usr/bin/python3 (the ONNX export needs it).

usage: test_bench_cpu.py BUILD_DIR"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "bench", "bench_cpu.py")


def main():
    build = sys.argv[1]
    if subprocess.run(["/usr/bin/python3", "-c", "import transformers"], capture_output=True).returncode != 0:
        print("skip: /usr/bin/python3 has no transformers (samples/install_deps.sh --tests)")
        return 77
    refused = subprocess.run(["/usr/bin/python3", BENCH, "--build", build, "--training", "real"],
                             capture_output=True, text=True)
    assert refused.returncode == 1 and "bench_cpu: case 'real' needs --shards DIR" in refused.stderr, refused
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "rows.json")
        run = subprocess.run(["/usr/bin/python3", BENCH, "--build", build, "--native-build", build, "--short",
                              "--threads", "1", "--work", work, "--json", out], capture_output=True, text=True)
        print(run.stdout)
        assert run.returncode == 0, run.stderr[-3000:]
        summary = json.load(open(out))
    sgemm = summary["sgemm"]["1"]
    assert sgemm["best"] == max(sgemm["onednn"], sgemm["openblas"]) > 0, sgemm
    bf16 = sgemm["bf16"] > 0
    training = [r for r in summary["rows"] if r["section"] == "training"]
    engine_runs = {"bertengine fp32"} | ({"bertengine bf16"} if bf16 else set())
    expected = engine_runs | {run + " -Dnative" for run in engine_runs} | {"PyTorch fp32"}
    assert {r["run"] for r in training} == expected, training
    for r in training:
        assert r["sequences_per_second"] > 0 and r["model_gflops"] > 0 and r["peak_rss_mib"] > 0, r
        assert r["sgemm_reference_gflops"] > 0, r  # timed in the case's own rounds
        assert abs(r["share_of_sgemm"] - r["model_gflops"] / r["sgemm_reference_gflops"]) < 1e-12, r
        assert (r["vs_default_build"] is not None and r["vs_default_build"] > 0) == r["run"].endswith(" -Dnative"), r
    inference = [r for r in summary["rows"] if r["section"] == "inference"]
    engines = {r["engine"] for r in inference}
    assert {"bertengine fp32"} | ({"bertengine bf16"} if bf16 else set()) <= engines, engines
    with_ort = any(e.startswith("ONNX Runtime") for e in engines)
    for r in inference:
        assert r["sequences_per_second"] > 0, r
        if r["batch"] == 1:
            assert r["calls"] == 10 and 0 < r["p50_ms"] <= r["p99_ms"], r
        if with_ort and r["engine"] == "bertengine fp32":
            assert r["max_abs_logit_difference_to_ort"] < 1e-5, r
        if with_ort and r["engine"] == "bertengine bf16":
            assert r["max_abs_logit_difference_to_ort"] < 1e-2, r
    print(f"ok: {len(training)} training rows, {len(inference)} inference rows"
          + ("" if with_ort else " (no ONNX Runtime: engine rows only)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
