#!/usr/bin/env python3
"""Rewrites CUDA launches in a kernels/*.cu file into plain C++ for the kernel emulation:
`kernel<<<grid, block, smem, stream>>>(args)` -> `::cuda_emu::Launcher(grid, block, smem,
stream).bind([](auto&&... a) { kernel(a...); })(args)`, so a kernel template's arguments are
deduced from the call as nvcc does. Usage: rewrite_launches.py IN.cu OUT.cpp"""
import re
import sys

LAUNCH = re.compile(r"([A-Za-z_][\w:]*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>", re.DOTALL)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        text = f.read()
    out, count = LAUNCH.subn(r"::cuda_emu::Launcher(\2).bind([](auto&&... a) { \1(a...); })", text)
    if "<<<" in out:
        sys.exit(f"{src}: a launch was not rewritten")
    with open(dst, "w", encoding="utf-8") as f:
        f.write(f'#line 1 "{src}"\n' + out)
    print(f"{src}: {count} launches rewritten")


if __name__ == "__main__":
    main()
