"""A checkpoint.dir belongs to one run: every checkpoint records its run's id; a fresh bert-train
in a directory holding another run's checkpoints refuses (naming the directory, suggesting
--resume or --overwrite); --overwrite moves them aside and says where; --resume continues the run
that wrote the directory last and never picks another run's checkpoint, even one with a higher
step (the reported bug: an old run's ckpt_11 taken over the new run's ckpt_9)."""
import json
import shutil

import h5py

from train_helpers import TRAIN, needs_tools, run, tiny_model, write_config

pytestmark = needs_tools


def config(tmp_path, name, steps=12):
    (tmp_path / name).mkdir(exist_ok=True)
    cfg = {"model": tiny_model(), "train": {"micro_batch": 4, "steps": steps, "lr": 0.01, "threads": 1, "log_every": 100},
           "data": {"max_seq_length": 32, "max_predictions_per_seq": 4},
           "checkpoint": {"dir": str(tmp_path / name), "every": 1, "keep": 20}}
    return write_config(tmp_path / f"{name}.json", cfg)


def run_id(path):
    with h5py.File(path, "r") as f:
        return json.loads(f["metadata/state"][()])["run_id"]


def test_a_fresh_run_refuses_a_used_directory_and_overwrite_moves_it_aside(tmp_path):
    cfg = config(tmp_path, "ckpt", steps=3)
    run(TRAIN, cfg, "--quiet")
    d = tmp_path / "ckpt"
    first = sorted(p.name for p in d.iterdir())
    assert first == ["ckpt_1.h5", "ckpt_2.h5", "final.h5"], first
    old_id = run_id(d / "final.h5")
    assert len(old_id) == 32 and {run_id(d / n) for n in first} == {old_id}

    p = run(TRAIN, cfg, "--quiet", check=False)
    assert p.returncode == 2, p.stdout + p.stderr
    assert (f"checkpoint.dir '{d}' holds another run's checkpoints (ckpt_1.h5, ckpt_2.h5, final.h5): "
            "continue that run with --resume, or start a new one with --overwrite") in p.stderr, p.stderr
    assert sorted(p.name for p in d.iterdir()) == first  # nothing touched

    p = run(TRAIN, cfg, "--resume", "--overwrite", check=False)
    assert p.returncode == 2 and "give one of them" in p.stderr, p.stderr

    out = run(TRAIN, cfg, "--overwrite").stdout
    aside = [p for p in d.iterdir() if p.is_dir()]
    assert len(aside) == 1 and aside[0].name.startswith("overwritten-"), list(d.iterdir())
    assert f"--overwrite: moved 3 files of the previous run from {d} to {aside[0]} (ckpt_1.h5, ckpt_2.h5, final.h5)" in out
    assert sorted(p.name for p in aside[0].iterdir()) == first and run_id(aside[0] / "final.h5") == old_id
    new_id = run_id(d / "final.h5")
    assert new_id != old_id and {run_id(d / n) for n in first} == {new_id}


def test_resume_never_picks_another_runs_checkpoint(tmp_path):
    old, new = config(tmp_path, "old"), config(tmp_path, "new")
    run(TRAIN, old, "--quiet", "--steps-this-run", 11)
    run(TRAIN, new, "--quiet", "--steps-this-run", 9, "--loss-log", tmp_path / "new.log")
    # An old run's checkpoint in the directory (copied by hand, or left by an engine before run ids).
    shutil.copy(tmp_path / "old" / "ckpt_11.h5", tmp_path / "new" / "ckpt_11.h5")
    assert run_id(tmp_path / "new" / "ckpt_11.h5") != run_id(tmp_path / "new" / "ckpt_9.h5")
    p = run(TRAIN, new, "--resume", "--steps-this-run", 1, "--loss-log", tmp_path / "new.log")
    assert "resumed from step 9" in p.stdout, p.stdout + p.stderr
    assert (f"not resuming from {tmp_path / 'new' / 'ckpt_11.h5'}: it belongs to another run (run id "
            f"{run_id(tmp_path / 'old' / 'ckpt_11.h5')})") in p.stderr, p.stderr
    # The resumed run keeps its id and may write into its directory; the steps are the new run's own.
    assert run_id(tmp_path / "new" / "ckpt_10.h5") == run_id(tmp_path / "new" / "ckpt_9.h5")
    steps = [int(line.split()[0]) for line in open(tmp_path / "new.log")]
    assert steps == list(range(1, 11)), steps
