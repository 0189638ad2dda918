"""Tiller's gradients against Paddle's, on small training programs.

Each case is a forward program ending in a scalar loss, built by Paddle 3.3
in a child process: once as PIR (the default) and once as a legacy
ProgramDesc (FLAGS_enable_pir_api=0). The child
  * computes Paddle's reference gradients with ``paddle.static.gradients``
    (for every trainable parameter and the float feeds marked trainable),
  * saves the forward program with ``save_inference_model``, which clones it
    for test (is_test = true on batch_norm and dropout); it then reloads the
    saved program and sets is_test = false again on those ops, re-serializing
    with Paddle's own writer, so the saved program is the training forward,
  * writes feeds, reference loss, gradients and (legacy) the updated batch
    norm running statistics to an npz.
The test feeds the same arrays to ``_tiller.compute_gradients`` (translation
in training mode, then autodiff) and compares.

Tolerance: float32 throughout, and Tiller sums in other orders than Paddle
(oneDNN backward convolutions, per-channel double accumulation in batch
norm, different GEMM blocking), so per-element differences are rounding
noise amplified by cancellation (batch norm's dx subtracts two sums of the
same size). Each gradient is compared with |tiller - paddle| <= 1e-5 *
max|paddle| + 1e-4 * |paddle| + 1e-6 * (largest gradient of the case):
errors relative to the gradient's own scale (observed: at most 6e-7, a few
float32 epsilons; the bound leaves room for other oneDNN algorithms on other
CPUs), plus a floor for gradients that are zero in exact arithmetic (a conv
bias before batch norm, the attention key bias), where both sides hold only
rounding noise of the case's gradient terms. A wrong rule (a missing term, a
transposed filter, a wrong divisor) moves elements by orders of magnitude more.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
RTOL = 1e-4
SCALE_TOL = 1e-5
CASE_TOL = 1e-6

# ---------------------------------------------------------------------------
# Child side: the cases, built with Paddle's static API.


def _cnn(paddle, rng):
    nn, F = paddle.nn, paddle.nn.functional
    x = paddle.static.data("x", [4, 3, 16, 16], "float32")
    x.stop_gradient = False
    label = paddle.static.data("label", [4, 1], "int64")
    conv1 = nn.Conv2D(3, 4, 3, stride=2, padding=1)
    bn = nn.BatchNorm2D(4, momentum=0.8)
    conv2 = nn.Conv2D(4, 6, 3, padding=[1, 0, 0, 1], groups=2)  # 4x4 -> 3x3
    fc = nn.Linear(6 * 2 * 2, 5)
    h = F.relu(bn(conv1(x)))
    h = F.max_pool2d(h, 2, 2)
    h = conv2(h)
    h = F.avg_pool2d(h, 2, 2, ceil_mode=True, exclusive=False)  # 3x3 -> 2x2, windows past the edge
    h = paddle.flatten(h, 1)
    loss = F.cross_entropy(fc(h), label)
    feeds = {"x": rng.standard_normal((4, 3, 16, 16)).astype("float32"),
             "label": rng.integers(0, 5, (4, 1)).astype("int64")}
    return {"x": x, "label": label}, feeds, loss, ["x"], [bn._mean.name, bn._variance.name]


def _bert(paddle, rng):
    nn, F = paddle.nn, paddle.nn.functional
    b, s, h, heads, v = 2, 6, 16, 2, 20
    ids = paddle.static.data("ids", [b, s], "int64")
    pos = paddle.static.data("pos", [b, s], "int64")
    label = paddle.static.data("label", [b, 1], "int64")
    emb, pemb = nn.Embedding(v, h), nn.Embedding(s, h)
    ln0, ln1, ln2 = nn.LayerNorm(h), nn.LayerNorm(h), nn.LayerNorm(h)
    qkv = [nn.Linear(h, h) for _ in range(3)]
    out_proj, ff1, ff2 = nn.Linear(h, h), nn.Linear(h, 4 * h), nn.Linear(4 * h, h)
    pool, cls = nn.Linear(h, h), nn.Linear(h, 3)
    x = ln0(emb(ids) + pemb(pos))

    def split(t):
        return paddle.transpose(paddle.reshape(t, [b, s, heads, h // heads]), [0, 2, 1, 3])

    q, k, val = (split(layer(x)) for layer in qkv)
    att = F.softmax(paddle.matmul(q, k, transpose_y=True) * (1.0 / (h // heads) ** 0.5))
    att = F.dropout(att, p=0.0)
    ctx = paddle.reshape(paddle.transpose(paddle.matmul(att, val), [0, 2, 1, 3]), [b, s, h])
    x = ln1(x + F.dropout(out_proj(ctx), p=0.0))
    x = ln2(x + ff2(F.gelu(ff1(x))))
    pooled = paddle.tanh(pool(x[:, 0]))
    loss = F.cross_entropy(cls(pooled), label)
    feeds = {"ids": rng.integers(0, v, (b, s)).astype("int64"),
             "pos": np.tile(np.arange(s, dtype="int64"), (b, 1)),
             "label": rng.integers(0, 3, (b, 1)).astype("int64")}
    return {"ids": ids, "pos": pos, "label": label}, feeds, loss, [], []


def _loss_case(kind):
    def build(paddle, rng):
        F = paddle.nn.functional
        x = paddle.static.data("x", [6, 5], "float32")
        x.stop_gradient = False
        xv = rng.standard_normal((6, 5)).astype("float32")
        feeds, vars_ = {"x": xv}, {"x": x}

        def add(name, arr):
            vars_[name] = paddle.static.data(name, list(arr.shape), str(arr.dtype))
            feeds[name] = arr
            return vars_[name]

        if kind == "ce_hard_ignore":
            label = add("label", np.array([[0], [1], [4], [1], [2], [3]], "int64"))
            loss = F.cross_entropy(x, label, ignore_index=1)
        elif kind == "ce_soft":
            t = rng.random((6, 5)).astype("float32")
            label = add("label", t / t.sum(1, keepdims=True))
            loss = F.cross_entropy(x, label, soft_label=True)
        elif kind == "ce_prob":  # cross entropy of probabilities (cross_entropy2 in legacy)
            label = add("label", rng.integers(0, 5, (6, 1)).astype("int64"))
            loss = F.cross_entropy(F.softmax(x), label, use_softmax=False)
        elif kind == "sigmoid_ce":
            label = add("label", rng.random((6, 5)).astype("float32"))
            loss = F.binary_cross_entropy_with_logits(x, label)
        elif kind == "sigmoid_ce_pos_weight":
            label = add("label", rng.integers(0, 2, (6, 5)).astype("float32"))
            pw = add("pw", rng.uniform(0.5, 2.0, (5,)).astype("float32"))
            loss = F.binary_cross_entropy_with_logits(x, label, pos_weight=pw, reduction="sum")
        elif kind == "bce":
            label = add("label", rng.random((6, 5)).astype("float32"))
            loss = F.binary_cross_entropy(F.sigmoid(x), label)
        elif kind == "kldiv":
            t = rng.random((6, 5)).astype("float32") + 0.05
            target = add("target", t / t.sum(1, keepdims=True))
            loss = F.kl_div(F.log_softmax(x), target, reduction="batchmean")
        elif kind == "huber":
            y = add("y", rng.standard_normal((6, 5)).astype("float32") * 2)
            loss = F.smooth_l1_loss(x, y, delta=0.7)
        elif kind == "identity":
            loss = paddle.incubate.identity_loss(paddle.square(x), reduction="mean")
        else:
            raise ValueError(kind)
        return vars_, feeds, loss, ["x"], []

    return build


def _dropout(paddle, rng):
    """loss = sum(dropout(x, 0.3) * w): Paddle's mask is its own, so only
    Tiller's self-consistency is checked (test_training_dropout_...)."""
    x = paddle.static.data("x", [64, 32], "float32")
    x.stop_gradient = False
    w = paddle.static.data("w", [64, 32], "float32")
    loss = paddle.sum(paddle.nn.functional.dropout(x, p=0.3) * w)
    feeds = {"x": rng.standard_normal((64, 32)).astype("float32"),
             "w": rng.uniform(0.5, 1.5, (64, 32)).astype("float32")}
    return {"x": x, "w": w}, feeds, loss, ["x"], []


