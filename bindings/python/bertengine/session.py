"""Session: one training session of the engine (a bert_session*), as a context manager.

Each method maps to one C call of capi/bert.h; failures raise BertError subclasses. Calls that
run the model release the GIL, and Ctrl-C during them aborts the call through
bert_session_abort (the session stays usable; the step's gradients are discarded).
"""
from __future__ import annotations

import dataclasses
import json
import os
import weakref
from typing import Mapping, NamedTuple, Optional, Union

import numpy as np

from . import _native
from .batch import prepare
from .errors import InvalidArgumentError

ConfigLike = Union[Mapping[str, object], str, "os.PathLike[str]"]
Batch = Mapping[str, np.ndarray]

_BACKENDS = {"auto": _native.BERT_DIST_AUTO, "local": _native.BERT_DIST_LOCAL, "mpi": _native.BERT_DIST_MPI,
             "nccl": _native.BERT_DIST_NCCL}
_REDUCE_OPS = {"sum": _native.BERT_REDUCE_SUM, "mean": _native.BERT_REDUCE_MEAN, "max": _native.BERT_REDUCE_MAX}


@dataclasses.dataclass(frozen=True)
class Dist:
    """Distributed placement (bert_dist). -1 means "from the launcher's environment"."""
    backend: str = "auto"  # auto | local | mpi | nccl
    rank: int = -1
    world_size: int = -1
    local_rank: int = -1
    nccl_unique_id: Optional[bytes] = None  # from bertengine.nccl_unique_id() on rank 0

    @classmethod
    def from_env(cls, backend: str = "auto") -> "Dist":
        """Reads RANK, WORLD_SIZE and LOCAL_RANK (torchrun style) when set, else -1."""
        def get(name: str) -> int:
            return int(os.environ.get(name, "-1"))
        return cls(backend, get("RANK"), get("WORLD_SIZE"), get("LOCAL_RANK"))


class RankInfo(NamedTuple):
    """bert_session_rank: this session's place in the distributed run (0, 1, 0 without one)."""
    rank: int
    world_size: int
    local_rank: int


@dataclasses.dataclass(frozen=True)
class StepResult:
    """bert_step_result: losses and throughput of one call."""
    step: int
    loss: float
    mlm_loss: float
    nsp_loss: float
    learning_rate: float
    grad_norm: float
    loss_scale: float
    skipped: bool
    micro_batches: int
    sequences: int
    step_seconds: float
    sequences_per_second: float
    tokens_per_second: float


@dataclasses.dataclass(frozen=True)
class EvalResult:
    """bert_eval_result: masked-LM and next-sentence metrics (pretraining sessions), or the
    fine-tuning head's loss and accuracy over ``task_count`` sequences or labelled tokens (task
    sessions; accuracy NaN for regression, whose loss is the MSE). Fields of the other kind of
    session are 0."""
    mlm_accuracy: float
    mlm_loss: float
    nsp_accuracy: float
    nsp_loss: float
    sequences: int
    masked_tokens: int
    task_loss: float
    task_accuracy: float
    task_count: int


@dataclasses.dataclass(frozen=True)
class MemoryInfo:
    """bert_memory_info: backend memory the session holds, in bytes."""
    parameter_bytes: int
    gradient_bytes: int
    optimizer_bytes: int
    activation_bytes: int
    peak_device_bytes: int


def _config_text(config: ConfigLike) -> str:
    if isinstance(config, Mapping):
        return json.dumps(config)
    if isinstance(config, os.PathLike):
        with open(config, encoding="utf-8") as f:
            return f.read()
    if isinstance(config, str):
        if config.lstrip().startswith("{"):
            return config
        with open(config, encoding="utf-8") as f:
            return f.read()
    raise TypeError(f"config must be a dict, JSON text or a path, not {type(config).__name__}")


def _dist_args(dist) -> tuple:
    if dist is None:
        dist = Dist()
    elif isinstance(dist, Mapping):
        dist = Dist(**dist)
    elif not isinstance(dist, Dist):
        raise TypeError(f"dist must be None, a dict or a bertengine.Dist, not {type(dist).__name__}")
    if dist.backend not in _BACKENDS:
        raise InvalidArgumentError(f"dist.backend must be one of {', '.join(_BACKENDS)}, got {dist.backend!r}")
    uid = dist.nccl_unique_id
    if uid is not None and (not isinstance(uid, (bytes, bytearray)) or len(uid) != _native.NCCL_UNIQUE_ID_BYTES):
        raise InvalidArgumentError(f"dist.nccl_unique_id must be {_native.NCCL_UNIQUE_ID_BYTES} bytes "
                                   "from bertengine.nccl_unique_id()")
    return (_BACKENDS[dist.backend], int(dist.rank), int(dist.world_size), int(dist.local_rank),
            None if uid is None else bytes(uid))


