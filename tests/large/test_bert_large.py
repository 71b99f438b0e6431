"""The shipped BERT-large recipes at their real model size (24 layers, hidden 1024, vocabulary
30,522, sequence 128 then 512), run on the CPU as a user would, overriding only what a CPU run
must (device, precision, micro-batch, global batch, steps, data and output paths):

  DLE phase 1 (dle_bert_large_phase1.json) with a checkpoint every step -> SIGKILL after the first
  -> bert-train phase1 phase2 --resume (phase 1 resumed, phase 2 at seq 512 from phase 1's final
  checkpoint with its LAMB moments) -> bert-ckpt export-hf -> transformers.BertForPreTraining
  loads the folder with no missing or unexpected keys and gives the engine's MLM/NSP losses and
  NSP logits on a batch -> a SQuAD fine-tune of a few steps from it (bert-finetune, train.steps)
  -> bert-predict; and MLPerf's recipe (mlperf_bert.json: MLPerf-format shards, evaluation,
  log.mlperf) from phase 1's checkpoint, for a few steps.

Data: wikitext-2 validation and the BERT uncased vocabulary from ../shared/data (skips without
them). Each stage's wall time is printed (meson's test log) and written to
BERT_BUILD_DIR/meson-logs/bert_large_stages.json, with the tools' peak RSS (VmHWM, sampled every
0.1 s) beside the engine's own accounting (the activation arena of each session)."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
BUILD = os.environ.get("BERT_BUILD_DIR", "")
TOOLS = os.path.join(BUILD, "src", "tools")
SHARED = os.path.join(ROOT, "..", "shared", "data")
TEXT = os.path.join(SHARED, "wikitext2-valid.txt")
VOCAB = os.path.join(SHARED, "bert-uncased-vocab.txt")
CONFIGS = os.path.join(ROOT, "samples", "configs")

pytestmark = [
    pytest.mark.skipif(not os.path.exists(os.path.join(TOOLS, "bert-train")), reason="tools not built (BERT_BUILD_DIR)"),
    pytest.mark.skipif(not (os.path.exists(TEXT) and os.path.exists(VOCAB)), reason="../shared/data is absent"),
]
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
STAGES = {}


def tool(name):
    return os.path.join(TOOLS, name)


class Finished:
    """A finished tool: its output, exit status and peak resident memory (MiB)."""

    def __init__(self, stdout, stderr, returncode, peak_mib):
        self.stdout, self.stderr, self.returncode, self.peak_mib = stdout, stderr, returncode, peak_mib


def high_water_mib(pid):
    """The process's VmHWM (its own peak RSS; getrusage's ru_maxrss would carry this test's over exec)."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run(*args, expect=0):
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen([str(a) for a in args], stdout=out, stderr=err, text=True)
        peak = 0.0
        while child.poll() is None:
            peak = max(peak, high_water_mib(child.pid))
            time.sleep(0.1)
        out.seek(0)
        err.seek(0)
        p = Finished(out.read(), err.read(), child.returncode, peak)
    assert p.returncode == expect, f"{args[0]} exited {p.returncode}\nstdout:\n{p.stdout[-4000:]}\nstderr:\n{p.stderr[-4000:]}"
    return p, time.perf_counter() - t0


def stage(name, seconds, **extra):
    STAGES[name] = {"seconds": round(seconds, 1), **extra}
    print(f"stage {name}: {seconds:.1f} s {extra if extra else ''}", flush=True)
    if BUILD:
        os.makedirs(os.path.join(BUILD, "meson-logs"), exist_ok=True)
        with open(os.path.join(BUILD, "meson-logs", "bert_large_stages.json"), "w") as f:
            json.dump(STAGES, f, indent=1)


def recipe(name, work, **overrides):
    """A shipped recipe with the CPU overrides: sections' keys replaced, others kept."""
    cfg = json.load(open(os.path.join(CONFIGS, name)))
    assert cfg["model"] == "bert-large"
    cfg["device"] = "cpu"
    for section, values in overrides.items():
        cfg.setdefault(section, {}).update(values)
    os.makedirs(cfg["checkpoint"]["dir"], exist_ok=True)
    path = os.path.join(work, name)
    json.dump(cfg, open(path, "w"), indent=1)
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("large")
    for seq, preds, name, fmt in ((128, 20, "p1", "dle"), (512, 80, "p2", "dle"), (512, 76, "mlperf", "mlperf")):
        _, seconds = run(tool("bert-prep"), "shards", "--vocab", VOCAB, "--output", d / name, "--max-seq-length", seq,
                         "--max-predictions", preds, "--dupe-factor", 1, "--format", fmt, "--eval-fraction", 0.05, TEXT)
        stage(f"bert-prep shards seq {seq} ({fmt})", seconds)
    return d


