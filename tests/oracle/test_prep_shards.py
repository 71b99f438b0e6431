"""bert-prep end to end: `vocab` learns a BERT-layout vocabulary from a directory of .txt files,
`shards` writes shards that h5py reads with exactly the DLE keys, dtypes, shapes and padding
(and the MLPerf variable-length dtypes), a seed fixes every byte whatever the thread count,
`inspect` reads them back with the engine's reader, and bad input (empty documents, non-UTF-8
bytes, a vocab without special tokens, missing files, existing shards) gives clear errors."""
import json
import os
import random
import subprocess

import pytest

h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")

BUILD = os.environ.get("BERT_BUILD_DIR")
PREP = os.path.join(BUILD, "src", "tools", "bert-prep") if BUILD else None
pytestmark = pytest.mark.skipif(not PREP or not os.path.exists(PREP), reason="BERT_BUILD_DIR/src/tools/bert-prep not built")
SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data")

DLE_KEYS = {"input_ids": "int32", "input_mask": "int8", "segment_ids": "int8", "masked_lm_positions": "int32",
            "masked_lm_ids": "int32", "next_sentence_labels": "int8"}
WORDS = ("the engine trains bert models on text that users prepare with native tools and "
         "tokenizers which split words into pieces such as token ##izer running walked quickly "
         "data shards hold samples masks labels sentences documents").split()


def prep(*args, ok=True):
    proc = subprocess.run([PREP, *map(str, args)], capture_output=True, text=True, timeout=300)
    if ok:
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode != 0, proc.stdout
    return proc


def write_corpus(root, files=3, docs=12, seed=0):
    """Directory tree of .txt files: documents separated by blank lines, one sentence per line."""
    rng = random.Random(seed)
    paths = []
    for f in range(files):
        sub = os.path.join(root, "part%d" % (f % 2))
        os.makedirs(sub, exist_ok=True)
        lines = []
        for _ in range(docs):
            for _ in range(rng.randint(2, 9)):
                words = [rng.choice(WORDS) for _ in range(rng.randint(4, 20))]
                lines.append(" ".join(words).capitalize() + rng.choice([".", "!", "?"]))
            lines.append("")
        path = os.path.join(sub, "file%d.txt" % f)
        with open(path, "w") as fh:
            fh.write("\n".join(lines))
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    write_corpus(str(root / "text"))
    vocab = root / "vocab.txt"
    out = prep("vocab", "--size", 256, "--output", vocab, root / "text").stdout
    assert "256 tokens" in out and "3 files" in out
    return root, vocab


def read_dle(path):
    with h5py.File(path, "r") as f:
        assert set(f.keys()) == set(DLE_KEYS)
        data = {}
        for key, dtype in DLE_KEYS.items():
            assert f[key].dtype == np.dtype(dtype), key
            data[key] = f[key][()]
    return data


def test_vocab_has_bert_layout(corpus):
    _, vocab = corpus
    tokens = open(vocab, encoding="utf-8").read().split("\n")[:-1]
    assert len(tokens) == 256 and len(set(tokens)) == 256
    assert tokens[0] == "[PAD]" and tokens[1] == "[unused0]" and tokens[99] == "[unused98]"
    assert tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert "the" in tokens and "##s" in tokens


