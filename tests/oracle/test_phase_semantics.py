"""DLE's phase semantics, checked against a computation by hand: a phase-2 session started from
phase 1's checkpoint (train.init_checkpoint) takes phase 1's LAMB moments m1, v1 and restarts the
step count (train.init_optimizer_state "auto" and "load"), as run_pretraining.py --phase2 does;
"zero" starts from zero moments (the behaviour before). With the same weights, data and seed,
both take the same first gradient g, so after one phase-2 step (lr 0: the weights stay)
  zero:       m = (1 - b1) g,          v = (1 - b2) g^2
  load:       m = b1 m1 + (1 - b1) g,  v = b2 v1 + (1 - b2) g^2
which the test checks element by element from the saved moments (h5py), without running the
engine's optimizer arithmetic itself."""
import json

import pytest

h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")

from engine_ctypes import EngineError, Session, load_library

pytestmark = pytest.mark.skipif(load_library() is None, reason="libbert not found (BERT_LIB)")

MODEL = {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 32, "max_position_embeddings": 32}
DATA = {"max_seq_length": 16, "max_predictions_per_seq": 3}


def moments(path):
    with h5py.File(path, "r") as f:
        m = {k: v[()] for k, v in f["optimizer/exp_avg"].items()}
        v = {k: v[()] for k, v in f["optimizer/exp_avg_sq"].items()}
        state = json.loads(f["metadata/state"][()])
    return m, v, state


@pytest.fixture(scope="module")
def phase1(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("phase1") / "phase1.h5")
    with Session({"model": MODEL, "data": DATA, "train": {"steps": 3, "micro_batch": 2, "threads": 1, "lr": 0.02}}) as s:
        for _ in range(3):
            s.step()
        s.checkpoint(path)
    return path


def phase2(phase1, tmp_path, mode):
    train = {"phase": 2, "steps": 5, "micro_batch": 2, "threads": 1, "lr": 0.0, "seed": 7, "init_checkpoint": phase1}
    if mode is not None:
        train["init_optimizer_state"] = mode
    path = str(tmp_path / f"phase2_{mode}.h5")
    with Session({"model": MODEL, "data": DATA, "train": train}) as s:
        config = s.config()["train"]
        s.step()
        s.checkpoint(path)
    return moments(path), config


def test_phase_two_continues_phase_one_moments_with_a_fresh_step(phase1, tmp_path):
    m1, v1, _ = moments(phase1)
    (m_zero, v_zero, state_zero), config = phase2(phase1, tmp_path, "zero")
    # The engine keeps beta1, beta2 and 1 - beta as float32 (1 - 0.999f is 0.00100004673...).
    b1, b2 = np.float32(config["beta1"]), np.float32(config["beta2"])
    c1, c2 = np.float32(1) - b1, np.float32(1) - b2
    (m_load, v_load, state_load), _ = phase2(phase1, tmp_path, "load")
    (m_auto, v_auto, _), auto_config = phase2(phase1, tmp_path, None)
    assert auto_config["init_optimizer_state"] == "auto"
    assert state_zero["optimizer_steps"] == state_load["optimizer_steps"] == 1  # bias correction restarts
    assert state_load["global_step"] == 1
    checked = 0
    for name in m1:
        g = m_zero[name].astype(np.float64) / c1
        np.testing.assert_allclose(v_zero[name], c2 * g * g, rtol=1e-6, atol=1e-30, err_msg=name)
        np.testing.assert_allclose(m_load[name], b1 * m1[name] + c1 * g, rtol=2e-6, atol=1e-9, err_msg=name)
        np.testing.assert_allclose(v_load[name], b2 * v1[name] + c2 * g * g, rtol=2e-6, atol=1e-14, err_msg=name)
        assert np.array_equal(m_auto[name], m_load[name]) and np.array_equal(v_auto[name], v_load[name])
        checked += m1[name].size
    assert checked > 6000  # every element of every tensor
    # The measured symptom of zeroed moments: m^2 / v == (1 - b1)^2 / (1 - b2) everywhere.
    name = "bert.encoder.layer.0.attention.self.query.weight"
    nonzero = v_zero[name] > 0
    ratio = m_zero[name][nonzero] ** 2 / v_zero[name][nonzero]
    np.testing.assert_allclose(ratio, c1 ** 2 / c2, rtol=1e-5)
    assert not np.allclose(m_load[name][nonzero] ** 2 / v_load[name][nonzero], c1 ** 2 / c2, rtol=1e-2)


def refusal(config):
    with pytest.raises(EngineError) as e:
        Session(config)
    return str(e.value)


def test_load_needs_moments_of_the_same_optimizer_and_a_pretraining_session(phase1):
    adamw = {"optimizer": "adamw", "init_checkpoint": phase1, "threads": 1}
    message = refusal({"model": MODEL, "data": DATA, "train": {**adamw, "init_optimizer_state": "load"}})
    assert f"checkpoint '{phase1}' holds lamb moments but train.optimizer = \"adamw\"" in message, message
    with Session({"model": MODEL, "data": DATA, "train": adamw}) as s:  # auto: fresh moments
        assert s.config()["train"]["init_optimizer_state"] == "auto"
    task = {"type": "sequence_classification", "num_labels": 2}
    message = refusal({"model": MODEL, "data": DATA, "task": task,
                       "train": {"init_checkpoint": phase1, "init_optimizer_state": "load", "threads": 1}})
    assert "'train.init_optimizer_state' = \"load\" applies to pretraining" in message, message
    message = refusal({"model": MODEL, "data": DATA, "train": {"init_optimizer_state": "keep"}})
    assert "train.init_optimizer_state" in message, message
