#!/usr/bin/env bash
# Launches samples/python/pretrain_dist.py as two ranks with Open MPI. The environment carries
# the run's settings (BERT_SAMPLE_STEPS, BERT_SAMPLE_OUT) and the library and package paths
# (BERT_BUILD_DIR: a bertengine build directory, default ./build).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${BERT_BUILD_DIR:-$root/build}" && pwd)"
export BERT_SAMPLE_STEPS="${BERT_SAMPLE_STEPS:-40}"
export BERT_SAMPLE_OUT="${BERT_SAMPLE_OUT:-$PWD/pretrain_out}"
export LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
export BERTENGINE_NATIVE_DIR="$build/tests/bindings"
extra=()
[ "$(id -u)" -eq 0 ] && extra+=(--allow-run-as-root)
exec mpirun -np 2 --oversubscribe "${extra[@]}" \
  -x BERT_SAMPLE_STEPS -x BERT_SAMPLE_OUT -x LD_LIBRARY_PATH -x PYTHONPATH -x BERTENGINE_NATIVE_DIR \
  /usr/bin/python3 "$here/pretrain_dist.py" "$@"
