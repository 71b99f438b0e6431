"""`bert-prep wiki`: Wikipedia dumps to plain text, against WikiExtractor (PyPI wikiextractor 3.x,
run with --no-templates, the mode whose templates are dropped as ours are) article by article on
real wikitext (tests/data/wiki) and on a dump of 2,000 articles recombined from it; the same text
from plain XML, bz2 and multistream bz2 (in parallel through the index); bad dumps refused with
the file, byte offset and article named, nothing published; an interrupted run restarting
cleanly; memory independent of the dump's size; and dump -> text -> vocab -> shards -> training
steps -> checkpoint."""
import difflib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

import wiki_dumps as W

BUILD = os.environ.get("BERT_BUILD_DIR", "")
PREP = os.path.join(BUILD, "src", "tools", "bert-prep")
TRAIN = os.path.join(BUILD, "src", "tools", "bert-train")
pytestmark = pytest.mark.skipif(not os.path.exists(PREP), reason="BERT_BUILD_DIR/src/tools/bert-prep not built")
WIKIEXTRACTOR_PYTHON = os.environ.get(
    "BERT_WIKIEXTRACTOR_PYTHON",
    os.path.expanduser(os.path.join(os.environ.get("BERT_WIKIEXTRACTOR_VENV", "~/.cache/bertengine/wikiextractor-venv"),
                                    "bin", "python3")))
needs_wikiextractor = pytest.mark.skipif(
    subprocess.run([WIKIEXTRACTOR_PYTHON, "-c", "import wikiextractor"], capture_output=True).returncode != 0
    if os.path.exists(WIKIEXTRACTOR_PYTHON) else True,
    reason="wikiextractor is not installed (samples/install_deps.sh --tests puts it in a venv)")


