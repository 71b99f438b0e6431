#!/usr/bin/env bash
# Installs everything bertengine needs to build, test and run its samples on Debian 12
# (distribution packages only; the CUDA toolkit, when present, is found in /usr/local/cuda).
set -euo pipefail

packages=(
  meson ninja-build pkg-config g++ ccache
  libeigen3-dev libhdf5-dev nlohmann-json3-dev libutf8proc-dev libgtest-dev libgmock-dev
  libopenmpi-dev openmpi-bin
  python3 python3-dev python3-numpy python3-h5py python3-pytest python3-torch libopenblas0-pthread
  pybind11-dev python3-mesonpy python3-pip swig golang-go
  python3.11-doc
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