@pytest.fixture(scope="module")
def pretrained(work):
    """DLE phase 1 killed and resumed, then phase 2: returns (phase 1 final, phase 2 final)."""
    common = {"precision": "fp32", "threads": 2, "log_every": 1}
    p1 = recipe("dle_bert_large_phase1.json", work,
                train={**common, "micro_batch": 2, "global_batch": 4, "steps": 2},
                data={"train_dir": str(work / "p1" / "train")},
                checkpoint={"dir": str(work / "ckpt1"), "every": 1},
                log={"metrics": str(work / "p1.metrics.json")})
    p2 = recipe("dle_bert_large_phase2.json", work,
                train={**common, "micro_batch": 1, "global_batch": 2, "steps": 1},
                data={"train_dir": str(work / "p2" / "train")},
                checkpoint={"dir": str(work / "ckpt2"), "every": 1},
                log={"metrics": str(work / "p2.metrics.json")})
    t0 = time.perf_counter()
    with open(work / "first.log", "w") as log:
        first = subprocess.Popen([tool("bert-train"), p1], stdout=log, stderr=subprocess.STDOUT)
    ckpt1 = work / "ckpt1" / "ckpt_1.h5"
    while not ckpt1.exists() and first.poll() is None and time.perf_counter() - t0 < 600:
        time.sleep(0.2)
    assert ckpt1.exists(), (work / "first.log").read_text()
    first.send_signal(signal.SIGKILL)
    first.wait()
    stage("phase 1 to its first checkpoint, then SIGKILL", time.perf_counter() - t0,
          bytes=ckpt1.stat().st_size)
    assert not (work / "ckpt1" / "final.h5").exists()

    p, seconds = run(tool("bert-train"), p1, p2, "--resume")
    out = p.stdout + p.stderr
    assert "resumed from step" in out and "phase 2 of 2" in out, out
    assert "optimizer moments from" in out, out  # phase 2 continues phase 1's LAMB moments
    arenas = [line.split("activation arena ")[1].split(",")[0] for line in out.splitlines() if "activation arena" in line]
    # The engine's own accounting: weights, gradients and both moments (4 x 335M fp32) plus the
    # activation arena; the peak adds the resumed state read into host buffers before it is applied.
    rates = {}
    for phase in ("p1", "p2"):
        records = [json.loads(line[len("DLLL "):]) for line in open(work / f"{phase}.metrics.json")]
        rates[phase] = [round(r["data"]["sequences_per_second"], 3) for r in records
                        if r["type"] == "LOG" and "sequences_per_second" in r["data"]]
    assert rates["p2"], rates
    stage("phase 1 resumed + phase 2 (seq 512)", seconds, peak_rss_mib=round(p.peak_mib), activation_arenas=arenas,
          sequences_per_second=rates)
    return work / "ckpt1" / "final.h5", work / "ckpt2" / "final.h5"