def _logsumexp(paddle, x, axis, keepdim=False):
    """paddle.logsumexp; in legacy mode, where Paddle 3.3's takes PIR values
    only, the legacy op Paddle 2 appended."""
    from paddle.base.framework import in_pir_mode
    from paddle.base.layer_helper import LayerHelper

    if in_pir_mode():
        return paddle.logsumexp(x, axis, keepdim=keepdim)
    helper = LayerHelper("logsumexp")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="logsumexp", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"axis": axis or [], "keepdim": keepdim, "reduce_all": not axis})
    return out


def _logsumexp_case(paddle, rng):
    """Rows, a strided pair of axes and every axis, weighted so each output
    element's gradient differs: d/dx = softmax over the reduced positions."""
    x = paddle.static.data("x", [3, 4, 5], "float32")
    x.stop_gradient = False
    w = paddle.static.data("w", [3, 4], "float32")
    rows = paddle.multiply(_logsumexp(paddle, x, [2]), w)
    cols = _logsumexp(paddle, x, [0, 2], keepdim=True)
    loss = paddle.mean(rows) + paddle.mean(paddle.multiply(cols, cols)) + \
        _logsumexp(paddle, x, None)
    feeds = {"x": (rng.standard_normal((3, 4, 5)) * 3).astype("float32"),
             "w": rng.uniform(0.5, 1.5, (3, 4)).astype("float32")}
    return {"x": x, "w": w}, feeds, loss, ["x"], []


