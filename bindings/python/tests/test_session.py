"""bertengine Python binding: training, checkpoints, batches, parameters, errors, logging,
abort and Ctrl-C. Runs against the libbert of the build tree (see tests/bindings/meson.build)."""
import logging
import os
import signal
import threading
import time

import numpy as np
import pytest

import bertengine
from bertengine import batch as batch_mod
from conftest import make_batch


def test_versions():
    assert bertengine.api_version() == 1
    assert bertengine.version().count(".") == 2


def test_training_loss_falls(tiny):
    with bertengine.Session(tiny) as s:
        results = [s.step() for _ in range(80)]
    losses = [r.mlm_loss for r in results]
    assert np.mean(losses[:5]) - np.mean(losses[-5:]) > 0.2, losses
    r = results[40]
    assert r.step == 41 and r.micro_batches == 1 and r.sequences == 16
    assert r.learning_rate > 0 and np.isfinite(r.grad_norm) and not r.skipped


def test_checkpoint_round_trip(tiny, tmp_path):
    path = tmp_path / "ckpt.h5"
    with bertengine.Session(tiny) as s:
        for _ in range(3):
            s.step()
        s.checkpoint(path)
        after = [s.step().loss for _ in range(2)]
        trained = s.read_param("bert.embeddings.word_embeddings.weight")
    with bertengine.Session(tiny) as t:
        t.load_checkpoint(str(path))
        resumed = [t.step().loss for _ in range(2)]
        assert np.array_equal(t.read_param("bert.embeddings.word_embeddings.weight"), trained)
    assert resumed == after


def test_explicit_batch_without_and_with_conversion(tiny):
    tiny["train"]["dropout"] = False
    b = make_batch()
    with bertengine.Session(tiny) as s:
        ref = s.eval(b)
        # int32 and C-contiguous: handed over as is.
        assert batch_mod.prepare(b)[0] is b["input_ids"]
        converted = {k: v.astype(np.int64) for k, v in b.items()}
        fortran = {k: np.asfortranarray(v) for k, v in b.items()}
        assert s.eval(converted) == ref
        assert s.eval(fortran) == ref
        assert ref.sequences == 4 and ref.masked_tokens == 20
        r = s.step(b)
        assert r.sequences == 4 and np.isfinite(r.loss)


def test_forward_backward_allreduce_optimizer_step(tiny):
    b = make_batch()
    name = "cls.predictions.bias"
    with bertengine.Session(tiny) as s:
        before = s.read_param(name)
        fb = s.forward_backward(b)
        assert fb.loss > 0
        g = s.read_grad(name)
        assert g.shape == before.shape and np.abs(g).sum() > 0
        s.allreduce()
        r = s.optimizer_step()
        assert r.step == 1
        assert not np.array_equal(s.read_param(name), before)
        assert np.abs(s.read_grad(name)).sum() == 0


def test_host_allreduce_single_rank(tiny):
    with bertengine.Session(tiny) as s:
        x = np.array([1.5, -2.0, 3.0])
        assert np.array_equal(s.allreduce(x, "sum"), x.astype(np.float32))
        assert np.array_equal(s.allreduce(x, "mean"), x.astype(np.float32))
        with pytest.raises(bertengine.InvalidArgumentError, match="op must be one of"):
            s.allreduce(x, "median")


def test_parameters(tiny):
    with bertengine.Session(tiny) as s:
        shapes = s.param_shapes()
        n = sum(int(np.prod(v)) for v in shapes.values())
        mem = s.memory()
        assert mem.parameter_bytes >= 4 * n and mem.activation_bytes > 0
        assert shapes["bert.embeddings.word_embeddings.weight"] == (100, 32)
        assert shapes["bert.encoder.layer.1.intermediate.dense.weight"] == (64, 32)
        name = "bert.pooler.dense.bias"
        w = np.arange(32, dtype=np.float64)
        s.write_param(name, w)
        assert np.array_equal(s.read_param(name), w.astype(np.float32))
        with pytest.raises(bertengine.InvalidArgumentError, match=r"has shape \(32,\), got an array of shape \(31,\)"):
            s.write_param(name, np.zeros(31))
        with pytest.raises(KeyError, match="no parameter named 'nope'"):
            s.read_param("nope")


