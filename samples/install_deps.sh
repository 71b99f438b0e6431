#!/usr/bin/env bash
# Installs everything bertengine needs to build, test and run its samples on Debian 12
# (distribution packages, plus cudnn-frontend's headers from pip where the CUDA toolkit is present
# in /usr/local/cuda).
set -euo pipefail

packages=(
  meson ninja-build pkg-config g++ ccache
  libeigen3-dev libhdf5-dev nlohmann-json3-dev libutf8proc-dev libgtest-dev libgmock-dev
  libopenmpi-dev openmpi-bin
  python3 python3-dev python3-numpy python3-h5py python3-pytest python3-torch libopenblas0-pthread
  pybind11-dev python3-mesonpy python3-pip swig golang-go
  python3.11-doc python3-matplotlib python3-venv
)

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
if [ -x /usr/local/cuda/bin/nvcc ] && ! /usr/bin/python3 -m pip show -q nvidia-cudnn-frontend >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO /usr/bin/python3 -m pip install -q --break-system-packages --no-deps nvidia-cudnn-frontend==1.32.0
fi
