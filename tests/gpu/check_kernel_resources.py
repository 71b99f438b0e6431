#!/usr/bin/env python3
"""Checks the resources each GPU kernel of a binary was compiled to use, per architecture, against
what a launch may have (cuobjdump --dump-resource-usage): the engine's kernels (namespace
bert::kernels) must fit a block of 1024 threads, the most CUDA launches, in the 65,536 registers
of an SM (at most 64 registers a thread) and use no local memory; every kernel (CUB's too) at
most 48 KiB of static shared memory. A kernel over a limit would fail its launch on the GPU
("too many resources requested"); here it fails the build's test, naming the kernel.

usage: check_kernel_resources.py BINARY...    exit 0: all fit; 1: a kernel over a limit;
77: cuobjdump not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin or NVIDIA's pip package
nvidia-cuda-cuobjdump, which samples/install_deps.sh --tests installs)."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys

REGISTERS_PER_SM = 65536
MAX_THREADS_PER_BLOCK = 1024
STATIC_SHARED_BYTES = 48 * 1024
ENGINE_KERNEL = "4bert7kernels"  # the mangled namespace bert::kernels


def find_cuobjdump():
    candidates = [shutil.which("cuobjdump"),
                  os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "cuobjdump"),
                  "/usr/local/cuda/bin/cuobjdump"]
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations if spec else []):
        candidates += [os.path.join(root, d, "bin", "cuobjdump") for d in ("cu13", "cu12", "cuda_cuobjdump")]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def demangle(names):
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt:
        return names
    out = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return out if len(out) == len(names) else names


def kernels(cuobjdump, binary):
    """(arch, mangled name, {REG: n, SHARED: n, LOCAL: n, STACK: n}) per kernel."""
    text = subprocess.run([cuobjdump, "--dump-resource-usage", binary], capture_output=True, text=True, check=True).stdout
    arch, name = None, None
    for line in text.splitlines():
        if m := re.match(r"\s*arch = (sm_\d+)", line):
            arch = m.group(1)
        elif m := re.match(r"\s*Function (\S+):", line):
            name = m.group(1)
        elif name and "REG:" in line:
            usage = {k: int(v) for k, v in re.findall(r"(REG|SHARED|LOCAL|STACK):(\d+)", line)}
            yield arch, name, usage
            name = None


def main():
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        print("cuobjdump not found: skipping the kernel resource check")
        return 77
    found, problems = [], []
    for binary in sys.argv[1:]:
        found += [(binary, *k) for k in kernels(cuobjdump, binary)]
    names = demangle([name for _, _, name, _ in found])
    per_arch = {}
    for (binary, arch, mangled, usage), name in zip(found, names):
        short = name[:160]
        engine = ENGINE_KERNEL in mangled
        row = per_arch.setdefault(arch, {"kernels": 0, "REG": (0, ""), "SHARED": (0, ""), "STACK": (0, "")})
        row["kernels"] += 1
        for key in ("REG", "SHARED", "STACK"):
            if engine and usage.get(key, 0) > row[key][0]:
                row[key] = (usage[key], short)
        if engine and usage["REG"] * MAX_THREADS_PER_BLOCK > REGISTERS_PER_SM:
            problems.append(f"{arch} {short}: {usage['REG']} registers a thread, more than the "
                            f"{REGISTERS_PER_SM // MAX_THREADS_PER_BLOCK} a block of {MAX_THREADS_PER_BLOCK} threads can have")
        if engine and usage.get("LOCAL", 0) > 0:
            problems.append(f"{arch} {short}: {usage['LOCAL']} bytes of local memory")
        if usage.get("SHARED", 0) > STATIC_SHARED_BYTES:
            problems.append(f"{arch} {short}: {usage['SHARED']} bytes of static shared memory, more than "
                            f"{STATIC_SHARED_BYTES}")
    if not found:
        print(f"no GPU kernels in {' '.join(sys.argv[1:])}")
        return 1
    print(f"cuobjdump: {cuobjdump}")
    for arch, row in sorted(per_arch.items()):
        print(f"{arch}: {row['kernels']} kernels; the engine's largest: {row['REG'][0]} registers ({row['REG'][1][:70]}), "
              f"{row['SHARED'][0]} B shared ({row['SHARED'][1][:70]}), {row['STACK'][0]} B stack ({row['STACK'][1][:70]})")
    for p in problems:
        print("over a limit:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