def test_phases_export_and_transformers_agree(work, pretrained):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    import numpy as np
    import torch_bert
    from engine_ctypes import Session
    _, final = pretrained
    folder = work / "hf"
    _, seconds = run(tool("bert-ckpt"), "export-hf", final, folder)
    stage("bert-ckpt export-hf", seconds)
    t0 = time.perf_counter()
    model, info = transformers.BertForPreTraining.from_pretrained(str(folder), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    model = model.double().eval()
    batch = torch_bert.random_batch(np.random.default_rng(5), 2, 128, 20, 30522)
    t = torch_bert.batch_tensors(batch)
    labels = t["masked_lm_labels"].masked_fill(t["masked_lm_labels"] < 0, -100)
    with torch.no_grad():
        out = model(input_ids=t["input_ids"], token_type_ids=t["token_type_ids"], attention_mask=t["attention_mask"],
                    labels=labels, next_sentence_label=t["next_sentence_labels"])
    config = {"model": "bert-large", "mode": "inference", "train": {"init_checkpoint": str(final), "threads": 2,
                                                                     "micro_batch": 2},
              "data": {"max_seq_length": 128, "max_predictions_per_seq": 20}}
    with Session({**config, "mode": "train"}) as s:
        engine = s.eval(batch)
        nsp = s.infer(batch, "logits").reshape(2, 2)
    total = engine["mlm_loss"] + engine["nsp_loss"]
    assert abs(total - out.loss.item()) <= 1e-5 * abs(out.loss.item()), (total, out.loss.item())
    np.testing.assert_allclose(nsp, out.seq_relationship_logits.numpy(), rtol=0, atol=1e-4)
    stage("transformers loads the export and agrees", time.perf_counter() - t0,
          engine_loss=total, transformers_loss=out.loss.item())


def small_squad(work):
    run(sys.executable, os.path.join(ROOT, "samples", "finetune", "make_qa_task.py"), TEXT, work / "qa")
    for split, keep in (("train", 4), ("dev", 4)):
        doc = json.load(open(work / "qa" / f"{split}.json"))
        kept, n = [], 0
        for article in doc["data"]:
            for para in article["paragraphs"]:
                if n < keep:
                    para["qas"] = para["qas"][: keep - n]
                    n += len(para["qas"])
                    kept.append({"title": article.get("title", ""), "paragraphs": [para]})
        json.dump({"version": "1.1", "data": kept}, open(work / f"{split}_small.json", "w"))


def test_squad_fine_tune_and_predict(work, pretrained):
    _, final = pretrained
    small_squad(work)
    cfg = {"train": {"init_checkpoint": str(final), "micro_batch": 2, "steps": 1, "lr": 3e-5, "threads": 2},
           "data": {"max_seq_length": 384},
           "finetune": {"task": "squad", "train_file": str(work / "train_small.json"),
                        "dev_file": str(work / "dev_small.json"), "vocab": VOCAB, "epochs": 1,
                        "output_dir": str(work / "squad")}}
    json.dump(cfg, open(work / "squad.json", "w"))
    p, seconds = run(tool("bert-finetune"), work / "squad.json")
    assert "step 1/1" in p.stdout and "cut at train.steps" in p.stdout, p.stdout
    assert os.path.samefile(work / "squad" / "final.h5", work / "squad" / "epoch_1.h5")  # one write of 4 GB
    stage("SQuAD fine-tune, 1 step of 2 x 384, dev evaluation", seconds, peak_rss_mib=round(p.peak_mib))
    p, seconds = run(tool("bert-predict"), "--model", work / "squad" / "final.h5", "--task", "squad", "--vocab", VOCAB,
                     "--input", work / "dev_small.json", "--output", work / "squad_pred", "--max-seq-length", 384)
    predictions = json.load(open(work / "squad_pred" / "predictions.json"))
    assert len(predictions) == 4 and all(isinstance(v, str) for v in predictions.values()), predictions
    stage("bert-predict SQuAD dev (4 questions)", seconds, peak_rss_mib=round(p.peak_mib))


def test_mlperf_recipe(work, pretrained):
    phase1, _ = pretrained
    cfg = recipe("mlperf_bert.json", work,
                 train={"precision": "fp32", "threads": 2, "micro_batch": 2, "global_batch": 2, "steps": 2,
                        "init_checkpoint": str(phase1), "eval_every_samples": 4, "log_every": 1},
                 data={"train_dir": str(work / "mlperf" / "train"), "eval_dir": str(work / "mlperf" / "eval"),
                       "eval_samples": 8},
                 checkpoint={"dir": str(work / "ckpt_mlperf")},
                 log={"mlperf": str(work / "mlperf.log"), "metrics": str(work / "mlperf.metrics.json")})
    p, seconds = run(tool("bert-train"), cfg, expect=3)  # 2 steps do not reach 0.720: bert-train's documented 3
    assert "not reached" in p.stdout, p.stdout
    events = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in open(work / "mlperf.log") if ":::MLLOG" in line]
    keys = [e["key"] for e in events]
    assert keys.count("eval_accuracy") == 1 and keys.count("run_stop") == 1, keys
    assert (work / "ckpt_mlperf" / "final.h5").exists()
    stage("MLPerf recipe, 2 steps of 2 x 512, an evaluation", seconds, peak_rss_mib=round(p.peak_mib))
