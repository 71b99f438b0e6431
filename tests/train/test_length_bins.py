"""Samsung's length bins end to end: `bert-prep bins` splits real shards into the four bins
(checked with h5py: every sequence kept once, each in its bin), `bert-prep eval-set` draws a
fixed number of held-out sequences, and bert-train with data.length_bins under mpirun -np 2
draws the same bin on both ranks at every step (the checkpoint's per-rank cursors count the
batches taken from each bin)."""
import json
import os

import h5py
import pytest

from train_helpers import (PREP, TRAIN, dominant_word_corpus, make_shards, needs_tools, run, tiny_model, which,
                           write_config)

pytestmark = needs_tools
SEQ, PREDS = 32, 5


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bins")
    return tmp, make_shards(tmp, dominant_word_corpus(tmp / "corpus.txt", documents=300), seq=SEQ, preds=PREDS,
                            shards=3)


def rows(directory):
    """(length, input_ids) of every sequence of the DLE shards in a directory."""
    out = []
    for name in sorted(os.listdir(directory)):
        with h5py.File(os.path.join(directory, name), "r") as f:
            for ids, mask in zip(f["input_ids"][:], f["input_mask"][:]):
                n = int(mask.sum())
                out.append((n, tuple(int(x) for x in ids[:n])))
    return out


def test_bins_split_every_sequence_into_its_length_bin(shards):
    tmp, (train, _) = shards
    out = run(PREP, "bins", "--output", tmp / "binned", "--max-seq-length", SEQ, "--max-predictions", PREDS, train).stdout
    assert "3 shards split into 4 length bins" in out, out
    seen = []
    for b in range(4):
        d = tmp / "binned" / f"bin_{b}"
        if not d.exists():
            continue
        for length, ids in rows(d):
            assert b * SEQ // 4 < length <= (b + 1) * SEQ // 4, (b, length)
            seen.append((length, ids))
    assert sorted(seen) == sorted(rows(train))
    assert sum(1 for b in range(4) if list((tmp / "binned").glob(f"bin_{b}/*"))) >= 2


def test_eval_set_draws_a_fixed_number_of_held_out_sequences(shards):
    tmp, (train, _) = shards
    out = run(PREP, "eval-set", "--samples", 50, "--output", tmp / "eval50" / "eval.hdf5", "--max-seq-length", SEQ,
              "--max-predictions", PREDS, train).stdout
    assert "50 sequences" in out, out
    picked = rows(tmp / "eval50")
    everything = rows(train)
    assert len(picked) == 50 and len(set(picked)) == len(picked) and set(picked) <= set(everything)
    assert picked != everything[:50]  # drawn at random, not the first ones
    p = run(PREP, "eval-set", "--samples", 50, "--output", tmp / "eval50" / "eval.hdf5", train, check=False)
    assert p.returncode != 0 and "exists (use --overwrite)" in p.stderr


@pytest.mark.skipif(which("mpirun") is None, reason="mpirun (Open MPI) is not installed")
def test_two_ranks_draw_the_same_bin_at_every_step(shards):
    tmp, (train, eval_dir) = shards
    binned = tmp / "binned_dist"
    run(PREP, "bins", "--output", binned, "--max-seq-length", SEQ, "--max-predictions", PREDS, train)
    (tmp / "ck").mkdir()
    cfg = {"model": tiny_model(), "train": {"micro_batch": 4, "accumulation_steps": 2, "steps": 12, "threads": 1},
           "data": {"train_dir": str(binned), "length_bins": True, "max_seq_length": SEQ,
                    "max_predictions_per_seq": PREDS},
           "checkpoint": {"dir": str(tmp / "ck")}}
    run(which("mpirun"), "--allow-run-as-root", "--oversubscribe", "-np", 2, TRAIN, write_config(tmp / "bins.json", cfg),
        "--quiet")
    with h5py.File(tmp / "ck" / "final.h5", "r") as f:
        cursors = [json.loads(c) for c in json.loads(f["metadata/state"][()])["data_cursors"]]
    assert len(cursors) == 2 and cursors[0]["kind"] == "length_bins"
    assert cursors[0]["draws"] == cursors[1]["draws"] == 24
    assert cursors[0]["taken"] == cursors[1]["taken"] and sum(1 for t in cursors[0]["taken"] if t) >= 2
