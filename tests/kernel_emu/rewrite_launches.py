#!/usr/bin/env python3
"""Rewrites a kernels/*.cu file into plain C++ for the kernel emulation:
- launches: `kernel<<<grid, block, smem, stream>>>(args)` -> `::cuda_emu::Launcher("kernel", grid,
  block, smem, stream).bind([](auto&&... a) { kernel(a...); })(args)`, so a kernel template's
  arguments are deduced from the call as nvcc does, and the emulator can name the kernel;
- shared memory: `__shared__ T name[N]...;` -> `static char name_site; auto& name =
  ::cuda_emu::block_shared<T[N]...>(&name_site);`, an array in the running block's own shared
  memory (cuda_emu.cpp), which every thread of that block sees and no other block does.
Usage: rewrite_launches.py IN.cu OUT.cpp"""
import re
import sys

LAUNCH = re.compile(r"([A-Za-z_][\w:]*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>", re.DOTALL)
SHARED = re.compile(r"__shared__\s+([\w:<>, ]+?)\s+(\w+)\s*((?:\[[^\]]+\]\s*)+);")


def launch(match):
    kernel, config = match.group(1), match.group(2)
    return f'::cuda_emu::Launcher("{kernel}", {config}).bind([](auto&&... a) {{ {kernel}(a...); }})'


def shared(match):
    element, name, dims = match.group(1), match.group(2), re.sub(r"\s+", "", match.group(3))
    return (f"static char {name}_site; "
            f"auto& {name} = ::cuda_emu::block_shared<{element}{dims}>(&{name}_site);")


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        text = f.read()
    out, launches = LAUNCH.subn(launch, text)
    out, arrays = SHARED.subn(shared, out)
    if "<<<" in out:
        sys.exit(f"{src}: a launch was not rewritten")
    if "__shared__" in out:
        sys.exit(f"{src}: a __shared__ declaration was not rewritten (arrays of a named type only)")
    with open(dst, "w", encoding="utf-8") as f:
        f.write(f'#line 1 "{src}"\n' + out)
    print(f"{src}: {launches} launches, {arrays} shared arrays rewritten")


if __name__ == "__main__":
    main()
