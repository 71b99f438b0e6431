"""bertengine: Python host for the bertengine BERT pretraining engine (C ABI capi/bert.h).

    import bertengine
    with bertengine.Session({"model": "bert-tiny", "train": {"steps": 100}}) as s:
        for _ in range(100):
            print(s.step().loss)
        s.checkpoint("tiny.h5")

Engine log lines go to the ``logging`` logger "bertengine". Errors raise BertError subclasses.
At interpreter exit the package closes sessions still open and calls bert_finalize (which gives
back MPI when a session initialised it; a host that initialised MPI itself, e.g. through mpi4py
first, keeps it).
"""
from __future__ import annotations

import atexit
import logging
import os

if os.environ.get("BERTENGINE_NATIVE_DIR"):
    # Tests run the package from the source tree with the extension from a build directory.
    __path__.append(os.environ["BERTENGINE_NATIVE_DIR"])  # noqa: F821

from . import _native
from .errors import (AbortedError, BackendError, BertError, CheckpointError, ConfigError,
                     DataError, DistributedError, EngineIOError, InternalError,
                     InvalidArgumentError, OutOfMemoryError, UnsupportedError, from_status)
from .session import Dist, EvalResult, MemoryInfo, RankInfo, Session, StepResult
from .session import close_all_and_finalize as finalize

__all__ = ["Session", "Dist", "StepResult", "EvalResult", "MemoryInfo", "RankInfo", "BertError", "InvalidArgumentError",
           "ConfigError", "EngineIOError", "DataError", "CheckpointError", "OutOfMemoryError",
           "BackendError", "DistributedError", "AbortedError", "UnsupportedError",
           "InternalError", "version", "api_version", "nccl_unique_id", "finalize"]

logger = logging.getLogger("bertengine")
_LEVELS = {_native.BERT_LOG_DEBUG: logging.DEBUG, _native.BERT_LOG_INFO: logging.INFO,
           _native.BERT_LOG_WARNING: logging.WARNING, _native.BERT_LOG_ERROR: logging.ERROR}


def _log(level: int, message: str) -> None:
    logger.log(_LEVELS.get(level, logging.ERROR), message)


_native.set_error_factory(from_status)
_native.set_log_sink(_log)
atexit.register(finalize)

if _native.api_version() != _native.HEADER_API_VERSION:
    raise ImportError(f"libbert ABI version {_native.api_version()} does not match the binding's "
                      f"{_native.HEADER_API_VERSION}")


def version() -> str:
    """The engine library's version string."""
    return _native.version()


def nccl_unique_id() -> bytes:
    """NCCL's 128-byte bootstrap id (bert_dist_unique_id): make it on rank 0, carry it to every
    rank and pass it as Dist(nccl_unique_id=...). UnsupportedError in a build without NCCL."""
    return _native.dist_unique_id()


def api_version() -> int:
    """The engine library's ABI version."""
    return _native.api_version()
