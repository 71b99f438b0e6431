"""Shard reader oracle: shards written with h5py in each format (DLE fixed-width, MLPerf
variable-length, MLPerf packed) are decoded by the C++ reader (tests/unit/dump_shard) and
compared field by field with what Python wrote, including the masked-LM labels rebuilt by DLE's
rule. Also: the per-epoch file order equals DLE's random.Random(seed + epoch).shuffle, and a
source over h5py-written shards delivers every sample once per epoch."""
import json
import os
import random
import subprocess

import pytest

h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")

BUILD = os.environ.get("BERT_BUILD_DIR")
DUMP = os.path.join(BUILD, "tests", "unit", "dump_shard") if BUILD else None
pytestmark = pytest.mark.skipif(not DUMP or not os.path.exists(DUMP), reason="BERT_BUILD_DIR/tests/unit/dump_shard not built")

VOCAB = 30522
SEQ = 64
PRED = 10


def run_dump(*args, ok=True):
    proc = subprocess.run([DUMP, *map(str, args)], capture_output=True, text=True, timeout=120)
    if ok:
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)
    assert proc.returncode == 2, proc.stdout
    return proc.stderr


def make_sequences(rng, count, max_len=SEQ, max_pred=PRED):
    """Random sequences: dicts of ids, seg, pos (sorted, in [1, len)), mids, nsl."""
    seqs = []
    for _ in range(count):
        length = int(rng.integers(3, max_len + 1))
        ids = rng.integers(0, VOCAB, size=length).astype(np.int64)
        split = int(rng.integers(1, length))
        seg = np.array([0] * split + [1] * (length - split), dtype=np.int64)
        n_pred = int(rng.integers(0, min(max_pred, length - 1) + 1))
        pos = np.sort(rng.choice(np.arange(1, length), size=n_pred, replace=False)).astype(np.int64)
        mids = rng.integers(0, VOCAB, size=n_pred).astype(np.int64)
        seqs.append(dict(ids=ids, seg=seg, pos=pos, mids=mids, nsl=int(rng.integers(0, 2))))
    return seqs


def expected_row(seq):
    """What a padded batch row must hold for this sequence (DLE layout and label rule)."""
    length, n_pred = len(seq["ids"]), len(seq["pos"])
    row = dict(
        input_ids=np.zeros(SEQ, np.int64), segment_ids=np.zeros(SEQ, np.int64), input_mask=np.zeros(SEQ, np.int64),
        masked_lm_positions=np.zeros(PRED, np.int64), masked_lm_ids=np.zeros(PRED, np.int64))
    row["input_ids"][:length] = seq["ids"]
    row["segment_ids"][:length] = seq["seg"]
    row["input_mask"][:length] = 1
    row["masked_lm_positions"][:n_pred] = seq["pos"]
    row["masked_lm_ids"][:n_pred] = seq["mids"]
    row["next_sentence_label"] = seq["nsl"]
    return row


def dle_labels(positions, ids):
    """DLE's pretraining_dataset.__getitem__: labels at positions before the first 0, else -1."""
    labels = np.full(SEQ, -1, np.int64)
    zeros = np.nonzero(positions == 0)[0]
    index = zeros[0] if len(zeros) else len(positions)
    labels[positions[:index]] = ids[:index]
    return labels


def compare(decoded, seqs):
    assert len(decoded["samples"]) == len(seqs)
    for i, (got, seq) in enumerate(zip(decoded["samples"], seqs)):
        want = expected_row(seq)
        for key in ("input_ids", "segment_ids", "input_mask", "masked_lm_positions", "masked_lm_ids"):
            assert np.array_equal(np.array(got[key]), want[key]), (i, key)
        assert got["next_sentence_label"] == want["next_sentence_label"], i
        labels = np.full(SEQ, -1, np.int64)
        labels[seq["pos"]] = seq["mids"]
        assert np.array_equal(np.array(got["masked_lm_labels"]), labels), (i, "masked_lm_labels")


def write_dle(path, seqs, junk_after_first_zero=False):
    n = len(seqs)
    arrays = dict(input_ids=np.zeros((n, SEQ), "i4"), input_mask=np.zeros((n, SEQ), "i1"),
                  segment_ids=np.zeros((n, SEQ), "i1"), masked_lm_positions=np.zeros((n, PRED), "i4"),
                  masked_lm_ids=np.zeros((n, PRED), "i4"), next_sentence_labels=np.zeros(n, "i1"))
    for i, s in enumerate(seqs):
        row = expected_row(s)
        for key in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids"):
            arrays[key][i] = row[key]
        if junk_after_first_zero and len(s["pos"]) + 1 < PRED:
            arrays["masked_lm_positions"][i, len(s["pos"]) + 1] = 5  # ignored by DLE's rule
            arrays["masked_lm_ids"][i, len(s["pos"]) + 1] = 77
        arrays["next_sentence_labels"][i] = s["nsl"]
    with h5py.File(path, "w") as f:
        for key, value in arrays.items():
            f.create_dataset(key, data=value, dtype=value.dtype, compression="gzip")
    return arrays


