"""A small ctypes wrapper over libbert's C ABI (capi/bert.h) for the oracle tests.

The library comes from the environment variable BERT_LIB (meson sets it); `load_library()`
returns None when it is unset or missing so tests can skip. Struct layouts mirror bert.h
field by field and are always filled by the library's *_init_sized functions first.
"""
import ctypes
import json
import os

import numpy as np

c_float_p = ctypes.POINTER(ctypes.c_float)
c_int32_p = ctypes.POINTER(ctypes.c_int32)


class Dist(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("backend", ctypes.c_int), ("rank", ctypes.c_int),
                ("world_size", ctypes.c_int), ("local_rank", ctypes.c_int),
                ("has_nccl_unique_id", ctypes.c_int), ("nccl_unique_id", ctypes.c_ubyte * 128)]


class Batch(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("batch_size", ctypes.c_int32),
                ("seq_length", ctypes.c_int32), ("max_predictions", ctypes.c_int32),
                ("input_ids", c_int32_p), ("segment_ids", c_int32_p), ("input_mask", c_int32_p),
                ("masked_lm_positions", c_int32_p), ("masked_lm_ids", c_int32_p),
                ("next_sentence_labels", c_int32_p), ("labels", c_int32_p), ("label_values", c_float_p),
                ("start_positions", c_int32_p), ("end_positions", c_int32_p)]

OUTPUTS = {"logits": 0, "pooled": 1, "hidden": 2}


class StepResult(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("step", ctypes.c_int64), ("loss", ctypes.c_float),
                ("mlm_loss", ctypes.c_float), ("nsp_loss", ctypes.c_float),
                ("learning_rate", ctypes.c_float), ("grad_norm", ctypes.c_float),
                ("loss_scale", ctypes.c_float), ("skipped", ctypes.c_int32),
                ("micro_batches", ctypes.c_int32), ("sequences", ctypes.c_int64),
                ("step_seconds", ctypes.c_double), ("sequences_per_second", ctypes.c_double),
                ("tokens_per_second", ctypes.c_double)]


class EvalResult(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("mlm_accuracy", ctypes.c_double),
                ("mlm_loss", ctypes.c_double), ("nsp_accuracy", ctypes.c_double),
                ("nsp_loss", ctypes.c_double), ("sequences", ctypes.c_int64),
                ("masked_tokens", ctypes.c_int64), ("task_loss", ctypes.c_double),
                ("task_accuracy", ctypes.c_double), ("task_count", ctypes.c_int64)]


class EngineError(RuntimeError):
    def __init__(self, call, status, message):
        super().__init__(f"{call} failed with status {status}: {message}")
        self.status = status
        self.message = message


_SIGNATURES = {
    "bert_version": (ctypes.c_char_p, []),
    "bert_api_version": (ctypes.c_int, []),
    "bert_status_string": (ctypes.c_char_p, [ctypes.c_int]),
    "bert_last_error": (ctypes.c_char_p, []),
    "bert_dist_init_sized": (None, [ctypes.POINTER(Dist), ctypes.c_size_t]),
    "bert_batch_init_sized": (None, [ctypes.POINTER(Batch), ctypes.c_size_t]),
    "bert_step_result_init_sized": (None, [ctypes.POINTER(StepResult), ctypes.c_size_t]),
    "bert_eval_result_init_sized": (None, [ctypes.POINTER(EvalResult), ctypes.c_size_t]),
    "bert_session_create": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(Dist), ctypes.POINTER(ctypes.c_void_p)]),
    "bert_session_destroy": (None, [ctypes.c_void_p]),
    "bert_session_config": (ctypes.c_char_p, [ctypes.c_void_p]),
    "bert_forward_backward": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(Batch), ctypes.POINTER(StepResult)]),
    "bert_allreduce": (ctypes.c_int, [ctypes.c_void_p]),
    "bert_optimizer_step": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(StepResult)]),
    "bert_step": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(Batch), ctypes.POINTER(StepResult)]),
    "bert_eval": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(Batch), ctypes.POINTER(EvalResult)]),
    "bert_checkpoint": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
    "bert_checkpoint_load": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
    "bert_checkpoint_load_weights": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
    "bert_param_count": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]),
    "bert_param_info": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                                       ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int64)]),
    "bert_param_read": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, c_float_p, ctypes.c_size_t]),
    "bert_param_write": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, c_float_p, ctypes.c_size_t]),
    "bert_grad_read": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, c_float_p, ctypes.c_size_t]),
    "bert_output_size": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                        ctypes.POINTER(ctypes.c_size_t)]),
    "bert_infer": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(Batch), ctypes.c_int, c_float_p, ctypes.c_size_t]),
}

