"""SQuAD natively against Hugging Face transformers: the core's reader and features (squad_tool
features) equal squad_convert_examples_to_features with SquadV1Processor / SquadV2Processor and a
BertTokenizer on the same vocabulary, feature by feature (input ids, token types, attention mask,
start/end positions, impossible flags, token_to_orig_map, token_is_max_context, the questions left
out of training); the core's post-processing (squad_tool predict) gives the same predictions.json
(texts exactly), nbest_predictions.json (texts and logits exactly, probabilities within 1e-6) and
null_odds.json as compute_predictions_logits fed the same features and logits, with Google's
write_predictions rule for a span that starts inside a word (the partial word; HF's own rule gives
the whole word — see with_google_text_rule). Contexts are real
text (wikitext-2 validation from ../shared/data with its BERT uncased vocabulary, else the prose
in data/squad_text.txt with a vocabulary built here), several paragraphs long so that windows
overlap, with odd whitespace, answers inside words, answers the context does not hold, long
questions and v2.0 impossible questions. Malformed files fail with the file, key and question
named. Skips without transformers (`pip install 'transformers<4.41'`)."""
import collections
import json
import os
import re
import subprocess

import numpy as np
import pytest

BUILD = os.environ.get("BERT_BUILD_DIR", "")
TOOL = os.path.join(BUILD, "tests", "oracle", "squad_tool")
HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "data")
WIKITEXT = os.path.join(SHARED, "wikitext2-valid.txt")
BERT_VOCAB = os.path.join(SHARED, "bert-uncased-vocab.txt")

pytestmark = pytest.mark.skipif(not os.path.exists(TOOL), reason="squad_tool is not built (BERT_BUILD_DIR)")
transformers = pytest.importorskip("transformers")
from transformers.data.metrics.squad_metrics import compute_predictions_logits  # noqa: E402
from transformers.data.processors.squad import (  # noqa: E402
    SquadResult, SquadV1Processor, SquadV2Processor, squad_convert_examples_to_features)

CONFIGS = {"dle": (384, 128, 64), "small": (100, 24, 12)}  # max_seq_length, doc_stride, max_query_length


def paragraphs():
    """Paragraphs of real text: wikitext-2 lines de-tokenised (so words carry punctuation as in
    SQuAD: "lobster," "(24" "Smith's"), or the committed fallback prose."""
    if os.path.exists(WIKITEXT):
        out = []
        for line in open(WIKITEXT, encoding="utf-8"):
            line = line.strip()
            if len(line) < 200 or line.startswith("="):
                continue
            for a, b in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" , ", ", "), (" . ", ". "), ("( ", "("),
                         (" )", ")"), (" 's", "'s"), (" ;", ";"), (" :", ":")):
                line = line.replace(a, b)
            out.append(line)
        return out[:400]
    return [line.strip() for line in open(os.path.join(HERE, "data", "squad_text.txt"), encoding="utf-8")
            if line.strip() and not line.startswith("#")]


def vocab_file(tmp_path, paras):
    if os.path.exists(BERT_VOCAB):
        return BERT_VOCAB
    words = collections.Counter(w for p in paras for w in re.findall(r"\w+", p.lower()))
    chars = sorted({c for p in paras for c in p.lower() if not c.isspace()})
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars]
    tokens += [w for w, n in words.most_common() if n >= 4 and w not in tokens][:400]
    tokens += ["##" + w[-3:] for w, _ in words.most_common(200) if len(w) > 5]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(dict.fromkeys(tokens)) + "\n", encoding="utf-8")
    return str(path)


SPACES = [" ", " ", " ", " ", "  ", "\n", "\t", " \u202f", "\u00a0", " \r\n "]