def test_dle_shards_keys_dtypes_shapes_and_padding(corpus, tmp_path):
    root, vocab = corpus
    out = tmp_path / "shards"
    prep("shards", "--vocab", vocab, "--output", out, "--max-seq-length", 64, "--max-predictions", 10,
         "--shards", 3, "--eval-fraction", 0.1, "--dupe-factor", 2, root / "text")
    meta = json.load(open(out / "bert_prep_shards.json"))
    train = sorted(os.listdir(out / "train"))
    assert train == ["shard_00000.hdf5", "shard_00001.hdf5", "shard_00002.hdf5"]
    assert os.listdir(out / "eval") == ["shard_00000.hdf5"]
    total = 0
    for name in train:
        d = read_dle(out / "train" / name)
        n = d["input_ids"].shape[0]
        total += n
        assert d["input_ids"].shape == (n, 64) and d["input_mask"].shape == (n, 64) and d["segment_ids"].shape == (n, 64)
        assert d["masked_lm_positions"].shape == (n, 10) and d["masked_lm_ids"].shape == (n, 10)
        assert d["next_sentence_labels"].shape == (n,)
        lengths = d["input_mask"].sum(axis=1)
        cols = np.arange(64)[None, :]
        assert np.array_equal(d["input_mask"], (cols < lengths[:, None]).astype(np.int8))  # prefix of ones
        assert (d["input_ids"][cols >= lengths[:, None]] == 0).all()  # zero padding
        assert (d["segment_ids"][cols >= lengths[:, None]] == 0).all()
        assert (d["input_ids"][:, 0] == 101).all()  # [CLS]
        assert (d["input_ids"][np.arange(n), lengths - 1] == 102).all()  # final [SEP]
        seg = d["segment_ids"]
        assert (np.diff(seg.astype(np.int32), axis=1)[cols[:, 1:] < lengths[:, None]] >= 0).all()  # 0..0 1..1
        pos, mids = d["masked_lm_positions"], d["masked_lm_ids"]
        real = pos != 0
        assert (real == (np.cumsum(~real, axis=1) == 0)).all()  # the first 0 ends the real masks
        assert (mids[~real] == 0).all() and (mids[real] > 0).all()
        assert (pos[real] < np.repeat(lengths, real.sum(axis=1))).all()
        expect = np.minimum(10, np.maximum(1, np.round(lengths * 0.15)))
        assert np.array_equal(real.sum(axis=1), expect)
        assert set(np.unique(d["next_sentence_labels"])) <= {0, 1}
    assert total == meta["train_instances"]
    assert read_dle(out / "eval" / "shard_00000.hdf5")["input_ids"].shape[0] == meta["eval_instances"] > 0


def shard_bytes(out):
    result = {}
    for split in ("train", "eval"):
        for name in sorted(os.listdir(out / split)):
            d = read_dle(out / split / name)
            result[split + "/" + name] = {k: v.tobytes() for k, v in d.items()}
    return result


def test_fixed_seed_gives_identical_shards_for_any_thread_count(corpus, tmp_path):
    root, vocab = corpus
    common = ["shards", "--vocab", vocab, "--max-seq-length", 48, "--shards", 4, "--dupe-factor", 2, root / "text"]
    prep(*common, "--output", tmp_path / "a", "--threads", 1, "--seed", 7)
    prep(*common, "--output", tmp_path / "b", "--threads", 3, "--seed", 7)
    prep(*common, "--output", tmp_path / "c", "--threads", 2, "--seed", 8)
    a, b, c = shard_bytes(tmp_path / "a"), shard_bytes(tmp_path / "b"), shard_bytes(tmp_path / "c")
    assert a == b
    assert a != c


def test_whole_word_mask_and_mlperf_format(corpus, tmp_path):
    root, vocab = corpus
    out = tmp_path / "ml"
    prep("shards", "--vocab", vocab, "--output", out, "--format", "mlperf", "--whole-word-mask", "--shards", 1,
         "--eval-fraction", 0, root / "text")
    assert not os.path.exists(out / "eval")
    with h5py.File(out / "train" / "shard_00000.hdf5", "r") as f:
        assert set(f.keys()) == {"input_ids", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"}
        assert h5py.check_vlen_dtype(f["input_ids"].dtype) == np.int16
        assert h5py.check_vlen_dtype(f["segment_ids"].dtype) == np.int8
        assert h5py.check_vlen_dtype(f["masked_lm_positions"].dtype) == np.int16
        assert h5py.check_vlen_dtype(f["masked_lm_ids"].dtype) == np.int16
        assert f["next_sentence_labels"].dtype == np.int8
        ids, pos = f["input_ids"][0], f["masked_lm_positions"][0]
        assert ids[0] == 101 and ids[-1] == 102 and len(pos) >= 1 and (np.diff(pos) > 0).all()


def test_inspect_reads_shards_with_engine_reader(corpus, tmp_path):
    root, vocab = corpus
    out = tmp_path / "s"
    prep("shards", "--vocab", vocab, "--output", out, "--shards", 1, "--max-seq-length", 64, root / "text")
    n = read_dle(out / "train" / "shard_00000.hdf5")["input_ids"].shape[0]
    text = prep("inspect", "--vocab", vocab, "--samples", 2, out / "train" / "shard_00000.hdf5").stdout
    assert "format: dle, rows %d, sequences %d, max_seq_length 64, max_predictions 20" % (n, n) in text
    assert "length histogram:" in text and "sample 1:" in text and "sample 2:" not in text
    assert "  A: [CLS] " in text


def test_paragraph_splitting_and_file_documents(tmp_path, corpus):
    _, vocab = corpus
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.txt").write_text("The engine trains bert. It splits words!\nData shards hold samples? "
                                          "Yes.\n\nThe second paragraph of the same file. Another sentence.\n")
    out = tmp_path / "o"
    res = prep("shards", "--vocab", vocab, "--output", out, "--sentences", "split", "--documents", "file",
               "--eval-fraction", 0, "--dupe-factor", 1, "--short-seq-prob", 0, tmp_path / "t").stdout
    assert "1 documents" in res and "6 sentences" in res


