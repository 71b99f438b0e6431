"""bert-train end to end under `mpirun -np 2` on CPU ranks: a small model on shards made from
real text (Debian's python3.11-doc tutorial) evaluates the held-out eval set periodically and
stops at a reachable target; the evaluation of one set of weights is bit-identical on 1 and 2
ranks; logs are written once (rank 0), the loss log and progress line with the world's mean loss; a
global batch the world cannot divide is refused; a sharded-optimizer run saved at 4 ranks resumes
at 2 and back at 4."""
import json
import os
import re
import subprocess

import numpy as np
import pytest

from train_helpers import (BUILD, PYTHON_DOCS, SOURCE, TRAIN, evals, make_shards, needs_tools, read_metrics, run,
                           tiny_model, which, write_config)

HERE = os.path.dirname(os.path.abspath(__file__))

MPIRUN = which("mpirun")
pytestmark = [needs_tools, pytest.mark.skipif(MPIRUN is None, reason="mpirun (Open MPI) is not installed")]
VOCAB, SEQ = 1000, 64


def mpirun(np, *args, check=True):
    return run(MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", np, TRAIN, *args, check=check, timeout=600)


def config(tmp_path, name, shards, **train):
    (tmp_path / name).mkdir()
    t = {"micro_batch": 16, "global_batch": 32, "steps": 400, "lr": 0.01, "warmup_proportion": 0.05, "log_every": 10,
         "threads": 1}
    t.update(train)
    cfg = {"model": {"vocab_size": VOCAB, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "intermediate_size": 256, "max_position_embeddings": SEQ},
           "train": t,
           "data": {"train_dir": str(shards[0]), "eval_dir": str(shards[1]), "max_seq_length": SEQ,
                    "max_predictions_per_seq": 10},
           "checkpoint": {"dir": str(tmp_path / name)},
           "log": {"metrics": str(tmp_path / f"{name}.json"), "mlperf": str(tmp_path / f"{name}.mllog")}}
    return write_config(tmp_path / f"{name}.cfg.json", cfg)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The periodic-evaluation run on two ranks, stopped at its target."""
    if not os.path.isdir(PYTHON_DOCS):
        pytest.skip(f"{PYTHON_DOCS} (python3.11-doc) is absent")
    tmp = tmp_path_factory.mktemp("dist")
    shards = make_shards(tmp, PYTHON_DOCS, vocab_size=VOCAB, seq=SEQ, preds=10, shards=4,
                         extra=("--documents", "file", "--sentences", "split", "--dupe-factor", 2))
    p = mpirun(2, config(tmp, "run", shards, eval_every=10, target_mlm_accuracy=0.08), "--quiet")
    return tmp, shards, p


def test_two_ranks_evaluate_periodically_and_stop_at_the_target(trained):
    tmp, _, p = trained
    assert "target mlm accuracy 0.0800 reached at step" in p.stdout, p.stdout + p.stderr
    assert p.stdout.count("done:") == 1  # rank 0 prints, the other rank is silent
    records = evals(read_metrics(tmp / "run.json"))
    steps = [s for s, _ in records]
    assert steps == list(range(10, steps[-1] + 1, 10)) and steps[-1] < 400, steps
    accuracies = [d["eval_mlm_accuracy"] for _, d in records]
    assert accuracies[-1] >= 0.08 and max(accuracies[:-1]) < 0.08 and accuracies[-1] > accuracies[0], accuracies
    assert (tmp / "run" / "final.h5").exists()
    keys = [json.loads(line[9:])["key"] for line in open(tmp / "run.mllog")]
    assert keys.count("run_start") == 1 and keys.count("run_stop") == 1  # rank 0 alone writes the log


def test_evaluation_is_the_same_on_one_and_two_ranks(trained):
    tmp, shards, _ = trained
    results = {}
    for np in (1, 2):
        # lr 0: the one training step leaves the loaded weights unchanged, so both evaluate the same model.
        cfg = config(tmp, f"eval{np}", shards, steps=1, lr=0.0, global_batch=32,
                     init_checkpoint=str(tmp / "run" / "final.h5"))
        mpirun(np, cfg, "--quiet")
        (_, data), = evals(read_metrics(tmp / f"eval{np}.json"))
        results[np] = {k: v for k, v in data.items() if k != "eval_seconds"}
    assert results[1] == results[2]  # exactly: the same batches, summed in the same order
    assert results[1]["eval_sequences"] > 2 * 16


def test_a_global_batch_the_world_cannot_divide_is_refused(trained):
    tmp, shards, _ = trained
    p = mpirun(2, config(tmp, "bad", shards, global_batch=48), check=False)
    assert p.returncode != 0
    assert "'train.global_batch' = 48 is not a multiple of train.micro_batch (16) x world size (2) = 32" in p.stderr


def test_two_phases_on_two_ranks_report_once(tmp_path):
    configs = []
    for phase, steps in ((1, 3), (2, 2)):
        (tmp_path / f"p{phase}").mkdir()
        cfg = {"model": tiny_model(), "train": {"micro_batch": 2, "steps": steps, "phase": phase, "threads": 1},
               "data": {"max_seq_length": 32, "max_predictions_per_seq": 4},
               "checkpoint": {"dir": str(tmp_path / f"p{phase}")}}
        configs.append(write_config(tmp_path / f"p{phase}.json", cfg))
    out = mpirun(2, *configs, "--quiet").stdout
    assert out.count("== phase 1 of 2") == 1 and out.count("== phase 2 of 2") == 1 and out.count("done:") == 2, out
    out = mpirun(2, *configs, "--quiet", "--resume").stdout  # a finished run: nothing trained, said once per phase
    assert out.count("phase 1 of 2") == 1 and out.count("phase 2 of 2") == 1 and out.count("already complete") == 2, out
    assert "done:" not in out, out


def test_loss_log_and_progress_line_hold_the_world_mean_once(tmp_path):
    """bert-train --loss-log under mpirun -np 2: one line per step, from rank 0, holding the mean of
    the two ranks' losses (each rank's own losses come from the same session through the Python
    binding); the progress line averages those world means."""
    native = os.path.join(BUILD, "tests", "bindings")
    if not os.path.isdir(native) or not any(f.startswith("_native") for f in os.listdir(native)):
        pytest.skip("the Python binding's extension is not built")
    (tmp_path / "ckpt").mkdir()
    cfg = write_config(tmp_path / "mean.json", {
        "model": tiny_model(), "train": {"micro_batch": 4, "steps": 6, "lr": 0.01, "threads": 1, "log_every": 2},
        "data": {"max_seq_length": 32, "max_predictions_per_seq": 4}, "checkpoint": {"dir": str(tmp_path / "ckpt")}})
    p = mpirun(2, cfg, "--loss-log", tmp_path / "loss.log")
    lines = open(tmp_path / "loss.log").read().splitlines()
    assert [int(line.split()[0]) for line in lines] == [1, 2, 3, 4, 5, 6], lines
    logged = [np.float32(line.split()[1]) for line in lines]

    env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "bindings", "python"), BERTENGINE_NATIVE_DIR=native)
    subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "PYTHONPATH", "-x",
                    "BERTENGINE_NATIVE_DIR", "/usr/bin/python3", os.path.join(HERE, "rank_losses.py"), str(cfg), "6",
                    str(tmp_path / "rank")], check=True, env=env, capture_output=True, timeout=300)
    ranks = [[np.float32(v) for v in open(tmp_path / f"rank.{r}").read().split()] for r in (0, 1)]
    mean = [(a + b) / np.float32(2) for a, b in zip(*ranks)]  # float32 sum then / world, as MPI does
    assert any(a != b for a, b in zip(*ranks))  # the ranks' losses differ, so the mean is not one rank's
    assert logged == mean, (logged, ranks)
    # The progress line: the mean over the log_every window so far (every step where stdout is a terminal,
    # as mpirun's is).
    progress = {int(s): shown for s, shown in re.findall(r"step (\d)/6  loss (\S+)", p.stdout)}
    assert {2, 4, 6} <= progress.keys(), p.stdout
    for s, shown in progress.items():
        window = [float(m) for m in mean[(s - 1) // 2 * 2:s]]
        assert shown == f"{sum(window) / len(window):.4f}", (s, shown, mean)


def test_a_sharded_run_of_four_ranks_resumes_on_two_and_back(tmp_path):
    """dist.shard_optimizer at 4 ranks stopped at step 4, resumed at 2 ranks to step 8, then at 4
    ranks again: the checkpoints hold the whole optimizer state and the data position moves to the
    new world size (tests/unit/test_shard_source.cpp checks which samples follow)."""
    if not os.path.isdir(PYTHON_DOCS):
        pytest.skip(f"{PYTHON_DOCS} (python3.11-doc) is absent")
    shards = make_shards(tmp_path, PYTHON_DOCS, vocab_size=VOCAB, seq=SEQ, preds=10, shards=4,
                         extra=("--documents", "file", "--sentences", "split"))
    (tmp_path / "ckpt").mkdir()
    cfg = {"model": {"vocab_size": VOCAB, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "intermediate_size": 256, "max_position_embeddings": SEQ},
           "train": {"micro_batch": 4, "global_batch": 16, "steps": 12, "lr": 0.01, "threads": 1, "log_every": 1},
           "data": {"train_dir": str(shards[0]), "max_seq_length": SEQ, "max_predictions_per_seq": 10},
           "dist": {"shard_optimizer": True},
           "checkpoint": {"dir": str(tmp_path / "ckpt")}}
    path = write_config(tmp_path / "sharded.json", cfg)
    out = mpirun(4, path, "--steps-this-run", 4, "--loss-log", tmp_path / "w4.log").stdout
    assert "stopped after 4 steps of this run at step 4/12" in out, out
    p = mpirun(2, path, "--resume", "--steps-this-run", 4, "--loss-log", tmp_path / "w2.log")
    assert "resumed from step 4" in p.stdout, p.stdout + p.stderr
    assert "was written by 4 ranks, this run has 2: the data continues from the first shard file" in p.stderr, p.stderr
    p = mpirun(4, path, "--resume", "--loss-log", tmp_path / "w4b.log")
    assert "resumed from step 8" in p.stdout and "was written by 2 ranks, this run has 4" in p.stderr, p.stdout + p.stderr
    losses = [float(line.split()[1]) for name in ("w4", "w2", "w4b") for line in open(tmp_path / f"{name}.log")]
    assert len(losses) == 12 and all(np.isfinite(losses)), losses
    # The state carried over: training goes on from where it was, not from fresh moments.
    assert np.mean(losses[-4:]) < np.mean(losses[:4]), losses
