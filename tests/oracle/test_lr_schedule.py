"""MLPerf's learning-rate schedule, as its reference convergence points use it (train.schedule_steps
= opt_learning_rate_training_steps, separate from the steps run; warmup_steps from
start_warmup_step, which may be negative; end_lr), against the reference's formula written here
from its definition (TF polynomial_decay to end_lr without cycling, and a linear warmup over
num_warmup_steps counted from start_warmup_step), with steps counted from 1 as DLE's scheduler
does. With start_warmup_step 0 and end_lr 0 it is DLE's PolyWarmUpScheduler (poly_warmup_lr). And
train.lr_schedule "linear" against transformers' get_linear_schedule_with_warmup."""
import pytest

from engine_ctypes import Session, load_library
from reference_optim import poly_warmup_lr

pytestmark = pytest.mark.skipif(load_library() is None, reason="libbert not found (BERT_LIB)")

MODEL = {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
         "intermediate_size": 32, "max_position_embeddings": 32}
DATA = {"max_seq_length": 16, "max_predictions_per_seq": 3}


def mlperf_lr(base_lr, step, schedule_steps, warmup_steps, start_warmup_step, degree, end_lr):
    decayed = (base_lr - end_lr) * (1 - min(step, schedule_steps) / schedule_steps) ** degree + end_lr
    since = step - start_warmup_step
    if warmup_steps > 0 and since < warmup_steps:
        return base_lr * since / warmup_steps
    return decayed


def engine_rates(train, steps):
    with Session({"model": MODEL, "data": DATA, "train": {"micro_batch": 2, "threads": 1, **train}}) as s:
        return [s.step()["learning_rate"] for _ in range(steps)]


@pytest.mark.parametrize("schedule", [
    # the MLPerf v1.1 reference point at global batch 8192 (mlperf-logging's rcps_bert.json), scaled 1/20
    {"lr": 2.88293e-3, "schedule_steps": 30, "warmup_steps": 14, "start_warmup_step": -4, "decay_degree": 1.0},
    {"lr": 1e-3, "schedule_steps": 10, "warmup_steps": 4, "start_warmup_step": 2, "decay_degree": 0.5, "end_lr": 1e-4},
    {"lr": 2.9293e-3, "schedule_steps": 35, "warmup_steps": 0, "start_warmup_step": -35, "decay_degree": 1.0},
])
def test_mlperf_schedule_equals_the_reference_formula(schedule):
    steps = schedule["schedule_steps"] + 3  # past the schedule's end: end_lr
    rates = engine_rates({"steps": steps, **schedule}, steps)
    expected = [mlperf_lr(schedule["lr"], k, schedule["schedule_steps"], schedule["warmup_steps"],
                          schedule["start_warmup_step"], schedule["decay_degree"], schedule.get("end_lr", 0.0))
                for k in range(1, steps + 1)]
    assert rates == pytest.approx(expected, rel=1e-6, abs=1e-12)


def test_defaults_are_dle_schedule():
    rates = engine_rates({"steps": 20, "lr": 6e-3, "warmup_proportion": 0.2843, "decay_degree": 0.5}, 20)
    assert rates == pytest.approx([poly_warmup_lr(6e-3, k, 20, 0.2843) for k in range(1, 21)], rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("steps,warmup", [(20, 0), (20, 6), (7, 7), (13, 1)])
def test_linear_schedule_equals_hugging_faces(steps, warmup):
    """train.lr_schedule "linear" against transformers' get_linear_schedule_with_warmup driven as
    HF's Trainer drives it (optimizer.step() then scheduler.step()): the LR of each optimizer step."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=5e-5)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, warmup, steps)
    expected = []
    for _ in range(steps):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    rates = engine_rates({"steps": steps, "lr": 5e-5, "lr_schedule": "linear", "warmup_steps": warmup}, steps)
    assert rates == pytest.approx(expected, rel=1e-6, abs=1e-15)
    assert rates[-1] > 0 and (warmup == 0 or rates[0] == 0)  # unlike DLE's poly, the last step is not at 0


def test_linear_schedule_refuses_what_it_does_not_have():
    with pytest.raises(Exception, match="train.end_lr' does not apply to train.lr_schedule"):
        Session({"model": MODEL, "data": DATA, "train": {"lr_schedule": "linear", "end_lr": 1e-5}})
    with pytest.raises(Exception, match="train.lr_schedule"):
        Session({"model": MODEL, "data": DATA, "train": {"lr_schedule": "cosine"}})