def _scale_tensor(paddle, rng):
    """scale by a factor the program computes from w (mean(w)): d/dx is the
    factor; w gets no gradient through it (Paddle's scale_grad has none for
    ScaleTensor), only through its other use."""
    x = paddle.static.data("x", [3, 4], "float32")
    x.stop_gradient = False
    w = paddle.static.data("w", [3, 4], "float32")
    w.stop_gradient = False
    y = paddle.scale(x, scale=paddle.mean(w), bias=0.5, bias_after_scale=False)
    loss = paddle.mean(paddle.multiply(y, y)) + paddle.mean(paddle.multiply(w, x))
    feeds = {"x": rng.standard_normal((3, 4)).astype("float32"),
             "w": rng.uniform(0.5, 2.0, (3, 4)).astype("float32")}
    return {"x": x, "w": w}, feeds, loss, ["x", "w"], []


def _unary(paddle, name, x):
    """paddle.<name>(x); in legacy mode, where Paddle 3.3's takes PIR values
    only, the legacy op appended as Paddle 2 did."""
    from paddle.base.framework import in_pir_mode
    from paddle.base.layer_helper import LayerHelper

    if in_pir_mode():
        return getattr(paddle, name)(x)
    helper = LayerHelper(name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type=name, inputs={"X": [x]}, outputs={"Out": [out]})
    return out


