"""Checkpoint integrity, checked with h5py. The seal (an HDF5 userblock: CRC-32C and length of
the whole file, checked before HDF5 parses it) follows its documented definition (recomputed by
checkpoint_seal.py), h5py reads sealed files, and any edit breaks it. Behind the seal, the
checksum attribute covers the metadata (engine_version attribute; config, state and index
datasets under /metadata) and every tensor: an edited 'global_step' in the state, or any of 20
random byte changes in the metadata, of a resealed file is refused with a checksum error; that
checksum is recomputed here from its definition (format 3: CRC-32C over the length-prefixed
metadata strings, then each tensor's name, int64 shape and float32 bytes). Files without a seal
(written before seals), format-2 files (metadata in attributes, an FNV-1a 64 checksum) and
format-1 files (tensor-only checksum) still load."""
import json
import random
import struct

import pytest

h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")

import checkpoint_seal
from engine_ctypes import EngineError, Session, load_library

pytestmark = pytest.mark.skipif(load_library() is None, reason="libbert not found (BERT_LIB)")

CONFIG = {"model": {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
                    "intermediate_size": 32, "max_position_embeddings": 32}, "train": {"steps": 10, "micro_batch": 2, "threads": 1},
          "data": {"max_seq_length": 16, "max_predictions_per_seq": 3}}
METADATA = ("engine_version", "config", "state", "index")
DATASETS = ("config", "state", "index")  # under /metadata from format 3 on; attributes before


def fnv1a(chunks):
    h = 1469598103934665603
    for chunk in chunks:
        for byte in chunk:
            h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def text_attr(f, name):
    value = f.attrs[name]
    return value.decode() if isinstance(value, bytes) else str(value)


def set_text_attr(f, name, text):
    del f.attrs[name]
    f.attrs.create(name, np.bytes_(text.encode()))


def text_of(f, name):
    """A metadata text of a format-3 file."""
    return f["metadata/" + name][()].decode() if name in DATASETS else text_attr(f, name)


def set_text(f, name, text):
    if name not in DATASETS:
        return set_text_attr(f, name, text)
    del f["metadata/" + name]
    f["metadata"].create_dataset(name, data=np.bytes_(text.encode()))


def metadata_and_tensor_chunks(f, metadata):
    chunks = []
    for text in metadata:
        data = text.encode()
        chunks += [struct.pack("<Q", len(data)), data]
    groups = [f["model"]] + ([f["optimizer/exp_avg"], f["optimizer/exp_avg_sq"]] if "optimizer" in f else [])
    for group in groups:
        for name in sorted(group.keys()):
            t = group[name][()]
            chunks += [name.encode(), np.array(t.shape, "<i8").tobytes(), t.astype("<f4").tobytes()]
    return chunks


def expected_checksum(path, version):
    """Format 3: CRC-32C; 2: FNV-1a 64 over the same bytes (metadata as attributes); 1: FNV-1a 64, tensors only."""
    with h5py.File(path, "r") as f:
        if version == 3:
            crc = 0
            for chunk in metadata_and_tensor_chunks(f, [text_of(f, name) for name in METADATA]):
                crc = checkpoint_seal.crc32c(chunk, crc)
            return crc
        metadata = [text_attr(f, name) for name in METADATA] if version == 2 else []
        return fnv1a(metadata_and_tensor_chunks(f, metadata))


@pytest.fixture()
def checkpoint(tmp_path):
    path = str(tmp_path / "ckpt.h5")
    with Session(CONFIG) as s:
        for _ in range(3):
            s.step()
        s.checkpoint(path)
    return path


def load_error(path):
    with Session(CONFIG) as s:
        with pytest.raises(EngineError) as e:
            s.checkpoint_load(path)
    return str(e.value)


def test_checksum_follows_its_documented_definition(checkpoint):
    with h5py.File(checkpoint, "r") as f:
        assert int(f.attrs["format_version"]) == 3
        assert set(f["metadata"].keys()) == set(DATASETS) and not set(DATASETS) & set(f.attrs.keys())
        stored = int(text_attr(f, "checksum"))
    assert stored == expected_checksum(checkpoint, version=3)


def test_seal_follows_its_documented_definition(checkpoint):
    data = open(checkpoint, "rb").read()
    fields, userblock = checkpoint_seal.read(data)
    assert userblock == 512 and fields["file_bytes"] == len(data)
    assert fields["crc32c"] == checkpoint_seal.crc32c(data[userblock:])
    with h5py.File(checkpoint, "r") as f:
        assert f.userblock_size == 512
        state = json.loads(text_of(f, "state"))
    assert fields["summary"] == {k: state[k] for k in ("run_id", "written_ns", "global_step")}
    assert checkpoint_seal.seal(data[userblock:], userblock, fields["summary"]) == data


def test_edited_global_step_is_refused(checkpoint):
    with h5py.File(checkpoint, "r+") as f:
        state = json.loads(text_of(f, "state"))
        assert state["global_step"] == 3
        state["global_step"] = 9
        set_text(f, "state", json.dumps(state))
    message = load_error(checkpoint)
    assert f"checkpoint '{checkpoint}' is corrupt: " in message, message  # its length or CRC-32C
    checkpoint_seal.reseal(checkpoint)  # the checksum attribute behind the seal refuses it too
    message = load_error(checkpoint)
    assert checkpoint in message and "checksum" in message and "metadata" in message, message


