#!/usr/bin/env python3
"""bertengine on the CPU next to its peers and the machine, all measured in one run (a benchmark:
it prints numbers and asserts none; it exits non-zero only when a part could not run).

  1. The machine: the CPU, and its best SGEMM (2048³): oneDNN's through the engine's GEMM and
     OpenBLAS's through NumPy in the PyTorch peer's environment, with OPENBLAS_CORETYPE and
     OPENBLAS_L2_SIZE unset for that command alone (OpenBLAS then picks its own kernel, named in
     the output); the faster is the reference. oneDNN's bf16 GEMM rate where the CPU has bf16.
  2. Training: bert-base micro-batch 8 and bert-large micro-batch 4 at sequence 128, synthetic
     padded batches (equal work on both sides): the engine in fp32 and, where the CPU multiplies
     bf16 natively, in bf16, next to PyTorch (tests/bench/bench_vs_torch.py's peer: the Hugging
     Face definition with DLE's LAMB). Model GFLOP/s as a share of the reference SGEMM timed again
     in each round just before the runs (the median of the rounds): a shared VM's speed drifts
     over the hour the program runs, so a reference timed once at the start flattered or
     understated the cases run long after it (the peer's rate moved by up to 18% between
     runs). With --shards DIR (`bert-prep shards` of real text at --max-seq-length 512) also case "real":
     bert-small micro-batch 8 on those sequences, the engine without the padding (data.unpad),
     the peer padded to 512.
  3. Inference: a bert-base sequence classifier (Hugging Face BertForSequenceClassification,
     seeded random weights; speed does not depend on their values) in the engine (bert_infer,
     fp32 and bf16) and in ONNX Runtime (the model exported by torch.onnx and fused by
     onnxruntime.transformers.optimizer, model_type bert), the same threads, timed in
     alternation in one process: batch 1, 8 and 32 at sequence 128 and 384. Each engine
     precision runs in a process of its own beside ORT, one engine session at a time, as a
     server would run it (two sessions' worker threads would each hold an OpenMP pool, and with
     more pooled threads than cores libgomp makes the workers sleep between parallel regions);
     the ORT row shown is the fp32 process's, and each engine row's ratio is to the ORT timed
     beside it. Batch 1 is timed call by call (--latency-calls, interleaved): p50 and p99
     latency. Largest logit difference to ORT.
With --native-build DIR (a build of the same commit with -Dnative=true) the training runs also
time that build's engine in the same rounds, and print it next to the default build's.
Every case runs on 1 thread and on all cores (--threads). Engine and peers alternate round by
round, each timing is a median. --short runs bert-tiny, one round, few calls: CI's check that the
program still works (tests/unit/test_bench_cpu.py, meson suite 'bench').

The peers live in virtual environments of their own (samples/install_deps.sh --bench makes them):
--torch-python (PyTorch 2.x from PyPI; default ~/.cache/bertengine/torch-venv, else Debian's
PyTorch) and --ort-python (ONNX Runtime; default ~/.cache/bertengine/ort-venv). The ONNX export
uses Debian's Python with transformers (samples/install_deps.sh --tests).

usage: /usr/bin/python3 tests/bench/bench_cpu.py --build build [--native-build DIR] [--short] [--threads 1,2]
         [--training base,large] [--batches 1,8,32] [--seqs 128,384] [--rounds 2]
         [--latency-calls 200] [--work DIR] [--json FILE]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bench_vs_torch  # noqa: E402  (the training peer, FLOP counts, presets)

CACHE = os.path.expanduser("~/.cache/bertengine")
FAILURES = []  # parts that could not run: reported, the others still measured, exit status 1
NATIVE = " -Dnative"  # the label suffix of the --native-build runs
TRAINING_CASES = {"tiny": ("bert-tiny", 8, 128), "base": ("bert-base", 8, 128), "large": ("bert-large", 4, 128),
                  "real": ("bert-small", 8, 512)}


# ---- children: each runs in the Python that has its library -----------------------------------

def openblas_main(argv):
    """bench_cpu.py openblas THREADS: NumPy's SGEMM rate (its OpenBLAS) and the kernel it picked."""
    import numpy as np
    threads, n = int(argv[0]), 2048
    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    b = np.random.default_rng(1).random((n, n), dtype=np.float32)
    kernel = "unknown"
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
        limits = threadpool_limits(threads)  # noqa: F841  (held for the timing)
        kernel = ", ".join(f"{i['internal_api']} {i['version']} {i.get('architecture', '')}".strip()
                           for i in threadpool_info())
    except ImportError:
        pass  # OPENBLAS_NUM_THREADS, set by the driver, holds the thread count
    a @ b
    best = min(_seconds(lambda: a @ b) for _ in range(5))
    print(json.dumps({"sgemm_gflops": 2.0 * n ** 3 / best * 1e-9, "kernel": kernel}))


