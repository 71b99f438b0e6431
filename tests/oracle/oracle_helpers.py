"""Shared pieces of the oracle tests: the bert-tiny-like test config, moving weights between
the engine and the PyTorch model, the float64 PyTorch forward/backward, and the error metric
(max |engine - torch| / max |torch| per tensor) with the worst tensor named for messages.
"""
import copy

import numpy as np
import torch

import torch_bert

VOCAB = 1000  # not a multiple of 8: the engine pads to 1008 internally
SEQ = 32
PRED = 5

BASE_CONFIG = {
    "model": {"vocab_size": VOCAB, "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 64,
              "type_vocab_size": 2, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
              "attention_probs_dropout_prob": 0.0},
    "train": {"micro_batch": 8, "accumulation_steps": 1, "steps": 12, "seed": 1234,
              "threads": 2, "lr": 1e-3, "warmup_proportion": 0.25, "decay_degree": 0.5,
              "optimizer": "lamb", "weight_decay": 0.01, "max_grad_norm": 1.0,
              "dropout": False},
    "data": {"max_seq_length": SEQ, "max_predictions_per_seq": PRED},
}

# The gradient of the attention key bias is zero in exact arithmetic: it adds q·b_k to every
# score of a query row, and softmax is invariant to a per-row shift. Its computed entries are
# rounding noise, so a relative comparison is meaningless; the tests check it is at noise level.
def analytically_zero_grad(name):
    return name.endswith("attention.self.key.bias")


def make_config(model=None, train=None, data=None):
    """BASE_CONFIG with the given sections' keys overridden."""
    cfg = copy.deepcopy(BASE_CONFIG)
    for section, override in (("model", model), ("train", train), ("data", data)):
        cfg[section].update(override or {})
    return cfg


def torch_model(cfg, dtype=torch.float64):
    fields = {k: v for k, v in cfg["model"].items()}
    return torch_bert.BertForPreTraining(torch_bert.BertConfig(**fields)).to(dtype)


def load_engine_weights(model, session):
    """Copies every engine parameter (bert_param_read) into the torch model."""
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in session.param_shapes():
            params[name].copy_(torch.from_numpy(session.param_read(name)))


def torch_from_engine(cfg, session, dtype=torch.float64):
    model = torch_model(cfg, dtype)
    load_engine_weights(model, session)
    return model


def torch_loss_and_grads(model, batch):
    """Float64 forward+backward of the mean MLM + mean NSP loss on one batch.
    Returns (total, mlm, nsp, {name: gradient})."""
    model.zero_grad(set_to_none=True)
    total, mlm, nsp, _, _ = model(**torch_bert.batch_tensors(batch))
    total.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return float(total), float(mlm), float(nsp), grads


def rel_err(value, ref):
    """max |value - ref| / max |ref| (inf when ref is all zero and value is not)."""
    value = np.asarray(value, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert value.shape == ref.shape, f"shape {value.shape} != {ref.shape}"
    diff = float(np.max(np.abs(value - ref))) if ref.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


def tensor_errors(engine, ref, skip=lambda name: False):
    """{name: rel_err} for every tensor of ref not skipped, worst first."""
    errs = {n: rel_err(engine[n], np.asarray(ref[n])) for n in ref if not skip(n)}
    return dict(sorted(errs.items(), key=lambda kv: -kv[1]))


def describe_worst(errs, count=5):
    return ", ".join(f"{n}: {e:.3e}" for n, e in list(errs.items())[:count])


def as_numpy(tensors):
    return {n: t.detach().cpu().numpy() if torch.is_tensor(t) else np.asarray(t)
            for n, t in tensors.items()}