@pytest.mark.parametrize("index", ["[]", "3", '{"model": 3, "exp_avg": []}'])
def test_an_index_of_another_shape_is_refused_cleanly(checkpoint, index):
    """A resealed file whose tensor index is not an object of objects: a checksum error, no crash."""
    with h5py.File(checkpoint, "r+") as f:
        set_text(f, "index", index)
    checkpoint_seal.reseal(checkpoint)
    message = load_error(checkpoint)
    assert checkpoint in message and "checksum" in message, message


@pytest.mark.parametrize("group,words", [("model", "missing model tensor"), ("optimizer/exp_avg", "missing optimizer exp_avg tensor")])
def test_missing_tensor_of_a_resealed_file_is_named(checkpoint, group, words):
    with h5py.File(checkpoint, "r+") as f:
        del f[f"{group}/bert.pooler.dense.bias"]
    checkpoint_seal.reseal(checkpoint)
    message = load_error(checkpoint)
    assert f"{words} 'bert.pooler.dense.bias'" in message, message


def unsealed_copy(src, dst):
    """The checkpoint as engines before seals wrote it: the same objects, no userblock."""
    with h5py.File(src, "r") as a, h5py.File(dst, "w") as b:
        for key in a:
            a.copy(a[key], b)
        for key in a.attrs:
            b.attrs.create(key, a.attrs[key], dtype=a.attrs.get_id(key).dtype)
    assert open(dst, "rb").read(8) == b"\x89HDF\r\n\x1a\n"


def test_file_without_a_seal_still_loads(checkpoint, tmp_path):
    legacy = str(tmp_path / "legacy.h5")
    unsealed_copy(checkpoint, legacy)
    with Session(CONFIG) as s:
        s.checkpoint_load(checkpoint)
        expected = s.param_read("bert.pooler.dense.weight")
    with Session(CONFIG) as s:
        s.checkpoint_load(legacy)
        assert np.array_equal(s.param_read("bert.pooler.dense.weight"), expected)
    with h5py.File(legacy, "r+") as f:  # its checksum attribute still guards it
        f["model/bert.pooler.dense.weight"][0, 0] += 1
    message = load_error(legacy)
    assert legacy in message and "checksum" in message, message


def test_random_metadata_byte_changes_are_all_refused(checkpoint, tmp_path):
    rng = random.Random(3)
    with h5py.File(checkpoint, "r") as f:
        original = {name: text_of(f, name) for name in METADATA}
    refused = 0
    for trial in range(20):
        path = str(tmp_path / f"edited_{trial}.h5")
        with open(checkpoint, "rb") as src, open(path, "wb") as dst:
            dst.write(src.read())
        name = rng.choice(METADATA)
        text = bytearray(original[name].encode())
        i = rng.randrange(len(text))
        text[i] = (text[i] + rng.randrange(1, 95)) % 95 + 32  # another printable character
        with h5py.File(path, "r+") as f:
            set_text(f, name, text.decode())
        checkpoint_seal.reseal(path)
        with Session(CONFIG) as s:
            try:
                s.checkpoint_load(path)
            except EngineError as e:
                refused += 1
                assert path in str(e), str(e)
    assert refused == 20


def to_format(path, version):
    """Rewrites a format-3 file as formats 2 and 1 were: the metadata as string attributes of the
    root group, format_version and the FNV-1a 64 checksum of that format; resealed."""
    with h5py.File(path, "r+") as f:
        for name in DATASETS:
            f.attrs.create(name, np.bytes_(f["metadata/" + name][()]))
        del f["metadata"]
        f.attrs["format_version"] = np.int64(version)
        set_text_attr(f, "checksum", "0")
    checksum = expected_checksum(path, version)
    with h5py.File(path, "r+") as f:
        set_text_attr(f, "checksum", str(checksum))
    checkpoint_seal.reseal(path)


@pytest.mark.parametrize("version", [1, 2])
def test_earlier_formats_still_load(checkpoint, version):
    with Session(CONFIG) as s:
        s.checkpoint_load(checkpoint)
        expected = s.param_read("bert.pooler.dense.weight")
    to_format(checkpoint, version)
    with Session(CONFIG) as s:
        s.checkpoint_load(checkpoint)
        assert np.array_equal(s.param_read("bert.pooler.dense.weight"), expected)
    with h5py.File(checkpoint, "r+") as f:  # its own checksum still guards it
        f["model/bert.pooler.dense.weight"][0, 0] += 1
    checkpoint_seal.reseal(checkpoint)
    message = load_error(checkpoint)
    assert checkpoint in message and "checksum" in message, message


def with_changes(train=None, data=None):
    config = json.loads(json.dumps(CONFIG))
    config["train"].update(train or {})
    config["data"].update(data or {})
    return config


def test_state_of_another_optimizer_or_sequence_length_is_refused(checkpoint):
    for config, words in ((with_changes(train={"optimizer": "adamw"}), ["lamb", "adamw", "init_checkpoint"]),
                          (with_changes(data={"max_seq_length": 32}), ["data.max_seq_length", "16", "32"])):
        with Session(config) as s:
            with pytest.raises(EngineError) as e:
                s.checkpoint_load(checkpoint)
        assert checkpoint in str(e.value) and all(w in str(e.value) for w in words), str(e.value)
    with Session(with_changes(train={"micro_batch": 4})) as s:  # the same data, another batch: loads
        s.checkpoint_load(checkpoint)
