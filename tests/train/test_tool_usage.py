"""Every command-line tool answers --help with its usage on stdout and status 0, and a call it
cannot parse (no arguments; an unknown option) with its usage on stderr and a non-zero status
(never a crash or an error about a file named '--help')."""
import os
import subprocess

import pytest

from train_helpers import TOOLS

TOOL_NAMES = ["bert-prep", "bert-train", "bert-bench", "bert-ckpt", "bert-finetune", "bert-predict",
              "bert-squad-eval"]


def tool(name):
    path = os.path.join(TOOLS, name)
    if not os.path.exists(path):
        pytest.skip(f"{name} is not built (BERT_BUILD_DIR)")
    return path


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_help_prints_usage_and_succeeds(name):
    r = subprocess.run([tool(name), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert "usage: " + name in r.stdout, r.stdout


# bert-bench without arguments runs its default benchmark, so it gets an unknown option instead.
BAD_CALLS = {name: [] for name in TOOL_NAMES} | {"bert-bench": ["--no-such-option", "1"]}


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_no_or_bad_arguments_fail_with_usage(name):
    r = subprocess.run([tool(name)] + BAD_CALLS[name], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "usage" in r.stderr, r.stderr
    assert r.returncode < 128, "killed by a signal"


# Values atoi/atof used to turn silently into something else (the probe's cases): each is refused
# with the option, what it expects and the text, status 2, before anything runs.
@pytest.mark.parametrize("option,value,expects", [
    ("--steps", "abc", "an integer in [0, "),     # was 0: memory-only output
    ("--steps", "1e3", "an integer in [0, "),     # was 1 step
    ("--threads", "inf", "an integer in [0, 4096]"),  # was every core
    ("--threads", "-1", "an integer in [0, 4096]"),
    ("--unpad", "bf16", "1, 0, true or false"),  # was false
    ("--bandwidth", "nan", "a finite number"),
    ("--batch", "", "an integer in [1, "),
])
def test_bert_bench_refuses_values_it_cannot_parse(option, value, expects):
    r = subprocess.run([tool("bert-bench"), option, value], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert f"error: {option} expects {expects}" in r.stderr and f"got '{value}'" in r.stderr, r.stderr


def test_bert_predict_refuses_an_option_it_does_not_know():
    """It used to accept any --key value (--device cuda --precision bf16 ran fp32 on the CPU)."""
    base = ["--model", "m.h5", "--task", "sst-2", "--vocab", "v.txt", "--input", "dev.tsv", "--output", "out.tsv"]
    r = subprocess.run([tool("bert-predict"), *base, "--devcie", "cuda"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "error: unknown option '--devcie'" in r.stderr and "usage" in r.stderr, r.stderr
    r = subprocess.run([tool("bert-predict"), *base, "--device"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "error: --device needs a value" in r.stderr, r.stderr
    r = subprocess.run([tool("bert-predict"), "--help"], capture_output=True, text=True, timeout=60)
    assert "--device cpu|cuda|cuda:N" in r.stdout and "--precision fp32|bf16|fp16" in r.stdout, r.stdout


# One parser for every tool (src/tools/command_line.cpp): each tool refuses, before it reads a
# file, an unknown option, an option without its value, a value given to a flag, the wrong number
# of arguments, and a value out of its type or range (an option given again: the last value);
# status 2 and a message naming the option and the text.
PREDICT = ["--model", "m.h5", "--task", "sst-2", "--vocab", "v.txt", "--input", "dev.tsv", "--output", "o.tsv"]
REFUSALS = [
    ("bert-prep", ["shards", "--vocab", "v", "--output", "o", "in", "--gzip", "12"],
     "error: --gzip expects an integer in [0, 9], got '12'"),
    ("bert-prep", ["shards", "--vocab", "v", "--output", "o", "in", "--dupe-factor", "99999999999"],
     "error: --dupe-factor expects an integer in [1, 65536], got '99999999999'"),  # was cast to int
    ("bert-prep", ["shards", "--vocab", "v", "--output", "o", "in", "--masked-lm-prob", "nan"],
     "error: --masked-lm-prob expects a finite number in [0, 1], got 'nan'"),
    ("bert-prep", ["shards", "--vocab", "v", "--output", "o", "in", "--sentences", "nltk"],
     "error: --sentences expects line or split, got 'nltk'"),
    ("bert-prep", ["shards", "--vocab", "v", "--output", "o"], "error: bert-prep shards takes at least 1 inputs, got 0"),
    ("bert-prep", ["tokenize", "--vocab", "v", "--ids=1"], "error: --ids takes no value, got '--ids=1'"),
    ("bert-prep", ["bins", "--output", "o", "s.h5", "--input-format", "hdf5"],
     "error: --input-format expects auto, dle, mlperf or mlperf_packed, got 'hdf5'"),
    ("bert-prep", ["inspect", "--vocab", "v", "s.h5", "--samples", "-1"],
     "error: --samples expects an integer in [0, 1048576], got '-1'"),
    ("bert-prep", ["vocab", "--output", "v", "in", "--size", "30522", "--size", "100"],  # the last one counts
     "error: --size expects an integer in [128, 16777216], got '100'"),
    ("bert-ckpt", ["inspect", "a.h5", "b.h5"], "error: bert-ckpt inspect takes 1 FILE, got 2"),  # b.h5 was ignored
    ("bert-ckpt", ["export-hf", "a.h5", "dir", "--tensors"], "error: unknown option '--tensors' for bert-ckpt export-hf"),
    ("bert-ckpt", ["import", "src", "out.h5", "--config"], "error: --config needs a value"),
    ("bert-ckpt", ["convert", "a.h5"], "error: unknown command 'convert'"),
    ("bert-train", ["c.json", "--steps", "0"], "error: --steps expects an integer in [1, "),  # was: the config's steps
    ("bert-train", ["c.json", "--steps", "1e3"], "error: --steps expects an integer in [1, "),
    ("bert-train", ["c.json", "--resume=yes"], "error: --resume takes no value, got '--resume=yes'"),
    ("bert-train", ["--quiet"], "error: bert-train takes at least 1 CONFIG.json files, got 0"),
    ("bert-finetune", ["c.json", "--epochs", "3"], "error: unknown option '--epochs' for bert-finetune"),
    ("bert-finetune", ["a.json", "b.json"], "error: bert-finetune takes 1 CONFIG.json, got 2"),
    ("bert-predict", PREDICT + ["--batch", "0"], "error: --batch expects an integer in [1, "),
    ("bert-predict", PREDICT + ["--lower-case", "yes"], "error: --lower-case expects 1, 0, true or false, got 'yes'"),
    ("bert-predict", PREDICT + ["--null-score-diff-threshold", "inf"],
     "error: --null-score-diff-threshold expects a finite number"),
    ("bert-predict", PREDICT[:8], "error: bert-predict needs --output"),
    ("bert-predict", PREDICT[:8] + ["--output="], "error: --output expects a value that is not empty, got ''"),
    ("bert-squad-eval", ["dev.json"], "error: bert-squad-eval takes 2 files (DATASET.json PREDICTIONS.json), got 1"),
    ("bert-bench", ["--recompute", "some"], "error: --recompute expects none, gelu, attention or all, got 'some'"),
    ("bert-bench", ["--steps", "1", "--steps", "x"], "error: --steps expects an integer in [0, 1073741824], got 'x'"),
]


@pytest.mark.parametrize("name,args,message", REFUSALS, ids=[f"{r[0]}-{i}" for i, r in enumerate(REFUSALS)])
def test_every_tool_refuses_a_call_it_cannot_parse(name, args, message, tmp_path):
    r = subprocess.run([tool(name)] + args, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
    assert os.listdir(tmp_path) == [], "nothing is written before the command line is accepted"
