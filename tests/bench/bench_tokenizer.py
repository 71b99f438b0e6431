"""Benchmark (prints measured numbers; not a test): WordPiece tokenisation throughput of
`bert-prep tokenize --benchmark` (1 thread and all cores) next to the Python reference
tokenizer (transformers' slow BertTokenizer: BasicTokenizer + WordpieceTokenizer, Google's
rules) and Hugging Face `tokenizers` (Rust) with 1 thread and all threads, on the same text; then
`bert-prep shards` on that text, next to Google's create_pretraining_data instance creation
(pure Python; run when the `bert` package of bert-tensorflow is importable).

usage: python3 tests/bench/bench_tokenizer.py [--prep build/src/tools/bert-prep] [--vocab V] [--text T]
Defaults use ../shared/data/bert-uncased-vocab.txt and ../shared/data/wikitext2-valid.txt."""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data"))


def lines_of(path):
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return len(data), [l.decode("utf-8", "ignore") for l in lines]


def report(name, mb, tokens, seconds, note=""):
    print("%-44s %9.2f MB/s %11.0f tokens/s  %s" % (name, mb / seconds, tokens / seconds, note))
    return mb / seconds


def python_reference(vocab, lines, mb):
    try:
        from transformers import BertTokenizer
    except ImportError:
        print("python reference: transformers not installed (pip install 'transformers<5')")
        return None
    tok = BertTokenizer(vocab, do_lower_case=True)
    if getattr(tok, "is_fast", False) or not hasattr(tok, "basic_tokenizer"):
        print("python reference: this transformers has no slow BertTokenizer (needs transformers<5)")
        return None
    t0, c0 = time.perf_counter(), time.process_time()
    n = sum(len(tok.tokenize(l)) for l in lines)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    report("python reference (transformers slow), 1 thread", mb, n, cpu, "(CPU time; wall %.2f s)" % wall)
    return mb / cpu, n


