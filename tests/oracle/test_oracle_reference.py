"""Self-tests of the oracle itself (no engine needed): the PyTorch model has Hugging Face's
parameter names and shapes, its loss is DLE's, its activations are the two GELU forms, and the
reference LAMB / AdamW / LR schedule follow their published formulas."""
import math

import numpy as np
import pytest
import torch

import oracle_helpers as oh
import reference_optim as ro
import torch_bert as tb


def hf_pretraining_names(layers, V, H, I, P, T):
    """Hugging Face BertForPreTraining.named_parameters(), as published for bert-base."""
    names = [("bert.embeddings.word_embeddings.weight", (V, H)),
             ("bert.embeddings.position_embeddings.weight", (P, H)),
             ("bert.embeddings.token_type_embeddings.weight", (T, H)),
             ("bert.embeddings.LayerNorm.weight", (H,)), ("bert.embeddings.LayerNorm.bias", (H,))]
    for l in range(layers):
        p = f"bert.encoder.layer.{l}."
        for proj in ("query", "key", "value"):
            names += [(p + f"attention.self.{proj}.weight", (H, H)), (p + f"attention.self.{proj}.bias", (H,))]
        names += [(p + "attention.output.dense.weight", (H, H)), (p + "attention.output.dense.bias", (H,)),
                  (p + "attention.output.LayerNorm.weight", (H,)), (p + "attention.output.LayerNorm.bias", (H,)),
                  (p + "intermediate.dense.weight", (I, H)), (p + "intermediate.dense.bias", (I,)),
                  (p + "output.dense.weight", (H, I)), (p + "output.dense.bias", (H,)),
                  (p + "output.LayerNorm.weight", (H,)), (p + "output.LayerNorm.bias", (H,))]
    names += [("bert.pooler.dense.weight", (H, H)), ("bert.pooler.dense.bias", (H,)),
              ("cls.predictions.bias", (V,)),
              ("cls.predictions.transform.dense.weight", (H, H)), ("cls.predictions.transform.dense.bias", (H,)),
              ("cls.predictions.transform.LayerNorm.weight", (H,)), ("cls.predictions.transform.LayerNorm.bias", (H,)),
              ("cls.seq_relationship.weight", (2, H)), ("cls.seq_relationship.bias", (2,))]
    return names


def small_model(act="gelu", seed=0):
    torch.manual_seed(seed)
    return oh.torch_model(oh.make_config(model={"hidden_act": act}))


def test_parameter_names_and_shapes_are_hugging_faces():
    model = small_model()
    got = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    assert got == hf_pretraining_names(2, 1000, 64, 128, 64, 2)
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight


def test_gelu_forms():
    x = torch.linspace(-6, 6, 1001, dtype=torch.float64)
    assert torch.allclose(tb.gelu_erf(x), torch.nn.functional.gelu(x), atol=1e-15)
    assert torch.allclose(tb.gelu_tanh(x), torch.nn.functional.gelu(x, approximate="tanh"), atol=1e-15)
    assert float((tb.gelu_erf(x) - tb.gelu_tanh(x)).abs().max()) > 1e-4  # the forms differ


def test_masked_lm_labels_first_zero_ends_masks():
    positions = np.array([[3, 5, 0, 7], [1, 2, 4, 6]])
    ids = np.array([[11, 12, 13, 14], [21, 22, 23, 24]])
    labels = tb.masked_lm_labels(positions, ids, 8)
    assert labels.tolist() == [[-1, -1, -1, 11, -1, 12, -1, -1], [-1, 21, 22, -1, 23, -1, 24, -1]]


def test_loss_is_mean_mlm_plus_mean_nsp_over_masked_tokens():
    model = small_model()
    batch = tb.random_batch(np.random.default_rng(1), 4, oh.SEQ, oh.PRED, oh.VOCAB, trailing_garbage=True)
    with torch.no_grad():
        total, mlm, nsp, scores, nsp_scores = model(**tb.batch_tensors(batch))
    logp = torch.log_softmax(scores, dim=-1)
    terms = []
    for b in range(4):
        for j in range(oh.PRED):
            pos = int(batch["masked_lm_positions"][b, j])
            if pos == 0:
                break
            terms.append(-float(logp[b, pos, int(batch["masked_lm_ids"][b, j])]))
    assert len(terms) == int((tb.masked_lm_labels(batch["masked_lm_positions"], batch["masked_lm_ids"], oh.SEQ) >= 0).sum())
    nsp_terms = [-float(torch.log_softmax(nsp_scores[b], -1)[int(batch["next_sentence_labels"][b])]) for b in range(4)]
    assert float(mlm) == pytest.approx(np.mean(terms), rel=1e-12)
    assert float(nsp) == pytest.approx(np.mean(nsp_terms), rel=1e-12)
    assert float(total) == pytest.approx(np.mean(terms) + np.mean(nsp_terms), rel=1e-12)


