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
#     1. tiller_gpu_check ops: every CUDA kernel and dtype against the CPU
#        backend (tests/gpu/op_check.cc states the tolerances);
#     2. BERT-Base (8 x 128) and ResNet-50 (batch 8) inference on cuda:0
#        (first supported, the CPU for the rest) against the CPU alone,
#        within rel 1e-4 of each output's largest value (fp32), with the
#        programs exported here by Paddle and the weights made there from a
#        seed (tiller_gpu_check weights; tests/gpu/model_check.cc).
#   Still to come (issue 43): BERT-small training, CPU + GPU pipelines and
#   replicas, and the benchmark against PyTorch.
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

# The programs (a few hundred KiB; their weights are made on the GPU machine).
models=$build/gpu_models
for preset in bert-base resnet50; do
  if [ ! -f "$models/$preset/model.pdmodel" ]; then
    echo "gpu_check: exporting $preset with Paddle ..."
    GLOG_minloglevel=2 .venv/bin/python -m models.export --preset "$preset" --format legacy \
      --out "$models/$preset" > "$models.$preset.log" 2>&1 ||
      { cat "$models.$preset.log" >&2; exit 1; }
  fi
  mkdir -p "$bundle/models/$preset"
  cp "$models/$preset/model.pdmodel" "$bundle/models/$preset/"
done

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
  check=$here/bin/tiller_gpu_check
  echo "== 1. CUDA kernels against the CPU backend"
  timeout 180 "$check" ops --device cuda:0; echo "exit $?"
  echo "== 2. inference, cuda:0 (+ cpu for the rest) against the CPU, fp32"
  work=$(mktemp -d)
  cp -r "$here/models/." "$work/"
  "$check" weights --model "$work/bert-base/model.pdmodel" --seed 1
  timeout 120 "$check" model --model "$work/bert-base/model.pdmodel" \
    --shape input_ids=8x128 --shape token_type_ids=8x128 \
    --ids input_ids=30522 --ids token_type_ids=2 --devices cuda:0,cpu; echo "exit $?"
  "$check" weights --model "$work/resnet50/model.pdmodel" --seed 1
  timeout 120 "$check" model --model "$work/resnet50/model.pdmodel" \
    --shape x=8x3x224x224 --devices cuda:0,cpu; echo "exit $?"
  rm -rf "$work"
} 2>&1 | tee "$log"
EOF
chmod +x "$bundle/run.sh"

size=$(du -sm "$bundle" | cut -f1)
echo "gpu_check: $bundle is ${size} MiB ($(ls "$bundle/lib" | wc -l) libraries)"
if [ "$size" -ge 64 ]; then
  echo "gpu_check: over the 64 MiB a GPU machine takes" >&2
  exit 1
fi
