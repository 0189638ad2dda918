"""The `tiller` command: info, run, bench, ops, and its errors (exit code 2
with the file / tensor named)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from models import export

REPO = Path(__file__).resolve().parents[2]
TILLER = Path(os.environ.get("TILLER_BUILD_DIR", REPO / "build")) / "bin" / "tiller"


def tiller(*args, check=True):
    res = subprocess.run([str(TILLER), *map(str, args)], capture_output=True, text=True, timeout=300)
    if check:
        assert res.returncode == 0, res.stderr
    return res


@pytest.fixture(scope="module")
def bert(zoo):
    return zoo.export("bert-tiny", "legacy")


def test_info(bert):
    out = tiller("info", bert.model_file, "--shape", "input_ids=2x16", "--shape", "token_type_ids=2x16").stdout
    assert "input_ids" in out and "int64" in out and "[-1, -1]" in out
    assert "matmul_v2" in out and "layer_norm" in out
    assert "planned activation memory" in out
    assert "input_ids=[2, 16]" in out


def test_run_writes_outputs_matching_paddle(bert, tmp_path):
    inputs = export.make_inputs("bert-tiny", batch=2, seq_len=12, seed=4)
    args = []
    for name, arr in inputs.items():
        np.save(tmp_path / f"{name}.npy", arr)
        args += ["--input", f"{name}={tmp_path / (name + '.npy')}"]
    tiller("run", bert.model_file, *args, "--output-dir", tmp_path / "out")
    ref = export.paddle_infer(bert.dir, inputs)
    for name, r in ref.items():
        got = np.load(tmp_path / "out" / f"{name}.npy")
        np.testing.assert_allclose(got, r, atol=1e-4, rtol=1e-4)


def test_bench(bert):
    out = tiller("bench", bert.model_file, "--batch", 2, "--seq-len", 16, "--iters", 3, "--profile").stdout
    assert "latency: median" in out
    assert "throughput" in out
    assert "linear" in out  # the profile lists fused linear layers


def test_ops_lists_the_translators():
    out = tiller("ops").stdout
    for op in ("matmul_v2", "layer_norm", "conv2d", "lookup_table_v2", "softmax"):
        assert op in out


def _ops_table(half=None):
    """`tiller ops` rows as {paddle op: (pir names, ir ops, dtypes)}; `half`
    (a dict) receives each row's half-precision column."""
    lines = tiller("ops").stdout.splitlines()
    assert lines[0].split()[-5:] == ["op(s)", "dtypes", "half", "precision", "notes"], lines[0]
    start, end = lines[0].index("half precision"), lines[0].index("notes")
    rows = {}
    for line in lines[1:-1]:
        paddle_op, pir, ir_ops, dtypes = line.split()[:4]
        rows[paddle_op] = (pir, ir_ops.split(","), dtypes)
        if half is not None:
            half[paddle_op] = line[start:end].strip()
    assert lines[-1] == f"{len(rows)} Paddle op types"
    return rows


def test_ops_names_the_ir_ops_and_their_kernel_dtypes():
    rows = _ops_table()
    # Every translator declares the IR ops it emits (translate.h).
    assert not [op for op, (_, ir, _) in rows.items() if ir == ["-"]]
    assert rows["softmax"][1:] == (["softmax"], "float32")
    assert rows["layer_norm"][1:] == (["layer_norm"], "float32")
    assert rows["conv2d"][1] == ["conv2d", "transpose"]
    assert rows["matmul_v2"][1][0] == "matmul"
    # The dtypes of the IR ops' CPU kernels (backends/cpu/kernels).
    assert rows["relu"][2] == "float32,float64,int32,int64"  # exact on integers
    assert rows["gelu"][2] == "float32,float64"
    assert rows["equal"][2] == "float32,float64,int8,uint8,int16,int32,int64,bool"
    assert rows["less_than"][2] == "float32,float64,int8,uint8,int16,int32,int64"
    assert rows["cast"][2] == "all" and rows["transpose2"][2] == "all"
    assert rows["one_hot_v2"][2] == "int32,int64"  # the ids' dtype
    assert rows["where"][2] == "all"  # x and y; the condition is bool
    # Several IR ops: the dtypes all of them run (p_norm: sqrt is float-only).
    assert rows["p_norm"][2] == "float32,float64"
    # Views and pass-through ops run no kernel.
    assert rows["reshape2"][1:] == (["reshape"], "all")
    assert rows["assign"][1:] == (["(none)"], "all")


def test_ops_says_how_each_op_runs_in_half_precision():
    half = {}
    _ops_table(half)
    for op in ("matmul_v2", "conv2d", "bmm"):
        assert half[op] == "bfloat16 GEMM, float16 rounded", op
    assert half["cast"] == half["reshape2"] == "bfloat16, float16"  # any dtype
    assert half["softmax"] == half["layer_norm"] == "via float32"
    assert half["one_hot_v2"] == "-"  # integer ids only


def test_errors_exit_2_with_names(bert, tmp_path):
    res = tiller("info", tmp_path / "missing.pdmodel", check=False)
    assert res.returncode == 2 and "missing.pdmodel" in res.stderr
    np.save(tmp_path / "ids.npy", np.zeros((2, 4), np.int32))
    res = tiller("run", bert.model_file, "--input", f"input_ids={tmp_path / 'ids.npy'}",
                 "--input", f"token_type_ids={tmp_path / 'ids.npy'}", check=False)
    assert res.returncode == 2 and "input_ids" in res.stderr and "int32" in res.stderr
    res = tiller("run", bert.model_file, "--input", f"input_idz={tmp_path / 'ids.npy'}", check=False)
    assert res.returncode == 2 and "input_idz" in res.stderr
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY garbage")
    res = tiller("run", bert.model_file, "--input", f"input_ids={tmp_path / 'bad.npy'}", check=False)
    assert res.returncode == 2 and "bad.npy" in res.stderr
    # Found by the npy fuzz target: a header key without a value was read
    # past the header's end.
    header = b"{'descr'i8:"
    (tmp_path / "nokey.npy").write_bytes(b"\x93NUMPY\x01\x00" + bytes([len(header), 0]) + header)
    res = tiller("run", bert.model_file, "--input", f"input_ids={tmp_path / 'nokey.npy'}",
                 check=False)
    assert res.returncode == 2 and "nokey.npy" in res.stderr and "descr" in res.stderr, res.stderr
    # And a dimension past int64 (std::stoll threw past the CLI's handler).
    header = b"{'descr': '|u1', 'fortran_order': False, 'shape': (2, 50000000000000000000000), }"
    (tmp_path / "huge.npy").write_bytes(b"\x93NUMPY\x01\x00" + bytes([len(header), 0]) + header)
    res = tiller("run", bert.model_file, "--input", f"input_ids={tmp_path / 'huge.npy'}",
                 check=False)
    assert res.returncode == 2 and "huge.npy" in res.stderr and "too large" in res.stderr, res.stderr


def test_info_marks_unsupported_ops(tmp_path):
    import paddle

    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [2, 3], "float32")
            y = paddle.roll(paddle.nn.functional.relu(x), 1)
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        paddle.static.save_inference_model(str(tmp_path / "model"), [x], [y], exe, program=main)
    finally:
        paddle.disable_static()
    res = tiller("info", tmp_path / "model.json", check=False)
    assert res.returncode == 2
    assert "relu" in res.stdout and "roll" in res.stdout and "(unsupported)" in res.stdout
    assert "roll (x1)" in res.stderr
