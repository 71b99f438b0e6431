"""Writes the committed seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): small
valid inputs of every format, so that fuzzing starts deep inside each parser. Checkpoint and
safetensors seeds come from a tiny model trained by this build's bert-train and exported by
bert-ckpt; TensorFlow formats from the independent writer tests/oracle/tf_formats.py.
Usage: make_seeds.py BUILD_DIR"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import tf_formats  # noqa: E402

TINY = {"vocab_size": 16, "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 1,
        "intermediate_size": 8, "max_position_embeddings": 8, "type_vocab_size": 2}


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def wiki_seeds():
    """The wikitext converter's seeds: the particular markup of the WikiExtractor comparison and
    the lead of a real article; the dump reader's: a small dump as XML, bz2 and multistream bz2."""
    import test_wiki_extract  # noqa: E402 - its EDGE_CASES
    import wiki_dumps
    for i, text in enumerate(test_wiki_extract.EDGE_CASES.values()):
        put("wikitext", f"case{i:02d}.txt", text)
    real = [p for p in wiki_dumps.real_pages() if p.ns == "0" and not p.redirect]
    put("wikitext", "real_lead.txt", real[0].text[:3000])
    pages = [wiki_dumps.Page(p.id, p.title, p.ns, p.text[:800], p.redirect) for p in wiki_dumps.real_pages()[:6]]
    with tempfile.TemporaryDirectory() as tmp:
        for kind, name in (("xml", "d.xml"), ("bz2", "d.xml.bz2"), ("multistream", "d-multistream.xml.bz2")):
            wiki_dumps.write_dump(os.path.join(tmp, name), pages, kind=kind, pages_per_stream=2)
            put("wiki_dump", name, open(os.path.join(tmp, name), "rb").read())


def main():
    build = sys.argv[1]
    wiki_seeds()
    tools = os.path.join(build, "src", "tools")
    cfg = {"model": TINY, "train": {"micro_batch": 2, "steps": 1, "threads": 1},
           "data": {"max_seq_length": 8, "max_predictions_per_seq": 2}}
    put("config", "tiny.json", json.dumps(cfg))
    put("config", "named_model.json", '{"model": "bert-tiny", "train": {"steps": 100, "lr": 1e-3}}')
    put("config", "full.json", json.dumps({
        "model": TINY, "device": "cpu",
        "train": {"micro_batch": 4, "global_batch": 8, "steps": 10, "optimizer": "lamb", "lr": 6e-3,
                  "warmup_proportion": 0.28, "precision": "fp32", "loss_scaling": "dynamic", "eval_every": 5},
        "data": {"source": "synthetic", "max_seq_length": 8, "max_predictions_per_seq": 2, "unpad": True},
        "checkpoint": {"dir": "/tmp/x", "every": 2, "keep": 3, "keep_every": 4},
        "dist": {"timeout_s": 10, "bucket_mb": 1, "wire_precision": "bf16"}, "log": {"metrics": "m.json"}}))
    # fuzz_session starts from the config seeds (and samples/configs), plus the inputs of the bugs
    # it must keep finding: a value nested 50,000 deep overflowed the stack while its error was
    # formatted; a long string value was echoed whole into the message.
    for name in ("tiny.json", "full.json"):
        put("session", name, open(os.path.join(HERE, "corpus", "config", name), "rb").read())
    put("session", "deep_nesting.json", '{"train": {"lr": ' + "[" * 50000 + "]" * 50000 + "}}")
    put("session", "long_string.json", json.dumps({"model": TINY, "train": {"optimizer": "x" * 100000}}))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "c.json")
        json.dump(cfg, open(path, "w"))
        subprocess.run([os.path.join(tools, "bert-train"), path, "--quiet", "--output", os.path.join(tmp, "t.h5")],
                       check=True, capture_output=True)
        put("checkpoint", "tiny.h5", open(os.path.join(tmp, "t.h5"), "rb").read())
        subprocess.run([os.path.join(tools, "bert-ckpt"), "export-hf", os.path.join(tmp, "t.h5"), os.path.join(tmp, "hf")],
                       check=True, capture_output=True)
        put("safetensors", "tiny.safetensors", open(os.path.join(tmp, "hf", "model.safetensors"), "rb").read())
        header = json.dumps({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
                             "b": {"dtype": "BF16", "shape": [1, 1], "data_offsets": [4, 6]},
                             "__metadata__": {"format": "pt"}}).encode()
        put("safetensors", "f16_bf16.safetensors", struct.pack("<Q", len(header)) + header + b"\x00\x3c\x00\xc0\x80\x3f")

        prefix = os.path.join(tmp, "model.ckpt")
        tf_formats.write_tensor_bundle(prefix, {"bert/embeddings/word_embeddings": np.arange(6, dtype="f4").reshape(2, 3),
                                                "global_step": np.array([7], dtype="f4")})
        index, data = open(prefix + ".index", "rb").read(), open(prefix + ".data-00000-of-00001", "rb").read()
        put("tf_bundle", "two_tensors", struct.pack("<I", len(index)) + index + data)
    inst = {"input_ids": [2, 5, 4, 3, 6, 3], "segment_ids": [0, 0, 0, 0, 1, 1], "masked_lm_positions": [2],
            "masked_lm_ids": [7], "is_random_next": False}
    records = b"".join(tf_formats.tfrecord_frame(tf_formats.pretraining_example(inst, 8, 2, packed=p)) for p in (True, False))
    put("tfrecord", "two_records.tfrecord", records)
    put("tfrecord", "one_example", tf_formats.pretraining_example(inst, 8, 2))
    vocab = "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "play", "##ing", "##ed", "un", "##able",
                       ".", "é", "中"]) + "\n"
    put("vocab_tokenizer", "vocab_and_text", vocab + "\0" + "The playing PLAYED unable. Café 中文 x\u0301 \t\n")
    put("vocab_tokenizer", "text_only", "Hello, world! Ünïcödé 日本語 \u200b control\x07 chars")
    put("text_reader", "two_documents.txt", "First sentence. Second one? Yes!\nAnother line.\n\n"
                                            "Second document, Dr. Smith said e.g. this.\r\nLast line without end")
    context = ("Paris is the capital of France. The city played host in 1900, unable to say when. "
               "Café 中文 who what the a b.")
    put("squad", "v1.json", json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": [
            {"id": "q1", "question": "What is the capital of France?", "answers": [{"text": "Paris", "answer_start": 0}]},
            {"id": "q2", "question": "When did the city play host?", "answers": [{"text": "1900", "answer_start": 56}]}]},
        {"context": "b a\tb\u202fa", "qas": [{"id": "q3", "question": "b", "answers": []}]}]}]}, ensure_ascii=False))
    put("squad", "v2.json", json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": [
            {"id": "p1", "question": "Who played?", "answers": [{"text": "The city", "answer_start": 32}],
             "is_impossible": False},
            {"id": "p2", "question": "Who is unable?", "answers": [], "is_impossible": True}]}]}]}))
    put("squad", "no_answers.json", json.dumps({"data": [{"paragraphs": [
        {"context": "  played   unable  ", "qas": [{"id": "x", "question": "playing?"}]}]}]}))
    put("text_reader", "blank_lines.txt", "\n\n\nonly\n\n\n \n\t\nlines\n")


if __name__ == "__main__":
    main()
