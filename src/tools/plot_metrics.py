#!/usr/bin/env python3
"""Plots bert-train metrics logs (log.metrics: DLLogger JSON lines, "DLLL {...}") as one PNG
of four panels against the optimizer step: training loss (total, MLM, NSP), evaluation MLM
accuracy, learning rate, and throughput (sequences/s). Several files (phase 1, phase 2, or runs
to compare) are drawn side by side, labelled by file name; a phase's steps follow the previous
phase's in the same file.

usage: /usr/bin/python3 src/tools/plot_metrics.py --output run.png METRICS.json [MORE.json ...]
       [--title TEXT]   (needs matplotlib: Debian's python3-matplotlib)
"""
import argparse
import json
import os
import sys


def read_records(path):
    """The LOG records of one metrics file as (step, data) with steps made continuous over phases."""
    records, offset, last_phase, last_step = [], 0, None, 0
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.startswith("DLLL "):
                continue
            try:
                record = json.loads(line[5:])
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{lineno}: not a JSON record: {e}")
            step = record.get("step")
            if record.get("type") != "LOG" or not isinstance(step, list) or len(step) != 2:
                continue  # metadata and run summaries
            phase, n = step
            if last_phase is not None and phase != last_phase:
                offset += last_step
            last_phase, last_step = phase, n
            records.append((offset + n, record["data"]))
    if not records:
        sys.exit(f"{path}: no step records (is it a bert-train log.metrics file?)")
    return records


def series(records, key):
    points = [(step, data[key]) for step, data in records if key in data and data[key] is not None]
    return [p[0] for p in points], [p[1] for p in points]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="metrics files written by bert-train (log.metrics)")
    parser.add_argument("--output", "-o", required=True, help="PNG to write")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_metrics.py needs matplotlib: apt-get install python3-matplotlib, and run it with /usr/bin/python3")

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    (ax_loss, ax_acc), (ax_lr, ax_speed) = axes
    for path in args.files:
        records = read_records(path)
        label = os.path.basename(path)
        x, y = series(records, "loss")
        ax_loss.plot(x, y, label=f"{label}: loss")
        x, y = series(records, "mlm_loss")
        ax_loss.plot(x, y, "--", label=f"{label}: mlm")
        x, y = series(records, "nsp_loss")
        ax_loss.plot(x, y, ":", label=f"{label}: nsp")
        x, y = series(records, "eval_mlm_accuracy")
        ax_acc.plot(x, y, "o-", markersize=3, label=label)
        x, y = series(records, "learning_rate")
        ax_lr.plot(x, y, label=label)
        x, y = series(records, "sequences_per_second")
        ax_speed.plot(x, y, label=label)
    for ax, title in ((ax_loss, "training loss"), (ax_acc, "eval MLM accuracy"), (ax_lr, "learning rate"),
                      (ax_speed, "sequences / s")):
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.output, dpi=100)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
