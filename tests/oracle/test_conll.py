"""CoNLL token files: the core's reader against Python's reading of a CoNLL-2003-style file
(-DOCSTART-, blank lines, four columns), and its entity-level scores against conlleval's chunk
rules (reimplemented here: B- begins, I- continues a chunk of the same type and begins one
otherwise, O ends) on random BIO sequences; bert-finetune's token classification on CoNLL files
of a learnable synthetic NER task (entity F1 per epoch, >= 0.95 at the end), and bert-predict
--task conll on the dev file (a CoNLL file of the same words with the predicted tags; its entity
F1, recomputed here with conlleval's rules, is the one printed and the last epoch's)."""
import json
import os
import re
import subprocess

import numpy as np
import pytest

BUILD = os.environ.get("BERT_BUILD_DIR", "")
GLUE_TOOL = os.path.join(BUILD, "tests", "oracle", "glue_tool")
pytestmark = pytest.mark.skipif(not os.path.exists(GLUE_TOOL), reason="glue_tool is not built (BERT_BUILD_DIR)")

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O
BRUSSELS NNP B-NP B-LOC
"""


def run(*args):
    result = subprocess.run([GLUE_TOOL, *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_reader(tmp_path):
    (tmp_path / "train.txt").write_text(CONLL)
    sentences = run("conll-read", str(tmp_path / "train.txt"))
    expected, words, tags = [], [], []
    for line in CONLL.splitlines() + [""]:
        cols = line.split()
        if not cols or cols[0] == "-DOCSTART-":
            if words:
                expected.append({"words": words, "tags": tags})
            words, tags = [], []
            continue
        words.append(cols[0])
        tags.append(cols[-1])
    assert sentences == expected and len(sentences) == 3
    (tmp_path / "bad.txt").write_text("EU B-ORG\nrejects\n")
    result = subprocess.run([GLUE_TOOL, "conll-read", str(tmp_path / "bad.txt")], capture_output=True, text=True)
    assert result.returncode == 1 and "line 2: 'rejects' has no tag column" in result.stderr


def conlleval_chunks(tags):
    chunks, kind, begin = set(), None, 0
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, t = (tag[0], tag[2:]) if len(tag) > 2 and tag[1] == "-" else (None, None)
        continues = prefix == "I" and kind is not None and t == kind
        if kind is not None and not continues:
            chunks.add((kind, begin, i - 1))
            kind = None
        if prefix is not None and not continues:
            kind, begin = t, i
    return chunks


def test_entity_scores_follow_conlleval(tmp_path):
    rng = np.random.default_rng(2)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG"]
    gold = [list(rng.choice(tags, int(rng.integers(1, 15)))) for _ in range(200)]
    pred = [[t if rng.random() < 0.8 else str(rng.choice(tags)) for t in g] for g in gold]
    (tmp_path / "gold").write_text("\n".join(" ".join(g) for g in gold) + "\n")
    (tmp_path / "pred").write_text("\n".join(" ".join(p) for p in pred) + "\n")
    ours = run("conll-scores", str(tmp_path / "gold"), str(tmp_path / "pred"))[0]
    g_chunks = [conlleval_chunks(g) for g in gold]
    p_chunks = [conlleval_chunks(p) for p in pred]
    correct = sum(len(a & b) for a, b in zip(g_chunks, p_chunks))
    n_gold, n_pred = sum(map(len, g_chunks)), sum(map(len, p_chunks))
    precision, recall = correct / n_pred, correct / n_gold
    assert (ours["gold"], ours["predicted"], ours["correct"]) == (n_gold, n_pred, correct)
    assert ours["f1"] == pytest.approx(2 * precision * recall / (precision + recall), abs=1e-12)
    assert 0 < ours["f1"] < 1
    assert conlleval_chunks(["B-PER", "I-PER", "I-LOC", "O", "I-ORG"]) == {("PER", 0, 1), ("LOC", 2, 2), ("ORG", 4, 4)}


FINETUNE = os.path.join(BUILD, "src", "tools", "bert-finetune")
PREDICT = os.path.join(BUILD, "src", "tools", "bert-predict")
FIRST, LAST, CITY = ["anna", "boris", "chen", "dara"], ["smith", "ivanov", "li", "okafor"], ["paris", "lagos", "oslo"]
FILLER = ["met", "in", "today", "and", "visited", "with", "later", "quietly"]


def ner_file(path, n, rng):
    lines = []
    for _ in range(n):
        words, tags = [], []
        for _ in range(int(rng.integers(3, 9))):
            r = rng.random()
            if r < 0.2:
                words += [str(rng.choice(FIRST)), str(rng.choice(LAST))]
                tags += ["B-PER", "I-PER"]
            elif r < 0.35:
                words.append(str(rng.choice(CITY)))
                tags.append("B-LOC")
            else:
                words.append(str(rng.choice(FILLER)))
                tags.append("O")
        lines += [f"{w} X X {t}" for w, t in zip(words, tags)] + [""]
    path.write_text("-DOCSTART- -X- -X- O\n\n" + "\n".join(lines))


@pytest.mark.skipif(not os.path.exists(FINETUNE), reason="bert-finetune is not built")
def test_finetune_token_classification_on_conll_files(tmp_path):
    rng = np.random.default_rng(8)
    data = tmp_path / "ner"
    data.mkdir()
    ner_file(data / "train.txt", 200, rng)
    ner_file(data / "dev.txt", 40, rng)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + FIRST + LAST + CITY + FILLER) + "\n")
    cfg = {"model": {"vocab_size": 24, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "intermediate_size": 64, "max_position_embeddings": 32},
           "train": {"micro_batch": 16, "lr": 3e-3, "threads": 2, "log_every": 50},
           "data": {"max_seq_length": 24},
           "finetune": {"task": "conll", "data_dir": str(data), "vocab": str(vocab), "epochs": 8,
                        "output_dir": str(tmp_path / "out")}}
    (tmp_path / "ft.json").write_text(json.dumps(cfg))
    result = subprocess.run([FINETUNE, str(tmp_path / "ft.json")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "fine-tuning conll: 200 train / 40 dev sentences (dev.txt), 4 tags, 104 steps of 16 sequences (8 epochs of 13 steps)" in out
    f1 = [float(v) for v in re.findall(r"epoch \d eval dev.txt \(40 sentences, \d+ entities\): f1 ([\d.]+)", out)]
    assert len(f1) == 8 and f1[-1] >= 0.95 and f1[0] < f1[-1], out
    assert (tmp_path / "out" / "final.h5").exists()

    pred_path = tmp_path / "dev.pred.txt"
    result = subprocess.run([PREDICT, "--model", str(tmp_path / "out" / "final.h5"), "--task", "conll", "--vocab",
                             str(vocab), "--input", str(data / "dev.txt"), "--output", str(pred_path),
                             "--max-seq-length", "24"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    gold = run("conll-read", str(data / "dev.txt"))
    predicted = run("conll-read", str(pred_path))
    assert [s["words"] for s in predicted] == [s["words"] for s in gold]
    assert {t for s in predicted for t in s["tags"]} <= {"O", "B-PER", "I-PER", "B-LOC"}
    g_chunks = [conlleval_chunks(s["tags"]) for s in gold]
    p_chunks = [conlleval_chunks(s["tags"]) for s in predicted]
    correct = sum(len(a & b) for a, b in zip(g_chunks, p_chunks))
    precision, recall = correct / sum(map(len, p_chunks)), correct / sum(map(len, g_chunks))
    f1_here = 2 * precision * recall / (precision + recall)
    assert f"conll: f1 {f1_here:.4f}" in result.stdout and f1_here == pytest.approx(f1[-1], abs=1e-4), result.stdout

    glue_model = subprocess.run([PREDICT, "--model", str(tmp_path / "out" / "final.h5"), "--task", "squad", "--vocab",
                                 str(vocab), "--input", str(data / "dev.txt"), "--output", str(tmp_path / "sq")],
                                capture_output=True, text=True)
    assert glue_model.returncode == 1 and "not the question-answering model task squad needs" in glue_model.stderr
