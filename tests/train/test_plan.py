"""bert-train --plan: every shipped recipe planned for 1, 8, 64 and 1024 ranks (the batch split
checked against the recipe's own numbers, worked out here; a recipe that cannot split refused by
name), and the plan checked against what a real run does: the learning rate and the evaluation
steps of its metrics log, the memory a real session accounts for (bert-bench --steps 0), the
sharded optimizer's share. No model is allocated and no data read: the DLE and MLPerf recipes
name files that do not exist here."""
import glob
import json
import os

import pytest

from train_helpers import SOURCE, TOOLS, TRAIN, dominant_word_corpus, make_shards, needs_tools, read_metrics, run, tiny_model, write_config

pytestmark = needs_tools
BENCH = os.path.join(TOOLS, "bert-bench")
RECIPES = sorted(glob.glob(os.path.join(SOURCE, "samples", "configs", "*.json")))
MAX_ACCUMULATION = 1 << 16


def plans(p):
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def expected_split(train, world):
    """(micro, accumulation) the recipe's train section gives on `world` ranks, or None when refused."""
    micro = train.get("micro_batch", 8)
    if not train.get("global_batch"):
        return micro, train.get("accumulation_steps", 1)
    per_pass = micro * world
    if train["global_batch"] % per_pass or train["global_batch"] // per_pass > MAX_ACCUMULATION:
        return None
    return micro, train["global_batch"] // per_pass


@pytest.mark.parametrize("recipe", RECIPES, ids=os.path.basename)
def test_every_recipe_plans_for_1_8_64_and_1024_ranks(recipe):
    config = json.load(open(recipe))
    train = config["train"]
    for world in (1, 8, 64, 1024):
        p = run(TRAIN, "--plan", recipe, "--world", world, check=False)
        split = expected_split(train, world)
        if split is None:
            assert p.returncode == 2, p.stdout + p.stderr
            assert f"{recipe} cannot run on {world} ranks" in p.stderr and "train.global_batch" in p.stderr, p.stderr
            continue
        assert p.returncode == 0, p.stdout + p.stderr
        (plan,) = plans(p)
        micro, accumulation = split
        assert (plan["world"], plan["micro_batch"], plan["accumulation_steps"]) == (world, micro, accumulation)
        assert plan["global_batch"] == micro * accumulation * world
        assert plan["samples"] == plan["global_batch"] * train["steps"]
        assert plan["steps"] == train["steps"] and plan["schedule_steps"] == train.get("schedule_steps", train["steps"])
        assert plan["lr"][0][0] == 1 and plan["lr"][-1][0] == train["steps"]
        assert max(lr for _, lr in plan["lr"]) <= train["lr"] * (1 + 1e-12)
        memory = plan["memory_per_rank"]
        assert memory["parameter_bytes"] == 4 * plan["parameters"] == memory["gradient_bytes"]
        assert memory["optimizer_bytes"] == 3 * memory["parameter_bytes"]  # m, v and the update
        assert memory["held_bytes"] >= sum(memory[k] for k in ("parameter_bytes", "gradient_bytes",
                                                               "optimizer_bytes", "activation_bytes"))
        if config.get("device", "cpu") != "cpu":
            f = plan["prediction"]
            assert f["step_seconds"] > 0 and f["time_to_train_seconds"] == pytest.approx(f["step_seconds"] * train["steps"])
            assert "PREDICTION" in p.stdout and "769 TFLOP/s" in p.stdout
        else:
            assert "prediction" not in plan


def test_phases_plan_together_and_bert_large_needs_its_sizes():
    p1, p2 = (os.path.join(SOURCE, "samples", "configs", f"dle_bert_large_phase{i}.json") for i in (1, 2))
    p = run(TRAIN, "--plan", p1, p2, "--world", 8)
    a, b = plans(p)
    assert (a["global_batch"], a["accumulation_steps"], a["max_seq_length"]) == (65536, 128, 128)
    assert (b["global_batch"], b["accumulation_steps"], b["max_seq_length"]) == (32768, 256, 512)
    assert a["parameters"] == b["parameters"] > 330_000_000  # BERT-large, 24 layers
    assert a["model"]["num_hidden_layers"] == 24 and a["model"]["vocab_size"] == 30522
    # seq 512 at micro-batch 16 holds more activations than seq 128 at 64 (attention is quadratic)
    assert b["memory_per_rank"]["activation_bytes"] > a["memory_per_rank"]["activation_bytes"]
    # DLE's warmup: the LR peaks at its last step, then follows the decay curve
    (s1, lr1), (s_end, lr_end), (s_after, lr_after) = a["lr"][:3]
    assert (s1, s_end, s_after) == (1, 2000, 2001) and lr_end == pytest.approx(6e-3 * 2000 / (0.2843 * 7038))
    assert lr_after == pytest.approx(6e-3 * (1 - 2001 / 7038) ** 0.5)
    # more ranks, shorter step: the prediction scales with the micro-batches per rank
    eight = a["prediction"]["step_seconds"]
    sixty_four = plans(run(TRAIN, "--plan", p1, "--world", 64))[0]["prediction"]["step_seconds"]
    assert 6 < eight / sixty_four < 8.5