def test_bad_input_errors(corpus, tmp_path):
    root, vocab = corpus
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n   \n\t\n")
    err = prep("shards", "--vocab", vocab, "--output", tmp_path / "o1", empty, ok=False).stderr
    assert "holds no documents" in err

    # Non-UTF-8 bytes are replaced and counted, never fatal.
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"The engine \xff\xfe trains bert.\nData \xc3 shards hold samples.\n\nThe second document here.\n")
    res = prep("shards", "--vocab", vocab, "--output", tmp_path / "o2", "--eval-fraction", 0, bad)
    assert "3 invalid UTF-8 sequences replaced" in res.stdout

    no_specials = tmp_path / "nospecial.txt"
    no_specials.write_text("[PAD]\n[UNK]\nthe\n")
    err = prep("shards", "--vocab", no_specials, "--output", tmp_path / "o3", bad, ok=False).stderr
    assert str(no_specials) in err and "[CLS] [SEP] [MASK]" in err

    err = prep("shards", "--vocab", tmp_path / "nope.txt", "--output", tmp_path / "o4", bad, ok=False).stderr
    assert "cannot open vocab file '%s'" % (tmp_path / "nope.txt") in err
    err = prep("shards", "--vocab", vocab, "--output", tmp_path / "o5", tmp_path / "missing_dir", ok=False).stderr
    assert "missing_dir' does not exist" in err
    err = prep("vocab", "--size", 300, "--output", tmp_path / "v.txt", tmp_path / "missing_dir", ok=False).stderr
    assert "missing_dir' does not exist" in err

    # Existing shards are not silently mixed with new ones.
    err = prep("shards", "--vocab", vocab, "--output", tmp_path / "o2", bad, ok=False).stderr
    assert "already holds shards" in err and "--overwrite" in err
    prep("shards", "--vocab", vocab, "--output", tmp_path / "o2", "--overwrite", "--eval-fraction", 0, bad)

    err = prep("shards", "--vocab", vocab, "--output", tmp_path / "o6", "--max-seq-lenght", 64, bad, ok=False).stderr
    assert "unknown option '--max-seq-lenght'" in err
    err = prep("inspect", "--vocab", vocab, tmp_path / "bad.txt", ok=False).stderr
    assert "bad.txt" in err


def test_tokenize_cli_ids_and_counts(corpus, tmp_path):
    _, vocab = corpus
    tokens = open(vocab, encoding="utf-8").read().split("\n")
    src = tmp_path / "in.txt"
    src.write_bytes(b"The Engine trains\n\nbert \xff models\n")
    res = prep("tokenize", "--vocab", vocab, src)
    lines = res.stdout.split("\n")
    assert lines[1] == ""  # empty line -> no tokens
    assert "".join(lines[0].split()).replace("##", "") == "theenginetrains"
    ids = prep("tokenize", "--vocab", vocab, "--ids", src).stdout.split("\n")
    assert [tokens[int(i)] for i in ids[0].split()] == lines[0].split()
    assert "1 invalid UTF-8 sequences replaced" in res.stderr


@pytest.mark.skipif(not os.path.exists(os.path.join(SHARED, "wikitext2-valid.txt")), reason="../shared/data absent")
def test_wikitext_shards_with_bert_vocab(tmp_path):
    vocab = os.path.join(SHARED, "bert-uncased-vocab.txt")
    out = tmp_path / "w"
    res = prep("shards", "--vocab", vocab, "--output", out, "--sentences", "split", "--dupe-factor", 1,
               os.path.join(SHARED, "wikitext2-valid.txt")).stdout
    assert "260172 tokens" in res  # the tokenizer unit test pins the tokens themselves
    d = read_dle(out / "train" / "shard_00000.hdf5")
    assert d["input_ids"].max() < 30522
    assert 0.45 < d["next_sentence_labels"].mean() < 0.8
