#!/usr/bin/env bash
# Installs what bertengine needs on Debian 12 from distribution packages.
#   bash samples/install_deps.sh           the main job (samples/quickstart.sh): build the engine
#                                          and its tools, and the quickstart's text corpus
#   bash samples/install_deps.sh --tests   also the test stack (tests/run_all.sh): GoogleTest,
#                                          Python with NumPy/h5py/pytest/PyTorch (the oracle),
#                                          pybind11, meson-python, Go and SWIG for the bindings,
#                                          iproute2 (the two-host test's network namespaces),
#                                          clang with libFuzzer and libomp (tests/fuzz),
#                                          cudnn-frontend's headers from pip where the CUDA
#                                          toolkit is present in /usr/local/cuda, and
#                                          transformers (the Hugging Face oracle) from PyPI,
#                                          ONNX Runtime in a virtual environment (the CPU
#                                          benchmark's inference peer)
#   bash samples/install_deps.sh --bench   the test stack and the CPU benchmark's training peer,
#                                          PyTorch 2.x from PyPI in a virtual environment of its
#                                          own (about 5 GB: its wheels bring CUDA libraries)
set -euo pipefail

packages=(
  meson ninja-build pkg-config g++ ccache
  libdnnl-dev libhdf5-dev zlib1g-dev nlohmann-json3-dev libutf8proc-dev libexpat1-dev libbz2-dev
  libopenmpi-dev openmpi-bin
  python3.11-doc python3-matplotlib
)
tests=0
bench=0
case "${1:-}" in
  "") ;;
  --tests) tests=1 ;;
  --bench) tests=1; bench=1 ;;
  *) echo "usage: $0 [--tests|--bench]" >&2; exit 2 ;;
esac
if ((tests)); then
  packages+=(
    libgtest-dev libgmock-dev libeigen3-dev
    python3 python3-dev python3-venv python3-numpy python3-h5py python3-pytest python3-torch
    libopenblas0-pthread pybind11-dev python3-mesonpy python3-pip swig golang-go iproute2
    clang libclang-rt-14-dev libomp-dev
  )
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# With the CUDA toolkit: cudnn-frontend's headers (a PyPI wheel; the build finds them through
# pip) for the fused-attention path. Pinned to the version the code is built against.
if ((tests)) && [ -x /usr/local/cuda/bin/nvcc ] && ! /usr/bin/python3 -m pip show -q nvidia-cudnn-frontend >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO /usr/bin/python3 -m pip install -q --break-system-packages --no-deps nvidia-cudnn-frontend==1.32.0
fi
# ... and cuobjdump (NVIDIA's wheel, when the toolkit lacks it) for tests/gpu's kernel resource check.
if ((tests)) && [ -x /usr/local/cuda/bin/nvcc ] && [ ! -x /usr/local/cuda/bin/cuobjdump ] &&
   ! /usr/bin/python3 -m pip show -q nvidia-cuda-cuobjdump >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO /usr/bin/python3 -m pip install -q --break-system-packages --no-deps 'nvidia-cuda-cuobjdump==13.*' ||
    echo "warning: cuobjdump did not install; tests/gpu's kernel resource check will skip" >&2
fi

# The Hugging Face oracle (tests/oracle, tests/large: exported folders load into transformers,
# SQuAD post-processing equals its own, fine-tuning tracks its Trainer): transformers < 4.41, the
# last to run on Debian's torch 1.13, and accelerate < 0.30 (the Trainer needs it), into Debian's
# Python. A failure here only warns; those tests then skip.
if ((tests)) && ! /usr/bin/python3 -c "import transformers, accelerate" >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO /usr/bin/python3 -m pip install -q --break-system-packages 'transformers<4.41' 'accelerate<0.30' ||
    echo "warning: transformers did not install; the Hugging Face oracle tests will skip" >&2
fi

# The WikiExtractor oracle (tests/oracle/test_wiki_extract.py, tests/bench/bench_wiki.py compare
# `bert-prep wiki` with it article by article): wikiextractor from PyPI in a virtual environment of
# its own. A failure here only warns; those tests then skip.
if ((tests)); then
  wx_venv="${BERT_WIKIEXTRACTOR_VENV:-$HOME/.cache/bertengine/wikiextractor-venv}"
  if ! "$wx_venv/bin/python3" -c "import wikiextractor" >/dev/null 2>&1; then
    { /usr/bin/python3 -m venv "$wx_venv" && "$wx_venv/bin/python3" -m pip install -q 'wikiextractor>=3.0,<4'; } ||
      echo "warning: wikiextractor did not install; the WikiExtractor oracle tests will skip" >&2
  fi
fi

# Optional, for the tests whose fixtures TensorFlow itself writes (tests/oracle/test_tf_import.py;
# they skip without it, and the engine never needs TensorFlow): tensorflow-cpu for a python3 on
# PATH that is not Debian's (pyenv's), else in a virtual environment of its own, so Debian's
# numpy/torch stay as they are. A failure here only warns. BERT_NO_TENSORFLOW=1 skips it.
if ((tests)) && [ "${BERT_NO_TENSORFLOW:-0}" != 1 ]; then
  tf_python="$(command -v python3 || true)"
  if [ -z "$tf_python" ] || [ "$(readlink -f "$tf_python")" = "$(readlink -f /usr/bin/python3)" ]; then
    tf_venv="${BERT_TF_VENV:-$HOME/.cache/bertengine/tf-venv}"
    [ -x "$tf_venv/bin/python3" ] || /usr/bin/python3 -m venv "$tf_venv" 2>/dev/null || true
    tf_python="$tf_venv/bin/python3"
  fi
  if [ -x "$tf_python" ] && ! "$tf_python" -m pip show -q tensorflow-cpu >/dev/null 2>&1; then
    "$tf_python" -m pip install -q tensorflow-cpu ||
      echo "warning: tensorflow-cpu did not install; the TensorFlow-written fixture tests will skip" >&2
  fi
fi

# The CPU benchmark's peers (tests/bench/bench_cpu.py), each in a virtual environment of its own:
# ONNX Runtime with what its transformer optimizer imports (--tests: CI runs the benchmark's short
# mode), PyTorch 2.x from PyPI (--bench only). A failure here only warns; the benchmark then runs
# without that peer (ONNX Runtime) or with Debian's PyTorch.
venv_with() {  # VENV "MODULE, MODULE..." PACKAGE...: installs the packages unless the modules import
  local venv="$1" modules="$2"
  shift 2
  "$venv/bin/python3" -c "import $modules" >/dev/null 2>&1 && return 0
  { /usr/bin/python3 -m venv "$venv" && "$venv/bin/python3" -m pip install -q "$@"; } ||
    echo "warning: $modules did not install into $venv; the CPU benchmark runs without them" >&2
}
if ((tests)); then
  venv_with "${BERT_ORT_VENV:-$HOME/.cache/bertengine/ort-venv}" "onnxruntime, onnx, threadpoolctl" \
    'onnxruntime>=1.20,<2' onnx numpy sympy packaging coloredlogs threadpoolctl
fi
if ((bench)); then
  venv_with "${BERT_TORCH_VENV:-$HOME/.cache/bertengine/torch-venv}" "torch, h5py, threadpoolctl" 'torch>=2,<3' numpy h5py threadpoolctl
fi
