#!/usr/bin/env bash
# Installs what bertengine needs on Debian 12 from distribution packages.
#   bash samples/install_deps.sh           the main job (samples/quickstart.sh): build the engine
#                                          and its tools, and the quickstart's text corpus
#   bash samples/install_deps.sh --tests   also the test stack (tests/run_all.sh): GoogleTest,
#                                          Python with NumPy/h5py/pytest/PyTorch (the oracle),
#                                          pybind11, meson-python, Go and SWIG for the bindings,
#                                          and cudnn-frontend's headers from pip where the CUDA
#                                          toolkit is present in /usr/local/cuda
set -euo pipefail

packages=(
  meson ninja-build pkg-config g++ ccache
  libeigen3-dev libhdf5-dev zlib1g-dev nlohmann-json3-dev libutf8proc-dev
  libopenmpi-dev openmpi-bin
  python3.11-doc
)
tests=0
case "${1:-}" in
  "") ;;
  --tests) tests=1 ;;
  *) echo "usage: $0 [--tests]" >&2; exit 2 ;;
esac
if ((tests)); then
  packages+=(
    libgtest-dev libgmock-dev
    python3 python3-dev python3-venv python3-numpy python3-h5py python3-pytest python3-torch
    libopenblas0-pthread pybind11-dev python3-mesonpy python3-pip swig golang-go
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
