"""TensorFlow checkpoints and TFRecords read without TensorFlow. The fixtures are written by
TensorFlow itself (tf_writer.py under a Python that has tensorflow; those tests skip without it)
or by the independent writers of tf_formats.py (built from the published formats):

- a TF1 checkpoint with Google BERT's variable names imported by `bert-ckpt import` holds the
  same weights, and gives the same loss (within 1e-6), as the same weights imported from a
  Hugging Face safetensors file, and the loss of the PyTorch oracle; Adam slots become the
  checkpoint's moments;
- `bert-prep from-tfrecord` turns create_pretraining_data.py's Examples into DLE and MLPerf
  shards that h5py reads back as exactly the written instances;
- bit flips and truncations of either are refused with a message naming the file and the
  tensor or record, never a crash."""
import json
import os
import shutil
import subprocess

import h5py
import numpy as np
import pytest
import torch

import oracle_helpers as H
import tf_formats
import torch_bert
from engine_ctypes import Session
from test_hf_interop import write_safetensors

BUILD = os.environ.get("BERT_BUILD_DIR", "")
BERT_CKPT = os.path.join(BUILD, "src", "tools", "bert-ckpt")
BERT_PREP = os.path.join(BUILD, "src", "tools", "bert-prep")
TF_WRITER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_writer.py")
STEP = 28252
L, P = 32, 5

pytestmark = pytest.mark.skipif(not os.path.exists(BERT_CKPT), reason="bert-ckpt is not built (BERT_BUILD_DIR)")


def run(tool, *args, ok=True):
    r = subprocess.run([tool, *map(str, args)], capture_output=True, text=True, timeout=120)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def tf_python():
    python = tf_formats.tensorflow_python()
    if python is None:
        pytest.skip("no Python with tensorflow (pip install tensorflow-cpu) to write the fixtures")
    return python


def hf_to_tf(state):
    """Google BERT's TF variable names and layouts for an HF state dict (the tied decoder is not a variable)."""
    out = {}
    for name, value in state.items():
        if name == "cls.predictions.decoder.weight":
            continue
        if name == "cls.predictions.bias":
            out["cls/predictions/output_bias"] = value
            continue
        if name.startswith("cls.seq_relationship."):
            out["cls/seq_relationship/output_" + ("weights" if name.endswith("weight") else "bias")] = value
            continue
        parts, path, i = name.split("."), [], 0
        while i < len(parts):
            if parts[i] == "layer" and parts[i + 1].isdigit():
                path.append("layer_" + parts[i + 1])
                i += 2
            else:
                path.append(parts[i])
                i += 1
        leaf = path.pop()
        if path[-1].endswith("_embeddings"):
            out["/".join(path)] = value
        elif path[-1] == "LayerNorm":
            out["/".join(path) + ("/gamma" if leaf == "weight" else "/beta")] = value
        elif leaf == "weight":
            out["/".join(path) + "/kernel"] = value.T
        else:
            out["/".join(path) + "/bias"] = value
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


