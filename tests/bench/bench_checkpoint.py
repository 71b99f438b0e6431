#!/usr/bin/env python3
"""Checkpoint write and read speed of bertengine next to torch.save/torch.load of the same
tensors, measured in the same run on the same machine (a benchmark: prints numbers, asserts none).

The engine side is a CPU training session of the model (default BERT-large: weights plus both
LAMB moments, 3 x 335M fp32 values, about 4.0 GB) writing a checkpoint with bert_checkpoint
(HDF5, sealed, fsynced, renamed) and resuming it with bert_checkpoint_load (seal CRC, checksum,
every name and shape checked). The peer is torch.save of a dict holding the same tensors (names,
shapes, values read from the engine's file), then torch.load; it is timed without and with an
os.fsync of the file (the engine always fsyncs). Each side writes twice in its process: the first
write, then, with that file removed (as checkpoint retention removes old checkpoints), the write
reported as the steady state (on a VM that backs memory lazily, a first write's fresh page-cache
pages can cost 10x a recycled page's, and more for the side whose process holds more memory; the
first write is printed too). Each side runs in its own process, alternating
for --rounds (odd rounds engine first, even rounds peer first: the peer needs the engine's
file, so round 1 starts with the engine); each round is printed and the median is reported. Peak extra memory: the rise of the process's peak RSS
(VmHWM, reset through /proc/self/clear_refs) over its RSS before the call.

usage: /usr/bin/python3 tests/bench/bench_checkpoint.py --lib build/libbert.so
         [--model bert-large] [--rounds 3] [--dir /tmp] [--torch-python PYTHON]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def rss_kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def measured(call):
    """(seconds, peak extra MiB) of call()."""
    reset_peak()
    before = rss_kib("VmRSS")
    t0 = time.perf_counter()
    call()
    seconds = time.perf_counter() - t0
    return seconds, (rss_kib("VmHWM") - before) / 1024.0


def engine_main(args):
    sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
    os.environ["BERT_LIB"] = args.lib
    from engine_ctypes import Session
    config = {"model": args.model, "train": {"micro_batch": 1, "steps": 1, "threads": 1},
              "data": {"max_seq_length": 128, "max_predictions_per_seq": 20}}
    with Session(config) as s:
        s.step()  # moments become non-zero
        first = measured(lambda: s.checkpoint(args.path))
        os.remove(args.path)  # as checkpoint.keep does: its pages are free for the next file
        write = measured(lambda: s.checkpoint(args.path))
        read = measured(lambda: s.checkpoint_load(args.path))
    print(json.dumps({"first_write": first, "write": write, "read": read, "bytes": os.path.getsize(args.path)}))


def peer_main(args):
    import h5py
    import torch
    tensors = {}
    with h5py.File(args.source, "r") as f:
        for group in ("model", "optimizer/exp_avg", "optimizer/exp_avg_sq"):
            for name, ds in f[group].items():
                tensors[f"{group}/{name}"] = torch.from_numpy(ds[()])

    def save():
        torch.save(tensors, args.path)
        if args.fsync:
            fd = os.open(args.path, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)

    first = measured(save)
    os.remove(args.path)
    write = measured(save)
    read = measured(lambda: torch.load(args.path))
    print(json.dumps({"first_write": first, "write": write, "read": read, "bytes": os.path.getsize(args.path),
                      "torch": torch.__version__}))


def child(python, *argv):
    p = subprocess.run([python, os.path.abspath(__file__), *map(str, argv)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{argv[0]} failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--model", default="bert-large")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    args = ap.parse_args()
    engine_file = os.path.join(args.dir, f"bench_ckpt_{os.getpid()}.h5")
    torch_file = os.path.join(args.dir, f"bench_ckpt_{os.getpid()}.pt")
    rows = {"engine": [], "torch.save": [], "torch.save+fsync": []}
    try:
        for r in range(args.rounds):
            # The writers take turns going first: what the process before a writer freed (this
            # VM backs recently freed memory faster) favours neither side.
            order = ["engine", "torch.save", "torch.save+fsync"][::1 if r % 2 == 0 else -1]
            for name in order:
                if name == "engine":
                    rows[name].append(child(sys.executable, "engine", "--lib", args.lib, "--model", args.model,
                                            "--path", engine_file))
                else:
                    rows[name].append(child(args.torch_python, "peer", "--source", engine_file, "--path", torch_file,
                                            "--fsync", int(name.endswith("fsync"))))
            print(f"round {r + 1}: " + ", ".join(f"{n} first write {rows[n][-1]['first_write'][0]:.2f} s, write "
                                                 f"{rows[n][-1]['write'][0]:.2f} s, read {rows[n][-1]['read'][0]:.2f} s"
                                                 for n in order), flush=True)
    finally:
        for path in (engine_file, torch_file):
            if os.path.exists(path):
                os.remove(path)
    gb = rows["engine"][0]["bytes"] / 1e9
    print(f"checkpoint of {args.model} (weights + LAMB moments), {gb:.2f} GB; CPU: {cpu_model()}, {os.cpu_count()} cores; "
          f"torch {rows['torch.save'][0]['torch']}; {args.rounds} rounds alternating, median; files in {args.dir}")
    print(f"{'writer':<18} {'1st write s':>11} {'write s':>8} {'write GB/s':>10} {'peak extra MiB':>15} {'read s':>8} "
          f"{'read GB/s':>10} {'peak extra MiB':>15} {'file GB':>8}")
    for name, results in rows.items():
        first = statistics.median(r["first_write"][0] for r in results)
        write = statistics.median(r["write"][0] for r in results)
        read = statistics.median(r["read"][0] for r in results)
        write_mib = statistics.median(r["write"][1] for r in results)
        read_mib = statistics.median(r["read"][1] for r in results)
        size = results[0]["bytes"] / 1e9
        print(f"{name:<18} {first:11.2f} {write:8.2f} {gb / write:10.2f} {write_mib:15.0f} {read:8.2f} {gb / read:10.2f} "
              f"{read_mib:15.0f} {size:8.2f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("engine", "peer"):
        ap = argparse.ArgumentParser()
        ap.add_argument("mode")
        ap.add_argument("--lib")
        ap.add_argument("--model")
        ap.add_argument("--path", required=True)
        ap.add_argument("--source")
        ap.add_argument("--fsync", type=int, default=0)
        a = ap.parse_args()
        engine_main(a) if a.mode == "engine" else peer_main(a)
    else:
        main()