def _translated_ops(paddle, rng):
    """Newly translated ops on one chain, each weighted so every element's
    gradient differs: asinh / acosh / atanh / expm1, gather_nd (a repeated
    row), index_select, masked_fill, tril / triu, roll, unbind,
    pixel_shuffle, addmm, mv, logit."""
    x = paddle.static.data("x", [2, 8, 3, 3], "float32")
    x.stop_gradient = False
    m = paddle.static.data("m", [4, 4], "float32")
    m.stop_gradient = False
    w = paddle.static.data("w", [4, 4], "float32")
    idx = paddle.static.data("idx", [3, 2], "int64")
    sel = paddle.static.data("sel", [3], "int64")
    mask = paddle.static.data("mask", [4, 4], "bool")
    ps = paddle.nn.functional.pixel_shuffle(x, 2)                     # [2, 2, 6, 6]
    u = _unary(paddle, "asinh", ps) + _unary(paddle, "expm1", ps * 0.3)
    a = paddle.reshape(u, [4, 36])[:, :4]                             # [4, 4]
    b = paddle.tril(m, -1) * w + paddle.triu(paddle.roll(m, [1, -1], [0, 1]), 1)
    c = paddle.addmm(a, b, m, beta=0.5, alpha=2.0)
    d = paddle.masked_fill(c, mask, 0.25)
    g = paddle.gather_nd(d, idx)                                      # [3]
    s = paddle.index_select(d, sel, axis=1)                           # [4, 3]
    v = paddle.mv(s, g)                                               # [4]
    p = paddle.nn.functional.sigmoid(paddle.unbind(d, 0)[1])          # in (0, 1)
    e = _unary(paddle, "atanh", p * 0.9) + _unary(paddle, "acosh", p + 1.5) + paddle.logit(p, 1e-3)
    loss = paddle.mean(v * v) + paddle.mean(e * w[0])
    feeds = {"x": rng.uniform(-1, 1, (2, 8, 3, 3)).astype("float32"),
             "m": rng.uniform(-1, 1, (4, 4)).astype("float32"),
             "w": rng.uniform(0.5, 1.5, (4, 4)).astype("float32"),
             # non-negative: Paddle's own backward kernels crash on negative
             # indices (grad_test checks Tiller's by finite differences)
             "idx": np.array([[1, 3], [0, 2], [1, 3]], "int64"),
             "sel": np.array([3, 0, 1], "int64"),
             "mask": rng.random((4, 4)) < 0.3}
    return ({"x": x, "m": m, "w": w, "idx": idx, "sel": sel, "mask": mask}, feeds, loss,
            ["x", "m"], [])


def _einsum_scatter(paddle, rng):
    """einsum (a batched contraction, an outer product with a broadcast
    "..." dim, a three-operand chain) and scatter (a repeated row: the later
    update wins, so the earlier one's gradient is zero; and the summing
    form) on one chain."""
    a = paddle.static.data("a", [2, 3, 4], "float32")
    a.stop_gradient = False
    b = paddle.static.data("b", [2, 4, 5], "float32")
    b.stop_gradient = False
    c = paddle.static.data("c", [5, 3], "float32")
    c.stop_gradient = False
    u = paddle.static.data("u", [3, 3], "float32")
    u.stop_gradient = False
    ids = paddle.static.data("ids", [3], "int64")
    ab = paddle.einsum("bij,bjk->bik", a, b)                          # [2, 3, 5]
    chain = paddle.einsum("bik,kl,bjl->bij", ab, c, paddle.tanh(ab[:, :, :3]))  # [2, 3, 3]
    outer = paddle.einsum("...i,j->...ij", a[:, 0, :], c[0])          # [2, 4, 3]
    x = paddle.reshape(chain, [6, 3])
    s1 = paddle.scatter(x, ids, u, overwrite=True)
    s2 = paddle.scatter(x, ids, u * 0.5, overwrite=False)
    loss = paddle.mean(s1 * s1) + paddle.mean(paddle.sin(s2)) + paddle.mean(outer * outer)
    feeds = {"a": rng.uniform(-1, 1, (2, 3, 4)).astype("float32"),
             "b": rng.uniform(-1, 1, (2, 4, 5)).astype("float32"),
             "c": rng.uniform(-1, 1, (5, 3)).astype("float32"),
             "u": rng.uniform(-1, 1, (3, 3)).astype("float32"),
             "ids": np.array([4, 1, 4], "int64")}
    return ({"a": a, "b": b, "c": c, "u": u, "ids": ids}, feeds, loss, ["a", "b", "c", "u"], [])