def squad_file(path, paras, seed, v2, contexts=14):
    """A SQuAD-format file: contexts of 2-5 consecutive paragraphs with odd whitespace; per
    context 3-6 questions: exact spans, answers cut inside a word, answers the context does not
    hold at answer_start (left out of training), long questions, and for v2.0 impossible ones."""
    rng = np.random.default_rng(seed)
    data = []
    qid = 0
    for c in range(contexts):
        first = int(rng.integers(0, len(paras) - 5))
        words = " ".join(paras[first:first + int(rng.integers(2, 6))]).split(" ")
        context = ""
        spans = []  # (start, end) in code points of each word
        for w in words:
            if context:
                context += SPACES[int(rng.integers(0, len(SPACES)))]
            spans.append((len(context), len(context) + len(w)))
            context += w
        qas = []
        for _ in range(int(rng.integers(3, 7))):
            kind = rng.choice(["span", "span", "inside", "wrong", "long", "impossible" if v2 else "span"])
            i = int(rng.integers(0, len(spans) - 8))
            n = int(rng.integers(1, 6))
            start, end = spans[i][0], spans[i + n - 1][1]
            text = context[start:end]
            if kind == "inside":  # part of a word: its first characters, or without its punctuation
                word = context[spans[i][0]:spans[i][1]]
                core = re.sub(r"^\W+|\W+$", "", word) or word
                start = spans[i][0] + word.find(core)
                text = core[:max(1, len(core) - int(rng.integers(0, 3)))]
            elif kind == "wrong":
                text = "zebra crossing"
            question_words = words[max(0, i - 6):i] + ["what"] + words[i + n:i + n + 5]
            if kind == "long":
                question_words = question_words * 8
            qa = {"id": f"q{seed}-{qid}", "question": " ".join(question_words) + "?",
                  "answers": [{"text": text, "answer_start": start}]}
            if rng.random() < 0.4:
                qa["answers"].append({"text": context[spans[i][0]:spans[i + n][1]], "answer_start": spans[i][0]})
            if kind == "impossible":
                qa["is_impossible"] = True
                qa["plausible_answers"] = qa["answers"]
                qa["answers"] = []
            elif v2:
                qa["is_impossible"] = False
            qas.append(qa)
            qid += 1
        data.append({"title": f"t{c}", "paragraphs": [{"context": context, "qas": qas}]})
    doc = {"version": "v2.0" if v2 else "1.1", "data": data}
    path.write_text(json.dumps(doc, ensure_ascii=bool(seed % 2)), encoding="utf-8")
    return doc


def hf_features(path, vocab, v2, training, config):
    tokenizer = transformers.BertTokenizer(vocab, do_lower_case=True)
    processor = SquadV2Processor() if v2 else SquadV1Processor()
    read = processor.get_train_examples if training else processor.get_dev_examples
    examples = read(str(path.parent), filename=path.name)
    max_seq, stride, query = config
    features = squad_convert_examples_to_features(examples, tokenizer, max_seq, stride, query, training, threads=1,
                                                  tqdm_enabled=False)
    return examples, features, tokenizer


def with_google_text_rule(tokenizer):
    """compute_predictions_logits is a port of Google's write_predictions but for one line: it
    joins a span's pieces with convert_tokens_to_string, which keeps the "##" of a span that
    starts inside a word (get_final_text then falls back to the whole word), where Google's
    `" ".join(tok_tokens).replace(" ##", "").replace("##", "")` (HF keeps it as a comment) answers
    the partial word. The engine follows Google (and DLE): so does the tokenizer returned here."""
    tokenizer.convert_tokens_to_string = lambda tokens: " ".join(tokens).replace(" ##", "").replace("##", "")
    return tokenizer


