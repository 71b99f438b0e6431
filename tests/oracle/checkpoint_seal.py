"""The checkpoint seal (src/ckpt/checkpoint_seal.h), written again from its documented definition:
an HDF5 userblock holding "bertengine checkpoint seal 1\\n", a JSON line {crc32c, file_bytes,
summary, userblock}, "header_crc32c H\\n", then NULs. Used to check files the engine wrote, to
reseal a checkpoint after an edit (so the engine's inner checks can be reached) and to seal
regression inputs of the fuzz corpus."""
import json

MAGIC = b"bertengine checkpoint seal 1\n"


def _table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = _table()


def crc32c(data, crc=0):
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def header(fields):
    text = MAGIC + json.dumps(fields, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode() + b"\n"
    return text + b"header_crc32c %d\n" % crc32c(text)


def read(data):
    """(fields, userblock) of sealed file bytes; checks the header CRC and the padding."""
    assert data.startswith(MAGIC), data[:40]
    end = data.index(b"\0")
    text = data[:end]
    fields_line_end = text.index(b"\n", len(MAGIC))
    assert text[fields_line_end + 1:] == b"header_crc32c %d\n" % crc32c(text[:fields_line_end + 1])
    fields = json.loads(text[len(MAGIC):fields_line_end])
    assert data[end:fields["userblock"]] == bytes(fields["userblock"] - end)
    return fields, fields["userblock"]


def seal(hdf5_data, userblock, summary, crc=None):
    """A sealed file: the seal, then hdf5_data (the bytes after the userblock); crc overrides its CRC."""
    fields = {"crc32c": crc32c(hdf5_data) if crc is None else crc, "file_bytes": userblock + len(hdf5_data),
              "summary": summary, "userblock": userblock}
    text = header(fields)
    return text + bytes(userblock - len(text)) + hdf5_data


def reseal(path):
    """Rewrites the seal of an edited checkpoint so that it checks out again."""
    data = open(path, "rb").read()
    fields, userblock = read(data)
    open(path, "wb").write(seal(data[userblock:], userblock, fields["summary"]))
