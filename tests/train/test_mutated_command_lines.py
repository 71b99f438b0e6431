"""The hostile probe's "mutated command lines" class as a generator: for every tool, seeded random
command lines made of its real subcommands and options with hostile values (empty, negative,
huge, NaN, text for a number, missing files, directories, /dev/null, a file that is not what the
option wants, options without their value, unknown options, repeats). Each call must end by
itself within its time limit (no hang), never by a signal (no crash), and a failing call must say
why on stderr. The counts per tool are printed (pytest -s) for the closing note."""
import os
import random
import subprocess

import pytest

from train_helpers import TOOLS, tiny_model, write_config

CALLS_PER_TOOL = 40
SEED = 20261127

SUBCOMMANDS = {
    "bert-prep": ["tokenize", "vocab", "shards", "eval-set", "inspect", "from-tfrecord", "bins", "nonsense", ""],
    "bert-ckpt": ["export-hf", "import", "inspect", "convert", "nonsense", ""],
    "bert-train": [""],
    "bert-predict": [""],
    "bert-finetune": [""],
    "bert-squad-eval": [""],
    "bert-bench": [""],
}
OPTIONS = {
    "bert-prep": ["--vocab", "--output", "--size", "--max-seq-length", "--max-predictions", "--masked-lm-prob",
                  "--dupe-factor", "--seed", "--shards", "--eval-fraction", "--format", "--gzip", "--threads",
                  "--samples", "--bins", "--min-frequency", "--max-word-chars", "--sentences", "--documents",
                  "--cased", "--uncased", "--ids", "--overwrite", "--whole-word-mask"],
    "bert-ckpt": ["--config", "--hidden-act", "--tensors"],
    "bert-train": ["--steps", "--steps-this-run", "--output", "--resume", "--overwrite", "--discard-invalid",
                   "--loss-log", "--quiet", "--plan", "--world"],
    "bert-predict": ["--model", "--task", "--vocab", "--input", "--output", "--batch", "--device", "--precision",
                     "--max-seq-length", "--doc-stride", "--max-query-length", "--n-best", "--threads",
                     "--lower-case", "--max-answer-length", "--null-score-diff-threshold"],
    "bert-finetune": [],
    "bert-squad-eval": [],
    # bert-bench runs a benchmark when its call is valid: every call starts from a tiny, fast one
    "bert-bench": ["--model", "--batch", "--seq", "--steps", "--warmup", "--threads", "--predictions", "--device",
                   "--precision", "--unpad", "--recompute", "--cost-model", "--world", "--graphed", "--data"],
}
BENCH_BASE = ["--model", "bert-tiny", "--batch", "2", "--seq", "16", "--steps", "1", "--warmup", "0", "--threads", "1"]


def values(tmp):
    return ["", "-1", "0", "1", "3", "99999999999999999999", "1e3", "nan", "inf", "abc", "-", "--", "bf16", "cuda",
            "cuda:7", "h100", "squad", "sst-2", str(tmp / "missing.json"), str(tmp), "/dev/null", str(tmp / "text.txt"),
            str(tmp / "config.json"), str(tmp / "out"), "\u00e9\u00e9", "x" * 5000]


def random_call(rng, name, tmp):
    args = []
    sub = rng.choice(SUBCOMMANDS[name])
    if sub:
        args.append(sub)
    if name == "bert-bench":
        args += BENCH_BASE
    for _ in range(rng.randint(0, 5)):
        kind = rng.random()
        if kind < 0.6 and OPTIONS[name]:
            args.append(rng.choice(OPTIONS[name]))
            if rng.random() < 0.85:
                args.append(rng.choice(values(tmp)))
        elif kind < 0.8:
            args.append(rng.choice(values(tmp)))
        else:
            args.append(rng.choice(["--no-such-option", "-x", "--help=1", "--steps=3"]))
    return args


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_mutated_command_lines_never_crash_or_hang(name, tmp_path):
    path = os.path.join(TOOLS, name)
    if not os.path.exists(path):
        pytest.skip(f"{name} is not built (BERT_BUILD_DIR)")
    (tmp_path / "text.txt").write_text("A sentence here .\nAnother one .\n\nA second document .\n")
    write_config(tmp_path / "config.json", {"model": tiny_model(), "train": {"micro_batch": 2, "steps": 1, "threads": 1},
                                            "data": {"max_seq_length": 32, "max_predictions_per_seq": 4}})
    rng = random.Random(f"{SEED}-{name}")
    counts = {"ok": 0, "refused": 0}
    for _ in range(CALLS_PER_TOOL):
        args = random_call(rng, name, tmp_path)
        try:
            p = subprocess.run([path, *args], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                               errors="replace")
        except subprocess.TimeoutExpired:
            pytest.fail(f"hang: {name} {args} ran past 60 s")
        assert p.returncode >= 0 and p.returncode < 128, f"crash: {name} {args} ended with {p.returncode}:\n{p.stderr[-2000:]}"
        if p.returncode == 0:
            counts["ok"] += 1
        else:
            counts["refused"] += 1
            assert p.stderr.strip(), f"{name} {args} failed ({p.returncode}) without a word on stderr"
    print(f"{name}: {CALLS_PER_TOOL} mutated command lines: {counts['ok']} ran, {counts['refused']} refused with a "
          f"message, 0 crashes, 0 hangs")
