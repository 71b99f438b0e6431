"""Batches: dicts of NumPy arrays with the NVIDIA DLE field names, checked and turned into the
six C-contiguous int32 arrays bert_batch points at. Arrays that already are int32 and
C-contiguous are passed on as they are (no copy); other integer arrays are converted."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .errors import InvalidArgumentError

FIELDS = ("input_ids", "segment_ids", "input_mask", "masked_lm_positions", "masked_lm_ids",
          "next_sentence_labels")

_INT32 = np.iinfo(np.int32)


def _as_int32(name: str, value) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == np.int32:
        return np.ascontiguousarray(arr)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        raise InvalidArgumentError(f"batch field '{name}' must hold integers, got dtype {arr.dtype}")
    if arr.size and (arr.min() < _INT32.min or arr.max() > _INT32.max):
        raise InvalidArgumentError(f"batch field '{name}' has values outside the int32 range")
    return np.ascontiguousarray(arr, dtype=np.int32)


def prepare(batch: Mapping[str, object]) -> tuple[np.ndarray, ...]:
    """Checks a batch dict and returns its arrays in bert_batch order.

    Shapes: input_ids, segment_ids, input_mask [B, S]; masked_lm_positions, masked_lm_ids
    [B, P]; next_sentence_labels [B] (or [B, 1]). Raises InvalidArgumentError naming the field at fault.
    """
    if not isinstance(batch, Mapping):
        raise InvalidArgumentError(f"a batch is a dict of arrays with keys {', '.join(FIELDS)}; "
                         f"got {type(batch).__name__}")
    missing = [f for f in FIELDS if f not in batch]
    if missing:
        raise InvalidArgumentError(f"batch is missing field(s): {', '.join(missing)}")
    unknown = sorted(set(batch) - set(FIELDS))
    if unknown:
        raise InvalidArgumentError(f"batch has unknown field(s): {', '.join(map(str, unknown))}")
    arrays = {name: _as_int32(name, batch[name]) for name in FIELDS}

    ids = arrays["input_ids"]
    if ids.ndim != 2:
        raise InvalidArgumentError(f"batch field 'input_ids' must be 2-D [B, S], got shape {ids.shape}")
    b, s = ids.shape
    for name in ("segment_ids", "input_mask"):
        if arrays[name].shape != (b, s):
            raise InvalidArgumentError(f"batch field '{name}' must have shape {(b, s)} like input_ids, "
                             f"got {arrays[name].shape}")
    pos = arrays["masked_lm_positions"]
    if pos.ndim != 2 or pos.shape[0] != b:
        raise InvalidArgumentError(f"batch field 'masked_lm_positions' must have shape ({b}, P), got {pos.shape}")
    if arrays["masked_lm_ids"].shape != pos.shape:
        raise InvalidArgumentError(f"batch field 'masked_lm_ids' must have shape {pos.shape} like "
                         f"masked_lm_positions, got {arrays['masked_lm_ids'].shape}")
    nsp = arrays["next_sentence_labels"]
    if nsp.shape == (b, 1):
        nsp = nsp.reshape(b)
    if nsp.shape != (b,):
        raise InvalidArgumentError(f"batch field 'next_sentence_labels' must have shape ({b},), got {nsp.shape}")
    arrays["next_sentence_labels"] = nsp
    return tuple(arrays[name] for name in FIELDS)
