#!/usr/bin/env bash
# Installs everything Tiller needs on a Debian 12 machine, idempotently:
# Debian packages (toolchain, protobuf, oneDNN, test libraries) and a .venv
# with the pinned Python packages used as references (Paddle, ONNX Runtime).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

apt_pkgs=(build-essential cmake ninja-build ccache pkg-config
  libprotobuf-dev protobuf-compiler libdnnl-dev nlohmann-json3-dev
  libcli11-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3-dev python3-venv libomp-dev openmpi-bin libopenmpi-dev
  qemu-user)  # qemu-x86_64 -cpu Haswell: the wheel on an AVX2-only CPU (packaging_test)
# `make fuzz` (TILLER_SETUP_FUZZ=1): clang with its libFuzzer runtime.
if [ "${TILLER_SETUP_FUZZ:-0}" = 1 ]; then apt_pkgs+=(clang); fi
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# shellcheck source=scripts/venv.sh
source scripts/venv.sh
ensure_venv .venv requirements.txt "the pinned Python packages"
# A second venv with Paddle 2.6.2: the drop-in is tested against both Paddle
# generations.
ensure_venv .venv-paddle2 requirements-paddle2.txt "Paddle 2.6.2"

# `import tiller` from either venv finds the package in python/ (the build
# puts the compiled _tiller module there).
for venv in .venv .venv-paddle2; do
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$root/python" > "$site/tiller.pth"
done
