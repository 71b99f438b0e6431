"""The engine's CPU forward/backward against the independent PyTorch model (float64).

The engine initialises its weights; they are read into PyTorch through bert_param_read (and,
the other way, PyTorch's weights are written into the engine with bert_param_write). On the
same padded batch with dropout off: loss within 1e-5 relative, every parameter gradient within
1e-4 relative (max-abs error / max-abs value), the worst tensor named on failure. Also eval,
checkpoints (HDF5 /model/<name>) and determinism with dropout on."""
import os

import numpy as np
import pytest
import torch

import engine_ctypes as ec
import oracle_helpers as oh
import torch_bert as tb

pytestmark = pytest.mark.skipif(ec.load_library() is None, reason="BERT_LIB (libbert.so) not available")

LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4
# Bound for a gradient that is zero in exact arithmetic (oh.analytically_zero_grad): fp32
# rounding noise, relative to the largest gradient entry of the model.
NOISE_RTOL = 1e-5


def make_batch(seed, batch_size=8, **kw):
    return tb.random_batch(np.random.default_rng(seed), batch_size, oh.SEQ, oh.PRED, oh.VOCAB, **kw)


def check_gradients(engine_grads, torch_grads):
    ref = oh.as_numpy(torch_grads)
    errs = oh.tensor_errors(engine_grads, ref, skip=oh.analytically_zero_grad)
    worst_name, worst = next(iter(errs.items()))
    assert worst <= GRAD_RTOL, f"gradient mismatch; worst tensors: {oh.describe_worst(errs)}"
    global_max = max(float(np.abs(g).max()) for g in ref.values())
    for name in ref:
        if oh.analytically_zero_grad(name):
            noise = float(np.abs(engine_grads[name]).max()) / global_max
            assert noise <= NOISE_RTOL, f"{name}: gradient should be ~0, max |g| / max |G| = {noise:.3e}"
    return worst_name, worst


def test_parameter_table_is_hugging_faces():
    cfg = oh.make_config()
    with ec.Session(cfg) as s:
        shapes = s.param_shapes()
    expected = [(n, tuple(p.shape)) for n, p in oh.torch_model(cfg).named_parameters()]
    assert list(shapes.items()) == expected
    assert shapes["bert.embeddings.word_embeddings.weight"] == (oh.VOCAB, 64)
    assert shapes["cls.predictions.bias"] == (oh.VOCAB,)


def test_engine_init_follows_the_config():
    cfg = oh.make_config(model={"initializer_range": 0.05})
    with ec.Session(cfg) as s:
        params = s.params()
    for name, p in params.items():
        if "LayerNorm" in name:
            expected = 1.0 if name.endswith("weight") else 0.0
            assert np.all(p == expected), name
        elif name.endswith("bias"):
            assert np.all(p == 0.0), name
        else:
            assert abs(float(p.std()) - 0.05) < 0.2 * 0.05, f"{name}: std {p.std()}"
            assert abs(float(p.mean())) < 0.05 * 0.3, name


# initializer_range 0.2 drives the GELU inputs to O(1), where the erf and tanh forms differ by
# far more than the tolerance (checked below), so the activation form is really tested.
@pytest.mark.parametrize("act,unpad,init", [("gelu", True, 0.02), ("gelu", False, 0.02),
                                            ("gelu", False, 0.2), ("gelu_new", True, 0.2)])
def test_loss_and_gradients_match_torch(act, unpad, init):
    cfg = oh.make_config(model={"hidden_act": act, "initializer_range": init}, data={"unpad": unpad})
    batch = make_batch(10, trailing_garbage=True)
    with ec.Session(cfg) as s:
        model = oh.torch_from_engine(cfg, s)
        r = s.forward_backward(batch)
        engine_grads = s.grads()
        other_act = "gelu" if act == "gelu_new" else "gelu_new"
        other = oh.torch_from_engine(oh.make_config(model={"hidden_act": other_act}), s)
    total, mlm, nsp, grads = oh.torch_loss_and_grads(model, batch)
    assert r["mlm_loss"] == pytest.approx(mlm, rel=LOSS_RTOL)
    assert r["nsp_loss"] == pytest.approx(nsp, rel=LOSS_RTOL)
    assert r["loss"] == pytest.approx(total, rel=LOSS_RTOL), f"engine {r['loss']} torch {total}"
    name, worst = check_gradients(engine_grads, grads)
    print(f"[{act}, unpad={unpad}, init={init}] loss engine {r['loss']:.9g} torch {total:.9g} "
          f"rel {abs(r['loss'] - total) / total:.2e}; worst grad {name} {worst:.2e}")
    if init >= 0.2:
        _, _, _, other_grads = oh.torch_loss_and_grads(other, batch)
        errs = oh.tensor_errors(oh.as_numpy(other_grads), oh.as_numpy(grads), skip=oh.analytically_zero_grad)
        assert max(errs.values()) > 10 * GRAD_RTOL, "test cannot tell the GELU forms apart"