def test_state_dict_asks_the_engine_for_the_names_once(tiny):
    with bertengine.Session(tiny) as s:
        native, calls = s._native, []

        class Counting:  # the native session, counting its params() calls
            def __getattr__(self, name):
                if name == "params":
                    calls.append(name)
                return getattr(native, name)

        s._native = Counting()
        state = s.state_dict()
        s._native = native
        assert len(state) == len(s.param_names()) > 20 and len(calls) <= 1
        assert state["bert.embeddings.word_embeddings.weight"].shape == (100, 32)


def test_bad_batches(tiny):
    b = make_batch()
    with bertengine.Session(tiny) as s:
        with pytest.raises(bertengine.InvalidArgumentError, match="'segment_ids' must have shape"):
            s.step({**b, "segment_ids": b["segment_ids"][:, :5]})
        with pytest.raises(bertengine.InvalidArgumentError, match="'input_mask' must hold integers, got dtype float32"):
            s.step({**b, "input_mask": b["input_mask"].astype(np.float32)})
        with pytest.raises(bertengine.InvalidArgumentError, match="missing field.*segment_ids"):
            s.step({k: v for k, v in b.items() if k != "segment_ids"})
        with pytest.raises(bertengine.InvalidArgumentError, match="'next_sentence_labels' is NULL"):
            s.step({k: v for k, v in b.items() if k != "next_sentence_labels"})
        with pytest.raises(bertengine.InvalidArgumentError, match="unknown field.*lables"):
            s.step({**b, "lables": b["input_ids"]})
        with pytest.raises(bertengine.InvalidArgumentError, match="a batch is a dict"):
            s.step([1, 2, 3])
        # Shapes that agree with each other but not with the config: the engine's message.
        long = make_batch(s=48)
        with pytest.raises(bertengine.InvalidArgumentError) as e:
            s.step(long)
        assert e.value.status == 1 and "48" in e.value.message
        bad_ids = {**b, "input_ids": np.full_like(b["input_ids"], 1000)}
        with pytest.raises(bertengine.BertError) as e:
            s.step(bad_ids)
        assert e.value.message
        assert s.step().step == 1  # still usable


def test_bad_config_and_closed_session(tiny, tmp_path):
    tiny["train"]["lr_typo"] = 1
    with pytest.raises(bertengine.ConfigError) as e:
        bertengine.Session(tiny)
    assert e.value.status == 2 and "lr_typo" in str(e.value)
    with pytest.raises(bertengine.ConfigError):
        bertengine.Session("{not json")
    with pytest.raises(TypeError):
        bertengine.Session(42)
    del tiny["train"]["lr_typo"]
    s = bertengine.Session(tiny)
    s.close()
    assert s.closed
    with pytest.raises(bertengine.InvalidArgumentError, match="session is closed"):
        s.step()
    with pytest.raises(bertengine.InvalidArgumentError):
        s.param_names()
    s.close()  # twice is fine
    with bertengine.Session(tiny) as t:
        with pytest.raises(bertengine.EngineIOError) as e:
            t.load_checkpoint(tmp_path / "missing.h5")
        assert "missing.h5" in e.value.message and isinstance(e.value, OSError)


def test_config_from_path_and_text(tiny, tmp_path):
    import json
    p = tmp_path / "c.json"
    p.write_text(json.dumps(tiny))
    with bertengine.Session(p) as a, bertengine.Session(str(p)) as b, \
            bertengine.Session(json.dumps(tiny)) as c:
        assert a.config["model"]["hidden_size"] == 32
        assert a.step().loss == b.step().loss == c.step().loss


def test_dist_argument(tiny):
    with bertengine.Session(tiny, dist=bertengine.Dist("local", 0, 1, 0)) as s:
        assert s.step().step == 1
    with pytest.raises(bertengine.InvalidArgumentError, match="dist.backend"):
        bertengine.Session(tiny, dist={"backend": "carrier-pigeon"})


def test_rank_without_a_distributed_run(tiny):
    with bertengine.Session(tiny, dist=bertengine.Dist("local")) as s:
        assert s.rank() == bertengine.RankInfo(rank=0, world_size=1, local_rank=0)
        rank, world_size, local_rank = s.rank()
        assert (rank, world_size, local_rank) == (0, 1, 0)


def test_native_layer_raises_binding_errors(tiny):
    """Bad input the extension itself detects is InvalidArgumentError, not a bare ValueError."""
    b = batch_mod.prepare(make_batch())
    with bertengine.Session(tiny) as s:
        with pytest.raises(bertengine.InvalidArgumentError, match="ten arrays"):
            s._native.step(b[:5])
        with pytest.raises(bertengine.InvalidArgumentError, match="'input_ids' must be a C-contiguous int32"):
            s._native.step((b[0][:, ::2],) + b[1:])
        with pytest.raises(bertengine.InvalidArgumentError, match="wrong number of dimensions"):
            s._native.step((b[0].ravel(),) + b[1:])