def _atan2(paddle, rng):
    """atan2 of two trained tensors (every quadrant, away from the origin)
    on a chain whose loss also reads a bitwise mask of their signs and a
    cumprod of a fed tensor (no gradient flows into either)."""
    a = paddle.static.data("a", [3, 4], "float32")
    a.stop_gradient = False
    b = paddle.static.data("b", [3, 4], "float32")
    b.stop_gradient = False
    w = paddle.static.data("w", [3, 4], "float32")
    angle = paddle.atan2(paddle.tanh(a) * 2.0, b)
    mask = paddle.cast((a > 0) & (b < 0), "float32")
    loss = paddle.mean(angle * angle) + paddle.mean(angle * mask * paddle.cumprod(w, dim=1))
    sign = np.where(rng.uniform(-1, 1, (3, 4)) < 0, -1.0, 1.0)
    feeds = {"a": rng.uniform(-1.5, 1.5, (3, 4)).astype("float32"),
             "b": (sign * rng.uniform(0.3, 1.5, (3, 4))).astype("float32"),
             "w": rng.uniform(0.5, 1.5, (3, 4)).astype("float32")}
    return ({"a": a, "b": b, "w": w}, feeds, loss, ["a", "b"], [])


def _cumprod(paddle, rng):
    """cumprod's gradient along each axis of a trained tensor that holds
    zeros (Paddle's kernel treats the first zero of a line apart: the
    gradients before it, at it and past it), weighted by a fed tensor."""
    a = paddle.static.data("a", [4, 5], "float32")
    a.stop_gradient = False
    c = paddle.static.data("c", [4, 5], "float32")
    loss = paddle.mean(paddle.cumprod(a, dim=1) * c) + paddle.mean(paddle.cumprod(a * a, dim=0))
    x = rng.uniform(0.5, 1.5, (4, 5)) * np.where(rng.uniform(size=(4, 5)) < 0.5, -1.0, 1.0)
    x[0, 2] = x[1, 1] = x[1, 3] = x[3, 0] = 0.0  # lines of none, one and two zeros
    feeds = {"a": x.astype("float32"), "c": rng.uniform(-1, 1, (4, 5)).astype("float32")}
    return ({"a": a, "c": c}, feeds, loss, ["a"], [])


CASES = {"cnn": _cnn, "bert": _bert, "train_dropout": _dropout, "logsumexp": _logsumexp_case,
         "scale_tensor": _scale_tensor, "translated_ops": _translated_ops,
         "einsum_scatter": _einsum_scatter, "atan2": _atan2, "cumprod": _cumprod}
# Paddle 3.3's static API builds these cases' ops in PIR programs only (its
# tril, pixel_shuffle, ... take PIR values); the op harness covers their
# legacy forms.
PIR_ONLY = {"translated_ops"}
LOSSES = ("ce_hard_ignore", "ce_soft", "ce_prob", "sigmoid_ce", "sigmoid_ce_pos_weight", "bce",
          "kldiv", "huber", "identity")
CASES.update({f"loss_{k}": _loss_case(k) for k in LOSSES})

TRAIN_OPS = {"batch_norm", "batch_norm_", "dropout", "pd_op.batch_norm", "pd_op.batch_norm_",
             "pd_op.dropout"}


def _mark_training(paddle, prefix, exe, pir):
    """Reloads a saved inference program and gives batch_norm and dropout the
    attributes of a training program: is_test = false (save_inference_model
    sets it true) and use_global_stats = false (an eval-mode layer exports it
    true)."""
    prog = paddle.static.load_inference_model(prefix, exe)[0]
    for op in prog.global_block().ops:
        if (op.name() if pir else op.type) not in TRAIN_OPS:
            continue
        for attr in ("is_test", "use_global_stats"):
            if op.has_attr(attr):
                op.set_bool_attr(attr, False) if pir else op._set_attr(attr, False)
    if pir:
        paddle.core.serialize_pir_program(prog, prefix + ".json", True, False, True)
    else:
        Path(prefix + ".pdmodel").write_bytes(prog.desc.serialize_to_string())


