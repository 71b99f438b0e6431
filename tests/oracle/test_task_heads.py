"""The fine-tuning heads against Hugging Face transformers (float64): BertForSequenceClassification
(classes, and regression with num_labels 1), BertForTokenClassification and
BertForQuestionAnswering. On the engine's weights and the same padded batch, dropout off: the
loss within 1e-5 relative, every gradient within 1e-4 relative, the logits of bert_infer within
1e-5. Also: a pretraining checkpoint as train.init_checkpoint (encoder loaded, head initialised),
`bert-ckpt export-hf` folders that load into the matching HF class with no missing or unexpected
keys and the same logits, and HF-made fine-tuned folders that import and predict the same.
Skips without transformers (`pip install 'transformers<4.41'`)."""
import json
import os
import subprocess

import numpy as np
import pytest
import torch

import engine_ctypes as ec
import oracle_helpers as oh
import torch_bert as tb

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.skipif(ec.load_library() is None, reason="BERT_LIB (libbert.so) not available")

BERT_CKPT = os.path.join(os.environ.get("BERT_BUILD_DIR", ""), "src", "tools", "bert-ckpt")
LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4
LOGIT_RTOL = 1e-5
NOISE_RTOL = 1e-5
B = 6

HF_CLASS = {"sequence_classification": "BertForSequenceClassification",
            "token_classification": "BertForTokenClassification",
            "question_answering": "BertForQuestionAnswering"}
CASES = [("sequence_classification", 3), ("sequence_classification", 1), ("token_classification", 5),
         ("question_answering", 2)]


def zero_gradients(task):
    """Gradients that are zero in exact arithmetic, so only their noise level is checked: the
    attention key bias (oh.analytically_zero_grad), and for QA the qa_outputs bias and the last
    LayerNorm's bias (each sequence's logit gradients sum to 0 over its positions)."""
    last_ln = f"bert.encoder.layer.{oh.BASE_CONFIG['model']['num_hidden_layers'] - 1}.output.LayerNorm.bias"
    qa = {"qa_outputs.bias", last_ln} if task == "question_answering" else set()
    return lambda name: oh.analytically_zero_grad(name) or name in qa


def task_config(task, num_labels, **train):
    cfg = oh.make_config(train=train)
    cfg["task"] = {"type": task, "num_labels": num_labels}
    return cfg


def hf_model(cfg, dtype=torch.float64):
    task = cfg["task"]
    config = transformers.BertConfig(**cfg["model"], num_labels=task["num_labels"])
    model = getattr(transformers, HF_CLASS[task["type"]])(config).to(dtype)
    model.eval()
    return model


