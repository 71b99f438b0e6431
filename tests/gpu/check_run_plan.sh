#!/usr/bin/env bash
# Proves run_bundle.sh's plan on this machine (no GPU), on an unpacked bundle: what comes back fits
# the GPU machine's limit of 8 files (3 are written: summary.txt, run.log, versions.txt), every
# program has its line in the summary and its header in run.log, the count line is right; a
# program that skips (exit 77) while nvidia-smi sees a GPU (a stand-in nvidia-smi on PATH) is a
# failure; the run's deadline stops before a program it could not finish ("not run", non-zero exit);
# and a machine without xz unpacks the payload with Python's tarfile.
#
# usage: bash tests/gpu/check_run_plan.sh BUNDLE_DIR (packed by pack_bundle.sh, payload unpacked)
set -euo pipefail
RUN="$(cd "$(dirname "$0")" && pwd)/run_bundle.sh"
BUNDLE="$(cd "${1:?usage: check_run_plan.sh BUNDLE_DIR}" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
programs=13  # the lines run_bundle.sh's tests mode gives: 8 programs, fused attention in 5 shards

rc=0; bash "$RUN" "$BUNDLE" "$WORK/plain" tests > /dev/null || rc=$?
[ "$rc" = 0 ] || fail "run_bundle.sh exited $rc on a machine without a GPU: $(cat "$WORK/plain/summary.txt")"
files=$(find "$WORK/plain" -type f | wc -l)
[ "$files" -le 8 ] || fail "$files files written: the GPU machine brings back 8"
[ "$(ls "$WORK/plain" | tr '\n' ' ')" = "run.log summary.txt versions.txt " ] || fail "unexpected files: $(ls "$WORK/plain")"
[ "$(tail -n 1 "$WORK/plain/summary.txt")" = "1 passed, 0 failed, $((programs - 1)) skipped, 0 not run" ] ||
  fail "summary: $(tail -n 1 "$WORK/plain/summary.txt")"
[ "$(grep -c '^===== .* (limit ' "$WORK/plain/run.log")" = "$programs" ] || fail "run.log lacks a header per program"
echo "ok   the plan writes 3 files, a line and a header per program: $(tail -n 1 "$WORK/plain/summary.txt")"

mkdir -p "$WORK/fake_bin"
cat > "$WORK/fake_bin/nvidia-smi" <<'SMI'
#!/bin/sh
case "$1" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-stand-in)" ;;
  --query-gpu=*) echo "NVIDIA H100 80GB HBM3, 81559 MiB, 580.00" ;;
  *) echo "stand-in nvidia-smi" ;;
esac
SMI
chmod +x "$WORK/fake_bin/nvidia-smi"
rc=0; PATH="$WORK/fake_bin:$PATH" bash "$RUN" "$BUNDLE" "$WORK/seen" tests > /dev/null || rc=$?
[ "$rc" != 0 ] || fail "a skip while nvidia-smi sees a GPU passed"
grep -q "cuda_casts: FAILED, skipped (exit 77) though nvidia-smi sees a GPU" "$WORK/seen/summary.txt" ||
  fail "the skip is not named: $(cat "$WORK/seen/summary.txt")"
# A failure shows the program's own last lines, also for a shard whose name holds * [ ] . :
awk '/^fused_attention\[FusedAttention.Bf16/ {quoted = 1; next} quoted && /^    / {print; next} {quoted = 0}' \
  "$WORK/seen/summary.txt" | grep -q '^    no CUDA device' ||
  fail "a shard's failure lacks its last lines: $(cat "$WORK/seen/summary.txt")"
echo "ok   exit 77 with a GPU in sight fails: $(tail -n 1 "$WORK/seen/summary.txt")"

# 14 s leave less than a program's 10 s minimum after the 5 s margin, so no program starts,
# however fast the machine (16 s let every program run where each skipped within a second).
rc=0; DEADLINE_S=14 bash "$RUN" "$BUNDLE" "$WORK/deadline" tests > /dev/null || rc=$?
[ "$rc" != 0 ] || fail "a run cut by its deadline exited 0"
grep -q "probe: not run (the run's 14 s deadline)" "$WORK/deadline/summary.txt" &&
  grep -q "e2e_capi: not run (the run's 14 s deadline)" "$WORK/deadline/summary.txt" ||
  fail "the deadline is not kept: $(cat "$WORK/deadline/summary.txt")"
echo "ok   the deadline stops the plan: $(tail -n 1 "$WORK/deadline/summary.txt")"

mkdir -p "$WORK/copy"
cp -r "$BUNDLE/MANIFEST" "$BUNDLE/scripts" "$BUNDLE/payload.tar.xz" "$WORK/copy/"
rc=0; BERT_NO_XZ=1 bash "$RUN" "$WORK/copy" "$WORK/noxz" tests > /dev/null || rc=$?
[ "$rc" = 0 ] && [ -x "$WORK/copy/bin/gpu_cuda_casts" ] || fail "without xz: exit $rc, $(cat "$WORK/noxz/summary.txt")"
echo "ok   without xz the payload unpacks with Python's tarfile"
