#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs dependencies, builds (with the CUDA backend
# when nvcc is present; its GPU tests skip without a GPU), runs every suite, then the unit, C ABI
# and distributed suites again under AddressSanitizer + UBSan (BERT_SKIP_SANITIZERS=1 skips that),
# then each libFuzzer target briefly (tests/fuzz/run.sh; BERT_SKIP_FUZZ=1 skips that).
set -euo pipefail
cd "$(dirname "$0")/.."

bash samples/install_deps.sh --tests
export PATH="/usr/local/cuda/bin:$PATH"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.ccache}"
BUILD="${BERT_BUILD_DIR:-build}"

if [ ! -d "$BUILD" ]; then
  meson setup "$BUILD" --buildtype=release
fi
ninja -C "$BUILD" -j"$(nproc)"
status=0
meson test -C "$BUILD" --print-errorlogs --num-processes 1 || status=$?
logs=("$BUILD/meson-logs/testlog.json")

# The unit, C ABI and distributed suites again under AddressSanitizer + UBSan (a CPU-only build).
if [ "${BERT_SKIP_SANITIZERS:-0}" != 1 ]; then
  export BERT_ASAN_BUILD_DIR="${BERT_ASAN_BUILD_DIR:-build-asan}"
  bash tests/sanitizers/run.sh || status=$?
  logs+=("$BERT_ASAN_BUILD_DIR/meson-logs/testlog-leaks.json" "$BERT_ASAN_BUILD_DIR/meson-logs/testlog-dist.json")
fi

# The libFuzzer targets of every parser of outside input, each for a short bounded time
# (BERT_FUZZ_SECONDS, default 20; BERT_SKIP_FUZZ=1 skips the stage).
if [ "${BERT_SKIP_FUZZ:-0}" != 1 ]; then
  export BERT_FUZZ_BUILD_DIR="${BERT_FUZZ_BUILD_DIR:-build-fuzz}"
  bash tests/fuzz/run.sh || status=$?
  logs+=("$BERT_FUZZ_BUILD_DIR/meson-logs/testlog-fuzz.json")
fi

# One closing line for CI readers: counts of meson tests by result, over every stage.
/usr/bin/python3 - "${logs[@]}" <<'PY'
import json, os, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0}
for path in sys.argv[1:]:
    if not os.path.exists(path):
        counts["FAIL"] += 1  # a stage that did not get as far as running its tests
        continue
    for line in open(path):
        result = json.loads(line)["result"]
        counts[{"OK": "OK", "SKIP": "SKIP", "EXPECTEDFAIL": "OK"}.get(result, "FAIL")] += 1
print(f"{counts['OK']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
PY
exit $status
