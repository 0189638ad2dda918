"""paddle.sparse COO tensors in static programs (issue 44, dynamic
sparsity): a program built with paddle.sparse (indices and values fed, so
the pattern changes every run), saved with save_inference_model, runs on
Tiller's predictor with Paddle's results.

Paddle's own executor is the reference where it runs the op (creation,
to_dense, values, indices, relu, abs, sin, pow, softmax over each row's
stored entries, reshape and transpose, which move the entries' indices); its CPU build has no kernel for the COO x dense matmul,
whose reference is the dense math on the same values in numpy (float64).
The legacy form is written by Paddle 2.6 (.venv-paddle2), whose static API
builds the ops of its legacy branch; the PIR form by Paddle 3.3.

Tolerance: 1e-6 relative (these ops are one multiply-add or exp per value;
the matmul sums at most K = 16 products in float32).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tiller.inference as ti

ROOT = Path(__file__).resolve().parents[2]
PADDLE2 = ROOT / ".venv-paddle2" / "bin" / "python"

# Builds the program in the form the interpreter's Paddle writes (PIR for
# 3.3, legacy for 2.6), saves it to argv[1], and writes Paddle's results
# for the feeds in argv[2] to argv[3].
BUILD = r"""
import json, sys, numpy as np, paddle
paddle.enable_static()
M, K, N = 6, 16, 5
main, startup = paddle.static.Program(), paddle.static.Program()
pir = hasattr(paddle, "pir") and paddle.framework.in_pir_mode()
with paddle.static.program_guard(main, startup):
    idx = paddle.static.data("idx", [2, -1], "int64")
    val = paddle.static.data("val", [-1], "float32")
    x = paddle.sparse.sparse_coo_tensor(idx, val, [M, K])
    r = paddle.sparse.nn.functional.relu(x)
    s = paddle.sparse.nn.functional.softmax(r)
    outs = {"dense": x.to_dense(), "relu": r.to_dense(), "softmax": s.to_dense(),
            "values": s.values(), "indices": s.indices()}
    rs = paddle.sparse.reshape(r, [2, -1, 8])
    rs0 = paddle.sparse.reshape(x, [0, 2, -1])  # 0 copies x's dim
    if pir:
        tr = paddle.sparse.transpose(x, [1, 0])
    else:  # Paddle 2.6's static API has no transpose: the op as its kernel takes it
        from paddle.base.layer_helper import LayerHelper
        helper = LayerHelper("sparse_transpose")
        tr = helper.create_sparse_variable_for_type_inference(x.dtype)
        helper.append_op(type="sparse_transpose", inputs={"x": x}, outputs={"out": tr},
                         attrs={"perm": [1, 0]})
    outs.update({"reshape": rs.to_dense(), "reshape_indices": rs.indices(),
                 "reshape0": rs0.to_dense(), "reshape0_indices": rs0.indices(),
                 "transpose": tr.to_dense(), "transpose_indices": tr.indices(),
                 "transpose_values": tr.values()})
    if pir:
        outs["pow"] = paddle.sparse.pow(x, 2.0).to_dense()
        outs["abs_sin"] = paddle.sparse.sin(paddle.sparse.abs(x)).to_dense()
names = list(outs)
exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(startup)
feeds = np.load(sys.argv[2])
res = {}
for k in ("a", "b"):
    f = {"idx": feeds[f"idx_{k}"], "val": feeds[f"val_{k}"]}
    got = exe.run(main, feed=f, fetch_list=[outs[n] for n in names])
    for n, g in zip(names, got):
        res[f"{n}_{k}"] = np.asarray(g)
paddle.static.save_inference_model(sys.argv[1], [idx, val], [outs[n] for n in names], exe,
                                   program=main)
