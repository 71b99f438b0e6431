"""GLUE: the core's TSV reader on files in each task's format (headers as the GLUE download has
them; CoLA's headerless train/dev; QQP's malformed lines skipped) against Python's own reading;
the task metrics against scipy/numpy on random predictions; and bert-finetune + bert-predict end
to end on a small learnable SST-2-format task (the metric printed per epoch, checkpoints, a
predictions TSV whose accuracy equals the one recomputed here)."""
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import scipy.stats

BUILD = os.environ.get("BERT_BUILD_DIR", "")
GLUE_TOOL = os.path.join(BUILD, "tests", "oracle", "glue_tool")
FINETUNE = os.path.join(BUILD, "src", "tools", "bert-finetune")
PREDICT = os.path.join(BUILD, "src", "tools", "bert-predict")

pytestmark = pytest.mark.skipif(not os.path.exists(GLUE_TOOL), reason="glue_tool is not built (BERT_BUILD_DIR)")

# (task, header or None, rows, text_a column, text_b column or None, label column, label names or None)
FORMATS = [
    ("cola", None, [["gj04", "1", "", "Our friends won't buy this analysis."], ["gj04", "0", "*", "They drank the pub."]],
     3, None, 1, ["0", "1"]),
    ("sst-2", ["sentence", "label"], [["a gripping film ", "1"], ["dull", "0"]], 0, None, 1, ["0", "1"]),
    ("mrpc", ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
     [["1", "702876", "702977", "Amrozi accused his brother .", "Referring to him as only ."]], 3, 4, 0, ["0", "1"]),
    ("sts-b", ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2", "score"],
     [["0", "main-captions", "MSRvid", "2012test", "0001", "none", "none", "A plane is taking off.",
       "An air plane is taking off.", "5.000"]], 7, 8, 9, None),
    ("qqp", ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
     [["201359", "303345", "303346", "Why are African-Americans so beautiful?", "Why are hispanics so beautiful?", "0"],
      ["7", "8", "only three columns"]], 3, 4, 5, ["0", "1"]),
    ("mnli", ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
              "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label"],
     [["0", "31193", "31193n", "government", "(", "(", "(", "(", "Conceptually cream skimming has two dimensions.",
       "Product and geography are what make cream skimming work.", "neutral", "neutral"]], 8, 9, 11,
     ["contradiction", "entailment", "neutral"]),
    ("qnli", ["index", "question", "sentence", "label"],
     [["0", "When did the third Digimon series begin?", "Unlike the two seasons before it.", "not_entailment"]],
     1, 2, 3, ["entailment", "not_entailment"]),
    ("rte", ["index", "sentence1", "sentence2", "label"],
     [["0", "No Weapons of Mass Destruction Found in Iraq Yet.", "Weapons of Mass Destruction Found in Iraq.",
       "not_entailment"]], 1, 2, 3, ["entailment", "not_entailment"]),
    ("wnli", ["index", "sentence1", "sentence2", "label"],
     [["0", "I stuck a pin through a carrot.", "The carrot had a hole.", "1"]], 1, 2, 3, ["0", "1"]),
]


def run(*args, stdin=None):
    result = subprocess.run(list(args), capture_output=True, text=True, input=stdin)
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


