"""Builds a small labelled task from real text, offline: word-order acceptability in GLUE's SST-2
format (sentence<TAB>label). Sentences come from a WikiText file (wikitext-2's raw tokenised
lines: ' @-@ ' joins, headings dropped); label 1 keeps a sentence as written, label 0 shuffles its
words (never back into the original order); sentences of 8-40 words with at most one <unk>.
The final period is removed from every sentence so
that "ends with '.'" gives nothing away. 60% of each split is label 1, so the majority-class
baseline is 0.6. Writes OUT/train.tsv and OUT/dev.tsv, sentences of different paragraphs.

    python3 samples/finetune/make_order_task.py /work/shared/data/wikitext2-valid.txt order_task
"""
import argparse
import pathlib
import random
import re


def sentences(path):
    paragraphs = []
    for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("="):
            continue
        line = line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
        found = []
        for s in re.split(r"(?<= \.) ", line):
            words = s.split()
            if words and words[-1] == ".":
                words = words[:-1]
            if 8 <= len(words) <= 40 and words.count("<unk>") <= 1:
                found.append(words)
        if found:
            paragraphs.append(found)
    return paragraphs


def examples(paragraphs, rng):
    out = []
    for para in paragraphs:
        for words in para:
            if rng.random() < 0.6:
                out.append((" ".join(words), 1))
            else:
                shuffled = words[:]
                while shuffled == words:
                    rng.shuffle(shuffled)
                out.append((" ".join(shuffled), 0))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("text")
    ap.add_argument("out")
    ap.add_argument("--dev-fraction", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=19)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    paragraphs = sentences(args.text)
    rng.shuffle(paragraphs)
    cut = int(len(paragraphs) * args.dev_fraction)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, part in (("dev.tsv", paragraphs[:cut]), ("train.tsv", paragraphs[cut:])):
        rows = examples(part, rng)
        with open(out / name, "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            for text, label in rows:
                f.write(f"{text}\t{label}\n")
        ones = sum(label for _, label in rows)
        print(f"{out / name}: {len(rows)} sentences, {ones / len(rows):.3f} label 1 "
              f"(majority-class accuracy {max(ones, len(rows) - ones) / len(rows):.4f})")


if __name__ == "__main__":
    main()
