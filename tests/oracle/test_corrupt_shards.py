"""Corrupt shards never take the process down. Variable-length (MLPerf) shards are read without
HDF5's vlen conversion (src/data/h5_raw_vlen.cpp), so: (1) every storage h5py can give them
(contiguous, chunked, gzip, gzip + shuffle) decodes exactly as written; (2) flipping 20 random
bits of a shard, 40 trials per file kind, ends each read in a result or a clean error naming the
file — never a signal (segfault, abort) and never a hang; (3) a targeted wild heap reference
gets a message naming the file, the dataset and the row."""
import os
import random
import subprocess

import pytest

h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")

from test_shard_reader import DUMP, PRED, SEQ, VOCAB, compare, make_sequences, read, write_dle

pytestmark = pytest.mark.skipif(not DUMP or not os.path.exists(DUMP), reason="BERT_BUILD_DIR/tests/unit/dump_shard not built")

STORAGES = {
    "contiguous": {},
    "chunked": {"chunks": (16,)},
    "gzip": {"chunks": (32,), "compression": "gzip"},
    "gzip+shuffle": {"chunks": (32,), "compression": "gzip", "shuffle": True},
}


def int16_sequences(seed, count):
    seqs = make_sequences(np.random.default_rng(seed), count)
    for s in seqs:
        s["ids"] %= 32768
        s["mids"] %= 32768
    return seqs


def write_mlperf(path, seqs, **storage):
    n = len(seqs)
    with h5py.File(path, "w") as f:
        for key, field, dt in (("input_ids", "ids", "int16"), ("segment_ids", "seg", "int8"),
                               ("masked_lm_positions", "pos", "int16"), ("masked_lm_ids", "mids", "int16")):
            data = np.empty(n, dtype=object)
            for i, s in enumerate(seqs):
                data[i] = s[field].astype(dt)
            f.create_dataset(key, data=data, dtype=h5py.vlen_dtype(np.dtype(dt)), **storage)
        f.create_dataset("next_sentence_labels", data=np.array([s["nsl"] for s in seqs], "int8"), dtype="i1")


@pytest.mark.parametrize("storage", sorted(STORAGES))
def test_every_vlen_storage_decodes_as_written(tmp_path, storage):
    seqs = int16_sequences(11, 150)
    path = str(tmp_path / f"part_{storage}")
    write_mlperf(path, seqs, **STORAGES[storage])
    decoded = read(path)
    assert decoded["format"] == "mlperf" and decoded["rows"] == 150
    compare(decoded, seqs)


def dump_read(path):
    return subprocess.run([DUMP, "read", path, "--seq", str(SEQ), "--pred", str(PRED), "--vocab", str(VOCAB)],
                          capture_output=True, text=True, errors="replace", timeout=30)


def flip_bits(src, dst, rng, bits=20):
    data = bytearray(open(src, "rb").read())
    for _ in range(bits):
        i = rng.randrange(len(data) * 8)
        data[i // 8] ^= 1 << (i % 8)
    open(dst, "wb").write(bytes(data))


def trial_outcomes(src, tmp_path, trials=40, seed=0):
    """Reads `trials` bit-flipped copies of src; counts ok / clean error / signal / hang."""
    rng = random.Random(seed)
    counts = {"ok": 0, "clean error": 0, "signal": 0, "hang": 0}
    bad = []
    for t in range(trials):
        path = str(tmp_path / f"flipped_{t}.h5")
        flip_bits(src, path, rng)
        try:
            proc = dump_read(path)
        except subprocess.TimeoutExpired:
            counts["hang"] += 1
            bad.append((t, "hang"))
            continue
        if proc.returncode == 0:
            counts["ok"] += 1
        elif proc.returncode == 2 and path in proc.stderr:
            counts["clean error"] += 1
        else:
            counts["signal" if proc.returncode < 0 else "clean error"] += 1
            bad.append((t, proc.returncode, proc.stderr[-300:]))
        os.remove(path)
    return counts, bad


@pytest.mark.parametrize("kind", ["mlperf contiguous", "mlperf gzip+shuffle", "dle gzip"])
def test_bit_flips_end_in_a_result_or_a_clean_error(tmp_path, kind):
    seqs = int16_sequences(12, 400)
    src = str(tmp_path / "source.h5")
    if kind == "dle gzip":
        write_dle(src, seqs)
    else:
        write_mlperf(src, seqs, **STORAGES[kind.split()[1]])
    counts, bad = trial_outcomes(src, tmp_path)
    print(f"\n{kind}: {counts}")
    assert counts["signal"] == 0 and counts["hang"] == 0, bad
    assert not bad, bad  # every error exits 2 and names the file


def test_wild_heap_reference_names_file_dataset_and_row(tmp_path):
    seqs = int16_sequences(13, 50)
    path = str(tmp_path / "wild.h5")
    write_mlperf(path, seqs)
    with h5py.File(path, "r") as f:
        offset = f["masked_lm_ids"].id.get_offset()
    row = 7
    with open(path, "r+b") as f:  # the row's descriptor: uint32 length, uint64 heap address, uint32 index
        f.seek(offset + 16 * row + 4)
        f.write((1 << 40).to_bytes(8, "little"))
    proc = dump_read(path)
    assert proc.returncode == 2, proc.stderr
    assert path in proc.stderr and "masked_lm_ids" in proc.stderr and f"row {row}" in proc.stderr, proc.stderr