def write_mlperf(path, seqs):
    n = len(seqs)
    with h5py.File(path, "w") as f:
        for key, field, dt in (("input_ids", "ids", "int16"), ("segment_ids", "seg", "int8"),
                               ("masked_lm_positions", "pos", "int16"), ("masked_lm_ids", "mids", "int16")):
            d = f.create_dataset(key, (n,), dtype=h5py.vlen_dtype(np.dtype(dt)))
            for i, s in enumerate(seqs):
                d[i] = s[field].astype(dt)
        f.create_dataset("next_sentence_labels", data=np.array([s["nsl"] for s in seqs], "int8"), dtype="i1")


def write_packed(path, seqs, rng):
    rows, i = [], 0
    while i < len(seqs):
        k = int(rng.integers(1, 4))
        rows.append(seqs[i:i + k])
        i += k
    n = len(rows)
    with h5py.File(path, "w") as f:
        ds = {key: f.create_dataset(key, (n,), dtype=h5py.vlen_dtype(np.dtype(dt))) for key, dt in (
            ("input_ids", "int16"), ("segment_ids", "int8"), ("masked_lm_positions", "int16"),
            ("masked_lm_ids", "int16"), ("next_sentence_labels", "int8"), ("packed_input_len", "int16"),
            ("packed_masked_lm_len", "int16"))}
        for r, group in enumerate(rows):
            offsets = np.cumsum([0] + [len(s["ids"]) for s in group])[:-1]
            ds["input_ids"][r] = np.concatenate([s["ids"] for s in group]).astype("int16")
            ds["segment_ids"][r] = np.concatenate([s["seg"] for s in group]).astype("int8")
            ds["masked_lm_positions"][r] = np.concatenate(
                [s["pos"] + o for s, o in zip(group, offsets)]).astype("int16")
            ds["masked_lm_ids"][r] = np.concatenate([s["mids"] for s in group]).astype("int16")
            ds["next_sentence_labels"][r] = np.array([s["nsl"] for s in group], "int8")
            ds["packed_input_len"][r] = np.array([len(s["ids"]) for s in group], "int16")
            ds["packed_masked_lm_len"][r] = np.array([len(s["pos"]) for s in group], "int16")
    return n


def read(path, fmt="auto"):
    return run_dump("read", path, "--seq", SEQ, "--pred", PRED, "--vocab", VOCAB, "--format", fmt)


def test_dle_shard_decodes_every_field(tmp_path):
    rng = np.random.default_rng(1)
    seqs = make_sequences(rng, 150)
    path = str(tmp_path / "dle.hdf5")
    arrays = write_dle(path, seqs, junk_after_first_zero=True)
    decoded = read(path)
    assert decoded["format"] == "dle" and decoded["rows"] == 150
    compare(decoded, seqs)
    for got, pos, ids in zip(decoded["samples"], arrays["masked_lm_positions"], arrays["masked_lm_ids"]):
        assert np.array_equal(np.array(got["masked_lm_labels"]), dle_labels(pos.astype(np.int64), ids.astype(np.int64)))


def test_mlperf_vlen_shard_decodes_every_field(tmp_path):
    rng = np.random.default_rng(2)
    seqs = make_sequences(rng, 120)
    for s in seqs:
        s["ids"] %= 32768  # int16 storage
        s["mids"] %= 32768
    path = str(tmp_path / "part_00000")
    write_mlperf(path, seqs)
    decoded = read(path)
    assert decoded["format"] == "mlperf" and decoded["rows"] == 120
    compare(decoded, seqs)


