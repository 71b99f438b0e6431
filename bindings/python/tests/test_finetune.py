"""bertengine Python binding: fine-tuning heads and inference (Session.infer returns NumPy arrays
of the head's shape), Session.eval's task loss and accuracy, inference-only sessions from a
checkpoint, and bad input."""
import numpy as np
import pytest

import bertengine
from conftest import TINY, make_batch


def task(kind, num_labels, **train):
    cfg = {**TINY, "task": {"type": kind, "num_labels": num_labels}}
    cfg["train"] = {**TINY["train"], "optimizer": "adamw", "lr": 0.003, "warmup_proportion": 0.1, **train}
    return cfg


def inputs(b=4, s=32, seed=0):
    full = make_batch(b=b, s=s, seed=seed)
    return {k: full[k] for k in ("input_ids", "segment_ids", "input_mask")}


def test_classifier_learns_and_infers_numpy_arrays(tmp_path):
    batch = inputs(b=16, seed=3)
    labels = (np.arange(16) % 2).astype(np.int32)
    batch["input_ids"][labels == 1, 2] = 7  # the label: whether token 7 is at position 2
    batch["input_ids"][labels == 0, 2] = 8
    with bertengine.Session(task("sequence_classification", 2)) as s:
        losses = [s.step({**batch, "labels": labels}).loss for _ in range(40)]
        logits = s.infer(batch)
        pooled = s.infer(batch, "pooled")
        hidden = s.infer(batch, "hidden")
        ev = s.eval({**batch, "labels": labels})
        s.checkpoint(tmp_path / "cls.h5")
    assert abs(losses[0] - np.log(2)) < 0.1 and losses[-1] < 0.1, losses
    assert logits.shape == (16, 2) and logits.dtype == np.float32
    assert (logits.argmax(1) == labels).all()
    assert ev.task_accuracy == 1.0 and ev.task_loss < 0.1 and ev.task_count == 16 and ev.sequences == 16
    assert pooled.shape == (16, 32) and np.abs(pooled).max() <= 1.0  # tanh
    assert hidden.shape == (16, 32, 32) and not hidden[:, -4:].any() and hidden[:, :-4].all()

    cfg = task("sequence_classification", 2, init_checkpoint=str(tmp_path / "cls.h5"))
    with bertengine.Session({**cfg, "mode": "inference"}) as inf:
        np.testing.assert_array_equal(inf.infer(batch), logits)
        assert inf.eval({**batch, "labels": labels}) == ev
        m = inf.memory()
        assert m.gradient_bytes == 0 and m.optimizer_bytes == 0
        with pytest.raises(bertengine.BertError, match="mode.*inference") as e:
            inf.step({**batch, "labels": labels})
        assert e.value.status == 10  # BERT_ERR_UNSUPPORTED


@pytest.mark.parametrize("kind,labels,shape", [("token_classification", 3, (4, 32, 3)),
                                               ("question_answering", 2, (4, 2, 32)),
                                               ("sequence_classification", 1, (4, 1))])
def test_each_head_trains_one_step_and_infers_its_shape(kind, labels, shape):
    batch = inputs()
    rng = np.random.default_rng(1)
    if kind == "token_classification":
        batch["labels"] = rng.integers(0, labels, (4, 32)).astype(np.int32)
    elif kind == "question_answering":
        batch["start_positions"] = np.array([1, 2, 3, 40])
        batch["end_positions"] = np.array([4, 5, 6, 7])
    else:
        batch["label_values"] = rng.normal(size=4)
    with bertengine.Session(task(kind, labels)) as s:
        r = s.step(batch)
        out = s.infer(batch)
        ev = s.eval(batch)
    assert np.isfinite(r.loss) and r.loss > 0
    assert out.shape == shape
    assert np.isfinite(ev.task_loss) and ev.task_loss > 0 and ev.sequences == 4
    assert ev.task_count == (4 * 32 if kind == "token_classification" else 4)  # every token labelled, padding too
    assert np.isnan(ev.task_accuracy) == (kind == "sequence_classification")  # regression: no accuracy


def test_inference_errors():
    with bertengine.Session(task("token_classification", 3)) as s:
        with pytest.raises(bertengine.InvalidArgumentError, match="has no pooler"):
            s.infer(inputs(), "pooled")
        with pytest.raises(bertengine.InvalidArgumentError, match="output must be one of"):
            s.infer(inputs(), "attention")
        with pytest.raises(bertengine.InvalidArgumentError, match="'labels' is NULL"):
            s.step(inputs())
        with pytest.raises(bertengine.InvalidArgumentError, match="'labels' is NULL"):
            s.eval(inputs())
        with pytest.raises(bertengine.InvalidArgumentError, match="token_classification session needs a labelled batch"):
            s.eval()
        with pytest.raises(bertengine.InvalidArgumentError, match="'start_positions' must have shape"):
            s.step({**inputs(), "start_positions": np.zeros(3, np.int32)})
    with pytest.raises(bertengine.ConfigError, match="task.num_labels"):
        bertengine.Session({**TINY, "task": {"type": "token_classification", "num_labels": 1}})