def test_padding_tokens_do_not_change_the_loss():
    model = small_model()
    batch = tb.random_batch(np.random.default_rng(2), 4, oh.SEQ, oh.PRED, oh.VOCAB)
    other = {k: v.copy() for k, v in batch.items()}
    pad = other["input_mask"] == 0
    assert pad.any()
    other["input_ids"][pad] = 7
    other["segment_ids"][pad] = 1
    with torch.no_grad():
        a = float(model(**tb.batch_tensors(batch))[0])
        b = float(model(**tb.batch_tensors(other))[0])
    assert a == pytest.approx(b, rel=1e-13)


def test_key_bias_gradient_is_rounding_noise():
    model = small_model()
    batch = tb.random_batch(np.random.default_rng(3), 4, oh.SEQ, oh.PRED, oh.VOCAB)
    _, _, _, grads = oh.torch_loss_and_grads(model, batch)
    global_max = max(float(g.abs().max()) for g in grads.values())
    for name, g in grads.items():
        if oh.analytically_zero_grad(name):
            assert float(g.abs().max()) < 1e-12 * global_max, name
        elif "position_embeddings" not in name:
            assert float(g.abs().max()) > 1e-8 * global_max, name


def test_hugging_face_model_agrees_when_installed():
    transformers = pytest.importorskip("transformers")
    for act in ("gelu", "gelu_new"):
        cfg = oh.make_config(model={"hidden_act": act})
        mine = small_model(act)
        hf = transformers.BertForPreTraining(transformers.BertConfig(**cfg["model"])).double()
        hf.load_state_dict(mine.state_dict(), strict=False)
        batch = tb.random_batch(np.random.default_rng(4), 4, oh.SEQ, oh.PRED, oh.VOCAB)
        t = tb.batch_tensors(batch)
        labels = t["masked_lm_labels"].clone()
        labels[labels == -1] = -100
        out = hf(input_ids=t["input_ids"], token_type_ids=t["token_type_ids"],
                 attention_mask=t["attention_mask"], labels=labels,
                 next_sentence_label=t["next_sentence_labels"])
        out.loss.backward()
        total, _, _, grads = oh.torch_loss_and_grads(mine, batch)
        assert total == pytest.approx(float(out.loss), rel=1e-12)
        hf_params = dict(hf.named_parameters())
        for name, g in grads.items():
            if not oh.analytically_zero_grad(name):
                assert oh.rel_err(g.numpy(), hf_params[name].grad.numpy()) < 1e-10, name


# ---- reference optimizers -------------------------------------------------------------

def test_poly_warmup_lr():
    lr = [ro.poly_warmup_lr(1.0, t, 12, 0.25, 0.5) for t in range(1, 13)]
    assert lr[0] == pytest.approx(1 / 12 / 0.25)
    assert lr[1] == pytest.approx(2 / 12 / 0.25)
    assert lr[2] == pytest.approx(math.sqrt(1 - 3 / 12))  # progress 0.25 is past warmup
    assert lr[10] == pytest.approx(math.sqrt(1 / 12))
    assert lr[11] == 0.0
    assert ro.poly_warmup_lr(2.0, 6, 12, 0.0, 1.0) == pytest.approx(1.0)


def test_no_decay_groups():
    assert ro.no_decay("cls.predictions.bias")
    assert ro.no_decay("bert.encoder.layer.0.output.LayerNorm.weight")
    assert ro.no_decay("bert.embeddings.LayerNorm.bias")
    assert not ro.no_decay("bert.embeddings.word_embeddings.weight")
    assert not ro.no_decay("cls.seq_relationship.weight")


