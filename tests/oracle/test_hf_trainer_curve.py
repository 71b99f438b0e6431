"""Fine-tuning against Hugging Face's Trainer, epoch by epoch: the same randomly initialised
BertForSequenceClassification (saved by transformers, imported by bert-finetune), the same
learnable SST-2-format task (the label is whether "good" or "bad" occurs), the same schedule
(AdamW, lr 2e-3, weight decay 0.01 off biases and LayerNorm, eps 1e-6, clipping at 1.0, HF's linear
schedule with 10% warmup), dropout off, and the whole training set as each step's batch, so the
data order cannot differ. The training loss of every step (40) and the dev accuracy after every
epoch must match the Trainer's (its log rounds the loss to 4 decimals). Measured: every loss equal
to the 4 decimals, every accuracy equal, 0.4375 after the first epoch and 0.9375 after the last."""
import json
import os
import re
import subprocess

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it
import torch  # noqa: E402

BUILD = os.environ.get("BERT_BUILD_DIR", "")
FINETUNE = os.path.join(BUILD, "src", "tools", "bert-finetune")
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
         "lima", "mike", "november", "oscar", "papa"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"] + WORDS
TRAIN, DEV, EPOCHS, SEQ, LR = 48, 32, 40, 16, 5e-3

pytestmark = pytest.mark.skipif(not os.path.exists(FINETUNE), reason="bert-finetune is not built (BERT_BUILD_DIR)")


def sentences(n, rng):
    rows = []
    for _ in range(n):
        words = list(rng.choice(WORDS, int(rng.integers(3, 9))))
        label = int(rng.integers(0, 2))
        words.insert(int(rng.integers(0, len(words) + 1)), "good" if label else "bad")
        rows.append((" ".join(words), label))
    return rows


def trainer_curve(folder, vocab, train, dev, out):
    """Per-step training losses and per-epoch (dev accuracy, dev loss) of HF's Trainer."""
    tok = transformers.BertTokenizer(str(vocab), do_lower_case=True)

    class Rows(torch.utils.data.Dataset):
        def __init__(self, rows):
            enc = tok([r[0] for r in rows], padding="max_length", max_length=SEQ, truncation=True)
            self.items = [{k: torch.tensor(v[i]) for k, v in enc.items()} | {"labels": torch.tensor(r[1])}
                          for i, r in enumerate(rows)]

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            return self.items[i]

    model = transformers.BertForSequenceClassification.from_pretrained(str(folder))
    args = transformers.TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=TRAIN, per_device_eval_batch_size=DEV,
        num_train_epochs=EPOCHS, learning_rate=LR, weight_decay=0.01, adam_beta1=0.9, adam_beta2=0.999,
        adam_epsilon=1e-6, max_grad_norm=1.0, lr_scheduler_type="linear", warmup_ratio=0.1, seed=1,
        evaluation_strategy="epoch", logging_strategy="steps", logging_steps=1, save_strategy="no",
        report_to=[], use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
    accuracy = lambda p: {"accuracy": float((p.predictions.argmax(-1) == p.label_ids).mean())}
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Rows(train), eval_dataset=Rows(dev),
                                   compute_metrics=accuracy)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    evals = [(h["eval_accuracy"], h["eval_loss"]) for h in trainer.state.log_history if "eval_accuracy" in h]
    return losses, evals


def test_fine_tuning_tracks_the_trainer_epoch_by_epoch(tmp_path):
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0, num_labels=2)
    folder = tmp_path / "hf_init"
    transformers.BertForSequenceClassification(config).save_pretrained(str(folder), safe_serialization=True)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    rng = np.random.default_rng(5)
    train, dev = sentences(TRAIN, rng), sentences(DEV, rng)
    data = tmp_path / "SST-2"
    data.mkdir()
    for name, rows in (("train.tsv", train), ("dev.tsv", dev)):
        (data / name).write_text("sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in rows))

    hf_losses, hf_evals = trainer_curve(folder, vocab, train, dev, tmp_path / "hf_out")

    cfg = {"train": {"init_checkpoint": str(folder), "micro_batch": TRAIN, "lr": LR, "optimizer": "adamw",
                     "weight_decay": 0.01, "eps": 1e-6, "max_grad_norm": 1.0, "lr_schedule": "linear",
                     "warmup_proportion": 0.1, "dropout": False, "log_every": 1, "threads": 2},
           "data": {"max_seq_length": SEQ},
           "log": {"metrics": str(tmp_path / "engine.dllog")},
           "finetune": {"task": "sst-2", "data_dir": str(data), "vocab": str(vocab), "epochs": EPOCHS,
                        "eval_batch": DEV, "output_dir": str(tmp_path / "engine_out")}}
    (tmp_path / "ft.json").write_text(json.dumps(cfg))
    r = subprocess.run([FINETUNE, str(tmp_path / "ft.json")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    records = [json.loads(line[5:]) for line in (tmp_path / "engine.dllog").read_text().splitlines()]
    logged = [x["data"] for x in records if x["type"] == "LOG"]
    losses = [d["loss"] for d in logged if "loss" in d]
    evals = [d["eval_accuracy"] for d in logged if "eval_accuracy" in d]
    print("step losses, engine vs Trainer:", [f"{a:.4f}/{b:.4f}" for a, b in zip(losses, hf_losses)])
    print("dev accuracy per epoch, engine vs Trainer:", [(e, h[0]) for e, h in zip(evals, hf_evals)])

    assert len(losses) == len(hf_losses) == EPOCHS  # one full-batch step per epoch
    np.testing.assert_allclose(losses, hf_losses, atol=1.5e-4)  # the Trainer's log has 4 decimals
    assert len(evals) == len(hf_evals) == EPOCHS
    assert evals == [h[0] for h in hf_evals]
    assert hf_evals[0][0] < 0.6 and hf_evals[-1][0] >= 0.9, "the task is learnt, so the curve means something"