def load_engine_weights(model, session):
    state = {n: torch.from_numpy(v).to(torch.float64) for n, v in session.params().items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert not [m for m in missing if not m.endswith(("position_ids", "token_type_ids"))], missing


def make_batch(task, num_labels, seed):
    rng = np.random.default_rng(seed)
    dle = tb.random_batch(rng, B, oh.SEQ, oh.PRED, oh.VOCAB)
    batch = {k: dle[k] for k in ("input_ids", "segment_ids", "input_mask")}
    S = oh.SEQ
    if task == "sequence_classification" and num_labels == 1:
        batch["label_values"] = rng.normal(size=B).astype(np.float32)
    elif task == "sequence_classification":
        batch["labels"] = rng.integers(0, num_labels, B).astype(np.int32)
    elif task == "token_classification":
        labels = rng.integers(0, num_labels, (B, S)).astype(np.int32)
        labels[batch["input_mask"] == 0] = -100
        labels[0, 3] = -100
        batch["labels"] = labels
    else:
        batch["start_positions"] = rng.integers(0, S, B).astype(np.int32)
        batch["end_positions"] = rng.integers(0, S, B).astype(np.int32)
        batch["start_positions"][1] = S + 4  # clamped to S and ignored, as HF does
    return batch


def hf_inputs(batch):
    out = {"input_ids": torch.from_numpy(batch["input_ids"].astype(np.int64)),
           "attention_mask": torch.from_numpy(batch["input_mask"].astype(np.int64)),
           "token_type_ids": torch.from_numpy(batch["segment_ids"].astype(np.int64))}
    if "labels" in batch:
        out["labels"] = torch.from_numpy(batch["labels"].astype(np.int64))
    if "label_values" in batch:
        out["labels"] = torch.from_numpy(batch["label_values"].astype(np.float64))
    for k in ("start_positions", "end_positions"):
        if k in batch:
            out[k] = torch.from_numpy(batch[k].astype(np.int64))
    return out


def hf_logits(task, output, mask):
    """The HF logits in bert_infer's layout, 0 at padding positions for per-token heads."""
    if task == "question_answering":
        logits = torch.stack([output.start_logits, output.end_logits], dim=1).detach().numpy()  # [B, 2, S]
        return logits * mask[:, None, :]
    logits = output.logits.detach().numpy()
    if task == "token_classification":
        return logits * mask[:, :, None]
    return logits


@pytest.mark.parametrize("task,num_labels", CASES)
def test_head_loss_gradients_and_logits_equal_hugging_face(task, num_labels):
    cfg = task_config(task, num_labels)
    with ec.Session(cfg) as s:
        shapes = s.param_shapes()
        model = hf_model(cfg)
        assert list(shapes) == [n for n, _ in model.named_parameters()]
        assert all(shapes[n] == tuple(p.shape) for n, p in model.named_parameters())
        load_engine_weights(model, s)
        batch = make_batch(task, num_labels, seed=11)
        result = s.forward_backward(batch)
        grads = s.grads()
        logits = s.infer({k: batch[k] for k in ("input_ids", "segment_ids", "input_mask")}, "logits")

    output = model(**hf_inputs(batch))
    output.loss.backward()
    ref_loss = float(output.loss)
    assert abs(result["loss"] - ref_loss) <= LOSS_RTOL * abs(ref_loss), (result["loss"], ref_loss)

    ref_grads = {n: p.grad.numpy() for n, p in model.named_parameters()}
    zero = zero_gradients(task)
    errs = oh.tensor_errors(grads, ref_grads, skip=zero)
    assert next(iter(errs.values())) <= GRAD_RTOL, oh.describe_worst(errs)
    global_max = max(float(np.abs(g).max()) for g in ref_grads.values())
    for name in [n for n in ref_grads if zero(n)]:
        assert float(np.abs(grads[name]).max()) / global_max <= NOISE_RTOL, name
    for head in [n for n in ref_grads if n.startswith(("classifier.", "qa_outputs."))]:
        assert zero(head) or (errs[head] <= GRAD_RTOL and np.abs(ref_grads[head]).max() > 0), head

    ref = hf_logits(task, output, batch["input_mask"])
    assert oh.rel_err(logits.reshape(ref.shape), ref) <= LOGIT_RTOL


def with_argmax_labels(task, batch, output):
    """The batch with some labels set to HF's argmax, so that accuracy is neither 0 nor 1: QA rows
    0, 2 and 4 get both positions (row 1's start stays outside the sequence, ignored) and row 3
    only its start; the first three sequences' class; every other token's tag."""
    batch = dict(batch)
    if task == "question_answering":
        start, end = (x.detach().numpy().argmax(-1) for x in (output.start_logits, output.end_logits))
        batch["start_positions"], batch["end_positions"] = batch["start_positions"].copy(), batch["end_positions"].copy()
        for b in (0, 2, 3, 4):
            batch["start_positions"][b] = start[b]
            if b != 3:
                batch["end_positions"][b] = end[b]
        batch["end_positions"][3] = (end[3] + 1) % oh.SEQ
    elif task == "token_classification":
        labels = batch["labels"].copy()
        guess = output.logits.detach().numpy().argmax(-1)
        labels[:, ::2] = np.where(labels[:, ::2] >= 0, guess[:, ::2], labels[:, ::2])
        batch["labels"] = labels
    elif "labels" in batch:
        batch["labels"] = batch["labels"].copy()
        batch["labels"][:3] = output.logits.detach().numpy().argmax(-1)[:3]
    return batch


def hf_accuracy(task, batch, output):
    """Accuracy from HF's logits as bert_eval defines it, and the count it is over."""
    if task == "question_answering":
        S = oh.SEQ
        start, end = (np.clip(batch[k], 0, S) for k in ("start_positions", "end_positions"))
        hits = (output.start_logits.detach().numpy().argmax(-1) == start) & (output.end_logits.detach().numpy().argmax(-1) == end)
        return hits.mean(), B
    if task == "token_classification":
        labelled = batch["labels"] >= 0
        hits = output.logits.detach().numpy().argmax(-1) == batch["labels"]
        return hits[labelled].mean(), int(labelled.sum())
    if "label_values" in batch:
        return float("nan"), B
    return (output.logits.detach().numpy().argmax(-1) == batch["labels"]).mean(), B


@pytest.mark.parametrize("task,num_labels", CASES)
def test_eval_loss_and_accuracy_equal_hugging_face(task, num_labels):
    """bert_eval on a labelled batch of 6 cut into micro-batches of 4 (QA's ignored start in the
    first): the whole batch's loss as HF computes it (1e-5 relative) and its accuracy, exactly."""
    cfg = task_config(task, num_labels, micro_batch=4)
    with ec.Session(cfg) as s:
        model = hf_model(cfg)
        load_engine_weights(model, s)
        inputs = hf_inputs({k: v for k, v in make_batch(task, num_labels, seed=13).items()})
        with torch.no_grad():
            unlabelled = model(**{k: v for k, v in inputs.items()
                                  if k in ("input_ids", "attention_mask", "token_type_ids")})
        batch = with_argmax_labels(task, make_batch(task, num_labels, seed=13), unlabelled)
        result = s.eval(batch)
    with torch.no_grad():
        output = model(**hf_inputs(batch))
    ref_loss = float(output.loss)
    assert abs(result["task_loss"] - ref_loss) <= LOSS_RTOL * abs(ref_loss), (result["task_loss"], ref_loss)
    accuracy, count = hf_accuracy(task, batch, output)
    assert result["task_count"] == count and result["sequences"] == B
    if task == "sequence_classification" and num_labels == 1:
        assert np.isnan(result["task_accuracy"])
    else:
        assert 0 < accuracy < 1 and result["task_accuracy"] == accuracy, (result["task_accuracy"], accuracy)
    assert result["mlm_loss"] == 0 and result["masked_tokens"] == 0


def test_pooled_and_hidden_outputs_equal_hugging_face():
    cfg = task_config("sequence_classification", 2)
    batch = make_batch("sequence_classification", 2, seed=5)
    inputs = {k: batch[k] for k in ("input_ids", "segment_ids", "input_mask")}
    with ec.Session(cfg) as s:
        model = hf_model(cfg)
        load_engine_weights(model, s)
        pooled = s.infer(inputs, "pooled").reshape(B, -1)
        hidden = s.infer(inputs, "hidden").reshape(B, oh.SEQ, -1)
    out = model.bert(**{k: v for k, v in hf_inputs(batch).items() if k != "labels"})
    mask = batch["input_mask"][:, :, None]
    assert oh.rel_err(pooled, out.pooler_output.detach().numpy()) <= LOGIT_RTOL
    assert oh.rel_err(hidden, out.last_hidden_state.detach().numpy() * mask) <= LOGIT_RTOL
    assert np.all(hidden[batch["input_mask"] == 0] == 0)


def test_init_checkpoint_loads_the_encoder_and_initialises_the_head(tmp_path):
    pre = oh.make_config()
    with ec.Session(pre) as s:
        s.step(tb.random_batch(np.random.default_rng(1), 8, oh.SEQ, oh.PRED, oh.VOCAB))
        s.checkpoint(str(tmp_path / "pre.h5"))
        encoder = s.params()
    for task, labels, head in (("sequence_classification", 4, "classifier"),
                               ("question_answering", 2, "qa_outputs")):
        cfg = task_config(task, labels, init_checkpoint=str(tmp_path / "pre.h5"))
        cfg["model"]["initializer_range"] = 0.05
        with ec.Session(cfg) as s:
            params = s.params()
        for name, value in params.items():
            if name.startswith("bert."):
                np.testing.assert_array_equal(value, encoder[name], err_msg=name)
        assert ("bert.pooler.dense.weight" in params) == (task == "sequence_classification")
        assert params[f"{head}.weight"].shape == (labels, 64)
        assert abs(float(params[f"{head}.weight"].std()) - 0.05) < 0.01
        assert not params[f"{head}.bias"].any()


def run_ckpt(*args):
    result = subprocess.run([BERT_CKPT, *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.skipif(not os.path.exists(BERT_CKPT), reason="bert-ckpt is not built")
@pytest.mark.parametrize("task,num_labels", CASES)
def test_exported_folder_loads_into_the_hf_class_with_the_same_logits(tmp_path, task, num_labels):
    cfg = task_config(task, num_labels)
    cfg["task"]["id2label"] = [f"tag{i}" for i in range(num_labels)]
    batch = make_batch(task, num_labels, seed=3)
    inputs = {k: batch[k] for k in ("input_ids", "segment_ids", "input_mask")}
    with ec.Session(cfg) as s:
        s.step(batch)
        s.checkpoint(str(tmp_path / "ft.h5"))
        logits = s.infer(inputs, "logits")
    run_ckpt("export-hf", str(tmp_path / "ft.h5"), str(tmp_path / "hf"))
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == [HF_CLASS[task]]
    assert config["id2label"] == {str(i): f"tag{i}" for i in range(num_labels)}
    cls = getattr(transformers, HF_CLASS[task])
    model, info = cls.from_pretrained(str(tmp_path / "hf"), output_loading_info=True)
    assert info["missing_keys"] == [] and info["unexpected_keys"] == [], info
    assert model.config.num_labels == num_labels
    model.eval()
    with torch.no_grad():
        out = model(**{k: v for k, v in hf_inputs(inputs).items()})
    ref = hf_logits(task, out, batch["input_mask"])
    assert oh.rel_err(logits.reshape(ref.shape), ref) <= LOGIT_RTOL


@pytest.mark.skipif(not os.path.exists(BERT_CKPT), reason="bert-ckpt is not built")
@pytest.mark.parametrize("task,num_labels", [("sequence_classification", 3), ("token_classification", 4),
                                             ("question_answering", 2)])
def test_hf_made_fine_tuned_model_imports_and_predicts_the_same(tmp_path, task, num_labels):
    torch.manual_seed(7)
    cfg = task_config(task, num_labels)
    model = hf_model(cfg, torch.float32)
    model.config.id2label = {i: f"L{i}" for i in range(num_labels)}
    model.config.label2id = {f"L{i}": i for i in range(num_labels)}
    model.save_pretrained(str(tmp_path / "hf"), safe_serialization=True)
    out = run_ckpt("import", str(tmp_path / "hf"), str(tmp_path / "imported.h5"))
    assert task in out
    batch = make_batch(task, num_labels, seed=9)
    inputs = {k: batch[k] for k in ("input_ids", "segment_ids", "input_mask")}
    infer_cfg = task_config(task, num_labels, init_checkpoint=str(tmp_path / "imported.h5"))
    infer_cfg["mode"] = "inference"
    with ec.Session(infer_cfg) as s:
        logits = s.infer(inputs, "logits")
    with torch.no_grad():
        ref = hf_logits(task, model(**hf_inputs(inputs)), batch["input_mask"])
    assert oh.rel_err(logits.reshape(ref.shape), ref) <= LOGIT_RTOL

    wrong = task_config(task, num_labels + 1 if task != "question_answering" else 2,
                        init_checkpoint=str(tmp_path / "imported.h5"))
    if task != "question_answering":
        with pytest.raises(ec.EngineError, match=r"classifier.weight' has shape \[%d, 64\]" % num_labels):
            ec.Session(wrong)