def prep(*args, ok=True, timeout=600):
    proc = subprocess.run([PREP, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr
    return proc


def wikiextractor(dump, out):
    subprocess.run([WIKIEXTRACTOR_PYTHON, "-m", "wikiextractor.WikiExtractor", "--no-templates", "--processes", "1",
                    "-q", "-o", str(out), str(dump)], check=True, capture_output=True, timeout=900)
    return W.wikiextractor_articles(out)


def compare(pages, tmp_path):
    """Articles identical after whitespace normalisation, and the differing ones with their diffs."""
    dump = tmp_path / "dump.xml"
    W.write_dump(dump, pages)
    theirs = wikiextractor(dump, tmp_path / "wikiextractor")
    prep("wiki", "--threads", 2, "--output", tmp_path / "ours", dump)
    ours = W.engine_articles(tmp_path / "ours")
    expected = [(p.title, W.normalise(theirs[p.title])) for p in pages
                if p.ns == "0" and not p.redirect and W.normalise(theirs.get(p.title, []))]
    # WikiExtractor writes an empty <doc> for an article with no text left; we write nothing.
    assert len(ours) == len(expected), f"{len(ours)} articles written, WikiExtractor has {len(expected)} with text"
    differing = [(title, lines, W.normalise(o)) for (title, lines), o in zip(expected, ours) if lines != W.normalise(o)]
    for title, lines, o in differing[:5]:
        print(f"--- {title}\n" + "\n".join(difflib.unified_diff(lines, o, "wikiextractor", "bert-prep", lineterm="", n=0)))
    return len(expected), differing


@needs_wikiextractor
def test_real_articles_equal_wikiextractor(tmp_path):
    pages = W.real_pages()
    total, differing = compare(pages, tmp_path)
    assert total >= 60
    rate = 1 - len(differing) / total
    print(f"real articles: {total - len(differing)} of {total} identical ({100 * rate:.1f}%)")
    assert rate >= 0.99


@needs_wikiextractor
def test_recombined_dump_equals_wikiextractor(tmp_path):
    pages = W.recombined_pages(2000)
    total, differing = compare(pages, tmp_path)
    rate = 1 - len(differing) / total
    print(f"recombined articles: {total - len(differing)} of {total} identical ({100 * rate:.2f}%)")
    assert total > 1800 and rate >= 0.99


# Markup WikiExtractor treats in particular ways, one article each (hand-written, in the style of
# real articles), compared one by one.
EDGE_CASES = {
    "Doubled brackets": "Text [[[[Foo]]]] and [[[[Bar|baz]]]] end.",
    "Syntax highlight": 'Code <syntaxhighlight lang="c">a &amp;&amp; b &lt; c</syntaxhighlight> done.',
    "Unclosed ref": "A fact.<ref>never closed\n\nNext paragraph here.",
    "Unclosed template": "Start {{foo|bar\n\nMore text here.",
    "Stray closers": "Some }} text and |} more.",
    "Table in template": "Before.\n{{box|\n{| class=x\n| a\n|}\n}}\nAfter.",
    "Entities": "Caf&eacute; &amp; bar &#8212; x &#x41; &bogus; &nbsp;end",
    "Gallery": "Intro.\n<gallery>\nFile:a.jpg|Cap\n</gallery>\nOutro.",
    "Quotes": "'''''both''''' and '''bold''' and ''it'' and ''\"q\"'' and stray ''' here.",
    "Math": "Sum <math>x^2</math> and <math>x^2</math> and <math display=block>y</math>.",
    "Indents": ":Indented line\n::Double\n; term\n: def",
    "Headings": "== A ==\n=== B ===\nText.\n==== C ====\n== D ==\nMore.",
    "File link": "[[File:Foo.jpg|thumb|A caption with [[link]] inside]] Text after.",
    "Interwiki": "[[fr:Paris]] [[:Category:X|shown?]] [[w:Foo|wfoo]] [[wikt:bar]] word.",
    "External links": "See [http://x.org label here] and [https://y.org] and [//z.org proto] and [ftp://a b].",
    "Line breaks": "Line<br>break and<br/>more<br />x <hr> y.",
    "Comments": "A <!-- hidden {{x}} --> B <!-- unclosed",
    "Nowiki": "A <nowiki>[[not a link]]</nowiki> B <nowiki/> C.",
    "Named refs": 'X<ref name="a/b">cite</ref> Y<ref name=c /> Z<references/>.',
    "Div and span": '<div class="x">inside div</div> after <span style="a">span</span>.',
    "Pre": "<pre>code\nlines</pre>\nText.",
    "Lists": "* item [[a]]\n# num\nText para.",
    "Punctuation lines": "Word.\n---\n(parenthetical line)\n...\nLast , word ( spaced ) .",
    "Uneven heading": "======= x ==\nAfter.",
    "Link trails": "[[dog]]s and [[cat|kitten]]ies and [[Category:X]]abc.",
    "Unicode": "Ünïcödé [[Ελληνικά]]ς text — «quoted» ( « x » ).",
    "Small": "Big <small>small text</small> end.",
    "Center and p": "a<center>b</center>c <p>para</p>d",
    "Tabs and dots": "a\t\tb    c.... d.",
    "Behaviour switches": "__NOTOC__Text __TOC__ more.",
    "Blockquote": "<blockquote>Quoted text.</blockquote>",
}


@needs_wikiextractor
def test_particular_markup_equals_wikiextractor(tmp_path):
    pages = [W.Page(i + 1, title, "0", text) for i, (title, text) in enumerate(EDGE_CASES.items())]
    total, differing = compare(pages, tmp_path)
    assert total == len(EDGE_CASES) and [d[0] for d in differing] == []


def text_of(folder):
    return "".join(f.read_text() for f in sorted(pathlib.Path(folder).glob("wiki_*.txt")))


def test_xml_bz2_and_multistream_give_the_same_text(tmp_path):
    pages = W.recombined_pages(700, seed=3)
    W.write_dump(tmp_path / "d.xml", pages)
    W.write_dump(tmp_path / "d.xml.bz2", pages, kind="bz2")
    index = W.write_dump(tmp_path / "m-multistream.xml.bz2", pages, kind="multistream")
    out = prep("wiki", "--threads", 1, "--output", tmp_path / "xml", tmp_path / "d.xml").stdout
    articles = sum(1 for p in pages if p.ns == "0" and not p.redirect)
    assert f"pages: {len(pages)} read: {sum(1 for p in pages if p.redirect)} redirects" in out
    reference = text_of(tmp_path / "xml")
    assert reference.count("\n\n") + int(out.split("empty after cleaning")[0].split()[-1]) == articles
    prep("wiki", "--threads", 2, "--output", tmp_path / "bz2", tmp_path / "d.xml.bz2")
    prep("wiki", "--threads", 2, "--output", tmp_path / "multi", tmp_path / "m-multistream.xml.bz2")
    prep("wiki", "--threads", 2, "--index", index, "--output", tmp_path / "indexed", tmp_path / "m-multistream.xml.bz2")
    for name in ["bz2", "multi", "indexed"]:
        assert text_of(tmp_path / name) == reference, name
    # Several output files of about --shard-mb, in order.
    prep("wiki", "--shard-mb", 1, "--output", tmp_path / "small", tmp_path / "d.xml.bz2")
    assert len(list((tmp_path / "small").glob("wiki_*.txt"))) > 1 and text_of(tmp_path / "small") == reference


def test_headings_are_kept_or_dropped(tmp_path):
    page = W.Page(1, "History of tea", "0", "Tea is a drink.\n\n== Origins ==\nIt began in China.\n\n"
                  "=== Spread ===\nIt spread west.\n\n== Why? ==\nTaste.\n\n== Empty ==\n")
    W.write_dump(tmp_path / "d.xml", [page])
    prep("wiki", "--output", tmp_path / "keep", tmp_path / "d.xml")
    prep("wiki", "--headings", "drop", "--output", tmp_path / "drop", tmp_path / "d.xml")
    assert text_of(tmp_path / "keep") == ("Tea is a drink.\nOrigins.\nIt began in China.\nSpread.\nIt spread west.\n"
                                          "Why?\nTaste.\n\n")
    assert text_of(tmp_path / "drop") == "Tea is a drink.\nIt began in China.\nIt spread west.\nTaste.\n\n"


def assert_nothing_published(folder):
    assert not (folder / "wiki.done").exists()
    assert not list(folder.glob("wiki_*.txt*"))


def test_a_failure_after_finished_files_removes_them(tmp_path):
    pages = W.recombined_pages(1500, seed=8)
    xml = W.HEADER + "".join(p.xml() for p in pages)  # no closing tag: fails at the very end
    (tmp_path / "cut.xml").write_text(xml)
    err = prep("wiki", "--shard-mb", 1, "--output", tmp_path / "o", tmp_path / "cut.xml", ok=False).stderr
    assert "cut.xml: malformed dump: no element found" in err, err
    assert_nothing_published(tmp_path / "o")


def test_bad_dumps_are_refused_with_offset_and_article(tmp_path):
    pages = W.recombined_pages(300, seed=4)
    W.write_dump(tmp_path / "d.xml.bz2", pages, kind="bz2")
    data = (tmp_path / "d.xml.bz2").read_bytes()
    # A corrupt block: bytes flipped in the middle of the compressed data.
    corrupt = bytearray(data)
    for i in range(len(data) // 2, len(data) // 2 + 64):
        corrupt[i] ^= 0x5A
    (tmp_path / "corrupt.xml.bz2").write_bytes(bytes(corrupt))
    err = prep("wiki", "--output", tmp_path / "o1", tmp_path / "corrupt.xml.bz2", ok=False).stderr
    assert "corrupt.xml.bz2" in err and "corrupt bz2 data near compressed byte" in err, err
    assert_nothing_published(tmp_path / "o1")
    # Cut short: the stream never ends.
    (tmp_path / "cut.xml.bz2").write_bytes(data[: len(data) * 2 // 3])
    err = prep("wiki", "--output", tmp_path / "o2", tmp_path / "cut.xml.bz2", ok=False).stderr
    assert "cut.xml.bz2" in err and "truncated" in err, err
    assert_nothing_published(tmp_path / "o2")
    # Malformed XML inside an article: the line, the column and the articles around it.
    good = W.HEADER + "".join(p.xml() for p in pages[:5])
    bad = W.Page(99, "Broken page", "0", "text").xml().replace("</title>", "</titel>")
    (tmp_path / "bad.xml").write_text(good + bad + W.FOOTER)
    err = prep("wiki", "--output", tmp_path / "o3", tmp_path / "bad.xml", ok=False).stderr
    assert "bad.xml: malformed dump: mismatched tag at XML line" in err, err
    assert f"after article '{pages[4].title}'" in err and "inside article 'Broken page'" in err, err
    assert_nothing_published(tmp_path / "o3")
    # A page larger than the 64 MiB any article needs: refused by name, not read into memory whole.
    huge = W.Page(7, "Endless page", "0", "word " * (13 * 2**20 + 1))
    (tmp_path / "huge.xml").write_text(W.HEADER + huge.xml() + W.FOOTER)
    err = prep("wiki", "--output", tmp_path / "o9", tmp_path / "huge.xml", ok=False).stderr
    assert "huge.xml: malformed dump: article 'Endless page' is larger than 64 MiB" in err, err
    assert_nothing_published(tmp_path / "o9")
    (tmp_path / "huge.xml").unlink()
    # An XML file that ends before </mediawiki>.
    (tmp_path / "short.xml").write_text(good)
    err = prep("wiki", "--output", tmp_path / "o4", tmp_path / "short.xml", ok=False).stderr
    assert "short.xml: malformed dump: no element found" in err, err
    # A multistream index that belongs to another dump; an index line that is not one.
    index = W.write_dump(tmp_path / "m-multistream.xml.bz2", pages, kind="multistream", pages_per_stream=50)
    other = W.write_dump(tmp_path / "n-multistream.xml.bz2", pages[:120], kind="multistream", pages_per_stream=37)
    err = prep("wiki", "--index", other, "--output", tmp_path / "o5", tmp_path / "m-multistream.xml.bz2", ok=False).stderr
    assert "no bz2 stream starts at byte" in err and "m-multistream.xml.bz2' (is the index for this dump?)" in err, err
    (tmp_path / "bad-index.txt").write_text("0:1:Title\nnot an entry\n")
    err = prep("wiki", "--index", tmp_path / "bad-index.txt", "--output", tmp_path / "o6", tmp_path / "m-multistream.xml.bz2",
               ok=False).stderr
    assert "bad-index.txt' line 2: not 'offset:page_id:title'" in err, err
    # Options refused before anything is read.
    err = prep("wiki", "--headings", "maybe", "--output", tmp_path / "o7", tmp_path / "d.xml.bz2", ok=False).stderr
    assert "--headings" in err and "maybe" in err
    err = prep("wiki", "--output", tmp_path / "o8", tmp_path / "missing.xml", ok=False).stderr
    assert "missing.xml" in err


def test_interrupted_run_restarts_cleanly_and_finished_run_is_kept(tmp_path):
    pages = W.recombined_pages(3000, seed=5)
    W.write_dump(tmp_path / "d.xml", pages)
    prep("wiki", "--shard-mb", 1, "--output", tmp_path / "clean", tmp_path / "d.xml")
    reference = text_of(tmp_path / "clean")
    # Killed once its first output file is complete (SIGKILL: nothing runs on the way out).
    out = tmp_path / "killed"
    proc = subprocess.Popen([PREP, "wiki", "--threads", "1", "--shard-mb", "1", "--output", str(out), str(tmp_path / "d.xml")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and not (out / "wiki_00000.txt").exists() and proc.poll() is None:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if (out / "wiki.done").exists():
        pytest.skip("the run finished before it could be killed")
    assert (out / "wiki_00000.txt").exists()
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]"] + [f"[unused{i}]" for i in range(99)] +
                                                 ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a"]) + "\n")
    err = prep("shards", "--vocab", tmp_path / "vocab.txt", "--output", tmp_path / "shards", out, ok=False).stderr
    assert "holds the files of a bert-prep wiki run that did not finish (no wiki.done)" in err, err
    rerun = prep("wiki", "--shard-mb", 1, "--output", out, tmp_path / "d.xml").stdout
    assert "an interrupted run left" in rerun and "started again" in rerun, rerun
    assert text_of(out) == reference and (out / "wiki.done").exists()
    # The same command again keeps the finished extraction.
    again = prep("wiki", "--shard-mb", 1, "--output", out, tmp_path / "d.xml").stdout
    assert "is up to date" in again
    # Another dump into the same folder is refused unless --overwrite says so; nothing is lost.
    W.write_dump(tmp_path / "e.xml", pages[:100])
    err = prep("wiki", "--shard-mb", 1, "--output", out, tmp_path / "e.xml", ok=False).stderr
    assert "holds an extraction of other dumps or options (wiki.done); pass --overwrite" in err
    assert text_of(out) == reference
    prep("wiki", "--shard-mb", 1, "--overwrite", "--output", out, tmp_path / "e.xml")
    assert 0 < len(text_of(out)) < len(reference)


def peak_rss_kib(*args):
    """The peak resident memory of `bert-prep ARGS`, measured by a fresh Python that runs it alone."""
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    proc = subprocess.run([sys.executable, "-c", probe, PREP, *map(str, args)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.strip())


def test_memory_does_not_grow_with_the_dump(tmp_path):
    small, large = W.recombined_pages(500, seed=6), W.recombined_pages(5000, seed=6)
    W.write_dump(tmp_path / "small.xml.bz2", small, kind="bz2")
    W.write_dump(tmp_path / "large.xml.bz2", large, kind="bz2")
    rss_small = peak_rss_kib("wiki", "--threads", 2, "--output", tmp_path / "s", tmp_path / "small.xml.bz2")
    rss_large = peak_rss_kib("wiki", "--threads", 2, "--output", tmp_path / "l", tmp_path / "large.xml.bz2")
    wikitext_mib = sum(len(p.text.encode()) for p in large) / 2**20
    print(f"peak RSS: {rss_small / 1024:.1f} MiB for 500 articles, {rss_large / 1024:.1f} MiB for 5,000 "
          f"({wikitext_mib:.0f} MiB of wikitext)")
    assert rss_large < 1.5 * rss_small + 16 * 1024


@pytest.mark.skipif(not os.path.exists(TRAIN), reason="bert-train is not built")
def test_dump_to_text_vocab_shards_training_and_checkpoint(tmp_path):
    W.write_dump(tmp_path / "enwiki-pages-articles.xml.bz2", W.recombined_pages(600, seed=7), kind="bz2")
    prep("wiki", "--output", tmp_path / "text", tmp_path / "enwiki-pages-articles.xml.bz2")
    prep("vocab", "--size", 3000, "--output", tmp_path / "vocab.txt", tmp_path / "text")
    # shards takes the dump itself: it extracts into shards/text (the same text) and goes on.
    out = prep("shards", "--vocab", tmp_path / "vocab.txt", "--output", tmp_path / "shards", "--dupe-factor", 1,
               "--max-seq-length", 64, "--max-predictions", 10, "--sentences", "split",
               tmp_path / "enwiki-pages-articles.xml.bz2").stdout
    assert "wiki: " in out and "train instances" in out
    assert text_of(tmp_path / "shards" / "text") == text_of(tmp_path / "text")
    config = {"model": {"vocab_size": 3000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                        "intermediate_size": 256},
              "train": {"micro_batch": 16, "steps": 8, "lr": 0.005, "log_every": 2},
              "data": {"train_dir": str(tmp_path / "shards" / "train"), "max_seq_length": 64,
                       "max_predictions_per_seq": 10}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    subprocess.run([TRAIN, str(tmp_path / "config.json"), "--output", str(tmp_path / "final.h5"), "--loss-log",
                    str(tmp_path / "loss.log")], check=True, capture_output=True, text=True, timeout=600)
    losses = [float(line.split()[1]) for line in open(tmp_path / "loss.log")]
    assert len(losses) == 8 and all(0 < l < 20 for l in losses)
    assert (tmp_path / "final.h5").stat().st_size > 0