_lib = None


def load_library():
    """The loaded libbert with typed signatures, or None when BERT_LIB is unset or missing."""
    global _lib
    if _lib is None:
        path = os.environ.get("BERT_LIB", "")
        if not path or not os.path.exists(path):
            return None
        lib = ctypes.CDLL(path)
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        _lib = lib
    return _lib


def _lib_or_raise():
    lib = load_library()
    if lib is None:
        raise RuntimeError("libbert not found: set BERT_LIB to the path of libbert.so")
    return lib


def last_error():
    return _lib_or_raise().bert_last_error().decode()


def _check(call, status):
    if status != 0:
        raise EngineError(call, status, last_error())


def _initialised(struct_type, init_name):
    """A struct filled by the library's sized init function; its struct_size must equal ours."""
    value = struct_type()
    getattr(_lib_or_raise(), init_name + "_sized")(ctypes.byref(value), ctypes.sizeof(struct_type))
    if value.struct_size != ctypes.sizeof(struct_type):
        raise RuntimeError(f"{init_name}: library struct_size {value.struct_size} != "
                           f"ctypes layout {ctypes.sizeof(struct_type)}; engine_ctypes.py is out of date")
    return value


def make_batch(batch):
    """A Batch struct over a dict of DLE arrays and fine-tuning labels (any subset beyond
    input_ids, segment_ids, input_mask); returns (struct, kept-alive arrays)."""
    arrays = {k: np.ascontiguousarray(v, dtype=np.float32 if k == "label_values" else np.int32)
              for k, v in batch.items()}
    b = _initialised(Batch, "bert_batch_init")
    B, S = arrays["input_ids"].shape
    b.batch_size, b.seq_length = B, S
    b.max_predictions = arrays["masked_lm_positions"].shape[1] if "masked_lm_positions" in arrays else 0
    for field, value in arrays.items():
        setattr(b, field, value.ctypes.data_as(c_float_p if field == "label_values" else c_int32_p))
    return b, arrays


def _result_dict(struct):
    return {name: getattr(struct, name) for name, _ in struct._fields_ if name != "struct_size"}


