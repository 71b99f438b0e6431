"""Crash safety: bert-train checkpoints every step and is killed with SIGKILL at random moments
(some during a checkpoint write). After each kill, `bert-train --resume` must start from the
newest complete checkpoint and reproduce, bit for bit, the losses of an uninterrupted run."""
import json
import os
import random
import signal
import subprocess
import time

import pytest

BUILD = os.environ.get("BERT_BUILD_DIR", "")
BERT_TRAIN = os.path.join(BUILD, "src", "tools", "bert-train")
pytestmark = pytest.mark.skipif(not os.path.exists(BERT_TRAIN), reason="bert-train is not built (BERT_BUILD_DIR)")

STEPS = 30
MIN_TRIALS, MIN_KILLS_DURING_WRITE, MAX_TRIALS = 20, 3, 60


def config(ckpt_dir):
    return {"model": {"vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                      "intermediate_size": 128, "max_position_embeddings": 64},
            "train": {"micro_batch": 8, "steps": STEPS, "lr": 0.01, "threads": 1, "log_every": 1000},
            "data": {"max_seq_length": 32, "max_predictions_per_seq": 5},
            "checkpoint": {"dir": str(ckpt_dir), "every": 1, "keep": 2}}


def losses(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            step, loss = line.split()
            out[int(step)] = loss  # the text keeps every digit of the float
    return out


def test_sigkill_at_random_moments_then_resume_exactly(tmp_path):
    (tmp_path / "ref").mkdir()
    ref_cfg = tmp_path / "ref.json"
    ref_cfg.write_text(json.dumps(config(tmp_path / "ref")))
    t0 = time.monotonic()
    subprocess.run([BERT_TRAIN, str(ref_cfg), "--quiet", "--loss-log", str(tmp_path / "ref.log")], check=True)
    run_time = time.monotonic() - t0
    reference = losses(tmp_path / "ref.log")
    assert len(reference) == STEPS

    rng = random.Random(2024)
    trials = during_write = 0
    while trials < MAX_TRIALS and (trials < MIN_TRIALS or during_write < MIN_KILLS_DURING_WRITE):
        trial = tmp_path / f"t{trials}"
        trial.mkdir()
        cfg = trial / "config.json"
        cfg.write_text(json.dumps(config(trial / "ckpt")))
        (trial / "ckpt").mkdir()
        proc = subprocess.Popen([BERT_TRAIN, str(cfg), "--quiet", "--loss-log", str(trial / "first.log")])
        deadline = time.monotonic() + rng.uniform(0.1, 0.9) * run_time
        # Even trials aim inside a write: kill as soon as a temporary file appears after the
        # deadline (or shortly after it when none does). Odd trials kill at the deadline.
        aim_for_write = trials % 2 == 0
        while proc.poll() is None and time.monotonic() < deadline + (0.2 if aim_for_write else 0.0):
            if aim_for_write and time.monotonic() >= deadline and any(".tmp." in f for f in os.listdir(trial / "ckpt")):
                break
            time.sleep(0.0005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        during_write += any(".tmp." in f for f in os.listdir(trial / "ckpt"))
        trials += 1

        resumed = subprocess.run([BERT_TRAIN, str(cfg), "--resume", "--loss-log", str(trial / "second.log")],
                                 capture_output=True, text=True)
        assert resumed.returncode == 0, resumed.stderr
        second = losses(trial / "second.log")
        start = min(second) if second else STEPS + 1
        for step, loss in second.items():
            assert loss == reference[step], f"trial {trials}: step {step} loss {loss} != {reference[step]}"
        first = losses(trial / "first.log")
        # The resume point is the newest complete checkpoint: never beyond what the first run reached.
        assert start - 1 <= max(first, default=0), (start, max(first, default=0))
        assert not any(".tmp." in f for f in os.listdir(trial / "ckpt")), "partial checkpoint left behind"
    print(f"{trials} trials, {during_write} killed during a checkpoint write")
    assert trials >= MIN_TRIALS
    assert during_write >= MIN_KILLS_DURING_WRITE
