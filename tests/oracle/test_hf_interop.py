"""Hugging Face interop: `bert-ckpt export-hf` writes a folder (config.json + model.safetensors)
that an independent PyTorch BertForPreTraining loads by name and evaluates to the engine's
loss; `bert-ckpt import` places HF- and DLE-named weights (safetensors, or pytorch_model.bin /
DLE .pt through torch_to_safetensors.py) into the engine and reports what it cannot place.
DLE weights as they are: vocabulary padding rows removed, the tanh GELU named and settable, an
untied decoder refused rather than dropped."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch

import oracle_helpers as H
import torch_bert
from engine_ctypes import Session

BUILD = os.environ.get("BERT_BUILD_DIR", "")
BERT_CKPT = os.path.join(BUILD, "src", "tools", "bert-ckpt")
CONVERTER = os.path.join(os.path.dirname(__file__), "..", "..", "src", "tools", "torch_to_safetensors.py")

pytestmark = pytest.mark.skipif(not os.path.exists(BERT_CKPT), reason="bert-ckpt is not built (BERT_BUILD_DIR)")


def read_safetensors(path):
    """A small independent safetensors reader (F32 only)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=np.float32).reshape(info["shape"])
    return out


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, value in tensors.items():
        raw = np.ascontiguousarray(value, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(value.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def run(*args):
    result = subprocess.run([BERT_CKPT, *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def trained_session(tmp_path):
    cfg = H.make_config()
    session = Session(cfg)
    rng = np.random.default_rng(3)
    for _ in range(3):
        session.step(torch_bert.random_batch(rng, 8, H.SEQ, H.PRED, H.VOCAB))
    path = str(tmp_path / "engine.h5")
    session.checkpoint(path)
    return cfg, session, path


def test_export_loads_into_pytorch_with_the_same_loss(tmp_path):
    cfg, session, ckpt = trained_session(tmp_path)
    folder = tmp_path / "hf"
    run("export-hf", ckpt, str(folder))
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"]
    assert config["vocab_size"] == H.VOCAB  # the original size, not the padded 1008
    tensors = read_safetensors(folder / "model.safetensors")

    fields = {k: config[k] for k in cfg["model"]}
    model = torch_bert.BertForPreTraining(torch_bert.BertConfig(**fields)).double()
    state = {k: torch.from_numpy(v.astype(np.float64)) for k, v in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert [m for m in missing if m != "cls.predictions.decoder.weight"] == [], missing

    batch = torch_bert.random_batch(np.random.default_rng(9), 8, H.SEQ, H.PRED, H.VOCAB)
    with torch.no_grad():
        _, mlm, nsp, _, _ = model(**torch_bert.batch_tensors(batch))
    engine = session.eval(batch)
    assert abs(engine["mlm_loss"] - mlm.item()) <= 1e-5 * abs(mlm.item())
    assert abs(engine["nsp_loss"] - nsp.item()) <= 1e-5 * abs(nsp.item())

    try:
        import safetensors.numpy  # optional: the reference reader, when installed
    except ImportError:
        return
    for name, value in safetensors.numpy.load_file(str(folder / "model.safetensors")).items():
        np.testing.assert_array_equal(value, tensors[name])


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "gelu_new"])
def test_export_of_each_activation_loads_into_transformers(tmp_path, act):
    """transformers itself loads the folder (from_pretrained: no missing or unexpected keys) and
    computes the engine's losses; the tanh form is written as HF's "gelu_new"."""
    transformers = pytest.importorskip("transformers")
    cfg = H.make_config(model={"hidden_act": act})
    session = Session(cfg)
    rng = np.random.default_rng(4)
    for _ in range(2):
        session.step(torch_bert.random_batch(rng, 8, H.SEQ, H.PRED, H.VOCAB))
    ckpt, folder = str(tmp_path / "engine.h5"), tmp_path / "hf"
    session.checkpoint(ckpt)
    run("export-hf", ckpt, str(folder))
    assert json.loads((folder / "config.json").read_text())["hidden_act"] == ("gelu" if act == "gelu" else "gelu_new")
    model, info = transformers.BertForPreTraining.from_pretrained(str(folder), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    model = model.double().eval()
    batch = torch_bert.random_batch(np.random.default_rng(9), 8, H.SEQ, H.PRED, H.VOCAB)
    t = torch_bert.batch_tensors(batch)
    labels = t["masked_lm_labels"].masked_fill(t["masked_lm_labels"] < 0, -100)  # DLE's -1 is HF's -100
    with torch.no_grad():
        out = model(input_ids=t["input_ids"], token_type_ids=t["token_type_ids"], attention_mask=t["attention_mask"],
                    labels=labels, next_sentence_label=t["next_sentence_labels"])
    engine = session.eval(batch)
    total = engine["mlm_loss"] + engine["nsp_loss"]
    assert abs(total - out.loss.item()) <= 1e-5 * abs(out.loss.item()), (total, out.loss.item())


def dle_names(state):
    """Renames an HF state dict the way NVIDIA DLE checkpoints spell it."""
    out = {}
    for name, value in state.items():
        name = name.replace("intermediate.dense.", "intermediate.dense_act.")
        name = name.replace("transform.dense.", "transform.dense_act.")
        if "LayerNorm." in name:
            name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        out["module." + name] = value
    return out


@pytest.mark.parametrize("spelling", ["hf", "dle"])
def test_import_safetensors_places_every_tensor(tmp_path, spelling):
    cfg = H.make_config()
    model = H.torch_model(cfg, torch.float32)
    torch.manual_seed(5)
    model.init_weights()
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    if spelling == "dle":
        state = dle_names(state)
    state["cls.extra.weight"] = np.ones((3, 3), np.float32)  # must be reported, not fatal
    write_safetensors(tmp_path / "w.safetensors", state)
    (tmp_path / "bert_config.json").write_text(json.dumps(cfg["model"]))
    out = run("import", str(tmp_path / "w.safetensors"), str(tmp_path / "imported.h5"),
              "--config", str(tmp_path / "bert_config.json"))
    assert "not placed: cls.extra.weight" in out

    session = Session(cfg)
    session.checkpoint_load_weights(tmp_path / "imported.h5")
    params = dict(model.named_parameters())
    for name in session.param_shapes():
        np.testing.assert_array_equal(session.param_read(name), params[name].detach().numpy(), err_msg=name)


def test_import_pytorch_bin_through_the_converter(tmp_path):
    cfg = H.make_config()
    model = H.torch_model(cfg, torch.float32)
    torch.manual_seed(6)
    model.init_weights()
    torch.save({"model": dle_names(model.state_dict())}, tmp_path / "dle_ckpt.pt")
    (tmp_path / "bert_config.json").write_text(json.dumps(cfg["model"]))
    direct = subprocess.run([BERT_CKPT, "import", str(tmp_path / "dle_ckpt.pt"), str(tmp_path / "d.h5"), "--config",
                             str(tmp_path / "bert_config.json")], capture_output=True, text=True)
    assert direct.returncode == 1 and "is a PyTorch file" in direct.stderr and "torch_to_safetensors.py" in direct.stderr
    subprocess.run([sys.executable, CONVERTER, str(tmp_path / "dle_ckpt.pt"), str(tmp_path / "c.safetensors")],
                   check=True, capture_output=True)
    (tmp_path / "bert_config.json").write_text(json.dumps(cfg["model"]))
    run("import", str(tmp_path / "c.safetensors"), str(tmp_path / "c.h5"), "--config", str(tmp_path / "bert_config.json"))
    info = run("inspect", str(tmp_path / "c.h5"))
    assert "weights only" in info


def test_import_names_a_missing_tensor(tmp_path):
    cfg = H.make_config()
    model = H.torch_model(cfg, torch.float32)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items() if "pooler.dense.bias" not in k}
    write_safetensors(tmp_path / "w.safetensors", state)
    (tmp_path / "bert_config.json").write_text(json.dumps(cfg["model"]))
    result = subprocess.run([BERT_CKPT, "import", str(tmp_path / "w.safetensors"), str(tmp_path / "x.h5"),
                             "--config", str(tmp_path / "bert_config.json")], capture_output=True, text=True)
    assert result.returncode != 0
    assert "bert.pooler.dense.bias" in result.stderr
    assert not (tmp_path / "x.h5").exists()


VOCAB = 1003  # DLE pads it to 1008


def dle_padded_state(seed):
    """An HF model's weights as a DLE checkpoint holds them: DLE names, the vocabulary padded to a
    multiple of 8 (1003 -> 1008 rows, as 30522 -> 30528; padding rows trained like any other),
    the decoder tied."""
    cfg = H.make_config(model={"vocab_size": VOCAB})
    model = H.torch_model(cfg, torch.float32)
    torch.manual_seed(seed)
    model.init_weights()
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(seed)
    padded = dict(state)
    word = state["bert.embeddings.word_embeddings.weight"]
    padded["bert.embeddings.word_embeddings.weight"] = np.concatenate(
        [word, rng.standard_normal((5, word.shape[1])).astype(np.float32)])
    padded["cls.predictions.decoder.weight"] = padded["bert.embeddings.word_embeddings.weight"]
    padded["cls.predictions.bias"] = np.concatenate([state["cls.predictions.bias"], np.full(5, 5.0, np.float32)])
    return cfg, state, dle_names(padded)


def test_dle_vocabulary_padding_is_removed_and_tanh_gelu_named(tmp_path):
    cfg, state, dle = dle_padded_state(21)
    write_safetensors(tmp_path / "dle.safetensors", dle)
    (tmp_path / "bert_config.json").write_text(json.dumps(cfg["model"]))  # vocab_size 1000, hidden_act gelu
    out = run("import", str(tmp_path / "dle.safetensors"), str(tmp_path / "dle.h5"),
              "--config", str(tmp_path / "bert_config.json"))
    assert "NVIDIA DLE" in out
    assert "removed 5 vocabulary padding rows: the source has 1008 word-embedding rows" in out, out
    assert "hidden_act 'gelu_tanh'" in out and "tanh form" in out, out
    assert "is tied to (equal to) the word embeddings" in out
    import h5py
    with h5py.File(tmp_path / "dle.h5", "r") as f:
        assert json.loads(f["metadata/config"][()])["model"]["hidden_act"] == "gelu_tanh"
        assert f["model/bert.embeddings.word_embeddings.weight"].shape == (VOCAB, 64)

    tanh_cfg = H.make_config(model={"hidden_act": "gelu_tanh", "vocab_size": VOCAB})
    session = Session(tanh_cfg)
    session.checkpoint_load_weights(tmp_path / "dle.h5")
    for name in session.param_shapes():
        np.testing.assert_array_equal(session.param_read(name), state[name], err_msg=name)
    oracle = H.torch_model(tanh_cfg)
    oracle.load_state_dict({k: torch.from_numpy(v.astype(np.float64)) for k, v in state.items()})
    batch = torch_bert.random_batch(np.random.default_rng(8), 8, H.SEQ, H.PRED, H.VOCAB)
    with torch.no_grad():
        _, mlm, nsp, _, _ = oracle(**torch_bert.batch_tensors(batch))
    engine = session.eval(batch)
    assert abs(engine["mlm_loss"] - mlm.item()) <= 1e-5 * abs(mlm.item())
    assert abs(engine["nsp_loss"] - nsp.item()) <= 1e-5 * abs(nsp.item())

    # export-hf writes the config's vocabulary, not the padding
    run("export-hf", str(tmp_path / "dle.h5"), str(tmp_path / "hf"))
    assert read_safetensors(tmp_path / "hf" / "model.safetensors")["cls.predictions.bias"].shape == (VOCAB,)


def test_dle_gelu_form_is_settable(tmp_path):
    cfg, _, dle = dle_padded_state(22)
    write_safetensors(tmp_path / "dle.safetensors", dle)
    (tmp_path / "bert_config.json").write_text(json.dumps(cfg["model"]))
    out = run("import", str(tmp_path / "dle.safetensors"), str(tmp_path / "erf.h5"),
              "--config", str(tmp_path / "bert_config.json"), "--hidden-act", "gelu")
    assert "hidden_act gelu," in out and "gelu_tanh" not in out, out
    # weights recorded with the tanh form, loaded by a session computing erf: a warning says so
    run("import", str(tmp_path / "dle.safetensors"), str(tmp_path / "tanh.h5"),
        "--config", str(tmp_path / "bert_config.json"))
    train_cfg = H.make_config(model={"vocab_size": VOCAB}, train={"steps": 1, "init_checkpoint": str(tmp_path / "tanh.h5")})
    (tmp_path / "train.json").write_text(json.dumps(train_cfg))
    bert_train = os.path.join(BUILD, "src", "tools", "bert-train")
    r = subprocess.run([bert_train, str(tmp_path / "train.json"), "--steps", "1", "--output", str(tmp_path / "o.h5")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "records hidden_act 'gelu_tanh' but this session computes 'gelu'" in r.stderr, r.stderr


def test_untied_decoder_is_refused_not_dropped(tmp_path):
    cfg = H.make_config()
    model = H.torch_model(cfg, torch.float32)
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"] + 0.01
    write_safetensors(tmp_path / "w.safetensors", state)
    (tmp_path / "bert_config.json").write_text(json.dumps(cfg["model"]))
    result = subprocess.run([BERT_CKPT, "import", str(tmp_path / "w.safetensors"), str(tmp_path / "x.h5"),
                             "--config", str(tmp_path / "bert_config.json")], capture_output=True, text=True)
    assert result.returncode == 1
    assert "untied MLM decoder: 'cls.predictions.decoder.weight' differs from" in result.stderr, result.stderr
    assert not (tmp_path / "x.h5").exists()


def test_inspect_shows_a_safetensors_source_and_its_mapping(tmp_path):
    _, _, dle = dle_padded_state(23)
    write_safetensors(tmp_path / "dle.safetensors", dle)
    info = run("inspect", str(tmp_path / "dle.safetensors"))
    assert "(safetensors, NVIDIA DLE names" in info
    line = next(x for x in info.splitlines() if x.split()[0] == "module.bert.encoder.layer.0.intermediate.dense_act.weight")
    assert line.split()[1:] == ["F32", "128x64", "->", "bert.encoder.layer.0.intermediate.dense.weight"], line
    line = next(x for x in info.splitlines() if x.split()[0] == "module.bert.embeddings.LayerNorm.gamma")
    assert line.split()[-1] == "bert.embeddings.LayerNorm.weight"


@pytest.mark.parametrize("field,value,message", [
    ("data_offsets", [0, 1.7e20], "has data offset 1.7e+20, not a non-negative integer"),
    ("data_offsets", [-4, 4], "has data offset -4, not a non-negative integer"),
    ("shape", [2.5], "has shape dimension 2.5, not a non-negative integer"),
])
def test_non_integer_offsets_and_dimensions_are_refused(tmp_path, field, value, message):
    # A fuzzer's find: a float offset made the reader convert 1.7e20 to an integer (undefined).
    header = {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    header["w"][field] = value
    text = json.dumps(header).encode()
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(8))
    result = subprocess.run([BERT_CKPT, "inspect", str(path)], capture_output=True, text=True)
    assert result.returncode == 1, result.stderr
    assert f"'{path}' tensor 'w' {message}" in result.stderr, result.stderr
