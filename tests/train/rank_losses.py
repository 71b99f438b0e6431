"""Run under mpirun by test_train_dist.py: each rank trains CONFIG for STEPS steps through the
Python binding (the same session bert-train creates) and writes its own per-step losses, one
float32 per line, to OUT.<rank>: the numbers bert-train's world-mean loss log is checked against.
Usage: rank_losses.py CONFIG STEPS OUT"""
import json
import sys

import bertengine


def main():
    config, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with bertengine.Session(json.load(open(config))) as s:
        losses = [s.step().loss for _ in range(steps)]
        with open(f"{out}.{s.rank().rank}", "w") as f:
            f.write("".join(f"{loss!r}\n" for loss in losses))


if __name__ == "__main__":
    main()
