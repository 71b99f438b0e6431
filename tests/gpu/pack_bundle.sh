#!/usr/bin/env bash
# Packs what the GPU suite and the benchmarks need on a GPU machine that has none of our Debian
# dependencies: the GPU test programs, bert-bench, bench_op_profile, libbert, and every shared
# library they load (found with ldd) except glibc/libstdc++ and CUDA's own libraries, which the
# GPU machine provides (NVIDIA's CUDA 13 pip packages; run_bundle.sh finds them). The result is
# one folder, carried to the machine as it is (see tests/gpu/README.md); the programs and libraries
# travel as payload.tar.xz (oneDNN alone is 40 MB, each program carries the engine: 5 MB; a carry
# is at most 64 MiB), which run_bundle.sh unpacks to bin/ and lib/ before the first run.
#
# usage: bash tests/gpu/pack_bundle.sh [BUILD_DIR] [OUT_DIR]   (defaults: build, gpu_bundle)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build}"
OUT="${2:-gpu_bundle}"

programs=(
  tests/gpu/gpu_cuda_ops_vs_cpu tests/gpu/gpu_cuda_casts tests/gpu/gpu_weight_mirror
  tests/gpu/gpu_fused_attention tests/gpu/gpu_cuda_graphs tests/gpu/gpu_e2e_capi tests/gpu/gpu_cuda_without_device
  tests/gpu/gpu_probe tests/dist/dist_nccl_gpu src/tools/bert-bench tests/unit/bench_op_profile
)
for p in "${programs[@]}"; do
  [ -x "$BUILD/$p" ] || { echo "pack_bundle: $BUILD/$p is missing: build with CUDA first (meson setup $BUILD -Dcuda=enabled && ninja -C $BUILD)" >&2; exit 2; }
done

# Provided on the GPU machine: the C runtime and C++ runtime (its own, newer), and CUDA's libraries.
provided='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec\.so|libpthread|libdl\.so|librt\.so|libresolv|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvrtc|libnvJitLink)'

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/scripts"
for p in "${programs[@]}"; do
  cp "$BUILD/$p" "$OUT/bin/"
  strip --strip-unneeded "$OUT/bin/$(basename "$p")"
done
# libbert and every non-provided library any of the programs (or libbert) loads, as resolved in
# the build tree (the programs find libbert there through their RUNPATH).
while read -r name path; do
  [[ "$name" =~ $provided ]] && continue
  [ -n "$path" ] || { echo "pack_bundle: $name is not found by ldd" >&2; exit 1; }
  cp -L "$path" "$OUT/lib/$name"
done < <(for p in "${programs[@]}"; do ldd "$BUILD/$p"; done | awk '$2 == "=>" {print $1, ($3 == "not" ? "" : $3)}' | sort -u)
strip --strip-unneeded "$OUT"/lib/*.so* 2>/dev/null || true
tar -C "$OUT" -cf - bin lib | xz -6 -T2 > "$OUT/payload.tar.xz"
rm -rf "$OUT/bin" "$OUT/lib"
cp tests/bench/bench_gpu.sh tests/gpu/run_bundle.sh "$OUT/scripts/"
# Real sequences for bench_gpu.sh's phase-2 rows: wikitext-2 validation (../shared/data) as
# seq-512 shards and their length bins (about 2 MB); left out, with a line, without ../shared.
SHARED=../shared/data
if [ -f "$SHARED/wikitext2-valid.txt" ]; then
  "$BUILD/src/tools/bert-prep" shards --vocab "$SHARED/bert-uncased-vocab.txt" --output "$OUT/data/real512" \
    --max-seq-length 512 --max-predictions 80 --dupe-factor 1 --shards 1 --eval-fraction 0 \
    "$SHARED/wikitext2-valid.txt" > /dev/null
  "$BUILD/src/tools/bert-prep" bins --output "$OUT/data/bins512" "$OUT/data/real512/train"/*.hdf5 > /dev/null
else
  echo "pack_bundle: no $SHARED/wikitext2-valid.txt: the bundle has no real data (bench_gpu.sh skips its rows)"
fi
{
  echo "built $(date -u +%FT%TZ) from $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -n 1)"
  echo "needs (CUDA, from the GPU machine):"
  for p in "${programs[@]}"; do ldd "$BUILD/$p"; done | awk '{print $1}' | grep -E '^(libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvrtc)' | sort -u | sed 's/^/  /'
} > "$OUT/MANIFEST"
echo "packed $OUT ($(du -sh "$OUT" | cut -f1))"