def infer_main(argv):
    """bench_cpu.py infer ...: the engine in one precision and ONNX Runtime timed in alternation."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--hf-config", required=True)
    ap.add_argument("--onnx", default="")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--batches", required=True)
    ap.add_argument("--seqs", required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--latency-calls", type=int, required=True)
    ap.add_argument("--precision", required=True)
    args = ap.parse_args(argv)
    import numpy as np
    import bertengine
    ort = None
    if args.onnx:
        import onnxruntime as ort
    hf = json.load(open(args.hf_config))
    rng = np.random.default_rng(0)
    for seq in [int(s) for s in args.seqs.split(",")]:
        for batch in [int(b) for b in args.batches.split(",")]:
            ids = rng.integers(5, hf["vocab_size"], (batch, seq), dtype=np.int32)
            engine_batch = {"input_ids": ids, "segment_ids": np.zeros_like(ids), "input_mask": np.ones_like(ids)}
            cfg = {"model": hf, "task": {"type": "sequence_classification", "num_labels": len(hf.get("id2label", [0, 1]))},
                   "mode": "inference",
                   "train": {"init_checkpoint": args.checkpoint, "micro_batch": batch, "threads": args.threads,
                             "precision": args.precision},
                   "data": {"max_seq_length": seq, "max_predictions_per_seq": 0}}
            session = bertengine.Session(cfg)
            runners = {f"bertengine {args.precision}": lambda: session.infer(engine_batch)}
            if ort is not None:
                options = ort.SessionOptions()
                options.intra_op_num_threads = args.threads
                options.inter_op_num_threads = 1
                options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                ort_session = ort.InferenceSession(args.onnx, options, providers=["CPUExecutionProvider"])
                feeds = {"input_ids": ids.astype(np.int64), "attention_mask": np.ones((batch, seq), np.int64),
                         "token_type_ids": np.zeros((batch, seq), np.int64)}
                runners[f"ONNX Runtime {ort.__version__} fp32"] = lambda: ort_session.run(None, feeds)[0]
            logits = {name: np.asarray(run()) for name, run in runners.items()}  # also the warm-up
            times = {name: [] for name in runners}
            if batch == 1:  # call by call, interleaved in blocks of 10
                for _ in range(max(1, args.latency_calls // 10)):
                    for name, run in runners.items():
                        times[name] += [_seconds(run) for _ in range(min(10, args.latency_calls))]
            else:
                for _ in range(args.rounds):
                    for name, run in runners.items():
                        times[name].append(_seconds(run))
            reference = logits.get(next((n for n in runners if n.startswith("ONNX")), "bertengine fp32"))
            for name, samples in times.items():
                row = {"threads": args.threads, "batch": batch, "seq": seq, "engine": name,
                       "sequences_per_second": batch / statistics.median(samples),
                       "max_abs_logit_difference_to_ort": float(np.abs(logits[name] - reference).max())}
                if batch == 1:
                    ordered = sorted(samples)
                    row.update(calls=len(samples), p50_ms=1e3 * ordered[len(ordered) // 2],
                               p99_ms=1e3 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))])
                print(json.dumps(row), flush=True)
            session.close()


def _seconds(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


# ---- the driver ------------------------------------------------------------------------------

def run_lines(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exited {out.returncode}:\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def without_openblas_overrides(threads):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    return env


def python_version_of(python, module):
    """The module's version under that Python; "" where the module or the Python itself is missing."""
    if not shutil.which(python):
        return ""
    out = subprocess.run([python, "-c", f"import {module}; print({module}.__version__)"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def sgemm_rates(args, torch_python, threads):
    """oneDNN's (through the engine's GEMM, with its bf16 GEMM) and OpenBLAS's SGEMM 2048³ now."""
    ours = run_lines([os.path.join(args.build, "tests", "unit", "bench_sgemm"), "--threads", str(threads),
                      "--bf16", "1"])[0]
    openblas = run_lines([torch_python, os.path.abspath(__file__), "openblas", str(threads)],
                         without_openblas_overrides(threads))[0]
    return ours, openblas


def machine_section(args, torch_python):
    print(f"CPU: {bench_vs_torch.cpu_model()}, {os.cpu_count()} cores ({bench_vs_torch.cpu_flags()})")
    sgemm = {}
    for threads in args.threads:
        ours, openblas = sgemm_rates(args, torch_python, threads)
        best = max(ours["sgemm_gflops"], openblas["sgemm_gflops"])
        sgemm[threads] = {"onednn": ours["sgemm_gflops"], "openblas": openblas["sgemm_gflops"], "best": best,
                          "bf16": ours.get("bf16_gemm_gflops", 0.0)}
        print(f"{threads} thread(s): SGEMM 2048³ oneDNN ({ours['isa']}) {ours['sgemm_gflops']:.1f} GFLOP/s, "
              f"OpenBLAS ({openblas['kernel']}) {openblas['sgemm_gflops']:.1f}: reference {best:.1f}"
              + (f"; oneDNN bf16 GEMM {ours['bf16_gemm_gflops']:.1f}" if "bf16_gemm_gflops" in ours else ""))
    return sgemm


def training_section(args, torch_python, torch_version, bf16):
    rows = []
    print(f"\nTraining (synthetic padded batches; peer: PyTorch {torch_version}, HF definition, DLE LAMB; "
          "of SGEMM: of the reference timed in each round beside the runs)")
    print(f"  {'case':<35} {'thr':>3} {'run':<26} {'seq/s':>8} {'GFLOP/s':>8} {'of SGEMM':>9} {'vs peer':>8} "
          f"{'vs fp32':>8} {'RSS MiB':>8}")
    for name in args.training:
        model, batch, seq = TRAINING_CASES[name]
        case = {"model": model, "batch": batch, "seq": seq}
        flops = bench_vs_torch.training_flops_per_sequence(model, seq, bench_vs_torch.predictions_for(seq))
        for threads in args.threads:
            shards = args.shards if name == "real" else ""
            engine = bench_vs_torch.engine_cmd(args.build, case, threads, args.steps, shards, True)
            runs = {"bertengine fp32": engine} | ({"bertengine bf16": engine + ["--precision", "bf16"]} if bf16 else {})
            if args.native_build:
                native = bench_vs_torch.engine_cmd(args.native_build, case, threads, args.steps, shards, True)
                runs |= {label + NATIVE: native + cmd[len(engine):] for label, cmd in list(runs.items())}
            results = {label: [] for label in list(runs) + ["PyTorch fp32"]}
            references = []  # the reference SGEMM, timed in each round beside the runs
            env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
            peer = bench_vs_torch.peer_cmd(case, threads, args.steps, shards, python=torch_python)
            try:
                for _ in range(args.rounds):  # the reference, engine runs and the peer alternate
                    if not shards:
                        ours, openblas = sgemm_rates(args, torch_python, threads)
                        references.append(max(ours["sgemm_gflops"], openblas["sgemm_gflops"]))
                    for label, cmd in runs.items():
                        results[label].append(run_lines(cmd)[-1])
                    results["PyTorch fp32"].append(run_lines(peer, env)[-1])
            except RuntimeError as e:
                FAILURES.append(f"training {name}, {threads} thread(s): {e}")
                print(f"  {name}, {threads} thread(s): FAILED, {str(e).splitlines()[0]}")
                continue
            rate = {label: statistics.median(r["sequences_per_second"] for r in rs) for label, rs in results.items()}
            reference = statistics.median(references) if references else None
            for label, rs in results.items():
                # Real data: the engine skips the padding, so padded-equivalent FLOPs would flatter it.
                gflops = None if shards else rate[label] * flops * 1e-9
                row = {"section": "training", "case": f"{model} micro-batch {batch} seq {seq}"
                       + (" real" if shards else ""), "threads": threads,
                       "run": label, "sequences_per_second": rate[label], "model_gflops": gflops,
                       "sgemm_reference_gflops": reference,
                       "share_of_sgemm": gflops / reference if gflops else None,
                       "vs_peer": rate[label] / rate["PyTorch fp32"],
                       "vs_fp32": rate[label] / rate["bertengine fp32"] if label.startswith("bertengine") else None,
                       "vs_default_build": rate[label] / rate[label[:-len(NATIVE)]] if label.endswith(NATIVE) else None,
                       "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in rs)}
                rows.append(row)
                shown = f"{gflops:8.1f} {row['share_of_sgemm']:9.0%}" if gflops else f"{'':8} {'':9}"
                vs_fp32 = f"{row['vs_fp32']:7.2f}x" if row["vs_fp32"] else ""
                native = f"  ({row['vs_default_build']:.3f}x the default build)" if row["vs_default_build"] else ""
                print(f"  {row['case']:<35} {threads:>3} {label:<26} {rate[label]:8.2f} {shown} "
                      f"{row['vs_peer']:7.2f}x {vs_fp32:>8} {row['peak_rss_mib']:8.0f}{native}")
            if references:
                print(f"  {'':<35} {threads:>3} reference SGEMM in its rounds: "
                      + ", ".join(f"{r:.1f}" for r in references) + " GFLOP/s")
    return rows


def prepare_classifier(args, model):
    """The HF classifier (seeded), its engine checkpoint and its fused ONNX graph, cached in --work."""
    folder = os.path.join(args.work, f"{model}-classifier")
    hf_dir, h5, onnx = os.path.join(folder, "hf"), os.path.join(folder, "engine.h5"), os.path.join(folder, "fused.onnx")
    layers, hidden, heads = bench_vs_torch.PRESETS[model]
    if not os.path.exists(h5):
        os.makedirs(folder, exist_ok=True)
        export = f"""
import torch, transformers
cfg = transformers.BertConfig(vocab_size={bench_vs_torch.VOCAB}, hidden_size={hidden}, num_hidden_layers={layers},
    num_attention_heads={heads}, intermediate_size={4 * hidden}, num_labels=2)
torch.manual_seed(0)
model = transformers.BertForSequenceClassification(cfg).eval()
model.save_pretrained({hf_dir!r}, safe_serialization=True)
ids = torch.ones(1, 128, dtype=torch.long)
names = ["input_ids", "attention_mask", "token_type_ids"]
torch.onnx.export(model, (ids, ids, ids * 0), {os.path.join(folder, "model.onnx")!r}, input_names=names,
    output_names=["logits"], opset_version=14,
    dynamic_axes={{**{{n: {{0: "batch", 1: "seq"}} for n in names}}, "logits": {{0: "batch"}}}})
"""
        subprocess.run(["/usr/bin/python3", "-c", export], check=True, capture_output=True)
        subprocess.run([os.path.join(args.build, "src", "tools", "bert-ckpt"), "import", hf_dir, h5 + ".tmp"],
                       check=True, capture_output=True)
        os.replace(h5 + ".tmp", h5)
    if args.ort_python and not os.path.exists(onnx):
        fuse = f"""
from onnxruntime.transformers import optimizer
m = optimizer.optimize_model({os.path.join(folder, "model.onnx")!r}, model_type="bert", num_heads={heads},
                             hidden_size={hidden}, opt_level=0)
m.save_model_to_file({onnx + ".tmp"!r})
print(m.get_fused_operator_statistics())
"""
        subprocess.run([args.ort_python, "-c", fuse], check=True, capture_output=True)
        os.replace(onnx + ".tmp", onnx)
    return os.path.join(hf_dir, "config.json"), h5, onnx if args.ort_python else ""


def inference_section(args, bf16):
    model = "bert-tiny" if args.short else "bert-base"
    child_python = args.ort_python or "/usr/bin/python3"
    ort_version = python_version_of(args.ort_python, "onnxruntime") if args.ort_python else ""
    print(f"\nInference, {model} sequence classifier (peer: "
          + (f"ONNX Runtime {ort_version}, transformer-fused graph)" if ort_version else "none: no ONNX Runtime)"))
    hf_config, h5, onnx = prepare_classifier(args, model)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"),
               BERTENGINE_NATIVE_DIR=os.path.join(os.path.abspath(args.build), "tests", "bindings"))
    print(f"  {'thr':>3} {'batch':>5} {'seq':>4} {'run':<26} {'seq/s':>8} {'vs ORT':>7} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'logits vs ORT':>13}")
    rows = []
    for threads in args.threads:
        lines = {}  # precision -> the rows of its process: the engine's and the ORT beside it
        for precision in ["fp32"] + (["bf16"] if bf16 else []):
            try:
                lines[precision] = run_lines(
                    [child_python, os.path.abspath(__file__), "infer", "--checkpoint", h5, "--hf-config", hf_config,
                     "--onnx", onnx, "--threads", str(threads), "--batches", ",".join(map(str, args.batches)),
                     "--seqs", ",".join(map(str, args.seqs)), "--rounds", str(args.rounds),
                     "--latency-calls", str(args.latency_calls), "--precision", precision], env)
            except RuntimeError as e:
                FAILURES.append(f"inference {precision}, {threads} thread(s): {e}")
                print(f"  {threads} thread(s), {precision}: FAILED, {str(e).splitlines()[0]}")
        shown = next(iter(lines.values()), [])  # the first process: its ORT rows are the ones shown
        for shape in dict.fromkeys((r["batch"], r["seq"]) for r in shown):
            shape_rows = []
            for process in lines.values():
                peer = next((r for r in process if r["engine"].startswith("ONNX") and (r["batch"], r["seq"]) == shape),
                            None)
                for row in process:
                    if (row["batch"], row["seq"]) == shape and (row is not peer or process is shown):
                        row.update(section="inference", model=model,
                                   vs_ort=row["sequences_per_second"] / peer["sequences_per_second"] if peer else None)
                        shape_rows.append(row)
            for row in sorted(shape_rows, key=lambda r: r["engine"].startswith("ONNX")):  # ORT last
                rows.append(row)
                latency = f"{row['p50_ms']:8.1f} {row['p99_ms']:8.1f}" if "p50_ms" in row else f"{'':8} {'':8}"
                vs = f"{row['vs_ort']:6.2f}x" if row["vs_ort"] else ""
                print(f"  {threads:>3} {row['batch']:>5} {row['seq']:>4} {row['engine']:<26} "
                      f"{row['sequences_per_second']:8.2f} {vs:>7} {latency} {row['max_abs_logit_difference_to_ort']:13.2e}")
    return rows


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("openblas", "infer"):
        return {"openblas": openblas_main, "infer": infer_main}[sys.argv[1]](sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="the engine's build directory")
    ap.add_argument("--short", action="store_true", help="bert-tiny, one round, few calls (CI)")
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}")
    ap.add_argument("--training", default="base,large", help=f"cases of {sorted(TRAINING_CASES)}, or 'none'")
    ap.add_argument("--shards", default="", help="DLE shards of real text at sequence 512 (adds case 'real')")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--seqs", default="128,384")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3, help="timed training steps per run")
    ap.add_argument("--latency-calls", type=int, default=200)
    ap.add_argument("--torch-python", default="")
    ap.add_argument("--ort-python", default="")
    ap.add_argument("--work", default=os.path.join(CACHE, "bench_cpu"), help="cached models and ONNX graphs")
    ap.add_argument("--json", default="", help="also write every row here")
    ap.add_argument("--native-build", default="", help="a -Dnative=true build: its training runs beside the default's")
    args = ap.parse_args()
    args.threads = sorted({int(t) for t in args.threads.split(",")})
    args.batches = [int(b) for b in args.batches.split(",")]
    args.seqs = [int(s) for s in args.seqs.split(",")]
    args.training = [] if args.training == "none" else args.training.split(",")
    if args.shards and "real" not in args.training:
        args.training.append("real")
    if "real" in args.training and not args.shards:
        raise SystemExit("bench_cpu: case 'real' needs --shards DIR")
    if args.short:
        args.training, args.rounds, args.steps, args.latency_calls = ["tiny"], 1, 1, 10
        args.batches, args.seqs = [1, 8], [128]
    venv_python = lambda name: os.path.join(CACHE, name, "bin", "python3")
    torch_python = args.torch_python or next(
        (p for p in (venv_python("torch-venv"), "/usr/bin/python3") if python_version_of(p, "torch")), "")
    if not args.ort_python and python_version_of(venv_python("ort-venv"), "onnxruntime"):
        args.ort_python = venv_python("ort-venv")
    if not torch_python:
        raise SystemExit("bench_cpu: no Python with PyTorch (samples/install_deps.sh --bench makes one)")
    sgemm = machine_section(args, torch_python)
    bf16 = all(rates["bf16"] > 0 for rates in sgemm.values())  # bench_sgemm times bf16 where the CPU has it
    if not bf16:
        print("bf16: this CPU has no native bf16 (AVX512-BF16 or AMX): fp32 rows only")
    rows = training_section(args, torch_python, python_version_of(torch_python, "torch"), bf16)
    rows += inference_section(args, bf16)
    summary = {"cpu": bench_vs_torch.cpu_model(), "sgemm": sgemm, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    print(json.dumps(summary))
    for failure in FAILURES:
        print(f"bench_cpu: {failure}", file=sys.stderr)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