def hf_tokenizers(vocab, text_path, threads):
    """Runs in a child so RAYON_RS_NUM_CPUS takes effect before tokenizers starts its pool."""
    env = dict(os.environ)
    if threads:
        env["RAYON_RS_NUM_CPUS"] = str(threads)
    code = ("import json,sys,time\n"
            "from tokenizers import BertWordPieceTokenizer\n"
            "t=BertWordPieceTokenizer(sys.argv[1], lowercase=True)\n"
            "d=open(sys.argv[2],'rb').read().split(b'\\n')\n"
            "d=[x.decode('utf-8','ignore') for x in (d[:-1] if d and d[-1]==b'' else d)]\n"
            "best=1e9\n"
            "for _ in range(3):\n"
            "  t0=time.perf_counter(); enc=t.encode_batch(d, add_special_tokens=False); best=min(best,time.perf_counter()-t0)\n"
            "print(json.dumps({'seconds':best,'tokens':sum(len(e.ids) for e in enc)}))\n")
    proc = subprocess.run([sys.executable, "-c", code, vocab, text_path], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def install_tensorflow_stand_in(absl_flags):
    """create_pretraining_data imports TensorFlow only for flags, file access, logging and
    TFRecord writing; instance creation is pure Python. When TensorFlow is not installed, a
    stand-in module provides the first three (absl flags, open/glob, no-op logging) so the
    reference logic runs unchanged."""
    try:
        import tensorflow  # noqa: F401 - the real one, when present
        return
    except ImportError:
        pass
    import glob
    import types
    v1 = types.ModuleType("tensorflow.compat.v1")
    v1.flags = absl_flags
    v1.gfile = types.SimpleNamespace(GFile=open, Glob=glob.glob)
    v1.logging = types.SimpleNamespace(info=lambda *a, **k: None, set_verbosity=lambda *a: None, INFO=0)
    compat = types.ModuleType("tensorflow.compat")
    compat.v1 = v1
    tf = types.ModuleType("tensorflow")
    tf.compat = compat
    tf.gfile, tf.logging, tf.flags = v1.gfile, v1.logging, v1.flags
    sys.modules.update({"tensorflow": tf, "tensorflow.compat": compat, "tensorflow.compat.v1": v1})


def reference_instances(vocab, text_path, dupe):
    """Google's create_training_instances (tokenisation + instance creation, no TF writing)."""
    try:
        from absl import flags
        install_tensorflow_stand_in(flags)
        flags.FLAGS(["bench"], known_only=True)
        from bert import create_pretraining_data as cpd
        from bert import tokenization
    except Exception as e:  # noqa: BLE001 - any import failure means the peer is unavailable
        print("reference create_pretraining_data: not importable (%s)" % type(e).__name__)
        return None
    if "do_whole_word_mask" in flags.FLAGS:
        flags.FLAGS.do_whole_word_mask = False
    tok = tokenization.FullTokenizer(vocab, do_lower_case=True)
    t0 = time.perf_counter()
    inst = cpd.create_training_instances([text_path], tok, 128, dupe, 0.1, 0.15, 20, random.Random(12345))
    return time.perf_counter() - t0, len(inst)


def main():
    ap = argparse.ArgumentParser()
    build = os.environ.get("BERT_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--prep", default=os.path.join(build, "src", "tools", "bert-prep"))
    ap.add_argument("--vocab", default=os.path.join(SHARED, "bert-uncased-vocab.txt"))
    ap.add_argument("--text", default=os.path.join(SHARED, "wikitext2-valid.txt"))
    ap.add_argument("--dupe-factor", type=int, default=5)
    args = ap.parse_args()
    for p in (args.prep, args.vocab, args.text):
        if not os.path.exists(p):
            print("skipped: %s not found" % p)
            return 0
    nbytes, lines = lines_of(args.text)
    mb = nbytes / 1e6
    print("text: %s (%.2f MB, %d lines), vocab: %s, %d cores" % (args.text, mb, len(lines), args.vocab, os.cpu_count()))

    ours = json.loads(subprocess.run([args.prep, "tokenize", "--vocab", args.vocab, "--uncased", "--benchmark", "--json",
                                      args.text], capture_output=True, text=True, check=True).stdout)
    one = report("bert-prep, 1 thread", mb, ours["tokens"], ours["single_thread"]["seconds"])
    report("bert-prep, %d threads" % ours["threads"], mb, ours["tokens"], ours["all_threads"]["seconds"])

    ref = python_reference(args.vocab, lines, mb)
    if ref:
        print("  -> bert-prep 1 thread is %.0fx the Python reference per core (target >= 50x); tokens %s"
              % (one / ref[0], "equal" if ref[1] == ours["tokens"] else "DIFFER: %d vs %d" % (ref[1], ours["tokens"])))
    for threads, label in ((1, "1 thread"), (0, "all threads")):
        hf = hf_tokenizers(args.vocab, args.text, threads)
        if hf is None:
            print("HF tokenizers: not installed (pip install tokenizers)")
            break
        rate = report("HF tokenizers (Rust), %s" % label, mb, hf["tokens"], hf["seconds"])
        if threads == 1:
            print("  -> bert-prep 1 thread is %.2fx HF tokenizers 1 thread (target >= 1x)" % (one / rate))

    out = tempfile.mkdtemp(prefix="bench_shards_")
    try:
        t0 = time.perf_counter()
        res = subprocess.run([args.prep, "shards", "--vocab", args.vocab, "--output", out, "--dupe-factor",
                              str(args.dupe_factor), "--eval-fraction", "0", "--shards", "1", args.text],
                             capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        meta = json.load(open(os.path.join(out, "bert_prep_shards.json")))
        print("bert-prep shards (1 shard, dupe %d, L=128): %.2f s wall, %d instances"
              % (args.dupe_factor, wall, meta["train_instances"]))
        res = subprocess.run([args.prep, "shards", "--vocab", args.vocab, "--output", out, "--overwrite",
                              "--dupe-factor", str(args.dupe_factor), "--eval-fraction", "0", args.text],
                             capture_output=True, text=True, check=True)
        meta = json.load(open(os.path.join(out, "bert_prep_shards.json")))
        print("bert-prep shards (auto shards = cores, all threads): %s"
              % [l.strip() for l in res.stdout.splitlines() if l.strip().startswith("time:")][0])
    finally:
        shutil.rmtree(out, ignore_errors=True)
    ref = reference_instances(args.vocab, args.text, args.dupe_factor)
    if ref:
        print("reference create_training_instances (Python, same text, dupe %d): %.2f s, %d instances  -> %.1fx"
              % (args.dupe_factor, ref[0], ref[1], ref[0] / wall))
    return 0


if __name__ == "__main__":
    sys.exit(main())
