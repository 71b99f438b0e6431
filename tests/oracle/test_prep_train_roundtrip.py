"""Round trip of the data pipeline: `bert-prep vocab` and `bert-prep shards` on real text
(../shared/data/wikitext2-valid.txt; generated text when that is absent), then `bert-train` on
the shards through the session's own HDF5 loader: the MLM loss must fall."""
import json
import os
import random
import subprocess

import pytest

BUILD = os.environ.get("BERT_BUILD_DIR", "")
PREP = os.path.join(BUILD, "src", "tools", "bert-prep")
TRAIN = os.path.join(BUILD, "src", "tools", "bert-train")
WIKITEXT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "wikitext2-valid.txt")
pytestmark = pytest.mark.skipif(not (os.path.exists(PREP) and os.path.exists(TRAIN)),
                                reason="bert-prep / bert-train are not built (BERT_BUILD_DIR)")


def corpus(tmp_path):
    if os.path.exists(WIKITEXT):
        return WIKITEXT
    rng = random.Random(1)
    words = [f"w{i}" for i in range(300)]
    path = tmp_path / "generated.txt"
    with open(path, "w") as f:
        for _ in range(400):
            for _ in range(rng.randint(3, 8)):
                start = rng.randrange(len(words) - 12)
                f.write(" ".join(words[start:start + rng.randint(5, 12)]) + " .\n")
            f.write("\n")
    return str(path)


def test_prep_then_train_mlm_loss_falls(tmp_path):
    text = corpus(tmp_path)
    run = lambda *a: subprocess.run([*map(str, a)], check=True, capture_output=True, text=True, timeout=600)
    run(PREP, "vocab", "--size", 2000, "--output", tmp_path / "vocab.txt", text)
    run(PREP, "shards", "--vocab", tmp_path / "vocab.txt", "--output", tmp_path / "shards", "--dupe-factor", 1,
        "--max-seq-length", 64, "--max-predictions", 10, "--sentences", "split", text)
    config = {"model": {"vocab_size": 2000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                        "intermediate_size": 256},
              "train": {"micro_batch": 32, "steps": 60, "lr": 0.01, "warmup_proportion": 0.1, "log_every": 10},
              "data": {"train_dir": str(tmp_path / "shards" / "train"), "eval_dir": str(tmp_path / "shards" / "eval"),
                       "max_seq_length": 64, "max_predictions_per_seq": 10}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    log = tmp_path / "loss.log"
    out = run(TRAIN, tmp_path / "config.json", "--output", tmp_path / "final.h5", "--loss-log", log).stdout
    losses = [float(line.split()[1]) for line in open(log)]
    assert len(losses) == 60
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert last < first - 1.0, f"loss did not fall: {first:.3f} -> {last:.3f}\n{out}"
    assert "eval:" in out and (tmp_path / "final.h5").exists()
