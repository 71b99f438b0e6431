"""Exceptions raised by bertengine: one BertError subclass per bert_status of capi/bert.h.

Every exception carries the numeric status, its C name and the engine's message
(bert_last_error() of the failed call).
"""
from __future__ import annotations

from . import _native


def _status(name: str) -> tuple[int, str]:
    """A bert_status as (its value in capi/bert.h, its C name)."""
    return getattr(_native, name), name


class BertError(RuntimeError):
    """A call into the engine failed. ``status`` is the bert_status value, ``status_name`` its
    C name (e.g. ``"BERT_ERR_CONFIG"``) and ``message`` the engine's explanation."""

    status, status_name = _status("BERT_ERR_INTERNAL")

    def __init__(self, message: str, status: int | None = None, status_name: str | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        if status_name is not None:
            self.status_name = status_name

    def __str__(self) -> str:
        return f"{self.status_name}: {self.message}"


class InvalidArgumentError(BertError, ValueError):
    """BERT_ERR_INVALID_ARGUMENT: a bad batch, a size out of range, a closed session."""
    status, status_name = _status("BERT_ERR_INVALID_ARGUMENT")


class ConfigError(BertError, ValueError):
    """BERT_ERR_CONFIG: malformed JSON, unknown key, wrong type, impossible value."""
    status, status_name = _status("BERT_ERR_CONFIG")


class EngineIOError(BertError, OSError):
    """BERT_ERR_IO: a file could not be opened, read or written."""
    status, status_name = _status("BERT_ERR_IO")


class DataError(BertError):
    """BERT_ERR_DATA: a data shard or vocabulary is malformed."""
    status, status_name = _status("BERT_ERR_DATA")


class CheckpointError(BertError):
    """BERT_ERR_CHECKPOINT: a checkpoint is corrupt or does not match the model."""
    status, status_name = _status("BERT_ERR_CHECKPOINT")


class OutOfMemoryError(BertError, MemoryError):
    """BERT_ERR_OUT_OF_MEMORY."""
    status, status_name = _status("BERT_ERR_OUT_OF_MEMORY")


class BackendError(BertError):
    """BERT_ERR_BACKEND: CUDA, cuBLAS, cuDNN or the CPU backend failed."""
    status, status_name = _status("BERT_ERR_BACKEND")


class DistributedError(BertError):
    """BERT_ERR_DISTRIBUTED: a collective failed or timed out."""
    status, status_name = _status("BERT_ERR_DISTRIBUTED")


class AbortedError(BertError):
    """BERT_ERR_ABORTED: Session.abort() (or Ctrl-C) stopped the call."""
    status, status_name = _status("BERT_ERR_ABORTED")


class UnsupportedError(BertError):
    """BERT_ERR_UNSUPPORTED: not built in (e.g. CUDA in a CPU-only build)."""
    status, status_name = _status("BERT_ERR_UNSUPPORTED")


class InternalError(BertError):
    """BERT_ERR_INTERNAL."""
    status, status_name = _status("BERT_ERR_INTERNAL")


_BY_STATUS = {cls.status: cls for cls in (
    InvalidArgumentError, ConfigError, EngineIOError, DataError, CheckpointError, OutOfMemoryError,
    BackendError, DistributedError, AbortedError, UnsupportedError, InternalError)}


def from_status(status: int, status_name: str, message: str) -> BertError:
    """The exception for a failed call (used by the native module)."""
    cls = _BY_STATUS.get(status, BertError)
    return cls(message, status, status_name)
