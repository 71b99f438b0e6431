"""bert-predict serving on the emulated GPU (tests/kernel_emu): the same tool built over the CUDA
emulation, asked for --device cuda / cuda:1 (two emulated devices) and --precision fp32 / bf16 / fp16,
predicts an STS-B-format regression set (numbers, so the outputs compare) from a model fine-tuned on
the CPU; its predictions against the CPU's (fp32 to 1e-4, 16-bit within a stated bound), with the
throughput and the latency of a call printed. The same call on this machine's real build (no GPU)
stops with a message, never falls back to the CPU."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

BUILD = os.environ.get("BERT_BUILD_DIR", "")
EMULATED = os.path.join(BUILD, "tests", "kernel_emu", "emulated-bert-predict")
PREDICT = os.path.join(BUILD, "src", "tools", "bert-predict")
FINETUNE = os.path.join(BUILD, "src", "tools", "bert-finetune")
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"

pytestmark = pytest.mark.skipif(not os.path.exists(EMULATED), reason="emulated-bert-predict is not built")


def run(*args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def stsb_file(path, n, rng):
    lines = [HEADER]
    for i in range(n):
        a, b = " ".join(rng.choice(WORDS, 5)), " ".join(rng.choice(WORDS, 5))
        score = (a + " " + b).split().count("alpha")  # learnable: the outputs spread, so they compare
        lines.append(f"{i}\tmain\tf\t2012\t{i}\tnone\tnone\t{a}\t{b}\t{score:.3f}")
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stsb")
    rng = np.random.default_rng(3)
    (tmp / "STS-B").mkdir()
    stsb_file(tmp / "STS-B" / "train.tsv", 256, rng)
    stsb_file(tmp / "STS-B" / "dev.tsv", 24, rng)
    (tmp / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
    cfg = {"model": {"vocab_size": 15, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "intermediate_size": 64, "max_position_embeddings": 32},
           "train": {"micro_batch": 16, "lr": 3e-3, "threads": 1},
           "data": {"max_seq_length": 16},
           "finetune": {"task": "sts-b", "data_dir": str(tmp / "STS-B"), "vocab": str(tmp / "vocab.txt"),
                        "epochs": 6, "output_dir": str(tmp / "out")}}
    (tmp / "ft.json").write_text(json.dumps(cfg))
    run(FINETUNE, tmp / "ft.json")
    return tmp


def predict(tool, model, name, *extra):
    out = model / f"{name}.tsv"
    printed = run(tool, "--model", model / "out" / "final.h5", "--task", "sts-b", "--vocab", model / "vocab.txt",
                  "--input", model / "STS-B" / "dev.tsv", "--output", out, "--max-seq-length", "16", "--batch", "8",
                  *extra)
    rows = [line.split("\t") for line in out.read_text().splitlines()[1:]]
    assert [r[0] for r in rows] == [str(i) for i in range(24)]
    return np.array([float(r[1]) for r in rows]), printed


# Measured (this model, 24 rows): fp32 4e-8, bf16 4.1e-3, fp16 5.5e-4 at most, on outputs spread 0 to 1.6.
@pytest.mark.parametrize("device,precision,bound", [("cuda", "fp32", 1e-5), ("cuda:1", "bf16", 0.02),
                                                    ("cuda", "fp16", 0.005)])
def test_serving_on_the_emulated_gpu_predicts_as_the_cpu(model, device, precision, bound):
    cpu, _ = predict(PREDICT, model, "cpu", "--threads", "1")
    assert cpu.std() > 0.3, "the model's outputs must spread for the comparison to mean something"
    gpu, printed = predict(EMULATED, model, f"gpu-{precision}", "--device", device, "--precision", precision)
    assert np.abs(gpu - cpu).max() <= bound, (gpu, cpu)
    assert "24 examples" in printed and "sequences/s (seq 16, batch 8); latency of a call: p50 " in printed, printed
    assert "over 3 calls" in printed, printed


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine: the real build serves there")
def test_the_cpu_build_refuses_the_gpu_with_a_message(model):
    r = subprocess.run([PREDICT, "--model", model / "out" / "final.h5", "--task", "sts-b", "--vocab",
                        model / "vocab.txt", "--input", model / "STS-B" / "dev.tsv", "--output", model / "x.tsv",
                        "--max-seq-length", "16", "--device", "cuda"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "bert_session_create: BERT_ERR_BACKEND: no CUDA device available" in r.stderr, r.stderr
