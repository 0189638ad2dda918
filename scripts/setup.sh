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
  python3-dev python3-venv libomp-dev)
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

# The venv uses Debian's python3 so that the extension module builds against
# the python3-dev headers installed above.
py=/usr/bin/python3
stamp=.venv/.requirements.stamp
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$py" -m venv .venv
fi
if [ ! -f "$stamp" ] || ! cmp -s requirements.txt "$stamp"; then
  echo "setup: installing pinned Python packages (requirements.txt)"
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
  cp requirements.txt "$stamp"
fi

# A second venv with Paddle 2.6.2 (requirements-paddle2.txt): the drop-in is
# tested against both Paddle generations.
stamp2=.venv-paddle2/.requirements.stamp
if [ ! -x .venv-paddle2/bin/python ]; then
  echo "setup: creating .venv-paddle2"
  "$py" -m venv .venv-paddle2
fi
if [ ! -f "$stamp2" ] || ! cmp -s requirements-paddle2.txt "$stamp2"; then
  echo "setup: installing Paddle 2.6.2 into .venv-paddle2 (requirements-paddle2.txt)"
  .venv-paddle2/bin/pip install -q --disable-pip-version-check -r requirements-paddle2.txt
  cp requirements-paddle2.txt "$stamp2"
fi

# `import tiller` from either venv finds the package in python/ (the build
# puts the compiled _tiller module there).
for venv in .venv .venv-paddle2; do
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$root/python" > "$site/tiller.pth"
done