def test_lamb_first_step_by_hand():
    w = torch.tensor([3.0, 4.0], dtype=torch.float64)        # ||w|| = 5, decayed
    b = torch.tensor([0.5, -0.5], dtype=torch.float64)       # a bias: no decay, no trust ratio
    opt = ro.Lamb([("layer.weight", w), ("layer.bias", b)], eps=1e-6, weight_decay=0.01,
                  max_grad_norm=1.0)
    gw = torch.tensor([6.0, 0.0], dtype=torch.float64)
    gb = torch.tensor([0.0, 8.0], dtype=torch.float64)        # global norm 10 -> divide by 10
    norm = opt.step({"layer.weight": gw, "layer.bias": gb}, lr=0.1)
    assert norm == pytest.approx(10.0)
    # step 1: m_hat = g', v_hat = g'^2 with g' = g / 10, so m_hat / (sqrt(v_hat) + eps) = g'/(|g'|+eps)
    uw = torch.tensor([0.6 / (0.6 + 1e-6), 0.0], dtype=torch.float64) + 0.01 * torch.tensor([3.0, 4.0], dtype=torch.float64)
    ratio = 5.0 / float(torch.linalg.norm(uw))
    assert torch.allclose(w, torch.tensor([3.0, 4.0], dtype=torch.float64) - 0.1 * ratio * uw, atol=1e-14)
    ub = torch.tensor([0.0, 0.8 / (0.8 + 1e-6)], dtype=torch.float64)
    assert torch.allclose(b, torch.tensor([0.5, -0.5], dtype=torch.float64) - 0.1 * ub, atol=1e-14)


def test_nvlamb_applies_the_trust_ratio_to_biases():
    b1 = torch.tensor([3.0, 4.0], dtype=torch.float64)
    b2 = b1.clone()
    g = {"x.bias": torch.tensor([0.3, 0.0], dtype=torch.float64)}
    ro.Lamb([("x.bias", b1)], nvlamb=False).step(g, lr=0.1)
    ro.Lamb([("x.bias", b2)], nvlamb=True).step(g, lr=0.1)
    u = 0.3 / (0.3 + 1e-6)
    assert float(b1[0]) == pytest.approx(3.0 - 0.1 * u, abs=1e-14)
    assert float(b2[0]) == pytest.approx(3.0 - 0.1 * (5.0 / u) * u, abs=1e-12)


def test_lamb_minimises_a_quadratic():
    torch.manual_seed(0)
    target = torch.randn(50, dtype=torch.float64)
    p = torch.randn(50, dtype=torch.float64)
    opt = ro.Lamb([("w.weight", p)], weight_decay=0.0, max_grad_norm=1.0)
    start = float(((p - target) ** 2).sum())
    for t in range(1, 301):
        opt.step({"w.weight": 2 * (p - target)}, lr=0.02)
    assert float(((p - target) ** 2).sum()) < 1e-3 * start


def test_adamw_equals_torch_optim_adamw_without_clipping():
    torch.manual_seed(0)
    shapes = {"a.weight": (5, 3), "a.bias": (5,), "n.LayerNorm.weight": (5,)}
    mine = {n: torch.randn(s, dtype=torch.float64) for n, s in shapes.items()}
    theirs = {n: p.clone().requires_grad_(True) for n, p in mine.items()}
    opt = ro.AdamW(list(mine.items()), eps=1e-6, weight_decay=0.01, max_grad_norm=0.0)
    groups = [{"params": [theirs[n] for n in shapes if not ro.no_decay(n)], "weight_decay": 0.01},
              {"params": [theirs[n] for n in shapes if ro.no_decay(n)], "weight_decay": 0.0}]
    torch_opt = torch.optim.AdamW(groups, lr=0.05, betas=(0.9, 0.999), eps=1e-6)
    for step in range(1, 6):
        grads = {n: torch.randn(s, dtype=torch.float64) for n, s in shapes.items()}
        lr = 0.05 * step / 5
        for group in torch_opt.param_groups:
            group["lr"] = lr
        for n, t in theirs.items():
            t.grad = grads[n].clone()
        torch_opt.step()
        opt.step(grads, lr)
    for n in shapes:
        assert torch.allclose(mine[n], theirs[n].detach(), rtol=0, atol=1e-14), n


def test_clipping_divides_by_norm_over_max():
    p1 = torch.tensor([1.0, 2.0], dtype=torch.float64)
    p2 = p1.clone()
    g = torch.tensor([30.0, 40.0], dtype=torch.float64)  # norm 50
    o1 = ro.AdamW([("w.weight", p1)], max_grad_norm=2.0, weight_decay=0.0)
    o2 = ro.AdamW([("w.weight", p2)], max_grad_norm=0.0, weight_decay=0.0)
    for _ in range(3):
        o1.step({"w.weight": g}, lr=0.1)
        o2.step({"w.weight": g / 25.0}, lr=0.1)
    assert torch.equal(p1, p2)
    assert ro.clip_factor(0.5, 1.0) == 1.0 and ro.clip_factor(3.0, 1.0) == 3.0
    assert ro.average_grads({"x": torch.tensor([8.0])}, 2, 2)["x"].item() == 2.0