def test_engine_message_with_invalid_utf8(tiny, tmp_path):
    """A file name that is not UTF-8 reaches the message as U+FFFD, never UnicodeDecodeError."""
    train = os.fsencode(tmp_path / "train")
    os.makedirs(train)
    with open(train + b"/bad\xff.hdf5", "wb") as f:
        f.write(b"not hdf5")
    tiny["data"]["train_dir"] = os.fsdecode(train)
    with pytest.raises(bertengine.EngineIOError) as e:
        bertengine.Session(tiny)
    assert "bad\ufffd.hdf5" in e.value.message


def test_engine_warnings_reach_logging(tiny, tmp_path, caplog):
    (tmp_path / "ckpt_5.h5").write_bytes(b"not a checkpoint")
    with bertengine.Session(tiny) as s:
        with pytest.raises(bertengine.CheckpointError) as e:  # never resumed over, never written over
            s.resume(tmp_path)
    assert "ckpt_5.h5" in e.value.message and (tmp_path / "ckpt_5.h5").exists()
    discarding = {**tiny, "checkpoint": {"discard_invalid": True}}
    with bertengine.Session(discarding) as s, caplog.at_level(logging.WARNING, logger="bertengine"):
        assert s.resume(tmp_path) == -1
    assert any("ckpt_5.h5" in r.getMessage() for r in caplog.records if r.name == "bertengine")
    assert (tmp_path / "ckpt_5.h5.invalid").exists()


def test_creation_and_calls_run_on_the_session_thread(tiny, tmp_path, caplog):
    """The engine's thread pool belongs to the OS thread that calls it, so a session is created
    and called on one thread of its own (not the caller's): its log lines, from creation and from
    a later call, come from that one thread."""
    (tmp_path / "ckpt_5.h5").write_bytes(b"not a checkpoint")
    config = {**tiny, "checkpoint": {"discard_invalid": True}}
    with caplog.at_level(logging.INFO, logger="bertengine"):
        with bertengine.Session(config) as s:
            s.step()
            assert s.resume(tmp_path) == -1
    created = [r for r in caplog.records if r.name == "bertengine" and r.getMessage().startswith("session: ")]
    resumed = [r for r in caplog.records if r.name == "bertengine" and "ckpt_5.h5" in r.getMessage()]
    assert created and resumed
    assert {r.thread for r in created + resumed} == {created[0].thread}
    assert created[0].thread != threading.get_ident()


def test_abort_then_continue(tiny):
    with bertengine.Session(tiny) as s:
        s.abort()
        with pytest.raises(bertengine.AbortedError):
            s.step()
        assert s.step().step == 1


SLOW = {"model": "bert-tiny", "train": {"micro_batch": 32, "accumulation_steps": 64, "threads": 1},
        "data": {"max_seq_length": 128, "max_predictions_per_seq": 20}}


def test_keyboard_interrupt_aborts_step():
    with bertengine.Session(SLOW) as s:
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        start = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            s.step()
        elapsed = time.monotonic() - start
        timer.join()
        assert elapsed < 5, elapsed
        p = s.param_names()[0]
        assert np.abs(s.read_grad(p)).sum() == 0  # the aborted step's gradients were discarded


def test_one_thread_at_a_time():
    with bertengine.Session(SLOW) as s:
        errors = []

        def run():
            try:
                s.step()
            except bertengine.BertError as e:
                errors.append(e)

        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.3)
        with pytest.raises(bertengine.InvalidArgumentError, match="in use by a call on another thread"):
            s.read_param("cls.predictions.bias")
        with pytest.raises(bertengine.InvalidArgumentError, match="cannot close"):
            s.close()
        s.abort()
        t.join()
        assert len(errors) == 1 and isinstance(errors[0], bertengine.AbortedError)


def test_nccl_unique_id_or_unsupported():
    try:
        uid = bertengine.nccl_unique_id()
    except bertengine.UnsupportedError as e:
        assert e.status == 10 and e.message
    else:
        assert isinstance(uid, bytes) and len(uid) == 128


def test_finalize_closes_open_sessions_and_leaves_local_runs_usable(tiny):
    s = bertengine.Session(tiny)
    bertengine.finalize()  # no MPI in this process: only the open session is closed
    assert s.closed
    with bertengine.Session(tiny) as again:
        assert np.isfinite(again.step().loss)
