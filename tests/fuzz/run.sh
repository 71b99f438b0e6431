#!/usr/bin/env bash
# The fuzzing stage: builds the libFuzzer targets of tests/fuzz with clang under AddressSanitizer +
# UndefinedBehaviorSanitizer (the engine's core instrumented for coverage, no CUDA, no MPI) and
# runs each for BERT_FUZZ_SECONDS (default 20) seconds. Results: BUILD/meson-logs/testlog-fuzz.json;
# each test's log ends with libFuzzer's stats (stat::number_of_executed_units, coverage "cov:").
#
# usage: bash tests/fuzz/run.sh   (build dir: $BERT_FUZZ_BUILD_DIR, default build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BERT_FUZZ_BUILD_DIR:-build-fuzz}"
if [ ! -d "$BUILD" ]; then
  CC=clang CXX=clang++ meson setup "$BUILD" --buildtype=plain -Doptimization=1 -Dtests=false -Dfuzz=true \
    -Dcuda=disabled -Dmpi=disabled -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcpp_args="-fsanitize=fuzzer-no-link -fno-omit-frame-pointer"
fi
# Only the targets (not libbert.so or the tools): their names from the build's target list.
ninja -C "$BUILD" -j"$(nproc)" $(ninja -C "$BUILD" -t targets all | sed -n 's|^\(tests/fuzz/fuzz_[a-z_]*\): .*|\1|p')
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:halt_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
meson test -C "$BUILD" --suite fuzz --num-processes 1 --print-errorlogs --logbase testlog-fuzz
