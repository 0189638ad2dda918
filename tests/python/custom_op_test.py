"""Custom ops (include/tiller/custom_op.h): builds the example library
(examples/custom_op/my_add_relu.cc) with g++ at test time, loads it into the
running Tiller, and runs a legacy program containing the op type
"my_add_relu" (written with legacy_writer: Paddle has no such op) against a
numpy reference. Also checks the print op's stderr log."""
from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import legacy_writer
import tiller.inference as ti

REPO = Path(__file__).resolve().parents[2]


def _libtiller() -> ctypes.CDLL:
    """The libtiller.so this process already loaded (through _tiller)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1]
        if path.endswith("/libtiller.so") or "/libtiller.so." in path:
            return ctypes.CDLL(path)
    pytest.skip("libtiller.so is not loaded as a shared library")


def _load(path: Path) -> tuple[int, str]:
    fn = _libtiller().TillerLoadCustomOpLibrary
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int
    err = ctypes.create_string_buffer(1024)
    rc = fn(str(path).encode(), err, len(err))
    return rc, err.value.decode()


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("g++ not available")
    out = tmp_path_factory.mktemp("custom_op") / "libmy_add_relu.so"
    subprocess.run(["g++", "-std=c++17", "-O2", "-shared", "-fPIC", f"-I{REPO / 'include'}",
                    str(REPO / "examples/custom_op/my_add_relu.cc"), "-o", str(out)], check=True)
    rc, err = _load(out)
    assert rc == 0, err
    return out


def _program(tmp_path: Path, x, y, attrs):
    model, params = legacy_writer.write_program(
        tmp_path, "my_add_relu", {"x": x, "y": y}, {}, {"X": ["x"], "Y": ["y"]},
        {"Out": (["out"], np.float32, x.shape)}, attrs)
    return ti.create_predictor(ti.Config(str(model), ""))


@pytest.mark.parametrize("shape,alpha", [((3, 7), 0.0), ((2, 1, 5), 0.25)])
def test_custom_op_matches_numpy(library, tmp_path, shape, alpha):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal(shape).astype(np.float32)
    pred = _program(tmp_path, x, y, {"alpha": alpha})
    (out,) = pred.run([x, y])
    s = x + y
    np.testing.assert_array_equal(out, np.where(s > 0, s, np.float32(alpha) * s))


def test_loading_twice_is_a_noop(library):
    assert _load(library) == (0, "")


def test_bad_library_is_reported(tmp_path):
    rc, err = _load(tmp_path / "missing.so")
    assert rc != 0 and "missing.so" in err


def test_infer_error_names_the_op(library, tmp_path):
    x = np.zeros((2, 3), np.float32)
    y = np.zeros((3, 2), np.float32)
    with pytest.raises(Exception, match="my_add_relu"):
        pred = _program(tmp_path, x, y, {})
        pred.run([x, y])


def test_print_logs_to_stderr(tmp_path, capfd):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    model, _ = legacy_writer.write_program(
        tmp_path, "print", {"x": x}, {}, {"In": ["x"]}, {"Out": (["out"], np.float32, x.shape)},
        {"message": "hello", "summarize": 4, "first_n": -1, "print_phase": "BOTH",
         "is_forward": True, "print_tensor_name": True, "print_tensor_type": True,
         "print_tensor_shape": True})
    pred = ti.create_predictor(ti.Config(str(model), ""))
    (out,) = pred.run([x])
    np.testing.assert_array_equal(out, x)
    err = capfd.readouterr().err
    assert "hello" in err and "Variable: x" in err and "shape: [2, 3]" in err
    assert "data: [0, 1, 2, 3, ...]" in err


def test_python_api_loads_libraries(library, tmp_path):
    # The public Python entry points (the ctypes route above is for C users).
    ti.load_custom_op_library(str(library))  # already loaded: a no-op
    config = ti.Config()
    config.load_custom_op_library(str(library))
    with pytest.raises(ti.TillerError, match="nope.so"):
        ti.load_custom_op_library(str(tmp_path / "nope.so"))