def test_mlperf_recipe_plans_its_evaluations_and_refuses_beyond_its_batch():
    recipe = os.path.join(SOURCE, "samples", "configs", "mlperf_bert_8192.json")
    (plan,) = plans(run(TRAIN, "--plan", recipe, "--world", 256))
    assert (plan["accumulation_steps"], plan["global_batch"]) == (1, 8192)
    # every 250000 samples at 8192 per step: after steps 31, 62, 92, ...
    assert plan["evaluation_steps"][:3] == [31, 62, 92] and plan["start_warmup_step"] == -76
    # the recipe's 287 warmup steps from step -76: step 210 is the last, at the LR's peak
    assert plan["warmup_steps"] == 287
    (_, _), (last, peak), (after, decayed) = plan["lr"][:3]
    assert (last, after) == (210, 211) and peak == pytest.approx(0.00288293 * 286 / 287) and decayed < peak
    p = run(TRAIN, "--plan", recipe, "--world", 512, check=False)
    assert p.returncode == 2 and "train.global_batch' = 8192 is not a multiple" in p.stderr, p.stderr


def test_plan_matches_a_real_run(tmp_path):
    """LR per step and evaluation steps as the run's metrics log has them; memory as a real session's."""
    train_dir, eval_dir = make_shards(tmp_path, dominant_word_corpus(tmp_path / "corpus.txt"))
    cfg = write_config(tmp_path / "run.json", {
        "model": tiny_model(), "train": {"micro_batch": 4, "global_batch": 8, "steps": 12, "lr": 0.01,
                                         "warmup_proportion": 0.25, "threads": 1, "log_every": 1,
                                         "eval_every_samples": 20},
        "data": {"train_dir": str(train_dir), "eval_dir": str(eval_dir), "max_seq_length": 32,
                 "max_predictions_per_seq": 5},
        "log": {"metrics": str(tmp_path / "metrics.json")}})
    (plan,) = plans(run(TRAIN, "--plan", cfg))
    run(TRAIN, cfg, "--quiet", "--output", tmp_path / "final.h5")
    metrics = read_metrics(tmp_path / "metrics.json")
    lr_of_step = {step[1]: d["learning_rate"] for step, d in metrics if "loss" in d}
    for step, lr in plan["lr"]:
        assert lr == pytest.approx(lr_of_step[step], rel=1e-6), (step, lr, lr_of_step[step])
    run_evals = sorted({step[1] for step, d in metrics if "eval_mlm_accuracy" in d and step[1] < 12})
    assert plan["evaluation_steps"] == run_evals == [3, 5, 8, 10]  # 20 samples at 8 per step

    real = json.loads(run(BENCH, "--model", "bert-mini", "--batch", 8, "--seq", 128, "--predictions", 20,
                          "--steps", 0, "--threads", 1).stdout.strip().splitlines()[-1])["memory"]
    mini = write_config(tmp_path / "mini.json", {"model": "bert-mini", "train": {"micro_batch": 8, "steps": 10},
                                                 "data": {"max_seq_length": 128, "max_predictions_per_seq": 20}})
    memory = plans(run(TRAIN, "--plan", mini))[0]["memory_per_rank"]
    for key, bench_key in (("parameter_bytes", "parameters_mib"), ("gradient_bytes", "gradients_mib"),
                           ("optimizer_bytes", "optimizer_mib"), ("activation_bytes", "activations_mib")):
        assert memory[key] / 1048576 == pytest.approx(real[bench_key], rel=1e-12), key


def test_sharded_optimizer_keeps_a_share_and_bad_input_is_refused(tmp_path):
    cfg = write_config(tmp_path / "shard.json", {"model": "bert-mini", "device": "cuda",
                                                 "train": {"micro_batch": 8, "global_batch": 64, "steps": 10,
                                                           "precision": "bf16"},
                                                 "dist": {"shard_optimizer": True}})
    (plan,) = plans(run(TRAIN, "--plan", cfg, "--world", 8))
    n = plan["parameters"]
    assert plan["memory_per_rank"]["optimizer_bytes"] == 3 * 4 * (n // 8)  # rank 0's slice [0, n/8)
    bad = write_config(tmp_path / "bad.json", {"model": "bert-mini", "train": {"micro_batch": 8, "stepz": 10}})
    p = run(TRAIN, "--plan", bad, check=False)
    assert p.returncode == 2 and "train.stepz" in p.stderr and str(bad) in p.stderr, p.stderr
    p = run(TRAIN, cfg, "--world", 8, check=False)
    assert p.returncode == 2 and "--world applies to --plan" in p.stderr, p.stderr
    p = run(TRAIN, "--plan", cfg, "--world", "eight", check=False)
    assert p.returncode == 2 and "--world" in p.stderr, p.stderr
