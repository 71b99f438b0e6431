"""Independent Python writers of TensorFlow's on-disk formats, built from their published
descriptions (not from our C++ code), for tests that must run where TensorFlow is not installed:
CRC-32C (Castagnoli, from the polynomial), TFRecord framing, the protobuf encoding of
tf.train.Example, and tensor-bundle checkpoints (a LevelDB-style table of BundleEntryProtos in
PREFIX.index, raw tensor bytes in PREFIX.data-00000-of-00001). Also finds a Python interpreter
that has TensorFlow, for the tests whose fixtures TensorFlow itself writes."""
import functools
import os
import shutil
import struct
import subprocess
import sys


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_frame(payload):
    length = struct.pack("<Q", len(payload))
    return length + struct.pack("<I", masked_crc(length)) + payload + struct.pack("<I", masked_crc(payload))


def varint(value):
    value &= (1 << 64) - 1  # negative int64 values take ten bytes, as protobuf encodes them
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number, wire_type, payload):
    key = varint(number << 3 | wire_type)
    if wire_type == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def example(features, packed=True):
    """tf.train.Example bytes from {name: list of int | list of float | list of bytes}."""
    entries = b""
    for name, values in features.items():
        if values and isinstance(values[0], float):
            if packed:
                body = field(1, 2, struct.pack(f"<{len(values)}f", *values))
            else:
                body = b"".join(field(1, 5, struct.pack("<f", v)) for v in values)
            feature = field(2, 2, body)  # Feature.float_list
        elif values and isinstance(values[0], bytes):
            feature = field(1, 2, b"".join(field(1, 2, v) for v in values))  # Feature.bytes_list
        else:
            if packed:
                body = field(1, 2, b"".join(varint(v) for v in values))
            else:
                body = b"".join(field(1, 0, varint(v)) for v in values)
            feature = field(3, 2, body)  # Feature.int64_list
        entries += field(1, 2, field(1, 2, name.encode()) + field(2, 2, feature))  # map<string, Feature> entry
    return field(1, 2, entries)  # Example.features


def pretraining_example(inst, max_seq_length, max_predictions, packed=True):
    """The features of Google's create_pretraining_data.py for one instance dict."""
    n, k = len(inst["input_ids"]), len(inst["masked_lm_ids"])
    pad, pad_p = max_seq_length - n, max_predictions - k
    return example({
        "input_ids": list(inst["input_ids"]) + [0] * pad,
        "input_mask": [1] * n + [0] * pad,
        "segment_ids": list(inst["segment_ids"]) + [0] * pad,
        "masked_lm_positions": list(inst["masked_lm_positions"]) + [0] * pad_p,
        "masked_lm_ids": list(inst["masked_lm_ids"]) + [0] * pad_p,
        "masked_lm_weights": [1.0] * k + [0.0] * pad_p,
        "next_sentence_labels": [1 if inst["is_random_next"] else 0],
    }, packed)


def _table_block(entries):
    """One table block: entries without key sharing, a single restart point at 0, and the trailer
    (compression type 0, masked CRC-32C of contents + type)."""
    body = b"".join(varint(0) + varint(len(k)) + varint(len(v)) + k + v for k, v in entries)
    body += struct.pack("<II", 0, 1)
    return body, body + b"\x00" + struct.pack("<I", masked_crc(body + b"\x00"))


def write_tensor_bundle(prefix, tensors, entry_override=None, block_entries=1 << 30):
    """A TF tensor-bundle checkpoint of float32 numpy arrays {name: array}; entry_override(name,
    entry_bytes) may replace an entry's serialized BundleEntryProto (for malformed-input tests);
    block_entries splits the table into data blocks of that many entries."""
    data, entries = b"", []
    for name in sorted(tensors):
        raw = tensors[name].astype("<f4").tobytes()
        shape = b"".join(field(2, 2, field(1, 0, varint(d))) for d in tensors[name].shape)
        entry = (field(1, 0, varint(1)) + field(2, 2, shape) + field(4, 0, varint(len(data))) +
                 field(5, 0, varint(len(raw))) + field(6, 5, struct.pack("<I", masked_crc(raw))))
        if entry_override:
            entry = entry_override(name, entry)
        entries.append((name.encode(), entry))
        data += raw
    header = field(1, 0, varint(1)) + field(3, 2, field(1, 0, varint(1)))  # num_shards 1, version.producer 1
    rows = [(b"", header)] + entries
    index, handles = bytearray(), []
    for first in range(0, len(rows), block_entries):
        chunk = rows[first:first + block_entries]
        contents, block = _table_block(chunk)
        handles.append((chunk[-1][0], varint(len(index)) + varint(len(contents))))  # keyed by its last key
        index += block
    meta_contents, meta_block = _table_block([])
    meta_handle = varint(len(index)) + varint(len(meta_contents))
    index += meta_block
    index_contents, index_block = _table_block(handles)
    index_handle = varint(len(index)) + varint(len(index_contents))
    index += index_block
    footer = (meta_handle + index_handle).ljust(40, b"\x00") + struct.pack("<Q", 0xDB4775248B80FB57)
    with open(f"{prefix}.index", "wb") as f:
        f.write(bytes(index) + footer)
    with open(f"{prefix}.data-00000-of-00001", "wb") as f:
        f.write(data)


@functools.lru_cache(maxsize=None)
def tensorflow_python():
    """A Python interpreter with TensorFlow (BERT_TF_PYTHON, python3 on PATH, pyenv's, the virtual
    environment samples/install_deps.sh makes), or None."""
    venv = os.environ.get("BERT_TF_VENV", os.path.expanduser("~/.cache/bertengine/tf-venv"))
    candidates = [os.environ.get("BERT_TF_PYTHON"), shutil.which("python3"),
                  os.path.expanduser("~/.pyenv/shims/python3"), os.path.join(venv, "bin", "python3"), sys.executable]
    for c in candidates:
        if c and os.path.exists(c):
            probe = subprocess.run([c, "-c", "import tensorflow"], capture_output=True,
                                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
            if probe.returncode == 0:
                return c
    return None
