"""Benchmark (prints measured numbers; not a test): `bert-prep wiki` next to WikiExtractor
(PyPI wikiextractor 3.x, --no-templates) on the same dump in the same run, and the whole chain
dump -> shards next to WikiExtractor + DLE's formatting + Google's create_pretraining_data.

The dump: N articles recombined from real wikitext (tests/oracle/wiki_dumps.py), written as XML,
bz2 and multistream bz2 with its index.
- Per core: each tool pinned to one core (taskset), alternating, ROUNDS rounds; medians. WikiExtractor
  runs with --processes 1 (a reader, one extractor and a writer process on that core).
- All cores: bert-prep on the multistream dump with its index; WikiExtractor with --processes = cores.
- Chain: bert-prep shards straight from the bz2 dump (extraction, sentence splitting, WordPiece,
  instances, HDF5 writing) against WikiExtractor (all cores) + DLE's formatting step (one line per
  article's paragraph) + Google's create_training_instances (tokenisation and instances, no TFRecord
  writing; needs the `bert` package of bert-tensorflow next to wikiextractor). NLTK sentence
  splitting, which DLE runs between the two, is left out of the Python chain (it has no part here).

usage: python3 tests/bench/bench_wiki.py [--articles 3000] [--rounds 3] [--prep build/src/tools/bert-prep]
       [--python ~/.cache/bertengine/wikiextractor-venv/bin/python3] [--vocab ../shared/data/bert-uncased-vocab.txt]"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import wiki_dumps as W  # noqa: E402

SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data"))

# The Python chain after WikiExtractor, run in the wikiextractor venv: DLE's formatting (each
# article's lines after its title joined into one line, a blank line after it) into FORMATTED,
# then Google's create_training_instances on FORMATTED's paragraphs; prints seconds per step.
PYTHON_CHAIN = r"""
import html, pathlib, random, re, sys, time
sys.path.insert(0, sys.argv[1])
import bench_tokenizer
extracted, formatted, vocab = sys.argv[2:5]
t0 = time.perf_counter()
with open(formatted, "w") as out:
    for f in sorted(pathlib.Path(extracted).rglob("wiki_*")):
        for m in re.finditer(r'<doc [^>]*>\n(.*?)\n</doc>', f.read_text(), re.S):
            lines = [l for l in m.group(1).split("\n")[1:] if l.strip()]
            out.write("\n".join(lines) + "\n\n")
