"""Batches: dicts of NumPy arrays with the NVIDIA DLE field names and the fine-tuning labels,
checked and turned into the ten C-contiguous arrays bert_batch points at (None where absent).
Arrays that already have the right dtype (int32; float32 for label_values) and are
C-contiguous are passed on as they are (no copy); other numeric arrays are converted."""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from .errors import InvalidArgumentError

REQUIRED = ("input_ids", "segment_ids", "input_mask")
FIELDS = REQUIRED + ("masked_lm_positions", "masked_lm_ids", "next_sentence_labels", "labels", "label_values",
                     "start_positions", "end_positions")

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


def _as_float32(name: str, value) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf":
        raise InvalidArgumentError(f"batch field '{name}' must hold numbers, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def _per_sequence(name: str, arr: Optional[np.ndarray], b: int) -> Optional[np.ndarray]:
    if arr is None:
        return None
    if arr.shape == (b, 1):
        arr = arr.reshape(b)
    if arr.shape != (b,):
        raise InvalidArgumentError(f"batch field '{name}' must have shape ({b},), got {arr.shape}")
    return arr


def prepare(batch: Mapping[str, object]) -> tuple[Optional[np.ndarray], ...]:
    """Checks a batch dict and returns its arrays in bert_batch order (None for absent fields).

    Shapes: input_ids, segment_ids, input_mask [B, S] (required); masked_lm_positions,
    masked_lm_ids [B, P]; next_sentence_labels [B]; labels [B] or [B, S] (token
    classification); label_values [B] (regression, float); start_positions, end_positions [B]
    (question answering). Which labels a call needs depends on the session's task. Raises
    InvalidArgumentError naming the field at fault.
    """
    if not isinstance(batch, Mapping):
        raise InvalidArgumentError(f"a batch is a dict of arrays with keys {', '.join(REQUIRED)} and labels; "
                                   f"got {type(batch).__name__}")
    missing = [f for f in REQUIRED if f not in batch]
    if missing:
        raise InvalidArgumentError(f"batch is missing field(s): {', '.join(missing)}")
    unknown = sorted(set(batch) - set(FIELDS))
    if unknown:
        raise InvalidArgumentError(f"batch has unknown field(s): {', '.join(map(str, unknown))} "
                                   f"(fields: {', '.join(FIELDS)})")
    arrays = {name: (_as_float32 if name == "label_values" else _as_int32)(name, batch[name])
              for name in FIELDS if name in batch and batch[name] is not None}

    ids = arrays["input_ids"]
    if ids.ndim != 2:
        raise InvalidArgumentError(f"batch field 'input_ids' must be 2-D [B, S], got shape {ids.shape}")
    b, s = ids.shape
    for name in ("segment_ids", "input_mask"):
        if arrays[name].shape != (b, s):
            raise InvalidArgumentError(f"batch field '{name}' must have shape {(b, s)} like input_ids, "
                                       f"got {arrays[name].shape}")
    pos, mlm_ids = arrays.get("masked_lm_positions"), arrays.get("masked_lm_ids")
    if (pos is None) != (mlm_ids is None):
        raise InvalidArgumentError("batch fields 'masked_lm_positions' and 'masked_lm_ids' go together")
    if pos is not None:
        if pos.ndim != 2 or pos.shape[0] != b:
            raise InvalidArgumentError(f"batch field 'masked_lm_positions' must have shape ({b}, P), got {pos.shape}")
        if mlm_ids.shape != pos.shape:
            raise InvalidArgumentError(f"batch field 'masked_lm_ids' must have shape {pos.shape} like "
                                       f"masked_lm_positions, got {mlm_ids.shape}")
    labels = arrays.get("labels")
    if labels is not None and labels.shape != (b, s):
        arrays["labels"] = _per_sequence("labels", labels, b)
    for name in ("next_sentence_labels", "label_values", "start_positions", "end_positions"):
        arrays[name] = _per_sequence(name, arrays.get(name), b)
    return tuple(arrays.get(name) for name in FIELDS)