def test_packed_shard_is_unpacked_into_sequences(tmp_path):
    rng = np.random.default_rng(3)
    seqs = make_sequences(rng, 100, max_len=SEQ // 3)
    path = str(tmp_path / "packed.hdf5")
    rows = write_packed(path, seqs, rng)
    decoded = read(path)
    assert decoded["format"] == "mlperf_packed" and decoded["rows"] == rows < 100
    compare(decoded, seqs)


def test_file_order_and_rank_rule_match_dle(tmp_path):
    files = sorted(f"part_{i:05d}.hdf5" for i in range(13))
    for seed, epoch, world in ((12345, 0, 4), (12345, 3, 4), (7, 1, 13), (99, 2, 5)):
        shuffled = list(files)
        random.Random(seed + epoch).shuffle(shuffled)  # run_pretraining.py
        order = [files.index(f) for f in shuffled]
        for rank in range(world):
            plan = run_dump("plan", "--files", 13, "--seed", seed, "--epoch", epoch, "--rank", rank, "--world", world)
            assert plan["order"] == order
            n_slots = -(-13 // world)
            assert [s["file"] for s in plan["slots"]] == [order[(f_id * world + rank) % 13] for f_id in range(n_slots)]


def philox4x32_10(ctr, key):
    """Philox4x32-10 (Salmon et al. 2011), as in src/core/philox.h."""
    m = 0xFFFFFFFF
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & m, p1 & m, ((p0 >> 32) ^ c3 ^ k1) & m, p0 & m
        k0, k1 = (k0 + 0x9E3779B9) & m, (k1 + 0xBB67AE85) & m
    return [c0, c1, c2, c3]


def reference_sample_shuffle(n, seed, epoch, file):
    """The documented sample shuffle: Fisher-Yates drawing j uniformly in [0, i] with Lemire's
    multiply-and-reject from the Philox stream (seed, step=epoch, tensor_id=file)."""
    words = []

    def word():
        if not words:
            k = word.count
            words.extend(reversed(philox4x32_10(
                [k & 0xFFFFFFFF, k >> 32, file, epoch & 0xFFFFFFFF], [seed & 0xFFFFFFFF, seed >> 32])))
            word.count += 1
        return words.pop()
    word.count = 0

    def below(m):
        prod = word() * m
        if prod & 0xFFFFFFFF < m:
            threshold = (-m % (1 << 32)) % m
            while prod & 0xFFFFFFFF < threshold:
                prod = word() * m
        return prod >> 32

    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = below(i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def test_sample_shuffle_matches_documented_algorithm():
    for n, seed, epoch, file in ((1, 0, 0, 0), (50, 12345, 0, 3), (777, 2**40 + 5, 7, 11)):
        assert run_dump("shuffle", "--n", n, "--seed", seed, "--epoch", epoch, "--file", file) == \
            reference_sample_shuffle(n, seed, epoch, file)


def test_source_epoch_covers_h5py_shards_once(tmp_path):
    rng = np.random.default_rng(4)
    all_tags = []
    for f in range(3):
        seqs = make_sequences(rng, 40)
        for i, s in enumerate(seqs):
            s["ids"][1] = f * 100 + i  # tag
            all_tags.append(f * 100 + i)
        write_dle(str(tmp_path / f"shard_{f}.hdf5"), seqs)
    batches = run_dump("source", str(tmp_path), "--seq", SEQ, "--pred", PRED, "--vocab", VOCAB, "--batch", 8,
                       "--batches", 15, "--seed", 3)
    tags = [row["input_ids"][1] for b in batches for row in b["rows"]]
    assert sorted(tags) == sorted(all_tags)
    assert batches[-1]["cursor"]["epoch"] == 1 and batches[-1]["cursor"]["sample"] == 0


def test_bad_shards_name_file_and_key(tmp_path):
    rng = np.random.default_rng(5)
    seqs = make_sequences(rng, 10)
    path = str(tmp_path / "bad.hdf5")

    write_dle(path, seqs)
    with h5py.File(path, "a") as f:
        data = f["input_ids"][:].astype("f4")
        del f["input_ids"]
        f.create_dataset("input_ids", data=data)
    msg = run_dump("read", path, "--seq", SEQ, "--pred", PRED, ok=False)
    assert path in msg and "input_ids" in msg and "float" in msg

    write_dle(path, seqs)
    with h5py.File(path, "a") as f:
        f["input_ids"][3, 1] = VOCAB
    msg = run_dump("read", path, "--seq", SEQ, "--pred", PRED, "--vocab", VOCAB, ok=False)
    assert path in msg and "input_ids" in msg and "sample 3" in msg and str(VOCAB) in msg

    write_dle(path, seqs)
    with h5py.File(path, "a") as f:
        del f["next_sentence_labels"]
    msg = run_dump("read", path, "--seq", SEQ, "--pred", PRED, ok=False)
    assert path in msg and "next_sentence_labels" in msg

    write_dle(path, seqs)
    msg = run_dump("read", path, "--seq", SEQ, "--pred", PRED - 1, ok=False)
    assert path in msg and "masked_lm_positions" in msg and "max_predictions_per_seq" in msg

    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    msg = run_dump("read", path, "--seq", SEQ, "--pred", PRED, ok=False)
    assert path in msg
