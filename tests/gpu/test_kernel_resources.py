#!/usr/bin/env python3
"""The kernel resource check (check_kernel_resources.py) on the engine's library, which must pass,
and on a deliberately over-sized kernel (kernel_resources_fixture.cu), which it must refuse by name.
usage: test_kernel_resources.py CHECKER LIBBERT FIXTURE   (exit 77 when cuobjdump is absent)"""
import subprocess
import sys


def check(checker, binary):
    run = subprocess.run([sys.executable, checker, binary], capture_output=True, text=True)
    print(run.stdout, run.stderr, sep="", end="")
    return run.returncode, run.stdout


def main():
    checker, libbert, fixture = sys.argv[1:4]
    code, _ = check(checker, libbert)
    if code == 77:
        return 77
    if code != 0:
        print("FAIL: the engine's kernels do not fit their launches")
        return 1
    code, out = check(checker, fixture)
    expected = "register_hungry_kernel(float*, float const*): "
    if code != 1 or "over a limit: sm_" not in out or expected not in out or "more than the 64 a block of 1024" not in out:
        print(f"FAIL: the over-sized kernel was not refused by name (exit {code})")
        return 1
    print("ok: the engine's kernels fit; the over-sized kernel is refused by name")
    return 0


if __name__ == "__main__":
    sys.exit(main())
