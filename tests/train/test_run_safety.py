"""No lost runs: bert-train stops (exit 1, the file named, earlier checkpoints intact) when a
periodic checkpoint cannot be written, unless checkpoint.on_failure is "continue"; --resume
refuses a directory whose checkpoints fail verification, naming each and changing none of them
(--discard-invalid renames them aside and resumes from the newest valid one); --resume of a
finished run trains nothing, rewrites nothing and appends no loss-log line. A full disk is
simulated with RLIMIT_FSIZE (SIGXFSZ ignored, so writes fail with EFBIG)."""
import os
import resource
import signal
import subprocess

from train_helpers import TRAIN, needs_tools, run, tiny_model, write_config

pytestmark = needs_tools


def config(tmp_path, name, steps=6, every=2, **checkpoint):
    (tmp_path / name).mkdir(exist_ok=True)
    cfg = {"model": tiny_model(), "train": {"micro_batch": 4, "steps": steps, "lr": 0.01, "threads": 1, "log_every": 100},
           "data": {"max_seq_length": 32, "max_predictions_per_seq": 4},
           "checkpoint": {"dir": str(tmp_path / name), "every": every, "keep": 20, **checkpoint}}
    return write_config(tmp_path / f"{name}.json", cfg)


def run_with_file_limit(limit, *args):
    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600,
                          preexec_fn=limit_file_size)


def corrupt(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    return bytes(data)


def test_a_failed_periodic_checkpoint_stops_the_run(tmp_path):
    cfg = config(tmp_path, "ckpt")
    d = tmp_path / "ckpt"
    run(TRAIN, cfg, "--quiet", "--steps-this-run", 2)
    good = (d / "ckpt_2.h5").read_bytes()
    p = run_with_file_limit(len(good) // 3, TRAIN, cfg, "--resume", "--loss-log", tmp_path / "loss.log")
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"{d / 'ckpt_4.h5'}" in p.stderr and "error: stopping at step 4" in p.stderr, p.stderr
    assert sorted(f.name for f in d.iterdir()) == ["ckpt_2.h5"]  # no partial file, the older one intact
    assert (d / "ckpt_2.h5").read_bytes() == good
    steps = [int(line.split()[0]) for line in open(tmp_path / "loss.log")]
    assert steps == [3, 4], steps  # trained no further than the failed checkpoint
    out = run(TRAIN, cfg, "--resume", "--quiet").stdout  # the cause fixed, the run continues
    assert "resumed from step 2" in out, out


def test_on_failure_continue_trains_on_without_the_checkpoint(tmp_path):
    cfg = config(tmp_path, "ckpt", on_failure="continue")
    d = tmp_path / "ckpt"
    run(TRAIN, cfg, "--quiet", "--steps-this-run", 2)
    size = (d / "ckpt_2.h5").stat().st_size
    p = run_with_file_limit(size // 3, TRAIN, cfg, "--resume", "--loss-log", tmp_path / "loss.log")
    assert p.returncode == 1, p.stdout + p.stderr  # the final checkpoint fails as well: an error of the run
    assert p.stderr.count('checkpoint.on_failure is "continue": training goes on') == 1, p.stderr
    steps = [int(line.split()[0]) for line in open(tmp_path / "loss.log")]
    assert steps == [3, 4, 5, 6], steps


def test_resume_refuses_invalid_checkpoints_and_discard_invalid_sets_them_aside(tmp_path):
    cfg = config(tmp_path, "ckpt", steps=8)
    d = tmp_path / "ckpt"
    run(TRAIN, cfg, "--quiet", "--steps-this-run", 6)
    damaged = corrupt(d / "ckpt_6.h5")
    p = run(TRAIN, cfg, "--resume", "--quiet", check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"checkpoint '{d / 'ckpt_6.h5'}' is corrupt" in p.stderr and "the newest valid one is" in p.stderr, p.stderr
    assert "--discard-invalid" in p.stderr, p.stderr
    assert (d / "ckpt_6.h5").read_bytes() == damaged
    assert not (d / "final.h5").exists()

    for name in ("ckpt_2.h5", "ckpt_4.h5"):  # every checkpoint invalid: still no fresh start
        corrupt(d / name)
    p = run(TRAIN, cfg, "--resume", "--quiet", check=False)
    assert p.returncode == 1 and "3 checkpoint(s) fail verification and none of them is valid" in p.stderr, p.stderr
    assert sorted(f.name for f in d.iterdir()) == ["ckpt_2.h5", "ckpt_4.h5", "ckpt_6.h5"]

    p = run(TRAIN, cfg, "--resume", "--discard-invalid", "--quiet", "--loss-log", tmp_path / "loss.log")
    assert "no valid checkpoint" in p.stdout, p.stdout  # the user asked: they are set aside, training starts over
    assert sorted(f.name for f in d.iterdir()) == sorted(
        ["ckpt_2.h5.invalid", "ckpt_4.h5.invalid", "ckpt_6.h5.invalid", "ckpt_2.h5", "ckpt_4.h5", "ckpt_6.h5",
         "final.h5"])
    assert (d / "ckpt_6.h5.invalid").read_bytes() == damaged

    p = run(TRAIN, cfg, "--discard-invalid", check=False)
    assert p.returncode == 2 and "--discard-invalid applies to --resume" in p.stderr, p.stderr


def test_resume_of_a_finished_run_trains_nothing(tmp_path):
    cfg = config(tmp_path, "ckpt", steps=4)
    d = tmp_path / "ckpt"
    run(TRAIN, cfg, "--quiet", "--loss-log", tmp_path / "loss.log")
    final = (d / "final.h5").read_bytes()
    mtime = os.stat(d / "final.h5").st_mtime_ns
    log = (tmp_path / "loss.log").read_text()
    p = run(TRAIN, cfg, "--resume", "--loss-log", tmp_path / "loss.log")
    assert "already complete" in p.stdout and "resumed" not in p.stdout, p.stdout
    assert (d / "final.h5").read_bytes() == final and os.stat(d / "final.h5").st_mtime_ns == mtime
    assert (tmp_path / "loss.log").read_text() == log
