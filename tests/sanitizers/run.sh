#!/usr/bin/env bash
# The sanitizer stage of the test suite: builds the engine without CUDA under AddressSanitizer
# (with its leak checker) and UndefinedBehaviorSanitizer, and runs the unit (incl. data
# pipeline), C ABI and distributed (mpirun -np 2 and 4) suites. Any memory error, leak or
# undefined behaviour fails the test that hit it; the leak checker is on for the unit and C ABI
# suites. Known leaks of libraries that are not ours are suppressed in lsan.supp beside this file.
# Results: BUILD/meson-logs/testlog-leaks.json and testlog-dist.json.
#
# usage: bash tests/sanitizers/run.sh   (build dir: $BERT_ASAN_BUILD_DIR, default build-asan)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BERT_ASAN_BUILD_DIR:-build-asan}"
if [ ! -d "$BUILD" ]; then
  # -O1 without -g: quick to compile, and ccache hits from any clone (debug info would record the path)
  meson setup "$BUILD" --buildtype=plain -Doptimization=1 -Dcuda=disabled -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcpp_args=-fno-omit-frame-pointer
fi
ninja -C "$BUILD" -j"$(nproc)"
# allocator_may_return_null: an impossible allocation (micro_batch 65536) must reach the engine's
# own BERT_ERR_OUT_OF_MEMORY path, as it does without the sanitizer.
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:halt_on_error=1:detect_stack_use_after_return=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
status=0
meson test -C "$BUILD" --suite unit --suite capi --num-processes 1 --print-errorlogs --timeout-multiplier 4 \
  --logbase testlog-leaks || status=$?
# Under mpirun the leak checker would report Open MPI's plugins, which are unloaded before exit
# (their frames cannot be named, so not suppressed): the distributed suite runs ASan and UBSan
# without it.
ASAN_OPTIONS="${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}" \
  meson test -C "$BUILD" --suite dist --num-processes 1 --print-errorlogs --timeout-multiplier 4 \
  --logbase testlog-dist || status=$?
exit $status
