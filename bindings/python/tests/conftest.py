"""Shared fixtures for the bertengine Python binding tests: the tiny config of the bindings'
test suites and a deterministic batch generator."""
import copy

import numpy as np
import pytest

TINY = {
    "model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64},
    "train": {"micro_batch": 16, "steps": 80, "lr": 0.02, "threads": 1},
    "data": {"max_seq_length": 32, "max_predictions_per_seq": 5},
}


@pytest.fixture
def tiny():
    return copy.deepcopy(TINY)


def make_batch(b=4, s=32, p=5, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 100, size=(b, s), dtype=np.int32)
    mask = np.ones((b, s), dtype=np.int32)
    mask[:, s - 4:] = 0
    ids[mask == 0] = 0
    seg = np.zeros((b, s), dtype=np.int32)
    seg[:, s // 2:] = 1
    seg[mask == 0] = 0
    pos = np.tile(np.arange(1, p + 1, dtype=np.int32) * 3, (b, 1))
    lm = rng.integers(5, 100, size=(b, p), dtype=np.int32)
    nsp = rng.integers(0, 2, size=(b,), dtype=np.int32)
    return {"input_ids": ids, "segment_ids": seg, "input_mask": mask,
            "masked_lm_positions": pos, "masked_lm_ids": lm, "next_sentence_labels": nsp}
