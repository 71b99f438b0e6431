#!/usr/bin/env python3
"""Distributed BERT pretraining driven from Python through the bertengine binding.

Every process creates a session, trains, all-reduces a metric through the engine's
communicator (bert_allreduce_host) and writes a checkpoint (rank 0 writes the file). Launch one
process per rank:

    mpirun -np 2 /usr/bin/python3 samples/python/pretrain_dist.py --steps 40 --out /tmp/run

(or samples/python/launch_two.sh). The rank and world size come from the launcher's
environment: Open MPI / Slurm variables are read by the engine (dist backend "auto"); RANK,
WORLD_SIZE and LOCAL_RANK (torchrun style), when set, are passed through the dist argument. A
process started without a launcher is a one-rank world and trains alone.
"""
import argparse
import json
import logging
import os
import sys
import time

import numpy as np

import bertengine

TINY = {
    "model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64},
    "train": {"micro_batch": 16, "steps": 40, "lr": 0.02, "threads": 1},
    "data": {"max_seq_length": 32, "max_predictions_per_seq": 5},
}


def dist_from_env() -> bertengine.Dist:
    def get(*names):
        for n in names:
            if n in os.environ:
                return int(os.environ[n])
        return -1
    return bertengine.Dist(backend=os.environ.get("BERT_DIST_BACKEND", "auto"),
                           rank=get("RANK"), world_size=get("WORLD_SIZE"),
                           local_rank=get("LOCAL_RANK"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="JSON config file (default: a tiny model on synthetic data)")
    ap.add_argument("--steps", type=int, default=int(os.environ.get("BERT_SAMPLE_STEPS", "40")))
    ap.add_argument("--report-every", type=int, default=10)
    ap.add_argument("--out", default=os.environ.get("BERT_SAMPLE_OUT", "pretrain_out"))
    args = ap.parse_args()

    config = json.load(open(args.config)) if args.config else dict(TINY)
    config.setdefault("train", {})["steps"] = args.steps
    dist = dist_from_env()
    label = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0"))
    logging.basicConfig(level=logging.INFO, format=f"[proc {label}] %(name)s %(levelname)s %(message)s")
    log = logging.getLogger("pretrain")

    os.makedirs(args.out, exist_ok=True)
    try:
        with bertengine.Session(config, dist=dist) as s:
            window, start = [], time.monotonic()
            for _ in range(args.steps):
                r = s.step()
                window.append([r.loss, r.sequences_per_second])
                if r.step % args.report_every == 0:
                    # Collective: every rank contributes its window; all receive the mean.
                    mean = s.allreduce(np.mean(window, axis=0), op="mean")
                    seqs = s.allreduce(np.array([r.sequences], dtype=np.float32), op="sum")
                    log.info("step %d  mean loss over ranks %.4f  seq/s per rank %.0f  "
                             "sequences this step (all ranks) %d  lr %.5f",
                             r.step, mean[0], mean[1], seqs[0], r.learning_rate)
                    window = []
            path = os.path.join(args.out, f"ckpt_{r.step}.h5")
            s.checkpoint(path)  # collective; rank 0 writes
            ev = s.eval()
            log.info("done in %.1f s: checkpoint %s, eval mlm_accuracy %.3f mlm_loss %.3f",
                     time.monotonic() - start, path, ev.mlm_accuracy, ev.mlm_loss)
    except bertengine.BertError as e:
        log.error("%s", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
