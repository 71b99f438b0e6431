"""The engine's command-line tools, installed inside the package (bertengine/bin) by
`pip install .`: the bert-train, bert-prep, bert-ckpt and bert-bench entry points run them
with the same arguments (`bert-train CONFIG.json --resume`, see README.md "Programs")."""
from __future__ import annotations

import os
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
BIN_DIR = os.path.join(PACKAGE_DIR, "bin")


def _exec(name: str) -> None:
    path = os.path.join(BIN_DIR, name)
    if not os.access(path, os.X_OK):
        sys.exit(f"{name}: not installed at {path} (the package was not built by `pip install .`)")
    # The tools find libbert (in this package) through their rpath with meson-python >= 0.22;
    # older ones keep the build tree's rpath, so the package directory is named here too.
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [PACKAGE_DIR, env.get("LD_LIBRARY_PATH")]))
    os.execve(path, [name, *sys.argv[1:]], env)


def bert_train() -> None:
    _exec("bert-train")


def bert_prep() -> None:
    _exec("bert-prep")


def bert_ckpt() -> None:
    _exec("bert-ckpt")


def bert_bench() -> None:
    _exec("bert-bench")
