#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs dependencies, builds (with the CUDA backend
# when nvcc is present; its GPU tests skip without a GPU), and runs every suite.
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

# One closing line for CI readers: counts of meson tests by result.
/usr/bin/python3 - "$BUILD/meson-logs/testlog.json" <<'PY'
import json, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0}
for line in open(sys.argv[1]):
    result = json.loads(line)["result"]
    counts[{"OK": "OK", "SKIP": "SKIP", "EXPECTEDFAIL": "OK"}.get(result, "FAIL")] += 1
print(f"{counts['OK']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
PY
exit $status