def our_features(path, vocab, training, config):
    result = subprocess.run([TOOL, "features", str(path), vocab, "train" if training else "eval", *map(str, config)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    return lines[:-1], lines[-1]["skipped"]


@pytest.mark.parametrize("version,config", [("1.1", "dle"), ("2.0", "dle"), ("2.0", "small")])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_features_equal_hugging_face(tmp_path, version, config, training):
    paras = paragraphs()
    vocab = vocab_file(tmp_path, paras)
    v2 = version == "2.0"
    path = tmp_path / "squad.json"
    doc = squad_file(path, paras, seed=7 if v2 else 8, v2=v2)
    examples, theirs, _ = hf_features(path, vocab, v2, training, CONFIGS[config])
    ours, skipped = our_features(path, vocab, training, CONFIGS[config])
    questions = sum(len(p["qas"]) for a in doc["data"] for p in a["paragraphs"])
    assert len(examples) == questions
    assert skipped == questions - len({f.example_index for f in theirs})
    if training:
        assert skipped > 0  # the "wrong" answers
    assert len(ours) == len(theirs)
    impossible = {q["id"] for a in doc["data"] for p in a["paragraphs"] for q in p["qas"] if q.get("is_impossible")}
    windows = collections.Counter(f.qas_id for f in theirs)
    assert max(windows.values()) >= 3, "contexts long enough for overlapping windows"
    for k, (o, t) in enumerate(zip(ours, theirs)):
        where = f"feature {k} (question {t.qas_id})"
        assert o["qas_id"] == t.qas_id, where
        assert o["input_ids"] == t.input_ids, where
        assert o["token_type_ids"] == t.token_type_ids, where
        assert o["attention_mask"] == t.attention_mask, where
        assert (o["start_position"], o["end_position"]) == (t.start_position, t.end_position), where
        assert o["is_impossible"] == bool(t.is_impossible), where
        assert o["paragraph_len"] == t.paragraph_len, where
        assert {int(i): v for i, v in o["token_to_orig_map"].items()} == t.token_to_orig_map, where
        assert {int(i): v for i, v in o["token_is_max_context"].items()} == t.token_is_max_context, where
    assert any(not v for f in theirs for v in f.token_is_max_context.values())
    if training:
        assert sum(f.start_position > 0 for f in theirs) > 10
        assert any(f.start_position == 0 and f.is_impossible and f.qas_id not in impossible for f in theirs)


@pytest.mark.parametrize("version,threshold", [("1.1", 0.0), ("2.0", 0.0), ("2.0", 1.5)])
def test_predictions_equal_hugging_face(tmp_path, version, threshold):
    paras = paragraphs()
    vocab = vocab_file(tmp_path, paras)
    v2 = version == "2.0"
    path = tmp_path / "dev.json"
    squad_file(path, paras, seed=11 if v2 else 12, v2=v2)
    config = CONFIGS["dle"]
    examples, features, tokenizer = hf_features(path, vocab, v2, False, config)
    rng = np.random.default_rng(5)
    # logits on a coarse grid, so ties in the n-best orders are common; float32 as bert_infer's
    logits = (np.round(rng.normal(0, 2, (len(features), 2, config[0])) * 4) / 4).astype(np.float32)
    for k in range(0, len(features), 3):  # some windows with a clear best answer inside the context
        f = features[k]
        inside = sorted(f.token_to_orig_map)
        inside_words = [i for i in inside if f.tokens[i].startswith("##")]  # answers starting inside a word
        pool = inside_words if k % 2 == 0 and inside_words else inside
        s = pool[int(rng.integers(0, len(pool)))]
        logits[k, 0, s] += 8
        logits[k, 1, min(s + int(rng.integers(0, 4)), inside[-1])] += 8
    for k, f in enumerate(features):  # every window of every fourth question: a high [CLS] score
        if f.example_index % 4 == 0:
            logits[k, :, 0] += 9
        logits[k, :, len(f.tokens):] = -1e4  # padding: below every real position (the engine ranks real ones only)
    logits.tofile(tmp_path / "logits.f32")
    results = [SquadResult(f.unique_id, logits[k, 0].tolist(), logits[k, 1].tolist()) for k, f in enumerate(features)]
    hf_dir, our_dir, whole_word_dir = tmp_path / "hf", tmp_path / "ours", tmp_path / "whole_word"
    for d in (hf_dir, our_dir, whole_word_dir):
        d.mkdir()
    compute_predictions_logits(examples, features, results, 20, 30, True, str(whole_word_dir / "predictions.json"),
                               str(whole_word_dir / "nbest_predictions.json"), None, False, v2, threshold, tokenizer)
    compute_predictions_logits(examples, features, results, 20, 30, True, str(hf_dir / "predictions.json"),
                               str(hf_dir / "nbest_predictions.json"), str(hf_dir / "null_odds.json"), False, v2,
                               threshold, with_google_text_rule(tokenizer))
    result = subprocess.run([TOOL, "predict", str(path), vocab, str(tmp_path / "logits.f32"), *map(str, config), "20",
                             "30", str(threshold), str(our_dir)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    theirs = json.loads((hf_dir / "predictions.json").read_text())
    ours = json.loads((our_dir / "predictions.json").read_text())
    assert list(ours.items()) == list(theirs.items())
    assert sum(1 for t in theirs.values() if t) >= len(theirs) // 3
    # answers that start inside a word: the partial word (Google), where HF's rule gives the whole word
    whole_word = json.loads((whole_word_dir / "predictions.json").read_text())
    partial = [(ours[q], whole_word[q]) for q in ours if ours[q] != whole_word[q]]
    assert partial and all(mine and mine in theirs for mine, theirs in partial), partial
    nbest_theirs = json.loads((hf_dir / "nbest_predictions.json").read_text())
    nbest_ours = json.loads((our_dir / "nbest_predictions.json").read_text())
    assert list(nbest_ours) == list(nbest_theirs)
    for qid, entries in nbest_theirs.items():
        mine = nbest_ours[qid]
        assert [e["text"] for e in mine] == [e["text"] for e in entries], qid
        assert [(e["start_logit"], e["end_logit"]) for e in mine] == [(e["start_logit"], e["end_logit"]) for e in entries]
        assert np.allclose([e["probability"] for e in mine], [e["probability"] for e in entries], rtol=0, atol=1e-6)
    if v2:
        odds_theirs = json.loads((hf_dir / "null_odds.json").read_text())
        odds_ours = json.loads((our_dir / "null_odds.json").read_text())
        assert list(odds_ours) == list(odds_theirs)
        assert np.allclose(list(odds_ours.values()), list(odds_theirs.values()), rtol=0, atol=1e-9)
        assert "" in theirs.values()
    else:
        assert not (our_dir / "null_odds.json").exists()


def test_padding_never_crowds_negative_logits_out_of_the_n_best(tmp_path):
    """bert_infer writes 0 at the padding. With every real logit negative (a bias of -30, which
    changes no argmax) ranking the padding filled the n-best and answered "empty"; only the
    window's real positions are ranked, so the answers equal HF's on the same real logits."""
    paras = paragraphs()
    vocab = vocab_file(tmp_path, paras)
    path = tmp_path / "dev.json"
    squad_file(path, paras, seed=12, v2=False)
    config = CONFIGS["dle"]
    examples, features, tokenizer = hf_features(path, vocab, False, False, config)
    rng = np.random.default_rng(6)
    logits = (rng.normal(0, 2, (len(features), 2, config[0])) - 30).astype(np.float32)
    theirs_logits = logits.copy()
    for k, f in enumerate(features):
        logits[k, :, len(f.tokens):] = 0  # as bert_infer writes the padding
        theirs_logits[k, :, len(f.tokens):] = -1e4
    logits.tofile(tmp_path / "logits.f32")
    results = [SquadResult(f.unique_id, theirs_logits[k, 0].tolist(), theirs_logits[k, 1].tolist())
               for k, f in enumerate(features)]
    hf_dir, our_dir = tmp_path / "hf", tmp_path / "ours"
    hf_dir.mkdir()
    our_dir.mkdir()
    compute_predictions_logits(examples, features, results, 20, 30, True, str(hf_dir / "predictions.json"),
                               str(hf_dir / "nbest_predictions.json"), None, False, False, 0.0,
                               with_google_text_rule(tokenizer))
    result = subprocess.run([TOOL, "predict", str(path), vocab, str(tmp_path / "logits.f32"), *map(str, config), "20",
                             "30", "0", str(our_dir)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    theirs = json.loads((hf_dir / "predictions.json").read_text())
    ours = json.loads((our_dir / "predictions.json").read_text())
    empty = sum(1 for t in ours.values() if t == "empty")
    assert empty == 0, f"{empty} of {len(ours)} answers 'empty'"
    assert list(ours.items()) == list(theirs.items())


def write_bad(tmp_path, doc, raw=None):
    path = tmp_path / "bad.json"
    if raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text(json.dumps(doc))
    return path


GOOD_QA = {"id": "a1", "question": "who?", "answers": [{"text": "Anne", "answer_start": 4}]}


def doc_with(**qa_changes):
    qa = dict(GOOD_QA, **qa_changes)
    qa = {k: v for k, v in qa.items() if v is not None}
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "Ask Anne twice.", "qas": [qa]}]}]}


@pytest.mark.parametrize("doc,raw,message", [
    (doc_with(question=None), None, "data[0].paragraphs[0].qas[0].question (question 'a1') is missing"),
    (doc_with(answers=[{"text": "Anne", "answer_start": "4"}]), None,
     "data[0].paragraphs[0].qas[0].answers[0].answer_start (question 'a1') must be an integer"),
    (doc_with(answers=[{"text": "Anne", "answer_start": 15}]), None,
     "answers[0].answer_start (question 'a1') = 15 is outside the context (15 characters)"),
    (doc_with(answers=[]), None, "qas[0].answers (question 'a1') is empty"),
    (doc_with(is_impossible="no"), None, "qas[0].is_impossible (question 'a1') must be true or false"),
    (doc_with(id=7), None, "data[0].paragraphs[0].qas[0].id must be a string"),
    ({"version": "1.1", "data": {"paragraphs": []}}, None, "data must be a list"),
    (None, b'{"data": [{"paragraphs": [{"context": "caf\xe9", "qas": []}]}]}', "is not valid JSON in UTF-8"),
    (None, b'{"data": [', "is not valid JSON in UTF-8"),
], ids=["missing-key", "wrong-type", "start-out-of-range", "no-answer", "bool", "id-type", "data-type", "not-utf8",
        "truncated"])
def test_bad_files_are_named(tmp_path, doc, raw, message):
    path = write_bad(tmp_path, doc, raw)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nask\nanne\ntwice\n.\n")
    result = subprocess.run([TOOL, "features", str(path), str(vocab), "train", "384", "128", "64"], capture_output=True,
                            text=True)
    assert result.returncode == 1, result.stdout
    assert f"SQuAD file '{path}'" in result.stderr and message in result.stderr, result.stderr


@pytest.mark.parametrize("answer,message", [
    ({"text": "Anne", "answer_start": 15}, "answer_start (question 'a1') = 15 is outside the context (15 characters)"),
    ({"text": "Anne", "answer_start": -1}, "answer_start (question 'a1') = -1 is outside the context"),
    ({"text": "Anne", "answer_start": "4"}, "answer_start (question 'a1') must be an integer"),
    ({"text": "Anne"}, "answers[0].answer_start (question 'a1') is missing"),
])
def test_a_dev_file_with_bad_answers_stops_as_a_training_file_does(tmp_path, answer, message):
    """Read for evaluation (bert-predict --task squad, bert-finetune's dev file), every answer is
    checked as a training file's first answer is: the README says such a file stops."""
    path = write_bad(tmp_path, doc_with(answers=[{"text": "Anne", "answer_start": 4}, answer]))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nask\nanne\ntwice\n.\n")
    result = subprocess.run([TOOL, "features", str(path), str(vocab), "eval", "384", "128", "64"], capture_output=True,
                            text=True)
    assert result.returncode == 1, result.stdout
    assert f"SQuAD file '{path}'" in result.stderr and message.replace("answers[0]", "answers[1]") in result.stderr, \
        result.stderr


def test_duplicate_ids_are_refused(tmp_path):
    doc = doc_with()
    doc["data"][0]["paragraphs"][0]["qas"].append(dict(GOOD_QA))
    path = write_bad(tmp_path, doc)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    result = subprocess.run([TOOL, "features", str(path), str(vocab), "eval", "384", "128", "64"], capture_output=True,
                            text=True)
    assert result.returncode == 1 and "qas[1].id (question 'a1') is used by an earlier question too" in result.stderr