_OUTPUTS = {"logits": _native.BERT_OUTPUT_LOGITS, "pooled": _native.BERT_OUTPUT_POOLED,
            "hidden": _native.BERT_OUTPUT_HIDDEN}


def _batch_args(batch: Optional[Batch]):
    return None if batch is None else prepare(batch)


# Sessions not yet closed, so that the interpreter's exit can close them before bert_finalize.
_open_sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()


def close_all_and_finalize() -> None:
    """Closes every open session, then gives back what the engine took process-wide
    (bert_finalize: MPI, when a session initialised it). The package registers this with
    ``atexit``; call it yourself only to finalise earlier."""
    for s in list(_open_sessions):
        s.close()
    _native.finalize()


class Session:
    """A BERT pretraining, fine-tuning or inference session.

    ``Session(config, dist=None)`` creates the engine session from a config (a dict, JSON
    text, or a path to a JSON file; schema in README.md "Config schema"). Use it as a context
    manager or call :meth:`close`. Without a batch, :meth:`step` draws from the session's own
    data (synthetic by default); with one, pass a dict of NumPy integer arrays with the DLE
    field names (``input_ids``, ``segment_ids``, ``input_mask`` [B, S];
    ``masked_lm_positions``, ``masked_lm_ids`` [B, P]; ``next_sentence_labels`` [B]) or, for a
    config with a fine-tuning ``task``, its labels (``labels`` [B] or [B, S], ``label_values``
    [B], ``start_positions``/``end_positions`` [B]). :meth:`infer` returns logits, pooled
    outputs or hidden states. int32 C-contiguous arrays are passed without copying; other
    integer arrays are converted; anything else raises InvalidArgumentError naming the field.

    Failures raise :class:`bertengine.BertError` subclasses (``.status``, ``.message``). Calls
    that run the model release the GIL; Ctrl-C during one aborts it (KeyboardInterrupt, the
    session stays usable). A session serves one thread at a time: a second thread's call while
    one runs raises InvalidArgumentError; :meth:`abort` may be called from any thread.

    >>> with Session({"model": "bert-tiny", "train": {"steps": 10}}) as s:
    ...     for _ in range(10):
    ...         r = s.step()
    ...     s.checkpoint("tiny.h5")
    """

    def __init__(self, config: ConfigLike, dist: Union[None, Dist, Mapping[str, object]] = None):
        self._native = _native.NativeSession(_config_text(config), *_dist_args(dist))
        self._param_shapes: Optional[dict[str, tuple[int, ...]]] = None  # fixed for the session's life
        _open_sessions.add(self)

    # -- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        """Frees the engine session (bert_session_destroy). Later calls raise InvalidArgumentError."""
        self._native.close()
        self._param_shapes = None

    @property
    def closed(self) -> bool:
        return self._native.closed

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def abort(self) -> None:
        """Makes the call running on another thread return AbortedError (bert_session_abort)."""
        self._native.abort()

    @property
    def config(self) -> dict:
        """The resolved config, defaults filled in."""
        return json.loads(self._native.config())

    def rank(self) -> RankInfo:
        """This session's rank, world size and local rank (bert_session_rank)."""
        return RankInfo(*self._native.rank())

    # -- training ---------------------------------------------------------------------------
    def step(self, batch: Optional[Batch] = None) -> StepResult:
        """One optimizer step (bert_step) on the batch, or on the session's own data."""
        return StepResult(**self._native.step(_batch_args(batch)))

    def forward_backward(self, batch: Batch) -> StepResult:
        """Forward and backward of one micro-batch; gradients accumulate until optimizer_step."""
        if batch is None:
            raise InvalidArgumentError("forward_backward needs a batch")
        return StepResult(**self._native.forward_backward(_batch_args(batch)))

    def allreduce(self, data: Optional[np.ndarray] = None, op: str = "sum") -> Optional[np.ndarray]:
        """Without ``data``: sums the accumulated gradients over ranks (bert_allreduce).

        With ``data`` (a small float array): reduces it across ranks (bert_allreduce_host) with
        ``op`` in {"sum", "mean", "max"} and returns the result as a new float32 array.
        Collective: every rank must make the same calls in the same order."""
        if data is None:
            self._native.allreduce()
            return None
        if op not in _REDUCE_OPS:
            raise InvalidArgumentError(f"op must be one of {', '.join(_REDUCE_OPS)}, got {op!r}")
        arr = np.asarray(data)
        if arr.dtype.kind not in "fiu":
            raise InvalidArgumentError(f"allreduce needs a numeric array, got dtype {arr.dtype}")
        out = np.array(arr, dtype=np.float32, order="C", copy=True)
        self._native.allreduce_host(out, _REDUCE_OPS[op])
        return out

    def optimizer_step(self) -> StepResult:
        """Averages accumulated gradients, clips and applies the optimizer."""
        return StepResult(**self._native.optimizer_step())

    def eval(self, batch: Optional[Batch] = None) -> EvalResult:
        """Evaluation without dropout or gradients, on the batch or the configured eval data
        (a task session: a batch with its labels, required)."""
        return EvalResult(**self._native.eval(_batch_args(batch)))

    # -- inference --------------------------------------------------------------------------
    def infer(self, batch: Batch, output: str = "logits") -> np.ndarray:
        """The model's ``output`` on a batch, without dropout or gradients (bert_infer), as a new
        float32 array: ``"logits"`` [B, num_labels] (sequence classification), [B, S, num_labels]
        (token classification), [B, 2, S] (question answering: start, end) or [B, 2] (pretraining:
        next-sentence logits); ``"pooled"`` [B, H]; ``"hidden"`` [B, S, H]. Per-token outputs
        are 0 at padding positions. Only input_ids, segment_ids and input_mask are needed."""
        if output not in _OUTPUTS:
            raise InvalidArgumentError(f"output must be one of {', '.join(_OUTPUTS)}, got {output!r}")
        if batch is None:
            raise InvalidArgumentError("infer needs a batch")
        arrays = _batch_args(batch)
        b, s = arrays[0].shape
        what = _OUTPUTS[output]
        out = np.empty(self._native.output_size(what, b, s), dtype=np.float32)
        self._native.infer(arrays, what, out)
        return out.reshape(self._output_shape(output, b, s))

    def _output_shape(self, output: str, b: int, s: int) -> tuple[int, ...]:
        config = self.config
        hidden = config["model"]["hidden_size"]
        if output == "pooled":
            return (b, hidden)
        if output == "hidden":
            return (b, s, hidden)
        task = config["task"]
        kind = task["type"]
        if kind == "pretraining":
            return (b, 2)
        if kind == "sequence_classification":
            return (b, task["num_labels"])
        if kind == "token_classification":
            return (b, s, task["num_labels"])
        return (b, 2, s)

    def memory(self) -> MemoryInfo:
        """The backend memory this session holds (bert_session_memory)."""
        return MemoryInfo(**self._native.memory())

    # -- checkpoints ------------------------------------------------------------------------
    def checkpoint(self, path: Union[str, "os.PathLike[str]", None] = None) -> None:
        """Writes the full training state to ``path`` (None: checkpoint.dir/ckpt_<step>.h5)."""
        self._native.checkpoint(None if path is None else os.fsencode(path))

    def load_checkpoint(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Resumes the full training state from a checkpoint (exact continuation)."""
        self._native.load_checkpoint(os.fsencode(path))

    def load_weights(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Loads only the model weights of a checkpoint or weights file."""
        self._native.load_weights(os.fsencode(path))

    def resume(self, directory: Union[str, "os.PathLike[str]", None] = None) -> int:
        """Resumes from the newest valid checkpoint in ``directory``; returns its step or -1."""
        return self._native.resume(None if directory is None else os.fsencode(directory))

    # -- parameters -------------------------------------------------------------------------
    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        """Parameter names (Hugging Face BertForPreTraining) and shapes, in engine order."""
        return dict(self._shapes())

    def param_names(self) -> list[str]:
        return list(self._shapes())

    def _shapes(self) -> dict[str, tuple[int, ...]]:
        """Asked of the engine once: state_dict() and friends look a name up per parameter."""
        if self._param_shapes is None:
            self._param_shapes = {name: tuple(shape) for name, shape in self._native.params()}
        return self._param_shapes

    def _shape(self, name: str) -> tuple[int, ...]:
        shapes = self._shapes()
        if name not in shapes:
            raise KeyError(f"no parameter named {name!r}")
        return shapes[name]

    def read_param(self, name: str) -> np.ndarray:
        """A copy of a parameter as a float32 array of its shape."""
        out = np.empty(self._shape(name), dtype=np.float32)
        self._native.read_param(name, out, False)
        return out

    def read_grad(self, name: str) -> np.ndarray:
        """The gradient accumulated since the last optimizer step (summed over micro-batches)."""
        out = np.empty(self._shape(name), dtype=np.float32)
        self._native.read_param(name, out, True)
        return out

    def write_param(self, name: str, value: np.ndarray) -> None:
        """Overwrites a parameter; ``value`` must have the parameter's shape."""
        shape = self._shape(name)
        arr = np.asarray(value)
        if arr.dtype.kind not in "fiu":
            raise InvalidArgumentError(f"parameter {name!r} needs a numeric array, got dtype {arr.dtype}")
        if arr.shape != shape:
            raise InvalidArgumentError(f"parameter {name!r} has shape {shape}, got an array of shape {arr.shape}")
        self._native.write_param(name, np.ascontiguousarray(arr, dtype=np.float32))

    def state_dict(self) -> dict[str, np.ndarray]:
        """Every parameter as a float32 array, by name."""
        return {name: self.read_param(name) for name in self.param_names()}