@pytest.fixture(scope="module")
def tf_checkpoint(tmp_path_factory):
    """A TF1 checkpoint written by tf.compat.v1.train.Saver: BERT weights under Google's names,
    Adam slots (adam_m, adam_v) for each, global_step; bert_config.json beside it."""
    python = tf_python()
    d = tmp_path_factory.mktemp("tf_ckpt")
    cfg = H.make_config()
    model = H.torch_model(cfg, torch.float32)
    torch.manual_seed(11)
    model.init_weights()
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    variables = hf_to_tf(state)
    rng = np.random.default_rng(4)
    for name in list(variables):
        variables[name + "/adam_m"] = rng.standard_normal(variables[name].shape).astype(np.float32)
        variables[name + "/adam_v"] = rng.random(variables[name].shape).astype(np.float32)
    np.savez(d / "vars.npz", **variables)
    r = subprocess.run([python, TF_WRITER, "checkpoint", d / "vars.npz", d / "model.ckpt", str(STEP)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (d / "bert_config.json").write_text(json.dumps(cfg["model"]))
    prefix = d / f"model.ckpt-{STEP}"
    assert (d / f"model.ckpt-{STEP}.index").exists()
    return {"cfg": cfg, "state": state, "variables": variables, "prefix": prefix, "dir": d}


def test_tf_checkpoint_gives_the_hf_import_loss(tf_checkpoint, tmp_path):
    cfg, state = tf_checkpoint["cfg"], tf_checkpoint["state"]
    # TF: the .index path; its bert_config.json is found beside it (Google's release layout)
    out = run(BERT_CKPT, "import", f"{tf_checkpoint['prefix']}.index", tmp_path / "tf.h5").stdout
    assert "Google BERT (TensorFlow)" in out and "optimizer moments included" in out, out
    assert "not placed: global_step" in out
    # HF: the same weights as safetensors under HF names
    write_safetensors(tmp_path / "hf.safetensors", state)
    (tmp_path / "bert_config.json").write_text(json.dumps(cfg["model"]))
    run(BERT_CKPT, "import", tmp_path / "hf.safetensors", tmp_path / "hf.h5", "--config", tmp_path / "bert_config.json")

    from_tf, from_hf = Session(cfg), Session(cfg)
    from_tf.checkpoint_load_weights(tmp_path / "tf.h5")
    from_hf.checkpoint_load_weights(tmp_path / "hf.h5")
    for name in from_tf.param_shapes():
        np.testing.assert_array_equal(from_tf.param_read(name), from_hf.param_read(name), err_msg=name)
        np.testing.assert_array_equal(from_tf.param_read(name), state[name], err_msg=name)

    oracle = torch_bert.BertForPreTraining(torch_bert.BertConfig(**cfg["model"])).double()
    oracle.load_state_dict({k: torch.from_numpy(v.astype(np.float64)) for k, v in state.items()})
    for seed in (1, 2):
        batch = torch_bert.random_batch(np.random.default_rng(seed), 8, H.SEQ, H.PRED, H.VOCAB)
        tf_loss, hf_loss = from_tf.eval(batch), from_hf.eval(batch)
        for key in ("mlm_loss", "nsp_loss"):
            assert abs(tf_loss[key] - hf_loss[key]) <= 1e-6, (key, tf_loss[key], hf_loss[key])
        with torch.no_grad():
            _, mlm, nsp, _, _ = oracle(**torch_bert.batch_tensors(batch))
        assert abs(tf_loss["mlm_loss"] - mlm.item()) <= 1e-5 * abs(mlm.item())
        assert abs(tf_loss["nsp_loss"] - nsp.item()) <= 1e-5 * abs(nsp.item())


def test_tf_slots_become_adam_moments_and_inspect_shows_the_mapping(tf_checkpoint, tmp_path):
    variables = tf_checkpoint["variables"]
    run(BERT_CKPT, "import", tf_checkpoint["prefix"], tmp_path / "tf.h5")  # the prefix works too
    with h5py.File(tmp_path / "tf.h5", "r") as f:
        assert json.loads(f["metadata/state"][()])["source_global_step"] == STEP
        kernel = "bert/encoder/layer_1/intermediate/dense/kernel"
        np.testing.assert_array_equal(f["optimizer/exp_avg/bert.encoder.layer.1.intermediate.dense.weight"][()],
                                      variables[kernel + "/adam_m"].T)
        np.testing.assert_array_equal(f["optimizer/exp_avg_sq/cls.predictions.bias"][()],
                                      variables["cls/predictions/output_bias/adam_v"])
    info = run(BERT_CKPT, "inspect", f"{tf_checkpoint['prefix']}.index").stdout
    assert f"global_step  {STEP}" in info
    assert "tensors      " in info and "not mapped" in info
    line = next(x for x in info.splitlines() if x.split()[0] == kernel)
    assert line.split()[1:5] == ["float32", "64x128", "->", "bert.encoder.layer.1.intermediate.dense.weight"], line
    assert "(transposed)" in line
    line = next(x for x in info.splitlines() if x.split()[0] == "cls/seq_relationship/output_weights")
    assert "-> cls.seq_relationship.weight" in line and "transposed" not in line


def copy_checkpoint(tf_checkpoint, dest):
    dest.mkdir()
    prefix = tf_checkpoint["prefix"]
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copy(f"{prefix}{suffix}", dest / f"m{suffix}")
    shutil.copy(tf_checkpoint["dir"] / "bert_config.json", dest / "bert_config.json")
    return dest / "m"


def test_corrupt_tf_checkpoint_is_refused_naming_file_and_tensor(tf_checkpoint, tmp_path):
    prefix = copy_checkpoint(tf_checkpoint, tmp_path / "c")
    data, index = f"{prefix}.data-00000-of-00001", f"{prefix}.index"
    out = tmp_path / "out.h5"
    for path, step in ((data, 997), (index, 23)):
        original = open(path, "rb").read()
        detected = 0
        for offset in range(0, len(original), max(1, len(original) // 60 if path == data else step)):
            flipped = bytearray(original)
            flipped[offset] ^= 0x5A
            open(path, "wb").write(flipped)
            r = run(BERT_CKPT, "import", index, out, ok=False)
            assert r.returncode in (0, 1), (path, offset, r.returncode, r.stderr)
            if r.returncode == 1:
                detected += 1
                assert os.path.basename(path) in r.stderr, r.stderr
                if path == data:
                    assert "tensor '" in r.stderr and "CRC-32C" in r.stderr, r.stderr
            else:  # only the footer's padding is covered by no checksum (TensorFlow ignores it too)
                assert path == index and offset >= len(original) - 48, (offset, r.stdout)
        open(path, "wb").write(original)
        assert detected > 0
    for path in (data, index):
        original = open(path, "rb").read()
        for keep in (0, 7, len(original) // 3, len(original) - 1):
            open(path, "wb").write(original[:keep])
            r = run(BERT_CKPT, "import", index, out, ok=False)
            assert r.returncode == 1, (path, keep, r.stdout)
            assert os.path.basename(path) in r.stderr, r.stderr
            if path == data:
                assert "tensor '" in r.stderr, r.stderr
        open(path, "wb").write(original)
    run(BERT_CKPT, "import", index, out)  # the restored copy imports


# ---- TFRecord -> HDF5 -------------------------------------------------------------------------

def make_instances(seed, count):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(8, L + 1))
        a = int(rng.integers(2, n - 1))
        k = int(rng.integers(1, P + 1))
        out.append({"input_ids": [101] + rng.integers(999, 30000, n - 2).tolist() + [102],
                    "segment_ids": [0] * a + [1] * (n - a),
                    "masked_lm_positions": sorted(rng.choice(np.arange(1, n - 1), k, replace=False).tolist()),
                    "masked_lm_ids": rng.integers(1000, 30000, k).tolist(),
                    "is_random_next": bool(rng.integers(0, 2))})
    return out


def write_independent_tfrecord(path, instances, packed=True):
    with open(path, "wb") as f:
        for inst in instances:
            f.write(tf_formats.tfrecord_frame(tf_formats.pretraining_example(inst, L, P, packed)))


def check_shard(path, instances, fmt):
    with h5py.File(path, "r") as f:
        assert len(f["next_sentence_labels"]) == len(instances)
        for r, inst in enumerate(instances):
            n, k = len(inst["input_ids"]), len(inst["masked_lm_ids"])
            assert f["next_sentence_labels"][r] == int(inst["is_random_next"])
            if fmt == "dle":
                np.testing.assert_array_equal(f["input_ids"][r], inst["input_ids"] + [0] * (L - n))
                np.testing.assert_array_equal(f["input_mask"][r], [1] * n + [0] * (L - n))
                np.testing.assert_array_equal(f["segment_ids"][r], inst["segment_ids"] + [0] * (L - n))
                np.testing.assert_array_equal(f["masked_lm_positions"][r], inst["masked_lm_positions"] + [0] * (P - k))
                np.testing.assert_array_equal(f["masked_lm_ids"][r], inst["masked_lm_ids"] + [0] * (P - k))
            else:
                np.testing.assert_array_equal(f["input_ids"][r], inst["input_ids"])
                np.testing.assert_array_equal(f["segment_ids"][r], inst["segment_ids"])
                np.testing.assert_array_equal(f["masked_lm_positions"][r], inst["masked_lm_positions"])
                np.testing.assert_array_equal(f["masked_lm_ids"][r], inst["masked_lm_ids"])


@pytest.mark.parametrize("writer", ["tensorflow", "independent_packed", "independent_unpacked"])
def test_tfrecord_to_dle_and_mlperf_shards(tmp_path, writer):
    parts = {"part-00000-of-00002": make_instances(1, 7), "part-00001-of-00002": make_instances(2, 5)}
    src = tmp_path / "tfrecords"
    src.mkdir()
    if writer == "tensorflow":
        (tmp_path / "files.json").write_text(json.dumps({str(src / name): inst for name, inst in parts.items()}))
        r = subprocess.run([tf_python(), TF_WRITER, "tfrecord", tmp_path / "files.json", str(L), str(P)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    else:
        for name, instances in parts.items():
            write_independent_tfrecord(src / name, instances, packed=writer == "independent_packed")
    for fmt in ("dle", "mlperf"):
        out = run(BERT_PREP, "from-tfrecord", "--output", tmp_path / fmt, "--format", fmt, src).stdout
        assert "records: 12 (max_seq_length 32, max_predictions 5)" in out, out
        for name, instances in parts.items():
            check_shard(tmp_path / fmt / f"{name}.hdf5", instances, fmt)
    info = run(BERT_CKPT, "inspect", src / "part-00001-of-00002").stdout
    assert "5 records" in info and "masked_lm_weights" in info and "float  [5]" in info


def test_corrupt_tfrecord_is_refused_naming_file_and_record(tmp_path):
    path = tmp_path / "part-0"
    write_independent_tfrecord(path, make_instances(3, 3))
    original = path.read_bytes()
    sizes = [16 + len(tf_formats.pretraining_example(i, L, P)) for i in make_instances(3, 3)]
    boundaries = set(np.cumsum(sizes).tolist())
    for offset in range(0, len(original), 5):
        flipped = bytearray(original)
        flipped[offset] ^= 0x01
        path.write_bytes(flipped)
        r = run(BERT_PREP, "from-tfrecord", "--output", tmp_path / "out", "--overwrite", path, ok=False)
        assert r.returncode == 1, (offset, r.stdout)
        assert f"TFRecord file '{path}' record " in r.stderr and "CRC-32C" in r.stderr, r.stderr
    for keep in range(1, len(original), 11):
        if keep in boundaries:
            continue
        path.write_bytes(original[:keep])
        r = run(BERT_PREP, "from-tfrecord", "--output", tmp_path / "out", "--overwrite", path, ok=False)
        assert r.returncode == 1 and "truncated" in r.stderr and str(path) in r.stderr, (keep, r.stderr)


def test_tfrecord_with_inconsistent_features_is_refused(tmp_path):
    inst = make_instances(5, 2)
    bad = dict(inst[1], segment_ids=[0, 1] + inst[1]["segment_ids"][2:-1] + [0])
    path = tmp_path / "part-0"
    write_independent_tfrecord(path, [inst[0], bad])
    r = run(BERT_PREP, "from-tfrecord", "--output", tmp_path / "out", path, ok=False)
    assert r.returncode == 1
    assert f"TFRecord file '{path}' record 1 feature 'segment_ids'" in r.stderr, r.stderr


# ---- without TensorFlow: the independent writers of tf_formats.py -----------------------------

def engine_state(seed):
    cfg = H.make_config()
    model = H.torch_model(cfg, torch.float32)
    torch.manual_seed(seed)
    model.init_weights()
    return cfg, {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def test_independently_written_bundle_imports_like_hf(tmp_path):
    cfg, state = engine_state(12)
    tf_formats.write_tensor_bundle(tmp_path / "model.ckpt-7", hf_to_tf(state), block_entries=7)  # several blocks
    (tmp_path / "bert_config.json").write_text(json.dumps(cfg["model"]))
    run(BERT_CKPT, "import", tmp_path / "model.ckpt-7.index", tmp_path / "tf.h5")
    write_safetensors(tmp_path / "hf.safetensors", state)
    run(BERT_CKPT, "import", tmp_path / "hf.safetensors", tmp_path / "hf.h5", "--config", tmp_path / "bert_config.json")
    from_tf, from_hf = Session(cfg), Session(cfg)
    from_tf.checkpoint_load_weights(tmp_path / "tf.h5")
    from_hf.checkpoint_load_weights(tmp_path / "hf.h5")
    for name in from_tf.param_shapes():
        np.testing.assert_array_equal(from_tf.param_read(name), state[name], err_msg=name)
    batch = torch_bert.random_batch(np.random.default_rng(3), 8, H.SEQ, H.PRED, H.VOCAB)
    a, b = from_tf.eval(batch), from_hf.eval(batch)
    assert abs(a["mlm_loss"] - b["mlm_loss"]) <= 1e-6 and abs(a["nsp_loss"] - b["nsp_loss"]) <= 1e-6


def test_malformed_bundle_entries_are_refused_cleanly(tmp_path):
    """Entries whose checksums are right but whose contents are wrong or garbage."""
    cfg, state = engine_state(13)
    tensors = hf_to_tf(state)
    (tmp_path / "bert_config.json").write_text(json.dumps(cfg["model"]))
    target = "bert/pooler/dense/bias"
    cases = {
        "dtype string": lambda e: e + tf_formats.field(1, 0, tf_formats.varint(7)),  # the last value wins
        "past the end of the file": lambda e: e + tf_formats.field(4, 0, tf_formats.varint(1 << 40)),
        "bytes but its shape and dtype need": lambda e: e + tf_formats.field(5, 0, tf_formats.varint(12)),
        "malformed protobuf": lambda e: e[:-3],
        "fails its CRC-32C check": lambda e: e + tf_formats.field(6, 5, b"\0\0\0\0"),
    }
    for expected, change in cases.items():
        tf_formats.write_tensor_bundle(tmp_path / "m", tensors, lambda n, e: change(e) if n == target else e)
        r = run(BERT_CKPT, "import", tmp_path / "m.index", tmp_path / "o.h5", ok=False)
        assert r.returncode == 1 and expected in r.stderr and target in r.stderr, (expected, r.stderr)
    rng = np.random.default_rng(0)
    for _ in range(25):  # random garbage entries: refused or read, never a crash
        garbage = rng.integers(0, 256, int(rng.integers(1, 40)), dtype=np.uint8).tobytes()
        tf_formats.write_tensor_bundle(tmp_path / "m", tensors, lambda n, e: garbage if n == target else e)
        r = run(BERT_CKPT, "import", tmp_path / "m.index", tmp_path / "o.h5", ok=False)
        assert r.returncode == 1 and ("m.index" in r.stderr or "m.data" in r.stderr), r.stderr


def test_malformed_examples_with_valid_crcs_are_refused_cleanly(tmp_path):
    inst = make_instances(6, 1)[0]
    good = tf_formats.pretraining_example(inst, L, P)
    rng = np.random.default_rng(1)
    path = tmp_path / "part-0"
    for trial in range(40):
        payload = bytearray(good)
        if trial % 2:
            payload[int(rng.integers(0, len(payload)))] ^= int(rng.integers(1, 256))
        else:
            payload = payload[:int(rng.integers(0, len(payload)))]
        path.write_bytes(tf_formats.tfrecord_frame(bytes(payload)))
        r = run(BERT_PREP, "from-tfrecord", "--output", tmp_path / "out", "--overwrite", path, ok=False)
        assert r.returncode in (0, 1), (trial, r.returncode, r.stderr)
        if r.returncode == 1:
            assert f"TFRecord file '{path}' record 0" in r.stderr, r.stderr


def test_tfrecord_shards_train_alike_in_both_formats(tmp_path):
    """The converted shards feed bert-train: DLE and MLPerf shards of the same records give the same losses."""
    write_independent_tfrecord(tmp_path / "part-0", make_instances(7, 16))
    losses = []
    for fmt in ("dle", "mlperf"):
        run(BERT_PREP, "from-tfrecord", "--output", tmp_path / fmt, "--format", fmt, tmp_path / "part-0")
        cfg = {"model": "bert-tiny", "train": {"steps": 2, "micro_batch": 4, "threads": 2},
               "data": {"train_dir": str(tmp_path / fmt), "format": fmt, "max_seq_length": L, "max_predictions_per_seq": P}}
        (tmp_path / f"{fmt}.json").write_text(json.dumps(cfg))
        r = run(os.path.join(BUILD, "src", "tools", "bert-train"), tmp_path / f"{fmt}.json", "--output", tmp_path / f"{fmt}.h5")
        losses.append([line.split("lr")[0] for line in r.stdout.splitlines() if line.startswith("step ")])
    assert losses[0] and losses[0] == losses[1], losses