def _legacy_sum(paddle, orig):
    """paddle.sum for legacy static mode, where Paddle 3.3's own only takes
    PIR values (the losses with ignore_index or batchmean call it)."""
    from paddle.base.framework import in_pir_mode
    from paddle.base.layer_helper import LayerHelper

    def total(x, axis=None, dtype=None, keepdim=False, name=None):
        if in_pir_mode() or paddle.in_dynamic_mode() or axis is not None or dtype is not None:
            return orig(x, axis=axis, dtype=dtype, keepdim=keepdim, name=name)
        helper = LayerHelper("reduce_sum")
        out = helper.create_variable_for_type_inference(dtype=x.dtype)
        helper.append_op(type="reduce_sum", inputs={"X": [x]}, outputs={"Out": [out]},
                         attrs={"dim": [], "keep_dim": keepdim, "reduce_all": True})
        return out

    return total


def _child(out_dir):
    import paddle

    pir = os.environ.get("FLAGS_enable_pir_api", "1") != "0"
    if not pir:  # Paddle 3.3's matmul/gelu/tanh... APIs take PIR values only
        sys.path.insert(0, str(HERE.parents[1]))
        from models import _legacy_compat

        _legacy_compat.install()
        paddle.sum = _legacy_sum(paddle, paddle.sum)
    paddle.enable_static()
    index = {}
    for name, build in CASES.items():
        if name in PIR_ONLY and not pir:
            continue
        paddle.seed(1)
        rng = np.random.default_rng(7)
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            vars_, feeds, loss, trainable_feeds, stats = build(paddle, rng)
            params = [p for p in main.global_block().all_parameters() if not p.stop_gradient]
            wrt = params + [vars_[n] for n in trainable_feeds]
            grads = paddle.static.gradients([loss], wrt)
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        case_dir = Path(out_dir) / name
        prefix = str(case_dir / "model")
        feed_vars = [vars_[n] for n in feeds]
        paddle.static.save_inference_model(prefix, feed_vars, [loss], exe, program=main)
        _mark_training(paddle, prefix, exe, pir)
        outs = exe.run(main, feed=feeds, fetch_list=[loss] + list(grads))
        scope = paddle.static.global_scope()
        running = {s: np.array(scope.find_var(s).get_tensor()) for s in stats}
        names = [p.name for p in params] + list(trainable_feeds)
        arrays = {f"feed:{k}": v for k, v in feeds.items()}
        arrays["loss"] = np.asarray(outs[0])
        arrays.update({f"grad:{n}": np.asarray(g) for n, g in zip(names, outs[1:])})
        arrays.update({f"stat:{k}": v for k, v in running.items()})
        np.savez(case_dir / "ref.npz", **arrays)
        model = prefix + (".json" if pir else ".pdmodel")
        index[name] = {"model": model, "params": prefix + ".pdiparams", "wrt": names,
                       "stats": stats}
    (Path(out_dir) / "index.json").write_text(json.dumps(index))


# ---------------------------------------------------------------------------
# Test side.


