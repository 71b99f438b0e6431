"""Soak: `bert-train` under `mpirun -np 2` is stopped again and again at random moments and
restarted with --resume each time, for BERT_SOAK_SECONDS (default 60; the issue's soak is 600):
runs of BERT_SOAK_STEPS (100) steps one after the other, each from step 0 to its final checkpoint.
Each stop is one of: SIGTERM to mpirun (bert-train checkpoints at the next step and exits),
SIGKILL to one rank (a crash: mpirun ends the other), SIGKILL to every process at once (power
loss). The run checkpoints every step, so many kills land inside a checkpoint write.

Checked for every run: the final weights are bit-identical (h5py, every tensor) to an
uninterrupted run's; no temporary checkpoint file is left; every restart resumed from a
checkpoint at or beyond the previous one's. Over all runs: the peak RSS of the ranks stays flat
across restarts (largest within 25% of the median). Prints the stops by kind and the resumes.
Usage: soak.py BUILD_DIR [SECONDS]"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

SKIP = 77


def config(path, ckpt_dir, steps):
    cfg = {"model": {"vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "intermediate_size": 128, "max_position_embeddings": 64},
           "train": {"micro_batch": 8, "global_batch": 16, "steps": steps, "lr": 0.01, "threads": 1, "log_every": 1000},
           "data": {"max_seq_length": 64, "max_predictions_per_seq": 8},
           "checkpoint": {"dir": str(ckpt_dir), "every": 1, "keep": 3},
           "dist": {"timeout_s": 3}}
    os.makedirs(ckpt_dir, exist_ok=True)
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def weights(path):
    out = {}
    with h5py.File(path, "r") as f:
        f["model"].visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def ranks_of(mpirun_pid, train):
    """PIDs of the bert-train processes that mpirun started."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == mpirun_pid and os.path.realpath(f"/proc/{entry}/exe") == os.path.realpath(train):
                out.append(int(entry))
        except (OSError, IndexError, ValueError):
            pass
    return out


def peak_rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def mpirun_cmd(mpirun, train, cfg, *args):
    return [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", "--mca", "orte_allowed_exit_without_sync", "1",
            train, str(cfg), "--quiet", *args]


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    train = os.path.join(sys.argv[1], "src", "tools", "bert-train")
    mpirun = shutil.which("mpirun")
    if not os.path.exists(train) or mpirun is None:
        print(f"skipped: needs {train} and mpirun")
        return SKIP
    seconds = float(sys.argv[2] if len(sys.argv) == 3 else os.environ.get("BERT_SOAK_SECONDS", "60"))
    tmp = tempfile.mkdtemp(prefix="soak_")
    try:
        return soak(tmp, train, mpirun, seconds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def stop(p, kind, train, rng):
    ranks = ranks_of(p.pid, train)
    if kind == "SIGTERM to mpirun":
        p.send_signal(signal.SIGTERM)
    elif kind == "SIGKILL to one rank" and ranks:
        os.kill(rng.choice(ranks), signal.SIGKILL)
    else:
        os.killpg(p.pid, signal.SIGKILL)
        for pid in ranks:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def soak_round(ckpt, cfg, ctx):
    """One run from step 0 to its final checkpoint, stopped at random moments while the budget
    lasts and resumed after each stop. Returns the steps each start began from."""
    starts = []
    while True:
        killing = time.monotonic() < ctx["deadline"]
        p = subprocess.Popen(mpirun_cmd(ctx["mpirun"], ctx["train"], cfg, "--resume"), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=ctx["env"], start_new_session=True)
        peak = 0
        stop_at = time.monotonic() + ctx["rng"].uniform(0.2, min(ctx["run_s"], 3.0))
        while p.poll() is None and (not killing or time.monotonic() < stop_at):
            for pid in ranks_of(p.pid, ctx["train"]):
                peak = max(peak, peak_rss_kib(pid))
            time.sleep(0.02)
        if p.poll() is None:
            kind = ctx["rng"].choice(list(ctx["kills"]))
            ctx["kills"][kind] += 1
            stop(p, kind, ctx["train"], ctx["rng"])
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            raise AssertionError("a run did not end within 120 s of its stop")
        ctx["partial"] += any(".tmp." in f for f in os.listdir(ckpt))  # stopped inside a checkpoint write
        m = re.search(r"resumed from step (\d+)", out)
        if m:
            starts.append(int(m.group(1)))
            if peak:
                ctx["peaks"].append(peak)
        elif "no valid checkpoint" in out:
            starts.append(0)
        if p.returncode == 0 and os.path.exists(os.path.join(ckpt, "final.h5")):
            return starts
        assert p.returncode != 0, out


def soak(tmp, train, mpirun, seconds):
    rng = random.Random(int(os.environ.get("BERT_SOAK_SEED", "16")))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    steps = int(os.environ.get("BERT_SOAK_STEPS", "100"))
    t0 = time.monotonic()
    subprocess.run(mpirun_cmd(mpirun, train, config(os.path.join(tmp, "ref.json"), os.path.join(tmp, "ref"), steps)),
                   check=True, capture_output=True, env=env)
    run_s = time.monotonic() - t0
    reference = weights(os.path.join(tmp, "ref", "final.h5"))

    ctx = {"rng": rng, "env": env, "train": train, "mpirun": mpirun, "run_s": run_s, "peaks": [],
           "kills": {"SIGTERM to mpirun": 0, "SIGKILL to one rank": 0, "SIGKILL to all": 0},
           "deadline": time.monotonic() + seconds, "partial": 0}
    start = time.monotonic()
    rounds = resumes = 0
    while time.monotonic() < ctx["deadline"]:
        ckpt = os.path.join(tmp, f"round{rounds}")
        starts = soak_round(ckpt, config(os.path.join(tmp, f"round{rounds}.json"), ckpt, steps), ctx)
        rounds += 1
        resumes += sum(1 for s in starts if s > 0)
        final = weights(os.path.join(ckpt, "final.h5"))
        assert final.keys() == reference.keys() and all(np.array_equal(final[k], reference[k]) for k in reference), \
            f"round {rounds}: final weights differ from the uninterrupted run (starts {starts})"
        leftovers = [f for f in os.listdir(ckpt) if ".tmp." in f]
        assert not leftovers, leftovers
        assert all(b >= a for a, b in zip(starts, starts[1:])), starts
        shutil.rmtree(ckpt)
    elapsed = time.monotonic() - start
    kills, peaks = ctx["kills"], sorted(ctx["peaks"])
    median = peaks[len(peaks) // 2] if peaks else 0
    print(f"soak: {elapsed:.0f} s, {rounds} runs of {steps} steps (uninterrupted: {run_s:.1f} s), "
          f"{sum(kills.values())} stops ({', '.join(f'{k}: {v}' for k, v in kills.items())}), "
          f"{resumes} resumes from a checkpoint; {ctx['partial']} stops left a partial checkpoint file")
    print(f"every run's final weights bit-identical to the uninterrupted run's; no temporary file left")
    print(f"peak RSS per rank over the {len(peaks)} resumed runs: min {peaks[0] / 1024:.1f} MiB, "
          f"median {median / 1024:.1f} MiB, max {peaks[-1] / 1024:.1f} MiB")
    assert sum(kills.values()) >= 3, f"only {sum(kills.values())} stops in {seconds} s"
    assert peaks and peaks[-1] <= 1.25 * median, peaks
    return 0


if __name__ == "__main__":
    sys.exit(main())
