"""The CUDA backend from the user's side where there is no GPU (CI): naming a
cuda device gives a clear error from the CLI and from Python, never a crash
or a silent CPU run; a build without the backend says so; the GPU machine's
bundle (scripts/gpu_check.sh) builds within the device tool's 64 MiB. What
the kernels compute is checked on a GPU (tests/gpu/op_check.cc)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tiller.inference as ti

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TILLER_BUILD_DIR", REPO / "build"))
TILLER = BUILD / "bin" / "tiller"
HAS_BACKEND = (BUILD / "lib" / "libtiller_cuda.so").exists()
HAS_GPU = shutil.which("nvidia-smi") is not None and subprocess.run(
    ["nvidia-smi", "-L"], capture_output=True).returncode == 0

needs_backend = pytest.mark.skipif(not HAS_BACKEND, reason="built without the CUDA backend (no nvcc)")
no_gpu = pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")


def run(*args, env=None):
    return subprocess.run([str(TILLER), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture(scope="module")
def bert(zoo):
    return zoo.export("bert-tiny", "legacy")


@needs_backend
@no_gpu
def test_cli_names_the_missing_gpu():
    res = run("passes", "--devices", "cuda")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "cuda: no usable GPU" in res.stderr
    assert "nvidia-smi" in res.stderr  # what to check


@needs_backend
@no_gpu
def test_cli_bench_on_cuda_without_gpu_exits_2(bert):
    res = run("bench", bert.model_file, "--devices", "cuda:0,cpu", "--placement",
              "first_supported", "--batch", "1", "--seq-len", "8", "--iters", "1")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "cuda:0: no usable GPU" in res.stderr


@needs_backend
@no_gpu
def test_predictor_on_cuda_without_gpu_raises(bert):
    config = ti.Config(bert.model_file, bert.params_file)
    config.set_devices(["cuda:0", "cpu"])
    with pytest.raises(ti.TillerError, match="cuda:0: no usable GPU"):
        ti.create_predictor(config)


def test_a_build_without_the_backend_says_so():
    env = dict(os.environ, TILLER_CUDA_LIBRARY="/nonexistent/libtiller_cuda.so")
    res = run("passes", "--devices", "cpu,cuda", env=env)
    assert res.returncode == 2
    assert "built without the CUDA backend" in res.stderr
    assert "/nonexistent/libtiller_cuda.so is missing" in res.stderr


def test_bad_device_names_are_refused():
    res = run("passes", "--devices", "cuda:first")
    assert res.returncode == 2
    assert "expected cuda:N" in res.stderr or "built without the CUDA backend" in res.stderr
    res = run("passes", "--devices", "cpu,cuda:")
    assert res.returncode == 2
    assert "device 'cuda:'" in res.stderr


@needs_backend
@no_gpu
def test_gpu_check_stops_at_once_without_a_gpu():
    res = subprocess.run([str(BUILD / "bin" / "tiller_gpu_check")], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2
    assert "no usable GPU" in res.stderr


def test_seeded_weights_run_a_program_exported_without_them(bert, tmp_path):
    """tiller_gpu_check weights + model, as the GPU machine runs them (its
    programs travel without weights): here on the test backend's devices,
    which must match the CPU bit for bit."""
    check = BUILD / "bin" / "tiller_gpu_check"
    if not check.exists():
        pytest.skip("built without the CUDA backend")
    program = tmp_path / "model.pdmodel"
    program.write_bytes(Path(bert.model_file).read_bytes())
    res = subprocess.run([str(check), "weights", "--model", str(program), "--seed", "3"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "model.pdiparams").stat().st_size > 0
    env = dict(os.environ, TILLER_BACKENDS=str(BUILD / "lib" / "libtiller_test_backend.so"))
    res = subprocess.run([str(check), "model", "--model", str(program), "--shape", "input_ids=2x16",
                          "--shape", "token_type_ids=2x16", "--ids", "input_ids=100", "--ids",
                          "token_type_ids=2", "--devices", "test,cpu", "--threads", "1", "--runs",
                          "1", "--rel", "0"], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("): ok") == 2 and "FAIL" not in res.stdout  # both outputs


@needs_backend
def test_gpu_bundle_fits_the_device_tool(tmp_path):
    """scripts/gpu_check.sh bundle: what a GPU machine is lent, under 64 MiB."""
    env = dict(os.environ, TILLER_BUILD_DIR=str(BUILD))
    res = subprocess.run(["bash", str(REPO / "scripts" / "gpu_check.sh"), "bundle"],
                         capture_output=True, text=True, timeout=1200, env=env, cwd=REPO)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    bundle = BUILD / "gpu_bundle"
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file())
    assert size < 64 << 20, f"{size / 2**20:.1f} MiB"
    for name in ("run.sh", "bin/tiller_gpu_check", "lib/libtiller.so", "lib/libtiller_cuda.so",
                 "models/bert-base/model.pdmodel", "models/resnet50/model.pdmodel"):
        assert (bundle / name).exists(), name
    # Every library the check binary needs is in the bundle or the CUDA
    # toolkit's, which the GPU machine has.
    ldd = subprocess.run(["ldd", str(bundle / "bin" / "tiller_gpu_check")], capture_output=True,
                         text=True, env=dict(os.environ, LD_LIBRARY_PATH=str(bundle / "lib"))).stdout
    assert "not found" not in ldd, ldd
    assert np.all([str(bundle / "lib") in line for line in ldd.splitlines()
                   if "libtiller" in line or "libdnnl" in line])


@needs_backend
def test_ops_lists_the_cuda_kernels_per_dtype():
    """`tiller ops --backend cuda`: which IR ops run on the GPU, in which
    dtypes (loads the backend; no GPU needed)."""
    res = run("ops", "--backend", "cuda")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    by_op = {line.split()[0]: line for line in lines[1:-1] if not line.startswith(" ")}
    assert "T, T -> T (T: float32, float16, bfloat16)" in by_op["matmul"]
    assert "float32" in by_op["layer_norm"] and "float16" not in by_op["layer_norm"]
    assert "conv2d" not in by_op  # runs on the CPU for now
    assert lines[-1].startswith(f"{len(by_op)} IR ops with cuda kernels")


def test_ops_for_an_unknown_backend_names_the_registered_ones():
    res = run("ops", "--backend", "nope")
    assert res.returncode == 2
    assert "no backend 'nope' (registered: cpu" in res.stderr