def test_weights_written_from_torch():
    cfg = oh.make_config()
    torch.manual_seed(7)
    model = oh.torch_model(cfg)
    with torch.no_grad():  # non-trivial LayerNorm and bias values too
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    batch = make_batch(11)
    with ec.Session(cfg) as s:
        for name, p in model.named_parameters():
            s.param_write(name, p.detach().numpy().astype(np.float32))
        for name, p in model.named_parameters():
            assert np.array_equal(s.param_read(name), p.detach().numpy().astype(np.float32)), name
        with torch.no_grad():  # torch computes with exactly the fp32 values the engine holds
            for p in model.parameters():
                p.copy_(p.float().double())
        r = s.forward_backward(batch)
        engine_grads = s.grads()
    total, _, _, grads = oh.torch_loss_and_grads(model, batch)
    assert r["loss"] == pytest.approx(total, rel=LOSS_RTOL)
    name, worst = check_gradients(engine_grads, grads)
    print(f"[param_write] loss rel {abs(r['loss'] - total) / total:.2e}; worst grad {name} {worst:.2e}")


def test_eval_matches_torch():
    cfg = oh.make_config()
    batch = make_batch(12)
    with ec.Session(cfg) as s:
        model = oh.torch_from_engine(cfg, s)
        r = s.eval(batch)
    with torch.no_grad():
        _, mlm, nsp, scores, nsp_scores = model(**tb.batch_tensors(batch))
    labels = torch.as_tensor(tb.masked_lm_labels(batch["masked_lm_positions"], batch["masked_lm_ids"], oh.SEQ))
    masked = labels >= 0
    mlm_acc = float((scores.argmax(-1)[masked] == labels[masked]).double().mean())
    nsp_acc = float((nsp_scores.argmax(-1) == torch.as_tensor(batch["next_sentence_labels"])).double().mean())
    assert r["masked_tokens"] == int(masked.sum())
    assert r["sequences"] == 8
    assert r["mlm_loss"] == pytest.approx(float(mlm), rel=LOSS_RTOL)
    assert r["nsp_loss"] == pytest.approx(float(nsp), rel=LOSS_RTOL)
    assert r["mlm_accuracy"] == pytest.approx(mlm_acc, abs=1e-12)
    assert r["nsp_accuracy"] == pytest.approx(nsp_acc, abs=1e-12)


def test_checkpoint_round_trip(tmp_path):
    h5py = pytest.importorskip("h5py")
    cfg = oh.make_config()
    path = tmp_path / "weights.h5"
    with ec.Session(cfg) as s:
        s.step(make_batch(13))  # weights no longer at their init values
        params = s.params()
        s.checkpoint(path)
        with h5py.File(path, "r") as f:
            names = []
            f["model"].visit(lambda n: names.append(n) if isinstance(f["model"][n], h5py.Dataset) else None)
            assert sorted(names) == sorted(params)
            for name, value in params.items():
                ds = f["model"][name]
                assert ds.dtype == np.float32, name
                assert ds.shape == value.shape, f"{name}: file {ds.shape} engine {value.shape}"
                assert np.array_equal(ds[()], value), name
            assert f["model/bert.embeddings.word_embeddings.weight"].shape == (oh.VOCAB, 64)
        # Overwrite the weights, then load the file back: every tensor is restored exactly.
        rng = np.random.default_rng(0)
        for name, value in params.items():
            s.param_write(name, rng.standard_normal(value.shape).astype(np.float32))
        s.checkpoint_load(path)
        for name, value in params.items():
            assert np.array_equal(s.param_read(name), value), name
    # A fresh session loading the file computes the same loss as the one that wrote it.
    batch = make_batch(14)
    with ec.Session(cfg) as a, ec.Session(oh.make_config(train={"seed": 99})) as b:
        a.checkpoint_load(path)
        b.checkpoint_load(path)
        assert a.eval(batch)["mlm_loss"] == b.eval(batch)["mlm_loss"]
    assert not [p for p in os.listdir(tmp_path) if p != "weights.h5"], "temporary files left behind"


def test_same_seed_is_bit_identical_with_dropout():
    cfg = oh.make_config(model={"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1},
                         train={"dropout": True, "seed": 77})
    batches = [make_batch(20 + i) for i in range(3)]

    def run(config):
        with ec.Session(config) as s:
            losses = [s.step(b)["loss"] for b in batches]
            return losses, s.params()

    losses_a, params_a = run(cfg)
    losses_b, params_b = run(cfg)
    assert [np.float32(x).tobytes() for x in losses_a] == [np.float32(x).tobytes() for x in losses_b]
    for name in params_a:
        assert np.array_equal(params_a[name], params_b[name]), name
    # Dropout is really on: the same weights without dropout give different losses.
    no_dropout = oh.make_config(model=cfg["model"], train={"dropout": False, "seed": 77})
    losses_c, _ = run(no_dropout)
    assert losses_c[0] != losses_a[0]
    # Training without dropout matches the eval loss of the initial weights on the first batch.
    with ec.Session(no_dropout) as s:
        e = s.eval(batches[0])
    assert losses_c[0] == pytest.approx(e["mlm_loss"] + e["nsp_loss"], rel=LOSS_RTOL)
