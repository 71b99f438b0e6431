"""Builds a small extractive question-answering task from real text, offline, in SQuAD v1.1 format:
cloze questions over wikitext-2. Each WikiText paragraph (its tokenisation undone: ' @-@ ' joins,
no space before punctuation) is cut into contexts of whole sentences of at most --context-words
words; a question is one of the context's sentences (8 words or more; at most --question-words
words kept on each side of the gap) with one number or one run of capitalised words (not the
sentence's first word) replaced by a question word ("when" for years, "how many" for other
numbers, "who or what" for names), ending in '?'; the answer is that span of the context, with its
answer_start. Only answers of a kind the context holds at least three of are asked, one per
sentence, at most --per-context per context. Train and dev come from different paragraphs.

Also writes OUT/baselines.json: EM/F1 (the official SQuAD v1.1 rules) on dev of two trivial
answerers that know the answer's kind: the kind's first candidate in the context, and a random
candidate of the kind (seeded).

    python3 samples/finetune/make_qa_task.py /work/shared/data/wikitext2-valid.txt qa_task
"""
import argparse
import collections
import json
import pathlib
import random
import re
import string

NUMBER = re.compile(r"(?<![\w.,])\d+(?:,\d{3})*(?:\.\d+)?(?![\w])")
NAME = re.compile(r"(?<![\w'])(?:[A-Z][a-z]+)(?: (?:[A-Z][a-z]+|of|de|von))*(?: [A-Z][a-z]+)?(?![\w'])")


def detokenise(line):
    for a, b in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" , ", ", "), (" . ", ". "), (" ; ", "; "),
                 (" : ", ": "), ("( ", "("), (" )", ")"), (" 's ", "'s "), (" n't", "n't")):
        line = line.replace(a, b)
    return line.strip().rstrip(" .") + "."


def paragraphs(path):
    for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if len(line) >= 300 and not line.startswith("=") and "<unk>" not in line[:40]:
            yield detokenise(line)


def candidates(text):
    """(kind, start, end) of every number and capitalised run of the text."""
    out = []
    for m in NUMBER.finditer(text):
        value = m.group().replace(",", "")
        year = re.fullmatch(r"1[0-9]{3}|20[0-2][0-9]", value) is not None
        out.append(("year" if year else "number", m.start(), m.end()))
    for m in NAME.finditer(text):
        name = m.group()
        while name.split()[-1] in ("of", "de", "von"):
            name = name.rsplit(" ", 1)[0]
        end = m.start() + len(name)
        if " " not in name and text[end:end + 2] == ". " and len(name) <= 3:
            continue  # an abbreviation such as "Dr." or "St."
        out.append(("name", m.start(), end))
    return out


WH = {"year": "when", "number": "how many", "name": "who or what"}


def sentences(text):
    """(start, end) of the sentences of a paragraph."""
    start = 0
    for m in re.finditer(r"(?<=[.!?]) (?=[A-Z\"(])", text):
        yield start, m.start()
        start = m.end()
    yield start, len(text)


def contexts(paragraph, max_words):
    """The paragraph cut into runs of whole sentences of at most max_words words (a longer
    sentence alone is dropped)."""
    run, words = [], 0
    for s, e in sentences(paragraph):
        n = len(paragraph[s:e].split())
        if run and words + n > max_words:
            yield " ".join(run)
            run, words = [], 0
        if n <= max_words:
            run.append(paragraph[s:e])
            words += n
    if run:
        yield " ".join(run)


def questions(context, rng, per_context, half_window, every):
    """Dev: one question per sentence, at most per_context, only of kinds the context holds three
    or more of. Train (every): a question for every candidate of every sentence."""
    cands = candidates(context)
    by_kind = collections.Counter(k for k, _, _ in cands)
    options = []
    for s, e in sentences(context):
        for kind, a, b in cands:
            if s < a and b <= e and (every or by_kind[kind] >= 3):  # not the sentence's first word
                options.append((kind, a, b, s, e))
    rng.shuffle(options)
    used, out = set(), []
    for kind, a, b, s, e in options:
        if len(context[s:e].split()) < 8 or (not every and ((s, e) in used or len(out) == per_context)):
            continue
        used.add((s, e))
        sentence = context[s:e].rstrip(".!?")
        before, after = sentence[:a - s].split()[-half_window:], sentence[b - s:].split()[:half_window]
        question = " ".join(before + [WH[kind]] + after) + " ?"
        out.append((kind, question, context[a:b], a))
    return out


# The official SQuAD rules (evaluate-v1.1.py), for the baselines.
def normalize_answer(s):
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def f1_score(prediction, truth):
    p, t = normalize_answer(prediction).split(), normalize_answer(truth).split()
    same = sum((collections.Counter(p) & collections.Counter(t)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


def score(pairs):
    em = 100.0 * sum(normalize_answer(p) == normalize_answer(t) for p, t in pairs) / len(pairs)
    f1 = 100.0 * sum(f1_score(p, t) for p, t in pairs) / len(pairs)
    return {"exact_match": round(em, 2), "f1": round(f1, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("text")
    ap.add_argument("out")
    ap.add_argument("--dev-fraction", type=float, default=0.2)
    ap.add_argument("--per-context", type=int, default=4)
    ap.add_argument("--context-words", type=int, default=70)
    ap.add_argument("--question-words", type=int, default=10, help="words kept on each side of the question word")
    ap.add_argument("--seed", type=int, default=19)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    paras = [list(contexts(p, args.context_words)) for p in paragraphs(args.text)]
    rng.shuffle(paras)
    cut = int(len(paras) * args.dev_fraction)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    baselines = {"first candidate of the kind": [], "random candidate of the kind": []}
    for split, group in (("dev", paras[:cut]), ("train", paras[cut:])):
        data, count = [], 0
        for p, context in enumerate(c for paragraph in group for c in paragraph):
            qas = []
            for q, (kind, question, answer, start) in enumerate(
                    questions(context, rng, args.per_context, args.question_words, split == "train")):
                assert context[start:start + len(answer)] == answer
                qas.append({"id": f"{split}-{p}-{q}", "question": question,
                            "answers": [{"text": answer, "answer_start": start}]})
                if split == "dev":
                    same = [context[a:b] for k, a, b in candidates(context) if k == kind]
                    baselines["first candidate of the kind"].append((same[0], answer))
                    baselines["random candidate of the kind"].append((rng.choice(same), answer))
            if qas:
                data.append({"title": f"{split}-{p}", "paragraphs": [{"context": context, "qas": qas}]})
                count += len(qas)
        (out / f"{split}.json").write_text(json.dumps({"version": "1.1", "data": data}, ensure_ascii=False),
                                           encoding="utf-8")
        print(f"{out / (split + '.json')}: {count} questions over {len(data)} contexts")
    result = {name: score(pairs) for name, pairs in baselines.items()}
    (out / "baselines.json").write_text(json.dumps(result, indent=2) + "\n")
    for name, s in result.items():
        print(f"baseline ({name}): exact_match {s['exact_match']:.2f}, f1 {s['f1']:.2f}")


if __name__ == "__main__":
    main()
