#!/usr/bin/env bash
# The CUDA backend's checks on a lent GPU machine (issue 43).
#
# Here (no GPU needed):   scripts/gpu_check.sh bundle
#   builds Tiller with the CUDA backend and writes build/gpu_bundle/: the
#   check binaries, libtiller*.so and the non-system libraries they load
#   (oneDNN, protobuf, fmt, ...), and run.sh. It stays under the device
#   tool's 64 MiB: the CUDA libraries themselves (cuBLASLt alone is hundreds
#   of MiB) are the GPU machine's, which has the CUDA toolkit.
# There:                  bash build/gpu_bundle/run.sh   (with $OUT set)
#   prints the GPU, the driver, whether every library resolves, then runs
#   each check under a time limit and keeps its output in $OUT/gpu_check.txt:
#     1. tiller_gpu_check: every CUDA kernel and dtype against the CPU
#        backend (tests/gpu/op_check.cc states the tolerances).
#   Still to come (issue 43): BERT-Base / ResNet-50 inference against the
#   CPU, BERT-small training, CPU + GPU pipelines and replicas, and the
#   benchmark against PyTorch.
#
# With the device tool: run(command="bash build/gpu_bundle/run.sh",
#   carry=["build/gpu_bundle"], timeout_s=540).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-bundle}
[ "$mode" = bundle ] || { echo "usage: scripts/gpu_check.sh [bundle]" >&2; exit 2; }

build=${TILLER_BUILD_DIR:-build}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILLER_CUDA=ON
fi
grep -q '^TILLER_CUDA:STRING=OFF' "$build/CMakeCache.txt" &&
  cmake "$build" -DTILLER_CUDA=ON
ninja -C "$build" tiller_gpu_check tiller_cuda_backend tiller_cli
[ -f "$build/lib/libtiller_cuda.so" ] || {
  echo "gpu_check: $build/lib/libtiller_cuda.so was not built (is nvcc installed?)" >&2
  exit 1
}

bundle=$build/gpu_bundle
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$build/bin/tiller_gpu_check" "$bundle/bin/"
[ -f "$build/bin/tiller" ] && cp "$build/bin/tiller" "$bundle/bin/"
cp "$build"/lib/libtiller.so "$build"/lib/libtiller_cuda.so "$bundle/lib/"

# The libraries they load that a bare machine may lack: everything ldd
# resolves outside the C runtime and the CUDA toolkit.
system='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s\.|libstdc\+\+\.|libcuda\.|libcudart\.|libcublas|libcublasLt\.)'
for f in "$bundle"/bin/* "$bundle"/lib/libtiller*.so; do
  ldd "$f" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $system ]] && continue
  [[ $name == libtiller* ]] && continue
  cp -L "$path" "$bundle/lib/$name"
done

cat > "$bundle/run.sh" <<'EOF'
#!/usr/bin/env bash
# On the GPU machine: the checks of scripts/gpu_check.sh, output in $OUT.
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib:${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64"
log="$out/gpu_check.txt"
{
  echo "== machine"; date -u; uname -m
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -5
  nvcc --version 2>/dev/null | tail -1
  echo "== libraries (not found = missing on this machine)"
  ldd "$here/lib/libtiller_cuda.so" | grep -E 'not found|cuda|cublas'
  echo "== 1. CUDA kernels against the CPU backend"
  timeout 240 "$here/bin/tiller_gpu_check" --device cuda:0; echo "exit $?"
} 2>&1 | tee "$log"
EOF
chmod +x "$bundle/run.sh"

size=$(du -sm "$bundle" | cut -f1)
echo "gpu_check: $bundle is ${size} MiB ($(ls "$bundle/lib" | wc -l) libraries)"
if [ "$size" -ge 64 ]; then
  echo "gpu_check: over the 64 MiB a GPU machine takes" >&2
  exit 1
fi
