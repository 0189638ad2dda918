#!/usr/bin/env bash
# Idempotent: .venv-torch with requirements-torch.txt, for the training
# benchmark's PyTorch eager comparison (bench/torch_bert.py). Separate from
# .venv so that PyTorch's OpenMP runtime and Paddle's never share a process.
set -euo pipefail
cd "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/venv.sh
source scripts/venv.sh
ensure_venv .venv-torch requirements-torch.txt "PyTorch (benchmark only, ~3 GB with its CUDA wheels)"