t1 = time.perf_counter()
ref = bench_tokenizer.reference_instances(vocab, formatted, 1)
print("format %.3f" % (t1 - t0))
print("instances %.3f %d" % ref if ref else "instances unavailable")
"""


def cpu_of_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd, **kw):
    """(wall seconds, stdout); the CPU seconds of the command (all its processes) in LAST_CPU."""
    global LAST_CPU
    t0, c0 = time.perf_counter(), cpu_of_children()
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{proc.stderr[-2000:]}")
    LAST_CPU = cpu_of_children() - c0
    return time.perf_counter() - t0, proc.stdout


LAST_CPU = 0.0


def pinned(cmd):
    return (["taskset", "-c", "0"] if shutil.which("taskset") else []) + cmd


def main():
    ap = argparse.ArgumentParser()
    build = os.environ.get("BERT_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--prep", default=os.path.join(build, "src", "tools", "bert-prep"))
    ap.add_argument("--python", default=os.path.expanduser("~/.cache/bertengine/wikiextractor-venv/bin/python3"))
    ap.add_argument("--vocab", default=os.path.join(SHARED, "bert-uncased-vocab.txt"))
    ap.add_argument("--articles", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not os.path.exists(args.prep) or subprocess.run([args.python, "-c", "import wikiextractor"],
                                                       capture_output=True).returncode != 0:
        print("skipped: needs bert-prep and wikiextractor (samples/install_deps.sh --tests)")
        return 0
    we_version = subprocess.run([args.python, "-m", "pip", "show", "wikiextractor"], capture_output=True,
                                text=True).stdout.split("Version: ")[1].split()[0]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    tmp = tempfile.mkdtemp(prefix="bench_wiki_")
    try:
        pages = W.recombined_pages(args.articles, seed=11)
        xml, bz, multi = os.path.join(tmp, "d.xml"), os.path.join(tmp, "d.xml.bz2"), os.path.join(tmp, "d-multistream.xml.bz2")
        W.write_dump(xml, pages)
        W.write_dump(bz, pages, kind="bz2")
        index = W.write_dump(multi, pages, kind="multistream")
        mb = os.path.getsize(xml) / 1e6
        articles = sum(1 for p in pages if p.ns == "0" and not p.redirect)
        print(f"dump: {len(pages)} pages ({articles} articles), {mb:.1f} MB of XML, {os.path.getsize(bz) / 1e6:.1f} MB bz2; "
              f"CPU: {cpu}, {os.cpu_count()} cores; wikiextractor {we_version}")

        def ours(src, out, threads, extra=()):
            shutil.rmtree(out, ignore_errors=True)
            return run(pinned([args.prep, "wiki", "--threads", threads, *extra, "--output", out, src])
                       if threads == 1 else [args.prep, "wiki", "--threads", threads, *extra, "--output", out, src])[0]

        def theirs(src, out, processes):
            shutil.rmtree(out, ignore_errors=True)
            cmd = [args.python, "-m", "wikiextractor.WikiExtractor", "--no-templates", "--processes", processes, "-q",
                   "-o", out, src]
            return run(pinned(cmd) if processes == 1 else cmd)[0]

        out_o, out_t = os.path.join(tmp, "ours"), os.path.join(tmp, "theirs")
        for name, src in (("XML", xml), ("bz2", bz)):
            t_ours, t_theirs, c_ours, c_theirs = [], [], [], []
            for _ in range(args.rounds):
                t_theirs.append(theirs(src, out_t, 1))
                c_theirs.append(LAST_CPU)
                t_ours.append(ours(src, out_o, 1))
                c_ours.append(LAST_CPU)
            o, t = statistics.median(t_ours), statistics.median(t_theirs)
            co, ct = statistics.median(c_ours), statistics.median(c_theirs)
            print(f"one core, {name:3s}: bert-prep wiki {o:6.2f} s ({mb / o:6.1f} MB/s, {articles / o:7.0f} articles/s, "
                  f"CPU {co:.2f} s)   WikiExtractor {t:6.2f} s ({mb / t:5.2f} MB/s, {articles / t:5.0f} articles/s, CPU {ct:.2f} s)"
                  f"   -> {t / o:.1f}x wall, {ct / co:.1f}x CPU")
        cores = os.cpu_count() or 1
        o = statistics.median(ours(multi, out_o, cores, ("--index", index)) for _ in range(args.rounds))
        t = statistics.median(theirs(bz, out_t, cores) for _ in range(args.rounds))
        print(f"{cores} cores: bert-prep wiki (multistream + index) {o:.2f} s ({mb / o:.1f} MB/s)   "
              f"WikiExtractor --processes {cores} (bz2) {t:.2f} s ({mb / t:.2f} MB/s)   -> {t / o:.1f}x")

        if not os.path.exists(args.vocab):
            print(f"chain: skipped ({args.vocab} not found)")
            return 0
        shards = os.path.join(tmp, "shards")
        t_chain, _ = run([args.prep, "shards", "--vocab", args.vocab, "--output", shards, "--dupe-factor", 1,
                          "--sentences", "split", "--eval-fraction", 0, bz])
        t_we = theirs(bz, out_t, cores)
        _, out = run([args.python, "-c", PYTHON_CHAIN, HERE, out_t, os.path.join(tmp, "formatted.txt"), args.vocab])
        steps = dict(line.split(" ", 1) for line in out.strip().splitlines())
        if steps.get("instances", "unavailable") == "unavailable":
            print(f"chain: bert-prep shards from the dump {t_chain:.2f} s; the Python chain needs bert-tensorflow")
            return 0
        t_format, t_inst = float(steps["format"]), float(steps["instances"].split()[0])
        total = t_we + t_format + t_inst
        print(f"chain dump -> shards (dupe 1, L=128): bert-prep shards {t_chain:.2f} s   WikiExtractor {t_we:.2f} s + "
              f"formatting {t_format:.2f} s + create_training_instances {t_inst:.2f} s = {total:.2f} s   "
              f"-> {total / t_chain:.1f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