np.savez(sys.argv[3], names=np.array(names), **res)
"""


def pattern(rng, m, k, nnz):
    """nnz distinct positions of an m x k matrix (row-major order), values
    with both signs and an explicit zero."""
    flat = np.sort(rng.choice(m * k, nnz, replace=False))
    idx = np.stack([flat // k, flat % k]).astype("int64")
    val = rng.standard_normal(nnz).astype("float32")
    val[1] = 0.0
    return idx, val


@pytest.fixture(scope="module", params=["pir", "legacy"])
def saved(request, tmp_path_factory):
    fmt = request.param
    python = sys.executable if fmt == "pir" else str(PADDLE2)
    if fmt == "legacy" and not PADDLE2.exists():
        pytest.skip(".venv-paddle2 (Paddle 2.6.2) is missing: scripts/setup.sh makes it")
    d = tmp_path_factory.mktemp(f"coo_{fmt}")
    rng = np.random.default_rng(3)
    feeds = {}
    # Two runs with different patterns and entry counts: nnz is fed.
    for key, nnz in (("a", 20), ("b", 33)):
        feeds[f"idx_{key}"], feeds[f"val_{key}"] = pattern(rng, 6, 16, nnz)
    np.savez(d / "feeds.npz", **feeds)
    # (Paddle 2.6's executor cannot garbage-collect an intermediate sparse
    # tensor: its eager deletion is turned off.)
    env = dict(os.environ, FLAGS_enable_pir_api="1" if fmt == "pir" else "0",
               GLOG_minloglevel="2", FLAGS_eager_delete_tensor_gb="-1")
    p = subprocess.run([python, "-c", BUILD, str(d / "model"), str(d / "feeds.npz"),
                        str(d / "ref.npz")], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    model = d / ("model.json" if fmt == "pir" else "model.pdmodel")
    return fmt, model, np.load(d / "feeds.npz"), np.load(d / "ref.npz")


def run(model, feeds):
    params = model.with_suffix(".pdiparams")
    config = ti.Config(str(model), str(params)) if params.exists() else ti.Config(str(model))
    predictor = ti.create_predictor(config)
    for name, value in feeds.items():
        h = predictor.get_input_handle(name)
        h.reshape(list(value.shape))
        h.copy_from_cpu(value)
    predictor.run()
    return [predictor.get_output_handle(n).copy_to_cpu()
            for n in predictor.get_output_names()]


def test_sparse_ops_match_paddle(saved):
    fmt, model, feeds, ref = saved
    names = [str(n) for n in ref["names"]]
    for key in ("a", "b"):
        got = run(model, {"idx": feeds[f"idx_{key}"], "val": feeds[f"val_{key}"]})
        assert len(got) == len(names)
        for name, g in zip(names, got):
            want = ref[f"{name}_{key}"]
            assert g.shape == want.shape, (fmt, name, g.shape, want.shape)
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7, err_msg=f"{fmt} {name}")


# The COO x dense matmul: Paddle's CPU build has no kernel for it and its
# static API does not append it, so the legacy program gets the op in its
# desc (as Paddle 2.6 writes sparse_matmul), and the PIR program is that
# program translated by Paddle 3.3 (pd_op.matmul_coo_dense_sp). A matrix
# [6, 16] and a batch of 3 matrices [3, 4, 8].
MATMUL = r"""
import sys, paddle
paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    blk = main.global_block()
    outs, feeds = [], []
    for tag, shape, n in (("m", [6, 16], 5), ("b", [3, 4, 8], 7)):
        idx = paddle.static.data(f"idx_{tag}", [len(shape), -1], "int64")
        val = paddle.static.data(f"val_{tag}", [-1], "float32")
        y = paddle.static.data(f"y_{tag}", shape[:-2] + [shape[-1], n], "float32")
        x = paddle.sparse.sparse_coo_tensor(idx, val, shape)
        out = blk.create_var(name=f"mm_{tag}", shape=shape[:-1] + [n], dtype="float32")
        d = blk.desc.append_op()
        d.set_type("sparse_matmul")
        d.set_input("x", [x.name])
        d.set_input("y", [y.name])
        d.set_output("out", [out.name])
        blk._sync_with_cpp()
        outs.append(paddle.scale(out, 2.0))
        feeds += [idx, val, y]
exe = paddle.static.Executor(paddle.CPUPlace())
paddle.static.save_inference_model(sys.argv[1], feeds, outs, exe, program=main)
"""

TO_PIR = r"""
import sys, paddle
from paddle.base import framework
paddle.enable_static()
legacy = framework.Program.parse_from_string(open(sys.argv[1], "rb").read())
paddle.base.core.serialize_pir_program(paddle.pir.translate_to_pir(legacy.desc), sys.argv[2])
"""


def coo(rng, shape, nnz):
    flat = np.sort(rng.choice(int(np.prod(shape)), nnz, replace=False))
    idx = np.stack(np.unravel_index(flat, shape)).astype("int64")
    return idx, rng.standard_normal(nnz).astype("float32")


@pytest.fixture(scope="module")
def matmul_models(tmp_path_factory):
    if not PADDLE2.exists():
        pytest.skip(".venv-paddle2 (Paddle 2.6.2) is missing: scripts/setup.sh makes it")
    d = tmp_path_factory.mktemp("coo_matmul")
    env = dict(os.environ, FLAGS_enable_pir_api="0", GLOG_minloglevel="2")
    p = subprocess.run([str(PADDLE2), "-c", MATMUL, str(d / "model")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    p = subprocess.run([sys.executable, "-c", TO_PIR, str(d / "model.pdmodel"),
                        str(d / "model.json")], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return {"legacy": d / "model.pdmodel", "pir": d / "model.json"}


@pytest.mark.parametrize("fmt", ["legacy", "pir"])
def test_coo_matmul_equals_the_dense_math(matmul_models, fmt):
    rng = np.random.default_rng(5)
    for nnz_m, nnz_b in ((30, 40), (9, 61)):  # a new pattern and count each run
        feeds = {}
        for tag, shape, n, nnz in (("m", (6, 16), 5, nnz_m), ("b", (3, 4, 8), 7, nnz_b)):
            idx, val = coo(rng, shape, nnz)
            y = rng.standard_normal(shape[:-2] + (shape[-1], n)).astype("float32")
            feeds.update({f"idx_{tag}": idx, f"val_{tag}": val, f"y_{tag}": y})
        got = run(matmul_models[fmt], feeds)
        for out, (tag, shape) in zip(got, (("m", (6, 16)), ("b", (3, 4, 8)))):
            dense = np.zeros(shape)
            dense[tuple(feeds[f"idx_{tag}"])] = feeds[f"val_{tag}"]
            want = 2 * np.matmul(dense, feeds[f"y_{tag}"].astype(np.float64))
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, err_msg=f"{fmt} {tag}")


def test_an_index_outside_the_shape_is_an_error_naming_it(matmul_models):
    rng = np.random.default_rng(6)
    feeds = {}
    for tag, shape, n in (("m", (6, 16), 5), ("b", (3, 4, 8), 7)):
        idx, val = coo(rng, shape, 10)
        feeds.update({f"idx_{tag}": idx, f"val_{tag}": val,
                      f"y_{tag}": np.ones(shape[:-2] + (shape[-1], n), "float32")})
    feeds["idx_m"][1, 3] = 16  # column 16 of a 16-column matrix
    with pytest.raises(Exception) as e:
        run(matmul_models["legacy"], feeds)
    msg = str(e.value)
    assert "coo_matmul" in msg and "16" in msg and "[0, 16)" in msg, msg
