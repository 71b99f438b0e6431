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
