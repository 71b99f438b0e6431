"""Corrupt checkpoints never take the process down (issue 16's trials, for checkpoint files): a
checkpoint written by the engine, damaged 40 times each way — 20 random bit flips, one random bit
flip, a truncation at a random length — and read by `bert-ckpt inspect` (read_checkpoint, the
path of bert_checkpoint_load and --resume): every trial ends in a clean error naming the file
(exit 1, "checkpoint '<file>' is corrupt"), never a signal (segfault, abort) or a hang. The seal
is checked before HDF5 parses anything, so the damage never reaches libhdf5."""
import os
import random
import subprocess

import pytest

from engine_ctypes import Session, load_library
from test_corrupt_shards import flip_bits

BUILD = os.environ.get("BERT_BUILD_DIR", "")
BERT_CKPT = os.path.join(BUILD, "src", "tools", "bert-ckpt")

pytestmark = [pytest.mark.skipif(load_library() is None, reason="libbert not found (BERT_LIB)"),
              pytest.mark.skipif(not os.path.exists(BERT_CKPT), reason="bert-ckpt is not built (BERT_BUILD_DIR)")]

CONFIG = {"model": {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
                    "intermediate_size": 32, "max_position_embeddings": 32}, "train": {"steps": 10, "micro_batch": 2, "threads": 1},
          "data": {"max_seq_length": 16, "max_predictions_per_seq": 3}}


def truncate(src, dst, rng):
    data = open(src, "rb").read()
    open(dst, "wb").write(data[:rng.randrange(len(data))])


DAMAGE = {"20 bit flips": lambda src, dst, rng: flip_bits(src, dst, rng, bits=20),
          "1 bit flip": lambda src, dst, rng: flip_bits(src, dst, rng, bits=1),
          "truncation": truncate}


def trials(src, tmp_path, damage, count=40, seed=16):
    """Counts the outcomes of `count` damaged copies of src read by bert-ckpt inspect."""
    rng = random.Random(seed)
    counts = {"loaded": 0, "clean error": 0, "signal": 0, "hang": 0, "other": 0}
    bad = []
    for t in range(count):
        path = str(tmp_path / f"damaged_{t}.h5")
        damage(src, path, rng)
        try:
            proc = subprocess.run([BERT_CKPT, "inspect", path], capture_output=True, text=True, errors="replace",
                                  timeout=30)
        except subprocess.TimeoutExpired:
            counts["hang"] += 1
            bad.append((t, "hang"))
            continue
        if proc.returncode == 0:
            counts["loaded"] += 1
            bad.append((t, "loaded"))
        elif proc.returncode == 1 and f"checkpoint '{path}' is corrupt: " in proc.stderr:
            counts["clean error"] += 1
        else:
            counts["signal" if proc.returncode < 0 else "other"] += 1
            bad.append((t, proc.returncode, proc.stderr[-300:]))
        os.remove(path)
    return counts, bad


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ckpt") / "ckpt_3.h5")
    with Session(CONFIG) as s:
        for _ in range(3):
            s.step()
        s.checkpoint(path)
    return path


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damaged_checkpoint_ends_in_a_clean_error(checkpoint, tmp_path, kind):
    counts, bad = trials(checkpoint, tmp_path, DAMAGE[kind])
    print(f"\n{kind} ({os.path.getsize(checkpoint)} bytes): {counts}")
    assert counts["clean error"] == 40, (counts, bad)