@pytest.fixture(scope="module", params=["pir", "legacy"])
def built(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"grads_{request.param}")
    env = dict(os.environ)
    if request.param == "legacy":
        env["FLAGS_enable_pir_api"] = "0"
    proc = subprocess.run([sys.executable, __file__, str(out)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return request.param, out, json.loads((out / "index.json").read_text())


def _compare(name, got, want, case_scale=0.0):
    assert got.shape == want.shape, f"{name}: shape {got.shape} vs {want.shape}"
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    err = np.abs(got.astype(np.float64) - want)
    bound = SCALE_TOL * scale + RTOL * np.abs(want) + CASE_TOL * case_scale
    worst = int(np.argmax(err - bound)) if want.size else 0
    assert np.all(err <= bound), (
        f"{name}: max excess at {np.unravel_index(worst, want.shape)}: tiller "
        f"{got.flat[worst]} paddle {want.flat[worst]} (scale {scale:g})")


@pytest.mark.parametrize("case", [c for c in CASES if c != "train_dropout"])
def test_gradients_match_paddle(built, case):
    from tiller import _tiller

    fmt, _, index = built
    if case not in index:
        pytest.skip(f"{case}: Paddle 3.3 builds its ops in PIR programs only")
    info = index[case]
    ref = np.load(Path(info["model"]).parent / "ref.npz")
    feeds = {k[5:]: ref[k] for k in ref.files if k.startswith("feed:")}
    # Legacy programs name MeanOut like Mean: fetching it gives the update.
    fetch = info["stats"] if fmt == "legacy" else []
    grads, fetched = _tiller.compute_gradients(info["model"], info["params"], feeds, "",
                                               info["wrt"], True, fetch)
    loss = next(iter(fetched.values()))
    np.testing.assert_allclose(loss.reshape(ref["loss"].shape), ref["loss"], rtol=1e-5, atol=1e-6)
    assert sorted(grads) == sorted(info["wrt"])
    case_scale = max(float(np.max(np.abs(ref[f"grad:{n}"]))) for n in info["wrt"])
    for name in info["wrt"]:
        _compare(f"{case}/{fmt} d loss / d {name}", grads[name], ref[f"grad:{name}"], case_scale)
    for name in fetch:
        _compare(f"{case}/{fmt} running {name}", fetched[name], ref[f"stat:{name}"])


def test_training_dropout_draws_a_mask_per_step(built):
    """The translated training dropout: d loss / d x = w * mask / (1 - p), the
    loss is then sum(x * grad) (it is linear in x), about 70% of the
    elements are kept (6-sigma binomial bound), and the mask is the same for
    the same step and changes with the step."""
    from tiller import _tiller

    _, _, index = built
    info = index["train_dropout"]
    ref = np.load(Path(info["model"]).parent / "ref.npz")
    feeds = {k[5:]: ref[k] for k in ref.files if k.startswith("feed:")}
    x, w = feeds["x"], feeds["w"]

    def run(step):
        grads, fetched = _tiller.compute_gradients(info["model"], info["params"], feeds, "", ["x"],
                                                   True, [], step)
        return grads["x"], float(next(iter(fetched.values())))

    g0, loss0 = run(0)
    kept = g0 != 0
    np.testing.assert_allclose(g0[kept], w[kept] / np.float32(0.7), rtol=1e-6)
    np.testing.assert_allclose(loss0, float(np.sum(x.astype(np.float64) * g0)), rtol=1e-5)
    n, p = kept.size, 0.3
    assert abs(kept.sum() - n * (1 - p)) <= 6 * np.sqrt(n * p * (1 - p))
    np.testing.assert_array_equal(run(0)[0], g0)
    g1, _ = run(1)
    # Independent masks differ on 2p(1-p) = 42% of the elements.
    assert abs(np.mean((g1 != 0) != kept) - 2 * p * (1 - p)) < 6 * np.sqrt(0.42 * 0.58 / n)


@pytest.mark.parametrize("fmt", ["pir", "legacy"])
@pytest.mark.parametrize("preset", ["bert-tiny", "ernie-tiny", "resnet-tiny"])
def test_zoo_model_gradients_match_eager_paddle(zoo, preset, fmt):
    """Every op of the exported BERT, ERNIE and ResNet programs has a rule:
    d sum(first output * R) / d every parameter matches the eager model's
    backward (eval mode: the exported programs are inference programs)."""
    import paddle
    import tiller.inference as ti
    from models import build_model, get_spec, make_inputs
    from tiller import _tiller

    exp = zoo.export(preset, fmt, batch=2, seq_len=8)
    spec = get_spec(preset)
    inputs = make_inputs(preset, 2, 8)
    model = build_model(preset)  # the export's weights (same seed, same names)
    outs = model(*[paddle.to_tensor(inputs[n]) for n, _ in spec.inputs])
    y = outs[0] if isinstance(outs, (tuple, list)) else outs
    r = np.random.default_rng(5).uniform(-1, 1, y.shape).astype(np.float32)
    (y * paddle.to_tensor(r)).sum().backward()
    ref = {p.name: p.grad.numpy() for p in model.parameters() if p.grad is not None}
    assert len(ref) > 10

    first = ti.create_predictor(ti.Config(exp.model_file, exp.params_file)).get_output_names()[0]
    grads, _ = _tiller.compute_gradients(exp.model_file, exp.params_file, inputs, first,
                                         sorted(ref), False, [], 0, r)
    case_scale = max(float(np.max(np.abs(g))) for g in ref.values())
    for name, want in ref.items():
        _compare(f"{preset}/{fmt} d loss / d {name}", grads[name], want, case_scale)


@pytest.mark.parametrize("fmt", ["pir", "legacy"])
def test_resnet_training_mode_matches_eager_paddle(zoo, tmp_path, fmt):
    """ResNet with batch_norm in training mode (batch statistics): the export
    re-marked is_test = false against the eager model in train(); the
    legacy program also yields the running-statistics update."""
    import shutil

    import paddle
    from models import build_model, get_spec, make_inputs
    from tiller import _tiller

    exp = zoo.export("resnet-tiny", fmt, batch=4)
    prefix = tmp_path / "model"
    for f in (exp.model_file, exp.params_file):
        shutil.copy(f, tmp_path / Path(f).name)
    env = dict(os.environ, FLAGS_enable_pir_api="0" if fmt == "legacy" else "1")
    proc = subprocess.run([sys.executable, __file__, "--mark-training", str(prefix), fmt], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]

    spec = get_spec("resnet-tiny")
    inputs = make_inputs("resnet-tiny", 4)
    model = build_model("resnet-tiny")
    model.train()
    y = model(*[paddle.to_tensor(inputs[n]) for n, _ in spec.inputs])
    r = np.random.default_rng(5).uniform(-1, 1, y.shape).astype(np.float32)
    (y * paddle.to_tensor(r)).sum().backward()
    ref = {p.name: p.grad.numpy() for p in model.parameters() if p.grad is not None}
    bns = [m for m in model.sublayers() if isinstance(m, paddle.nn.layer.norm._BatchNormBase)]
    stats = {s.name: s.numpy() for m in bns for s in (m._mean, m._variance)}
    assert len(stats) > 5
    fetch = sorted(stats) if fmt == "legacy" else []
    model_file = str(prefix) + (".json" if fmt == "pir" else ".pdmodel")
    grads, fetched = _tiller.compute_gradients(model_file, str(prefix) + ".pdiparams", inputs, "",
                                               sorted(ref), True, fetch, 0, r)
    case_scale = max(float(np.max(np.abs(g))) for g in ref.values())
    for name, want in ref.items():
        _compare(f"resnet-tiny/{fmt} train d loss / d {name}", grads[name], want, case_scale)
    for name in fetch:
        _compare(f"resnet-tiny/{fmt} running {name}", fetched[name], stats[name])


if __name__ == "__main__":
    if sys.argv[1] == "--mark-training":
        import paddle

        paddle.enable_static()
        _mark_training(paddle, sys.argv[2], paddle.static.Executor(paddle.CPUPlace()),
                       sys.argv[3] == "pir")
    else:
        _child(sys.argv[1])
