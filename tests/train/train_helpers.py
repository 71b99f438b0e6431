"""Shared helpers of the bert-train tests: the built tools, small corpora turned into real shards
with bert-prep, configs, running bert-train, and reading its metrics log (log.metrics)."""
import json
import os
import random
import shutil
import subprocess

import pytest

BUILD = os.environ.get("BERT_BUILD_DIR", "")
TOOLS = os.path.join(BUILD, "src", "tools")
PREP = os.path.join(TOOLS, "bert-prep")
TRAIN = os.path.join(TOOLS, "bert-train")
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PYTHON_DOCS = "/usr/share/doc/python3.11/html/_sources/tutorial"  # Debian's python3.11-doc

needs_tools = pytest.mark.skipif(not (os.path.exists(PREP) and os.path.exists(TRAIN)),
                                 reason="bert-prep / bert-train are not built (BERT_BUILD_DIR)")


def run(*args, check=True, timeout=600, cwd=None):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if check and p.returncode != 0:
        raise AssertionError(f"{args[0]} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def dominant_word_corpus(path, documents=200, seed=1):
    """Text in which 90% of the words are "a" and the rest one of seven letters: a model learns
    the word's frequency within a few steps, so MLM accuracy passes MLPerf's 0.72 (and stays
    below 1.0) in seconds. Blank lines end documents."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(documents):
            for _ in range(rng.randint(3, 6)):
                words = ["a" if rng.random() < 0.9 else rng.choice("bcdefgh") for _ in range(rng.randint(8, 16))]
                f.write(" ".join(words) + " .\n")
            f.write("\n")
    return path


def make_shards(tmp_path, text, vocab_size=128, seq=32, preds=5, shards=2, eval_fraction=0.1, extra=()):
    """bert-prep vocab + shards: returns (train dir, eval dir)."""
    vocab = tmp_path / "vocab.txt"
    run(PREP, "vocab", "--size", vocab_size, "--output", vocab, text)
    out = tmp_path / "shards"
    run(PREP, "shards", "--vocab", vocab, "--output", out, "--dupe-factor", 1, "--max-seq-length", seq,
        "--max-predictions", preds, "--eval-fraction", eval_fraction, "--shards", shards, *extra, text)
    return out / "train", out / "eval"


def tiny_model(vocab_size=128, seq=32):
    return {"vocab_size": vocab_size, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 64, "max_position_embeddings": seq}


def write_config(path, config):
    path.write_text(json.dumps(config))
    return path


def read_metrics(path):
    """The LOG records of a metrics file as (step list, data) pairs; every line must be DLLogger's shape."""
    out = []
    for line in open(path):
        assert line.startswith("DLLL "), line
        record = json.loads(line[5:])
        assert {"timestamp", "datetime", "elapsedtime", "type"} <= record.keys(), record
        float(record["timestamp"]), float(record["elapsedtime"])
        if record["type"] == "LOG":
            out.append((record["step"], record["data"]))
        else:
            assert record["type"] == "METADATA" and "metric" in record, record
    return out


def evals(metrics):
    return [(step[1], data) for step, data in metrics if "eval_mlm_accuracy" in data]


def which(program):
    return shutil.which(program)
