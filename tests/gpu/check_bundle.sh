#!/usr/bin/env bash
# Proves the GPU bundle on a machine without a GPU: packs it (pack_bundle.sh), checks it fits
# the 64 MiB a GPU machine accepts, and runs its programs in a chroot that holds nothing but the
# C/C++ runtime, the bundle and CUDA's libraries (bind-mounted, as the GPU machine provides them
# from NVIDIA's packages) — so no Debian -dev package or other library of this machine is on the
# path. There the GPU programs must skip (exit 77, "no CUDA device") and the CPU runs of bert-bench
# (on the bundle's real sequences too) and bench_op_profile must work. Exits 77 itself where it cannot chroot (not root).
#
# usage: bash tests/gpu/check_bundle.sh BUILD_DIR
set -euo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(cd "${1:?usage: check_bundle.sh BUILD_DIR}" && pwd)"
BUNDLE="$BUILD/gpu_bundle"
ROOT="$BUILD/gpu_bundle_root"
CUDA_LIBS="${CUDA_LIBS:-/usr/local/cuda/lib64}"

if [ "$(id -u)" != 0 ]; then echo "not root: cannot chroot, skipping"; exit 77; fi
bash "$SRC/tests/gpu/pack_bundle.sh" "$BUILD" "$BUNDLE"
size_mib=$(du -sm "$BUNDLE" | cut -f1)
echo "bundle: ${size_mib} MiB"
[ "$size_mib" -le 64 ] || { echo "FAIL: the bundle is ${size_mib} MiB, over the 64 MiB a GPU machine takes" >&2; exit 1; }
tar -C "$BUNDLE" -xJf "$BUNDLE/payload.tar.xz"  # as run_bundle.sh does on the GPU machine

cleanup() {
  umount "$ROOT/bundle" 2>/dev/null || true
  umount "$ROOT/cuda" 2>/dev/null || true
  rm -rf "$ROOT"
}
trap cleanup EXIT
cleanup
mkdir -p "$ROOT/lib64" "$ROOT/lib/x86_64-linux-gnu" "$ROOT/bundle" "$ROOT/cuda" "$ROOT/tmp"
for lib in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libmvec.so.1 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2 libstdc++.so.6 libgcc_s.so.1; do
  cp -L "/lib/x86_64-linux-gnu/$lib" "$ROOT/lib/x86_64-linux-gnu/"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$ROOT/lib64/"
if ! mount --bind "$BUNDLE" "$ROOT/bundle" || ! mount --bind "$CUDA_LIBS" "$ROOT/cuda"; then
  echo "cannot bind-mount here, skipping"
  exit 77
fi

in_root() {  # program and arguments, run inside the chroot with only the bundle and CUDA on the path
  chroot "$ROOT" /lib64/ld-linux-x86-64.so.2 --library-path /bundle/lib:/cuda "$@"
}
failures=0
for program in gpu_probe gpu_cuda_ops_vs_cpu gpu_cuda_casts gpu_weight_mirror gpu_fused_attention gpu_cuda_graphs gpu_e2e_capi dist_nccl_gpu; do
  rc=0
  out=$(in_root "/bundle/bin/$program" 2>&1) || rc=$?
  if [ "$rc" = 77 ]; then
    echo "ok   $program skips: $out"
  else
    echo "FAIL $program exited $rc (expected 77, a clean skip): $out"
    failures=$((failures + 1))
  fi
done
runs=("bert-bench --model bert-tiny --batch 2 --seq 32 --steps 1"
      "bench_op_profile --model bert-tiny --batch 2 --seq 32 --steps 1")
# The real sequences bench_gpu.sh reads (packed with ../shared present), read as it reads them.
[ -d "$BUNDLE/data/bins512" ] &&
  runs+=("bert-bench --model bert-tiny --batch 2 --seq 512 --steps 1 --unpad 1 --data /bundle/data/bins512 --length-bins 1")
for run in "${runs[@]}"; do
  read -r program args <<< "$run"
  # shellcheck disable=SC2086
  if out=$(cd "$ROOT" && in_root "/bundle/bin/$program" $args 2>&1); then
    echo "ok   $program runs on the CPU: $(echo "$out" | tail -n 1 | cut -c1-160)"
  else
    echo "FAIL $program: $out"
    failures=$((failures + 1))
  fi
done
[ "$failures" = 0 ] || exit 1
# The run plan on this bundle: what comes back, deadlines, a GPU in sight, no xz.
bash "$SRC/tests/gpu/check_run_plan.sh" "$BUNDLE"
