"""The MLPerf log (log.mlperf) of a short run that reaches the closed-division BERT target
(0.720) passes the official compliance checker: the mlperf-logging package from PyPI, installed
into a venv in the build directory (skipped when it cannot be installed), run as
`python -m mlperf_logging.compliance_checker --usage training --ruleset R LOG` with R the latest
training ruleset whose closed division still lists BERT, and with ruleset 1.1.0 (the MLPerf v1.1
era, which checks the logged tensors are BERT-large's). A run that misses the target is logged as
aborted and fails the checker."""
import glob
import json
import os
import re
import subprocess
import sys

import pytest

from train_helpers import BUILD, TRAIN, dominant_word_corpus, make_shards, needs_tools, run, tiny_model, write_config

pytestmark = needs_tools
VENV = os.path.join(BUILD or ".", "mlperf-logging-venv")


@pytest.fixture(scope="module")
def checker():
    """(python of the venv, ruleset) for the compliance checker."""
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        for base in ("/usr/bin/python3", sys.executable):
            if subprocess.run([base, "-m", "venv", VENV], capture_output=True).returncode == 0:
                break
        else:
            pytest.skip("cannot create a Python venv (Debian: python3-venv)")
    if subprocess.run([python, "-c", "import mlperf_logging"], capture_output=True).returncode != 0:
        p = subprocess.run([python, "-m", "pip", "install", "-q", "mlperf-logging"], capture_output=True, text=True,
                           timeout=600)
        if p.returncode != 0:
            pytest.skip(f"cannot install mlperf-logging from PyPI: {p.stderr.strip()[-300:]}")
    package = subprocess.run([python, "-c", "import mlperf_logging, os; print(os.path.dirname(mlperf_logging.__file__))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    rulesets = []
    for common in glob.glob(os.path.join(package, "compliance_checker", "training_*", "closed_common.yaml")):
        if "'bert'" in open(common).read():
            version = os.path.basename(os.path.dirname(common))[len("training_"):]
            rulesets.append(tuple(int(x) for x in version.split(".")))
    assert rulesets, "no training ruleset of mlperf-logging lists BERT"
    return python, ".".join(map(str, max(rulesets)))


def check(checker, log, tmp_path, ruleset=None):
    python, latest = checker
    ruleset = ruleset or latest
    return subprocess.run([python, "-m", "mlperf_logging.compliance_checker", "--usage", "training", "--ruleset", ruleset,
                           "--log_output", str(tmp_path / "checker.log"), str(log)],
                          capture_output=True, text=True, timeout=300)


def mlperf_run(tmp_path, steps, name, expect_status=0, parts=((),), model=None):
    """bert-train on a config of `steps` steps, once per entry of `parts` (the extra arguments of
    each invocation); returns the last one's stdout, the log and its events."""
    if not (tmp_path / "corpus.txt").exists():
        make_shards(tmp_path, dominant_word_corpus(tmp_path / "corpus.txt"))
    train_dir, eval_dir = tmp_path / "shards" / "train", tmp_path / "shards" / "eval"
    (tmp_path / name).mkdir(exist_ok=True)
    log = tmp_path / f"{name}.log"
    cfg = {"model": model or tiny_model(),
           "train": {"micro_batch": 16, "global_batch": 32, "steps": steps, "lr": 0.02, "warmup_proportion": 0.05,
                     "threads": 1, "eval_every_samples": 160, "target_mlm_accuracy": 0.72},
           "data": {"train_dir": str(train_dir), "eval_dir": str(eval_dir), "max_seq_length": 32,
                    "max_predictions_per_seq": 5},
           "checkpoint": {"dir": str(tmp_path / name)},
           "log": {"mlperf": str(log), "submission_org": "bertengine-tests", "submission_platform": "cpu"}}
    config = write_config(tmp_path / f"{name}.json", cfg)
    for extra in parts:
        p = run(TRAIN, config, "--quiet", *extra, check=False)
    assert p.returncode == expect_status, p.stdout + p.stderr
    out = p.stdout
    events = [json.loads(line[len(":::MLLOG "):]) for line in open(log)]
    return out, log, events


def values(events, key):
    return [e["value"] for e in events if e["key"] == key]


def test_a_run_that_reaches_the_target_passes_the_checker(checker, tmp_path):
    out, log, events = mlperf_run(tmp_path, 200, "reached")
    assert "target mlm accuracy 0.7200 reached" in out, out
    assert values(events, "submission_benchmark") == ["bert"]
    assert values(events, "global_batch_size") == [32] and values(events, "gradient_accumulation_steps") == [2]
    assert values(events, "opt_base_learning_rate") == [0.02] and values(events, "opt_learning_rate_training_steps") == [200]
    accuracy = values(events, "eval_accuracy")
    assert accuracy[-1] >= 0.72 and all(a < 0.72 for a in accuracy[:-1])
    epochs = [e["metadata"]["epoch_num"] for e in events if e["key"] == "eval_accuracy"]
    assert epochs == list(range(160, 160 * len(epochs) + 1, 160)), epochs  # eval_every_samples: every 5 steps
    stop = [e for e in events if e["key"] == "run_stop"]
    assert len(stop) == 1 and stop[0]["metadata"]["status"] == "success"
    assert [e["event_type"] for e in events if e["key"] in ("run_start", "run_stop")] == ["INTERVAL_START", "INTERVAL_END"]
    p = check(checker, log, tmp_path)
    assert p.returncode == 0 and "SUCCESS" in p.stdout + p.stderr, p.stdout + p.stderr


def test_a_bert_large_shaped_run_passes_the_seeds_era_ruleset_too(checker, tmp_path):
    """Ruleset 1.1.0 (the MLPerf v1.1 era) also needs opt_epsilon and a weights_initialization
    event naming each of BERT-large's 398 tensors by its TensorFlow name: a model of BERT-large's
    24 layers (narrow, so it trains here in seconds) gives exactly that list."""
    model = dict(tiny_model(), num_hidden_layers=24)
    out, log, events = mlperf_run(tmp_path, 300, "large_shaped", model=model)
    assert "target mlm accuracy 0.7200 reached" in out, out
    tensors = [e["metadata"]["tensor"] for e in events if e["key"] == "weights_initialization"]
    assert len(tensors) == len(set(tensors)) == 398 and "bert/encoder/layer_23/output/LayerNorm/gamma" in tensors
    keys = [e["key"] for e in events]
    assert keys.index("init_start") < keys.index("weights_initialization") < keys.index("init_stop")
    for ruleset in ("1.1.0", checker[1]):
        p = check(checker, log, tmp_path, ruleset)
        assert p.returncode == 0 and "SUCCESS" in p.stdout + p.stderr, (ruleset, p.stdout + p.stderr)
    small = mlperf_run(tmp_path, 200, "small")[1]  # one layer: not BERT-large's tensors, 1.1.0 says so
    p = check(checker, small, tmp_path, "1.1.0")
    assert p.returncode != 0 and "initialized_tensors" in p.stdout + p.stderr, p.stdout + p.stderr


def test_a_split_run_keeps_one_log_that_passes_the_checker(checker, tmp_path):
    """--steps-this-run, then --resume twice: one header, one run_start and run_stop, the blocks
    split where the run was; then a fresh run (--overwrite) starts a new log, the old one moved aside."""
    out, log, events = mlperf_run(tmp_path, 200, "split", parts=(("--steps-this-run", 3), ("--resume", "--steps-this-run", 4),
                                                                 ("--resume",)))
    assert "target mlm accuracy 0.7200 reached" in out, out
    keys = [e["key"] for e in events]
    for key in ("init_start", "init_stop", "run_start", "run_stop", "submission_benchmark", "global_batch_size"):
        assert keys.count(key) == 1, (key, keys)
    assert keys.count("block_start") == keys.count("block_stop"), keys
    p = check(checker, log, tmp_path)
    assert p.returncode == 0 and "SUCCESS" in p.stdout + p.stderr, p.stdout + p.stderr
    out, log, events = mlperf_run(tmp_path, 2, "split", expect_status=3, parts=(("--overwrite",),))
    assert "log.mlperf: the previous run's log was moved to" in out, out
    assert [e["key"] for e in events].count("init_start") == 1
    aside = [f for f in os.listdir(tmp_path) if f.startswith("split.log.")]
    assert len(aside) == 1 and check(checker, tmp_path / aside[0], tmp_path).returncode == 0, aside


def test_init_start_precedes_building_the_model(tmp_path):
    """init_start is logged before the session exists: a config the session refuses leaves a log
    holding init_start and nothing after it."""
    (tmp_path / "ckpt").mkdir()
    log = tmp_path / "bad.log"
    cfg = {"model": tiny_model(), "train": {"steps": 2, "micro_batch": 0}, "checkpoint": {"dir": str(tmp_path / "ckpt")},
           "log": {"mlperf": str(log)}}
    p = run(TRAIN, write_config(tmp_path / "bad.json", cfg), check=False)
    assert p.returncode != 0 and "train.micro_batch" in p.stderr, p.stderr
    assert [json.loads(line[len(":::MLLOG "):])["key"] for line in open(log)] == ["cache_clear", "init_start"]


def test_a_run_that_misses_the_target_is_aborted_and_fails_the_checker(checker, tmp_path):
    out, log, events = mlperf_run(tmp_path, 2, "missed", expect_status=3)  # bert-train's documented code
    assert "not reached" in out, out
    assert [e["metadata"]["status"] for e in events if e["key"] == "run_stop"] == ["aborted"]
    p = check(checker, log, tmp_path)
    assert p.returncode != 0 and re.search(r"eval_accuracy", p.stdout + p.stderr), p.stdout + p.stderr