class Session:
    """One engine session; methods raise EngineError with bert_last_error() on failure."""

    def __init__(self, config):
        self.handle = None
        self.lib = _lib_or_raise()
        text = config if isinstance(config, str) else json.dumps(config)
        handle = ctypes.c_void_p()
        _check("bert_session_create", self.lib.bert_session_create(text.encode(), None, ctypes.byref(handle)))
        self.handle = handle
        self._shapes = None

    def close(self):
        if self.handle:
            self.lib.bert_session_destroy(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def config(self):
        return json.loads(self.lib.bert_session_config(self.handle).decode())

    # ---- training -------------------------------------------------------------------
    def forward_backward(self, batch):
        b, _keep = make_batch(batch)
        r = _initialised(StepResult, "bert_step_result_init")
        _check("bert_forward_backward", self.lib.bert_forward_backward(self.handle, ctypes.byref(b), ctypes.byref(r)))
        return _result_dict(r)

    def allreduce(self):
        _check("bert_allreduce", self.lib.bert_allreduce(self.handle))

    def optimizer_step(self):
        r = _initialised(StepResult, "bert_step_result_init")
        _check("bert_optimizer_step", self.lib.bert_optimizer_step(self.handle, ctypes.byref(r)))
        return _result_dict(r)

    def step(self, batch=None):
        """One optimizer step on a host batch, or (batch None) on the session's own data."""
        r = _initialised(StepResult, "bert_step_result_init")
        if batch is None:
            status = self.lib.bert_step(self.handle, None, ctypes.byref(r))
        else:
            b, _keep = make_batch(batch)
            status = self.lib.bert_step(self.handle, ctypes.byref(b), ctypes.byref(r))
        _check("bert_step", status)
        return _result_dict(r)

    def eval(self, batch=None):
        r = _initialised(EvalResult, "bert_eval_result_init")
        if batch is None:
            status = self.lib.bert_eval(self.handle, None, ctypes.byref(r))
        else:
            b, _keep = make_batch(batch)
            status = self.lib.bert_eval(self.handle, ctypes.byref(b), ctypes.byref(r))
        _check("bert_eval", status)
        return _result_dict(r)

    def infer(self, batch, what="logits"):
        """bert_infer into a NumPy float32 array of bert_output_size floats (flat)."""
        b, _keep = make_batch(batch)
        count = ctypes.c_size_t()
        _check("bert_output_size", self.lib.bert_output_size(self.handle, OUTPUTS[what], b.batch_size, b.seq_length,
                                                             ctypes.byref(count)))
        out = np.empty(count.value, dtype=np.float32)
        _check("bert_infer", self.lib.bert_infer(self.handle, ctypes.byref(b), OUTPUTS[what],
                                                 out.ctypes.data_as(c_float_p), out.size))
        return out

    # ---- checkpoints ----------------------------------------------------------------
    def checkpoint(self, path):
        _check("bert_checkpoint", self.lib.bert_checkpoint(self.handle, str(path).encode()))

    def checkpoint_load(self, path):
        _check("bert_checkpoint_load", self.lib.bert_checkpoint_load(self.handle, str(path).encode()))

    def checkpoint_load_weights(self, path):
        _check("bert_checkpoint_load_weights",
               self.lib.bert_checkpoint_load_weights(self.handle, str(path).encode()))

    # ---- parameters -----------------------------------------------------------------
    def param_shapes(self):
        """Ordered {name: shape} of every parameter, from bert_param_count/bert_param_info."""
        if self._shapes is None:
            count = ctypes.c_size_t()
            _check("bert_param_count", self.lib.bert_param_count(self.handle, ctypes.byref(count)))
            shapes = {}
            for i in range(count.value):
                name, ndim, shape = ctypes.c_char_p(), ctypes.c_int(), (ctypes.c_int64 * 4)()
                _check("bert_param_info", self.lib.bert_param_info(
                    self.handle, i, ctypes.byref(name), ctypes.byref(ndim), shape))
                shapes[name.value.decode()] = tuple(shape[d] for d in range(ndim.value))
            self._shapes = shapes
        return self._shapes

    def _read(self, fn, call, name):
        shape = self.param_shapes()[name]
        out = np.empty(shape, dtype=np.float32)
        _check(call, fn(self.handle, name.encode(), out.ctypes.data_as(c_float_p), out.size))
        return out

    def param_read(self, name):
        return self._read(self.lib.bert_param_read, "bert_param_read", name)

    def grad_read(self, name):
        return self._read(self.lib.bert_grad_read, "bert_grad_read", name)

    def param_write(self, name, values):
        src = np.ascontiguousarray(values, dtype=np.float32)
        _check("bert_param_write", self.lib.bert_param_write(
            self.handle, name.encode(), src.ctypes.data_as(c_float_p), src.size))

    def params(self):
        return {name: self.param_read(name) for name in self.param_shapes()}

    def grads(self):
        return {name: self.grad_read(name) for name in self.param_shapes()}
