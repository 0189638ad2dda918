"""paddle.sparse COO tensors in static programs (issue 44, dynamic
sparsity): a program built with paddle.sparse (indices and values fed, so
the pattern changes every run), saved with save_inference_model, runs on
Tiller's predictor with Paddle's results.

Paddle's own executor is the reference where it runs the op (creation,
to_dense, values, indices, the unary ops, softmax over each row's stored
entries, reshape and transpose, which move the entries' indices, and the
ops whose entries depend on the data: add / subtract / multiply / divide of
two COO tensors, coalesce, slice, sum, dense-to-COO); its CPU build has no
kernel for the COO x dense matmul, mv or addmm, whose reference is the
dense math on the same values in numpy (float64).
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
    if fmt == "legacy" and not PADDLE2.exists():
        pytest.skip(".venv-paddle2 (Paddle 2.6.2) is missing: scripts/setup.sh makes it")
    d = tmp_path_factory.mktemp(f"coo_{fmt}")
    rng = np.random.default_rng(3)
    feeds = {}
    # Two runs with different patterns and entry counts: nnz is fed.
    for key, nnz in (("a", 20), ("b", 33)):
        feeds[f"idx_{key}"], feeds[f"val_{key}"] = pattern(rng, 6, 16, nnz)
    return build_with_paddle(fmt, BUILD, d, feeds)


def build_with_paddle(fmt, script, d, feeds):
    """Runs `script` (model path, feeds, results path) under the form's
    Paddle; returns (fmt, model file, feeds, Paddle's results)."""
    python = sys.executable if fmt == "pir" else str(PADDLE2)
    np.savez(d / "feeds.npz", **feeds)
    # (Paddle 2.6's executor cannot garbage-collect an intermediate sparse
    # tensor: its eager deletion is turned off.)
    env = dict(os.environ, FLAGS_enable_pir_api="1" if fmt == "pir" else "0",
               GLOG_minloglevel="2", FLAGS_eager_delete_tensor_gb="-1")
    p = subprocess.run([python, "-c", script, str(d / "model"), str(d / "feeds.npz"),
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


# The ops whose entry count depends on the data (add / subtract / multiply /
# divide of two COO tensors, coalesce, slice, sum over a dim, dense-to-COO)
# and the unary ops on the values, against Paddle's executor; both forms
# where Paddle's static API builds the op (Paddle 2.6 builds add, slice and
# sum; the rest are PIR only). x has an entry stored twice and an explicit
# zero, y shares some positions with x; d has -0.0 and NaN. Their results
# are read through to_dense, softmax, reshape and transpose, and fetched as
# values() and indices(), whose last dim the data decides.
DYNAMIC = r"""
import sys, numpy as np, paddle
paddle.enable_static()
M, K = 4, 6
pir = hasattr(paddle, "pir") and paddle.framework.in_pir_mode()
sp = paddle.sparse
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    idx = paddle.static.data("idx", [2, -1], "int64")
    val = paddle.static.data("val", [-1], "float32")
    idx2 = paddle.static.data("idx2", [2, -1], "int64")
    val2 = paddle.static.data("val2", [-1], "float32")
    d = paddle.static.data("d", [M, K], "float32")
    x = sp.sparse_coo_tensor(idx, val, [M, K])
    y = sp.sparse_coo_tensor(idx2, val2, [M, K])
    add = sp.add(x, y)
    outs = {"add": add.to_dense(),
            "add_softmax": sp.nn.functional.softmax(add).to_dense(),
            "slice": sp.slice(x, [0, 1], [1, -5], [3, 5]).to_dense(),
            "slice_neg_axis": sp.slice(x, [-1], [2], [100]).to_dense(),
            "sum_1": sp.sum(x, axis=1).to_dense(),
            "sum_0_keep": sp.sum(x, axis=0, keepdim=True).to_dense(),
            "sum_all": sp.sum(x).to_dense(), "sum_all_values": sp.sum(x).values(),
            "sum_all_indices": sp.sum(x).indices(),
            "sum_all_keep_values": sp.sum(x, keepdim=True).values(),
            "sum_of_add": sp.sum(add, axis=-1).to_dense(),
            # values() and indices() of data-dependent results: the entries
            # in Paddle's order, as many as the data gives
            "add_values": add.values(), "add_indices": add.indices(),
            "slice_values": sp.slice(x, [1], [1], [4]).values(),
            "slice_indices": sp.slice(x, [1], [1], [4]).indices(),
            "sum_1_values": sp.sum(x, axis=1).values(),
            "sum_1_indices": sp.sum(x, axis=1).indices()}
    if pir:
        co = sp.coalesce(x)
        outs.update({
            "subtract": sp.subtract(x, y).to_dense(), "multiply": sp.multiply(x, y).to_dense(),
            "divide": sp.divide(x, y).to_dense(), "coalesce": co.to_dense(),
            "coalesce_reshape": sp.reshape(co, [2, 12]).to_dense(),
            "coalesce_transpose": sp.transpose(co, [1, 0]).to_dense(),
            "add_of_coalesced": sp.add(co, sp.coalesce(y)).to_dense(),
            "coalesce_values": co.values(), "coalesce_indices": co.indices(),
            "divide_values": sp.divide(x, y).values(),
            "multiply_indices": sp.multiply(x, y).indices(),
            "dense_to_coo_values": paddle._C_ops.sparse_to_sparse_coo(d, 2).values(),
            "dense_to_coo_indices": paddle._C_ops.sparse_to_sparse_coo(d, 2).indices(),
            "coalesce_relu_values": sp.nn.functional.relu(co).values(),
            "dense_to_coo": paddle._C_ops.sparse_to_sparse_coo(d, 2).to_dense(),
            "tanh": sp.tanh(x).values(), "sqrt_abs": sp.sqrt(sp.abs(x)).values(),
            "square": sp.square(x).values(), "atan": sp.atan(x).values(),
            "log1p_abs": sp.log1p(sp.abs(x)).values(), "neg": sp.neg(x).values(),
            "divide_scalar": sp.divide(x, 3.0).values(), "deg2rad": sp.deg2rad(x).values(),
            "leaky_relu": sp.nn.functional.leaky_relu(x, 0.1).values(),
            "relu6": sp.nn.functional.relu6(x).values(),
            "cast_indices": sp.cast(x, "int32", "float32").indices(),
            "asinh": sp.asinh(x).values(), "atanh_tanh": sp.atanh(sp.tanh(x)).values(),
            "expm1": sp.expm1(x).values(), "rad2deg": sp.rad2deg(x).values(),
            # sqrt of the negative values is NaN
            "isnan_values": sp.isnan(sp.sqrt(x)).values(),
            "isnan_dense": sp.isnan(sp.sqrt(x)).to_dense()})
names = list(outs)
exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(startup)
feeds = np.load(sys.argv[2])
res = {}
inputs = [idx, val, idx2, val2] + ([d] if pir else [])  # Paddle 2.6 builds no op reading d
for k in ("a", "b"):
    f = {v.name: feeds[f"{v.name}_{k}"] for v in inputs}
    for n, g in zip(names, exe.run(main, feed=f, fetch_list=[outs[n] for n in names])):
        res[f"{n}_{k}"] = np.asarray(g)
paddle.static.save_inference_model(sys.argv[1], inputs, [outs[n] for n in names], exe,
                                   program=main)
np.savez(sys.argv[3], names=np.array(names), **res)
if pir:  # Paddle's CPU build cannot run mv and addmm: saved only, numpy is the reference
    m2, s2 = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(m2, s2):
        idx = paddle.static.data("idx", [2, -1], "int64")
        val = paddle.static.data("val", [-1], "float32")
        v = paddle.static.data("v", [K], "float32")
        b = paddle.static.data("b", [M, 3], "float32")
        w = paddle.static.data("w", [K, 3], "float32")
        x = sp.sparse_coo_tensor(idx, val, [M, K])
        mv, mm = sp.mv(x, v), sp.addmm(b, x, w, 0.5, 2.0)
    paddle.static.save_inference_model(sys.argv[1] + "_mv", [idx, val, v, b, w], [mv, mm],
                                       exe, program=m2)
"""


def dynamic_feeds(rng, key, nnz):
    """x with nnz entries (one position stored twice, an explicit zero), y
    sharing three of x's positions, d with -0.0, NaN and zeros."""
    idx, val = pattern(rng, 4, 6, nnz)
    idx = np.concatenate([idx, idx[:, 2:3]], axis=1)  # entry 2 stored again, last
    val = np.append(val, np.float32(1.5))
    shared = idx[:, [0, 3, 4]]
    idx2, val2 = pattern(rng, 4, 6, 5)
    idx2 = np.concatenate([idx2, shared], axis=1)
    val2 = np.concatenate([val2, rng.standard_normal(3).astype("float32")])
    d = rng.standard_normal((4, 6)).astype("float32")
    d[rng.random((4, 6)) < 0.5] = 0.0
    d[1, 1], d[2, 2] = -0.0, np.nan
    return {f"idx_{key}": idx, f"val_{key}": val, f"idx2_{key}": idx2, f"val2_{key}": val2,
            f"d_{key}": d}


@pytest.fixture(scope="module", params=["pir", "legacy"])
def dynamic(request, tmp_path_factory):
    fmt = request.param
    if fmt == "legacy" and not PADDLE2.exists():
        pytest.skip(".venv-paddle2 (Paddle 2.6.2) is missing: scripts/setup.sh makes it")
    d = tmp_path_factory.mktemp(f"coo_dynamic_{fmt}")
    rng = np.random.default_rng(8)
    feeds = {**dynamic_feeds(rng, "a", 9), **dynamic_feeds(rng, "b", 14)}
    return build_with_paddle(fmt, DYNAMIC, d, feeds)


def test_data_dependent_and_unary_ops_match_paddle(dynamic):
    fmt, model, feeds, ref = dynamic
    names = [str(n) for n in ref["names"]]
    assert len(names) == (49 if fmt == "pir" else 17), names
    inputs = ("idx", "val", "idx2", "val2") + (("d",) if fmt == "pir" else ())
    for key in ("a", "b"):  # 10 and 15 entries: each compiles for its own count
        got = run(model, {n: feeds[f"{n}_{key}"] for n in inputs})
        for name, g in zip(names, got):
            want = ref[f"{name}_{key}"]
            assert g.shape == want.shape and g.dtype == want.dtype, (fmt, name, g, want)
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7, err_msg=f"{fmt} {name}")


def test_mv_and_addmm_equal_the_dense_math(dynamic):
    fmt, model, _, _ = dynamic
    if fmt == "legacy":
        pytest.skip("Paddle 2.6's static API builds neither mv nor addmm")
    rng = np.random.default_rng(9)
    idx, val = pattern(rng, 4, 6, 11)
    v = rng.standard_normal(6).astype("float32")
    b = rng.standard_normal((4, 3)).astype("float32")
    w = rng.standard_normal((6, 3)).astype("float32")
    mv, mm = run(model.parent / "model_mv.json", {"idx": idx, "val": val, "v": v, "b": b, "w": w})
    dense = np.zeros((4, 6))
    dense[tuple(idx)] = val
    np.testing.assert_allclose(mv, dense @ v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mm, 0.5 * b + 2.0 * (dense @ w), rtol=1e-5, atol=1e-6)


COALESCED_VALUES = r"""
import sys, paddle
paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    idx = paddle.static.data("idx", [2, -1], "int64")
    val = paddle.static.data("val", [-1], "float32")
    c = paddle.sparse.coalesce(paddle.sparse.sparse_coo_tensor(idx, val, [4, 6]))
    exe = paddle.static.Executor(paddle.CPUPlace())
    paddle.static.save_inference_model(sys.argv[1], [idx, val], [c.to_dense(), c.values()], exe,
                                       program=main)
    paddle.static.save_inference_model(sys.argv[1] + "_exp", [idx, val],
                                       [paddle.exp(c.values())], exe, program=main)
"""


def test_data_dependent_values_read_by_an_op_or_under_ipu_are_refused_bad_indices_named(
        dynamic, tmp_path):
    fmt, model, feeds, _ = dynamic
    if fmt == "legacy":
        pytest.skip("one form is enough: the refusal is made while translating")
    p = subprocess.run([sys.executable, "-c", COALESCED_VALUES, str(tmp_path / "m")],
                       env=dict(os.environ, GLOG_minloglevel="2"), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    idx, val = pattern(np.random.default_rng(1), 4, 6, 5)
    with pytest.raises(Exception) as e:
        run(tmp_path / "m_exp.json", {"idx": idx, "val": val})
    msg = str(e.value)
    assert "depends on the data" in msg and "is read by op exp" in msg, msg
    # The IPU execution model stacks micro-batches' outputs: their shapes
    # must be known, so such a fetch target is refused there.
    config = ti.Config(str(tmp_path / "m.json"))
    config.enable_ipu(1)
    with pytest.raises(Exception) as e:
        ti.create_predictor(config)
    msg = str(e.value)
    assert "sparse_values" in msg and "sparse_coalesce" in msg and "IPU" in msg, msg
    # An index outside the shape fails the run naming the op that read it.
    f = {n: feeds[f"{n}_a"].copy() for n in ("idx", "val", "idx2", "val2", "d")}
    f["idx2"][1, 0] = 6  # column 6 of a 6-column matrix
    with pytest.raises(Exception) as e:
        run(model, f)
    msg = str(e.value)
    assert "coo_merge" in msg and "[0, 6)" in msg, msg


# A submanifold sparse convolution net (point clouds: values [nnz, C] per
# position of [N, D, H, W]) in Paddle 3.3's static API: SubmConv3D with
# bias, BatchNorm on its running statistics (set to random values), ReLU,
# a SubmConv3D of kernel (3, 1, 5) without bias; Paddle's executor is the
# reference; then an ordinary Conv3D with strides and padding (its outputs
# where the data reaches: a padded result) and a SubmConv3D on it; the
# merges and coalesce of hybrid COO tensors. A dilated SubmConv3D (Paddle
# shrinks its grid) and the softmax of a hybrid COO are refused.
SUBM = r"""
import sys, numpy as np, paddle
paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    idx = paddle.static.data("idx", [4, -1], "int64")
    val = paddle.static.data("val", [-1, 3], "float32")
    x = paddle.sparse.sparse_coo_tensor(idx, val, [2, 5, 6, 7, 3])
    y = paddle.sparse.nn.SubmConv3D(3, 4, 3, padding=1)(x)
    r = paddle.sparse.nn.ReLU()(paddle.sparse.nn.BatchNorm(4, use_global_stats=True)(y))
    z = paddle.sparse.nn.SubmConv3D(4, 2, (3, 1, 5), padding=(1, 0, 2), bias_attr=False)(r)
    c = paddle.sparse.nn.Conv3D(2, 3, (2, 3, 2), stride=(2, 1, 2), padding=(0, 1, 1))(z)
    c2 = paddle.sparse.nn.SubmConv3D(3, 2, 3, padding=1)(paddle.sparse.nn.ReLU()(c))
    outs = [y.values(), r.to_dense(), z.values(), z.indices(), z.to_dense(), c.indices(),
            c.values(), c.to_dense(), c2.indices(), c2.values(), c2.to_dense()]
    dilated = paddle.sparse.nn.SubmConv3D(2, 2, 3, padding=2, dilation=2)(z).to_dense()
    hybrid_softmax = paddle.sparse.nn.functional.softmax(y).to_dense()
    # Merges of hybrid COO tensors: the residual add of a sparse ResNet
    # block (equal indices), and x with a second input of other positions
    # (one stored twice), as add / subtract / multiply / divide and coalesce.
    idx2 = paddle.static.data("idx2", [4, -1], "int64")
    val2 = paddle.static.data("val2", [-1, 3], "float32")
    x2 = paddle.sparse.sparse_coo_tensor(idx2, val2, [2, 5, 6, 7, 3])
    sp = paddle.sparse
    residual = sp.add(r, y)
    merged = [residual.values(), residual.indices(), sp.add(x, x2).to_dense(),
              sp.add(x, x2).values(), sp.add(x, x2).indices(), sp.subtract(x2, x).to_dense(),
              sp.multiply(x, x2).values(), sp.divide(x, x2).to_dense(),
              sp.coalesce(x2).values(), sp.coalesce(x2).indices(),
              sp.coalesce(sp.add(x2, x)).to_dense()]
exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(startup)
rng = np.random.default_rng(4)
scope = paddle.static.global_scope()
for p in main.global_block().all_parameters():
    t = scope.find_var(p.name).get_tensor()
    shape = np.array(t).shape
    v = rng.uniform(0.5, 1.5, shape) if "variance" in p.name or "_var" in p.name else rng.standard_normal(shape) * 0.5
    t.set(v.astype("float32"), paddle.CPUPlace())
feeds = np.load(sys.argv[2])
got = exe.run(main, feed={n: feeds[n] for n in ("idx", "val", "idx2", "val2")},
              fetch_list=outs + merged)
paddle.static.save_inference_model(sys.argv[1], [idx, val], outs, exe, program=main)
paddle.static.save_inference_model(sys.argv[1] + "_merge", [idx, val, idx2, val2], merged, exe,
                                   program=main)
paddle.static.save_inference_model(sys.argv[1] + "_dilated", [idx, val], [dilated], exe,
                                   program=main)
paddle.static.save_inference_model(sys.argv[1] + "_softmax", [idx, val], [hybrid_softmax], exe,
                                   program=main)
np.savez(sys.argv[3], *got)
"""


def test_submanifold_conv_net_matches_paddle(tmp_path):
    rng = np.random.default_rng(12)
    flat = np.sort(rng.choice(2 * 5 * 6 * 7, 40, replace=False))  # coalesced, row-major
    idx = np.stack(np.unravel_index(flat, (2, 5, 6, 7))).astype("int64")
    val = rng.standard_normal((40, 3)).astype("float32")
    # 15 positions, 6 of them x's; the first stored again last
    flat2 = np.concatenate([rng.choice(flat, 6, replace=False),
                            rng.choice(np.setdiff1d(np.arange(420), flat), 9, replace=False)])
    flat2 = np.append(flat2, flat2[0])
    idx2 = np.stack(np.unravel_index(flat2, (2, 5, 6, 7))).astype("int64")
    val2 = rng.standard_normal((16, 3)).astype("float32")
    np.savez(tmp_path / "feeds.npz", idx=idx, val=val, idx2=idx2, val2=val2)
    p = subprocess.run([sys.executable, "-c", SUBM, str(tmp_path / "m"), str(tmp_path / "feeds.npz"),
                        str(tmp_path / "ref.npz")],
                       env=dict(os.environ, GLOG_minloglevel="2"), capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    ref = np.load(tmp_path / "ref.npz")
    got = run(tmp_path / "m.json", {"idx": idx, "val": val})
    assert len(got) == 11
    got += run(tmp_path / "m_merge.json", {"idx": idx, "val": val, "idx2": idx2, "val2": val2})
    assert len(got) == 22
    for i, g in enumerate(got):
        want = ref[f"arr_{i}"]
        assert g.shape == want.shape and g.dtype == want.dtype, (i, g.shape, want.shape)
        # Sums of at most 27 x 4 products in float32, in another order than
        # Paddle's gathered GEMMs: 1e-5.
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5, err_msg=f"output {i}")
    with pytest.raises(Exception) as e:
        run(tmp_path / "m_dilated.json", {"idx": idx, "val": val})
    msg = str(e.value)
    assert "sparse_conv3d" in msg and "dilations [2, 2, 2]" in msg, msg
    # An op that takes one value per entry refuses a hybrid COO by name.
    with pytest.raises(Exception) as e:
        run(tmp_path / "m_softmax.json", {"idx": idx, "val": val})
    msg = str(e.value)
    assert "sparse_softmax" in msg and "hybrid" in msg, msg