@pytest.mark.parametrize("task,header,rows,a,b,label,names", FORMATS, ids=[f[0] for f in FORMATS])
def test_reader_reads_each_task_format(tmp_path, task, header, rows, a, b, label, names):
    path = tmp_path / "dev.tsv"
    lines = (["\t".join(header)] if header else []) + ["\t".join(r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    out = [json.loads(line) for line in run(GLUE_TOOL, "read", task, str(path)).splitlines()]
    examples, skipped = out[:-1], out[-1]["skipped"]
    good = [r for r in rows if len(r) > max(a, b or 0, label)]
    assert skipped == len(rows) - len(good)
    assert len(examples) == len(good)
    for e, r in zip(examples, good):
        assert e["text_a"] == r[a]
        assert e["text_b"] == (r[b] if b is not None else "")
        if names is None:
            assert e["value"] == pytest.approx(float(r[label]))
        else:
            assert e["label"] == names.index(r[label])


def test_reader_names_the_bad_label_and_missing_column(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("sentence\tlabel\ngood\t1\nbad\tpositive\n")
    result = subprocess.run([GLUE_TOOL, "read", "sst-2", str(path)], capture_output=True, text=True)
    assert result.returncode == 1 and f"'{path}' line 3: label 'positive'" in result.stderr
    path.write_text("text\tlabel\nx\t1\n")
    result = subprocess.run([GLUE_TOOL, "read", "sst-2", str(path)], capture_output=True, text=True)
    assert result.returncode == 1 and "has no column 'sentence'" in result.stderr
    result = subprocess.run([GLUE_TOOL, "read", "squad", str(path)], capture_output=True, text=True)
    assert result.returncode == 1 and "unknown GLUE task 'squad'" in result.stderr


def test_a_skipped_row_keeps_the_later_rows_indexes_and_invalid_utf8_is_named(tmp_path):
    """Without an id column a row's id is its own index among the file's rows: rows 0, bad, 2, 3
    give ids 0, 2, 3 (they were renumbered 0, 1, 2, attaching every later prediction to the wrong
    input). Invalid UTF-8 is refused with the file and line, as in JSON files."""
    path = tmp_path / "dev.tsv"
    path.write_text("sentence\tlabel\nfirst\t1\nno label column\nthird\t0\nfourth\t1\n")
    out = [json.loads(line) for line in run(GLUE_TOOL, "read", "sst-2", str(path)).splitlines()]
    assert [e["id"] for e in out[:-1]] == ["0", "2", "3"] and out[-1]["skipped"] == 1, out
    path.write_bytes(b"sentence\tlabel\ngood\t1\ncaf\xe9\t0\n")
    result = subprocess.run([GLUE_TOOL, "read", "sst-2", str(path)], capture_output=True, text=True)
    assert result.returncode == 1 and f"GLUE file '{path}' line 3 is not valid UTF-8" in result.stderr, result.stderr


def metric(name, pred, gold):
    text = "".join(f"{p} {g}\n" for p, g in zip(pred, gold))
    return {k: float(v) for k, v in (line.split() for line in run(GLUE_TOOL, "metric", name, stdin=text).splitlines())}


def sk_matthews(pred, gold):
    """sklearn's multiclass matthews_corrcoef, from the confusion matrix (numpy)."""
    k = max(max(pred), max(gold)) + 1
    c = np.zeros((k, k))
    np.add.at(c, (gold, pred), 1)
    t, p, s, correct = c.sum(1), c.sum(0), c.sum(), np.trace(c)
    denom = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return 0.0 if denom == 0 else (correct * s - t @ p) / denom


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_equal_scipy_and_numpy(seed):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 2, 300)
    pred = np.where(rng.random(300) < 0.7, gold, 1 - gold)
    m = metric("accuracy_f1", pred, gold)
    tp, fp, fn = np.sum((pred == 1) & (gold == 1)), np.sum((pred == 1) & (gold == 0)), np.sum((pred == 0) & (gold == 1))
    assert m["accuracy"] == pytest.approx(np.mean(pred == gold), abs=1e-12)
    assert m["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn), abs=1e-12)
    assert metric("matthews", pred, gold)["matthews_corr"] == pytest.approx(sk_matthews(pred, gold), abs=1e-12)
    gold3, pred3 = rng.integers(0, 3, 200), rng.integers(0, 3, 200)
    assert metric("matthews", pred3, gold3)["matthews_corr"] == pytest.approx(sk_matthews(pred3, gold3), abs=1e-12)
    x = np.round(rng.normal(size=150), 1)  # rounding makes ties for the ranks
    y = np.round(x + rng.normal(size=150), 1)
    m = metric("pearson_spearman", x, y)
    assert m["pearson"] == pytest.approx(scipy.stats.pearsonr(x, y)[0], abs=1e-9)
    assert m["spearman"] == pytest.approx(scipy.stats.spearmanr(x, y)[0], abs=1e-9)


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
         "lima", "mike", "november", "oscar", "papa"]


def sst2_file(path, n, rng):
    """Sentences of random words; label 1 when 'good' occurs, 0 when 'bad' does."""
    lines = ["sentence\tlabel"]
    labels = []
    for _ in range(n):
        words = list(rng.choice(WORDS, int(rng.integers(4, 12))))
        label = int(rng.integers(0, 2))
        words.insert(int(rng.integers(0, len(words))), "good" if label else "bad")
        lines.append(" ".join(words) + f"\t{label}")
        labels.append(label)
    path.write_text("\n".join(lines) + "\n")
    return labels


def sst2_task(tmp_path, train, dev, seed):
    """An SST-2 data dir of `train` and `dev` rows and its vocabulary; returns them and the dev labels."""
    rng = np.random.default_rng(seed)
    data = tmp_path / "SST-2"
    data.mkdir()
    sst2_file(data / "train.tsv", train, rng)
    dev_labels = sst2_file(data / "dev.tsv", dev, rng)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"] + WORDS) + "\n")
    return data, vocab, dev_labels


@pytest.mark.skipif(not os.path.exists(FINETUNE), reason="bert-finetune is not built")
def test_finetune_and_predict_a_learnable_task(tmp_path):
    data, vocab, dev_labels = sst2_task(tmp_path, 256, 64, 4)
    cfg = {"model": {"vocab_size": 23, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "intermediate_size": 64, "max_position_embeddings": 64},
           "train": {"micro_batch": 8, "accumulation_steps": 2, "lr": 3e-3, "threads": 2, "log_every": 16},
           "data": {"max_seq_length": 24},
           "finetune": {"task": "SST-2", "data_dir": str(data), "vocab": str(vocab), "epochs": 6,
                        "output_dir": str(tmp_path / "out")}}
    (tmp_path / "ft.json").write_text(json.dumps(cfg))
    out = run(FINETUNE, str(tmp_path / "ft.json"))
    assert "fine-tuning sst-2: 256 train / 64 dev examples (dev.tsv), 96 steps of 16 sequences (6 epochs of 16 steps)" in out
    accs = [float(a) for a in re.findall(r"epoch \d eval dev.tsv \(64 examples\): accuracy ([\d.]+) \([\d.]+ seq/s\)", out)]
    assert len(accs) == 6 and accs[0] < 0.8 and accs[-1] >= 0.95, out
    losses = [float(v) for v in re.findall(r"loss ([\d.]+)", out)]
    assert losses[-1] < losses[0] / 3, out
    for name in ("epoch_1.h5", "epoch_6.h5", "final.h5"):
        assert (tmp_path / "out" / name).exists()
    assert os.path.samefile(tmp_path / "out" / "final.h5", tmp_path / "out" / "epoch_6.h5")  # the last epoch's, linked

    # train.steps bounds the run (DLE's --max_steps) and is the schedule's length.
    cfg["train"]["steps"] = 5
    cfg["finetune"]["output_dir"] = str(tmp_path / "short")
    (tmp_path / "short.json").write_text(json.dumps(cfg))
    short = run(FINETUNE, str(tmp_path / "short.json"))
    assert "5 steps of 16 sequences (6 epochs of 16 steps, cut at train.steps)" in short and "step 5/5" in short, short
    assert sorted(p.name for p in (tmp_path / "short").iterdir()) == ["epoch_1.h5", "final.h5", "predictions.tsv"]

    pred = run(PREDICT, "--model", str(tmp_path / "out" / "final.h5"), "--task", "sst-2", "--vocab", str(vocab),
               "--input", str(data / "dev.tsv"), "--output", str(tmp_path / "pred.tsv"), "--max-seq-length", "24",
               "--device", "cpu", "--precision", "fp32")
    rows = [line.split("\t") for line in (tmp_path / "pred.tsv").read_text().splitlines()[1:]]
    assert [r[0] for r in rows] == [str(i) for i in range(64)]
    accuracy = np.mean([int(r[1]) == label for r, label in zip(rows, dev_labels)])
    assert f"sst-2: accuracy {accuracy:.4f}" in pred
    assert accuracy == pytest.approx(accs[-1], abs=1e-4)
    # bert-finetune's last evaluation wrote the same predictions (one writer, the same batches)
    assert (tmp_path / "out" / "predictions.tsv").read_text() == (tmp_path / "pred.tsv").read_text()

    bad = subprocess.run([PREDICT, "--model", str(tmp_path / "out" / "final.h5"), "--task", "mnli", "--vocab",
                          str(vocab), "--input", str(data / "dev.tsv"), "--output", str(tmp_path / "p2.tsv")],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "not the 3-label sequence classifier task mnli needs" in bad.stderr


def model_tensors(path):
    import h5py
    with h5py.File(path, "r") as f:
        return {name: f["model"][name][()] for name in f["model"].keys()}


@pytest.mark.skipif(not os.path.exists(FINETUNE), reason="bert-finetune is not built")
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun (Open MPI) is not installed")
def test_two_ranks_fine_tune_as_one_rank_with_the_doubled_micro_batch(tmp_path):
    """Under mpirun each step's rows are dealt to the ranks (micro-batch 4 each) and the gradients
    averaged: the same run as one rank with micro-batch 8 (dropout off), up to fp32 rounding; the
    dev set is dealt too, and rank 0 alone writes the checkpoints, the metrics log and (bert-predict
    on 2 ranks) a predictions file identical to one rank's. --eval-only scores a checkpoint and
    --predict-only predicts a file without labels."""
    data, vocab, _ = sst2_task(tmp_path, 96, 40, 7)

    def config(name, micro):
        cfg = {"model": {"vocab_size": 23, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                         "intermediate_size": 64, "max_position_embeddings": 64},
               "train": {"micro_batch": micro, "lr": 3e-3, "threads": 1, "log_every": 4, "dropout": False,
                         "eval_every": 6},
               "data": {"max_seq_length": 24},
               "log": {"metrics": str(tmp_path / f"{name}.dllog")},
               "finetune": {"task": "SST-2", "data_dir": str(data), "vocab": str(vocab), "epochs": 2,
                            "eval_batch": 8, "output_dir": str(tmp_path / name)}}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(cfg))
        return str(path)

    mpirun = [shutil.which("mpirun"), "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    one = run(FINETUNE, config("one", 8))
    two = run(*mpirun, FINETUNE, config("two", 4))
    assert "24 steps of 8 sequences (2 epochs of 12 steps)" in one, one
    assert "24 steps of 8 sequences on 2 ranks (2 epochs of 12 steps)" in two, two
    assert two.count("fine-tuning sst-2") == 1 and two.count("saved ") == 1, "rank 0 alone prints"
    loss = lambda out: [float(v) for v in re.findall(r"  loss ([\d.]+)", out)]
    assert len(loss(one)) == 6 and loss(two) == pytest.approx(loss(one), abs=2e-4)  # printed to 4 decimals
    accuracy = lambda out: re.findall(r"eval dev.tsv \(40 examples\): accuracy ([\d.]+)", out)
    assert len(accuracy(one)) == 4 and accuracy(two) == accuracy(one)  # steps 6, 12 (epoch 1), 18, 24 (epoch 2)
    assert "epoch 1 step 6 eval" in one and "epoch 2 step 18 eval" in one and "epoch 1 eval" in one

    a, b = model_tensors(tmp_path / "one" / "final.h5"), model_tensors(tmp_path / "two" / "final.h5")
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=1e-4, atol=2e-5, err_msg=name)

    # log.metrics: DLLogger records of the logged steps and the evaluations, written once.
    records = [json.loads(line[5:]) for line in (tmp_path / "two.dllog").read_text().splitlines()]
    logged = [r for r in records if r["type"] == "LOG"]
    assert [r["step"] for r in logged if "loss" in r["data"]] == [[1, 4], [1, 8], [1, 12], [2, 16], [2, 20], [2, 24]]
    evals = [r for r in logged if "eval_accuracy" in r["data"]]
    assert [r["step"] for r in evals] == [[1, 6], [1, 12], [2, 18], [2, 24]]
    assert [f"{r['data']['eval_accuracy']:.4f}" for r in evals] == accuracy(one)

    # bert-predict on 2 ranks: the rows dealt, every prediction written once by rank 0.
    def predict(out, *launcher):
        return run(*launcher, PREDICT, "--model", str(tmp_path / "one" / "final.h5"), "--task", "sst-2", "--vocab",
                   str(vocab), "--input", str(data / "dev.tsv"), "--output", str(out), "--max-seq-length", "24",
                   "--batch", "8", "--threads", "1")
    predict(tmp_path / "p1.tsv")
    printed = predict(tmp_path / "p2.tsv", *mpirun)
    assert printed.count("wrote ") == 1
    assert (tmp_path / "p2.tsv").read_text() == (tmp_path / "p1.tsv").read_text()
    assert len((tmp_path / "p1.tsv").read_text().splitlines()) == 41
    # From a Hugging Face folder: every rank imports it to the one path its session config names
    # (the configs must agree; each write is a temporary file renamed into place).
    run(os.path.join(BUILD, "src", "tools", "bert-ckpt"), "export-hf", str(tmp_path / "one" / "final.h5"),
        str(tmp_path / "hf"))
    run(*mpirun, PREDICT, "--model", str(tmp_path / "hf"), "--task", "sst-2", "--vocab", str(vocab), "--input",
        str(data / "dev.tsv"), "--output", str(tmp_path / "p3.tsv"), "--max-seq-length", "24", "--batch", "8",
        "--threads", "1")
    assert sorted(p.name for p in tmp_path.glob("p3.tsv.imported*")) == ["p3.tsv.imported.h5"]
    assert (tmp_path / "p3.tsv").read_text() == (tmp_path / "p1.tsv").read_text()

    # --eval-only (DLE's --do_eval): the dev metrics of train.init_checkpoint and its predictions,
    # no training, no checkpoint; --predict-only (--do_predict): the predictions of a file without
    # labels (GLUE's test.tsv: index and sentence), not scored.
    cfg = json.loads((tmp_path / "one.json").read_text())
    cfg["train"]["init_checkpoint"] = str(tmp_path / "one" / "final.h5")
    cfg["finetune"]["output_dir"] = str(tmp_path / "eval")
    del cfg["log"]
    (tmp_path / "eval.json").write_text(json.dumps(cfg))
    for launcher in ([], mpirun):
        out = run(*launcher, FINETUNE, str(tmp_path / "eval.json"), "--eval-only")
        assert re.findall(r"^eval dev.tsv \(40 examples\): accuracy ([\d.]+)", out, re.M) == accuracy(one)[-1:], out
        assert "fine-tuning" not in out and os.listdir(tmp_path / "eval") == ["predictions.tsv"]
        assert (tmp_path / "eval" / "predictions.tsv").read_text() == (tmp_path / "p1.tsv").read_text()
    test_rows = [line.split("\t")[0] for line in (data / "dev.tsv").read_text().splitlines()[1:]]
    (tmp_path / "test.tsv").write_text("index\tsentence\n" + "".join(f"{100 + i}\t{s}\n" for i, s in enumerate(test_rows)))
    cfg["finetune"]["predict_file"] = str(tmp_path / "test.tsv")
    cfg["finetune"]["output_dir"] = str(tmp_path / "predict")
    (tmp_path / "predict.json").write_text(json.dumps(cfg))
    out = run(*mpirun, FINETUNE, str(tmp_path / "predict.json"), "--predict-only")
    assert f"eval test.tsv (40 examples): predictions in {tmp_path}/predict/predictions.tsv" in out, out
    expected = (tmp_path / "p1.tsv").read_text().splitlines()
    got = (tmp_path / "predict" / "predictions.tsv").read_text().splitlines()
    assert got[1:] == [f"{100 + i}\t{line.split()[1]}" for i, line in enumerate(expected[1:])]
    both = subprocess.run([FINETUNE, str(tmp_path / "eval.json"), "--eval-only", "--predict-only"],
                          capture_output=True, text=True)
    assert both.returncode == 2 and "--eval-only and --predict-only exclude each other" in both.stderr
