"""An op used with an attribute value Tiller does not handle must fail when
the model is loaded (create_predictor, before any run), naming the op, the
attribute and the value — never run and give a wrong answer. That holds for
models with static feed shapes and with a dynamic batch dim, while a valid
dynamic-shape model whose translation only fits its real sizes still loads
and runs. Programs are written directly (legacy_writer.py) so any attribute
value and any declared feed shape can be expressed."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import legacy_writer
import tiller.inference as ti

X = np.zeros((1, 2, 4, 4), np.float32)

# (op, inputs, output shape, attributes, attribute named, value named)
CASES = [
    ("pool2d", {"X": ["x"]}, (1, 2, 2, 2),
     {"pooling_type": "lp", "ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0]},
     "pooling_type", "lp"),
    ("pool2d", {"X": ["x"]}, (1, 2, 2, 2),
     {"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0],
      "padding_algorithm": "BOGUS"}, "padding_algorithm", "BOGUS"),
    ("dropout", {"X": ["x"]}, X.shape,
     {"dropout_prob": 0.5, "is_test": True, "dropout_implementation": "sideways"},
     "dropout_implementation", "sideways"),
    ("prelu", {"X": ["x"], "Alpha": ["alpha"]}, X.shape, {"mode": "diagonal"}, "mode", "diagonal"),
    ("matmul", {"X": ["x"], "Y": ["x"]}, (1, 2, 4, 4), {"head_number": 4}, "head_number", "4"),
    ("celu", {"X": ["x"]}, X.shape, {"alpha": 0.0}, "alpha", "0"),
    # Window attributes kernels divide or step by (a stride of 0 was a SIGFPE, issue 14).
    ("conv2d", {"Input": ["x"], "Filter": ["filter"]}, X.shape,
     {"strides": [1, 0], "paddings": [0, 0], "dilations": [1, 1], "groups": 1}, "strides",
     "[1, 0]"),
    ("conv2d", {"Input": ["x"], "Filter": ["filter"]}, X.shape,
     {"strides": [1, 1], "paddings": [0, 0], "dilations": [0, 1], "groups": 1}, "dilations",
     "[0, 1]"),
    ("depthwise_conv2d", {"Input": ["x"], "Filter": ["filter"]}, X.shape,
     {"strides": [1, 1], "paddings": [-1, 0], "dilations": [1, 1], "groups": 2}, "paddings",
     "[-1, 0]"),
    ("pool2d", {"X": ["x"]}, (1, 2, 2, 2),
     {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 0], "paddings": [0, 0]}, "strides",
     "[2, 0]"),
    ("pool2d", {"X": ["x"]}, (1, 2, 2, 2),
     {"pooling_type": "avg", "ksize": [0, 2], "strides": [2, 2], "paddings": [0, 0]}, "ksize",
     "[0, 2]"),
    # Found by sweeping every int attribute of exported models over 0, -1,
    # 2^31 - 1, 10^12 and [] (issue 14): an empty or short list was read
    # past its end (SIGSEGV), and max_pool2d_with_index divided by its stride.
    ("conv2d_transpose", {"Input": ["x"], "Filter": ["filter"]}, X.shape,
     {"strides": [], "paddings": [0, 0], "dilations": [1, 1], "groups": 1}, "strides", "[]"),
    ("conv2d_transpose", {"Input": ["x"], "Filter": ["filter"]}, X.shape,
     {"strides": [1, 1], "paddings": [0, 0], "dilations": [], "groups": 1}, "dilations", "[]"),
    ("conv2d", {"Input": ["x"], "Filter": ["filter"]}, X.shape,
     {"strides": [1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1}, "strides", "[1]"),
    ("max_pool2d_with_index", {"X": ["x"]}, (1, 2, 2, 2),
     {"ksize": [2, 2], "strides": [2, 0], "paddings": [0, 0]}, "strides", "[2, 0]"),
    ("max_pool2d_with_index", {"X": ["x"]}, (1, 2, 2, 2),
     {"ksize": [2, -2147483648], "strides": [2, 2], "paddings": [0, 0]}, "ksize",
     "[2, -2147483648]"),
]
PARAMS = {"Alpha": {"alpha": np.ones((1,), np.float32)},
          "Filter": {"filter": np.ones((2, 2, 1, 1), np.float32)}}


def _feed(batch):
    """The feed as the program declares it: X's shape, or batch -1 (dynamic)."""
    return X if batch == "static" else SimpleNamespace(dtype=X.dtype, shape=(-1,) + X.shape[1:])


@pytest.mark.parametrize("batch", ["static", "dynamic"])
@pytest.mark.parametrize("op,inputs,out_shape,attrs,attr,value", CASES,
                         ids=[f"{c[0]}-{c[5]}" for c in CASES])
def test_unhandled_attribute_fails_at_create_predictor(tmp_path, op, inputs, out_shape, attrs,
                                                       attr, value, batch):
    params = {}
    for slot, p in PARAMS.items():
        if slot in inputs:
            params.update(p)
    if op == "depthwise_conv2d":  # one input channel per group
        params["filter"] = np.ones((2, 1, 1, 1), np.float32)
    model, params_path = legacy_writer.write_program(
        tmp_path, op, {"x": _feed(batch)}, params, inputs,
        {"Out": (["out"], np.float32, out_shape)}, attrs)
    config = ti.Config(str(model), str(params_path) if params else "")
    with pytest.raises(ti.TillerError) as info:
        ti.create_predictor(config)
    msg = str(info.value)
    assert op in msg and attr in msg and value in msg and str(model) in msg, msg


def test_dynamic_batch_model_whose_shapes_only_fit_real_sizes_creates_and_runs(tmp_path):
    # reshape2 to [2, -1, 3] needs a batch divisible by 2: the batch-1
    # placeholder translated at load cannot be reshaped, yet the model is
    # valid. It must load, run with batch 4 and match numpy; batch 1 is
    # then refused at run, naming the reshape.
    model, _ = legacy_writer.write_program(
        tmp_path, "reshape2", {"x": SimpleNamespace(dtype=np.float32, shape=(-1, 3))}, {},
        {"X": ["x"]}, {"Out": (["out"], np.float32, (2, -1, 3))}, {"shape": [2, -1, 3]})
    predictor = ti.create_predictor(ti.Config(str(model), ""))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    (out,) = predictor.run([x])
    np.testing.assert_array_equal(out, x.reshape(2, -1, 3))
    with pytest.raises(ti.TillerError) as info:
        predictor.run([np.ones((1, 3), np.float32)])
    assert "reshape" in str(info.value) and "[1, 3]" in str(info.value), str(info.value)


def test_dynamic_batch_model_creates_and_runs_each_batch(tmp_path):
    attrs = {"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0]}
    model, _ = legacy_writer.write_program(
        tmp_path, "pool2d", {"x": _feed("dynamic")}, {}, {"X": ["x"]},
        {"Out": (["out"], np.float32, (-1, 2, 2, 2))}, attrs)
    predictor = ti.create_predictor(ti.Config(str(model), ""))
    rng = np.random.default_rng(0)
    for batch in (3, 1):
        x = rng.standard_normal((batch, 2, 4, 4)).astype(np.float32)
        (out,) = predictor.run([x])
        want = x.reshape(batch, 2, 2, 2, 2, 2).mean(axis=(3, 5))
        # Four float32 additions and one division: a few ulp.
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape,attrs,named", [
    ((2, 6), {"data_layout": "NCDHW"}, ["data_layout", "NCDHW"]),
    ((2, 6), {"data_layout": "AnyLayout"}, ["data_layout", "AnyLayout"]),
    ((2, 6), {"slot_dim": 4}, ["slot_dim", "4", "6 columns"]),
    ((2, 3, 2, 1), {"data_layout": "NHWC"}, ["rank 4", "2-D"]),
], ids=["NCDHW", "AnyLayout", "slot_dim", "rank4"])
def test_data_norm_refuses_what_paddles_cpu_kernel_cannot_run(tmp_path, shape, attrs, named):
    """data_norm as Paddle's CPU kernel runs it: a 2-D input, layout NCHW or
    NHWC, slot_dim a divisor of the columns (Paddle's kernel would read past
    the row). Anything else fails at load, naming the attribute."""
    c = shape[-1] if attrs.get("data_layout") == "NHWC" else shape[1]
    params = {n: np.full((c,), 100.0, np.float32) for n in ("bs", "bsum", "bsq")}
    model, params_path = legacy_writer.write_program(
        tmp_path, "data_norm", {"x": np.zeros(shape, np.float32)}, params,
        {"X": ["x"], "BatchSize": ["bs"], "BatchSum": ["bsum"], "BatchSquareSum": ["bsq"]},
        {"Y": (["y"], np.float32, shape), "Means": (["means"], np.float32, (c,)),
         "Scales": (["scales"], np.float32, (c,))},
        {"epsilon": 1e-4, "slot_dim": -1, "enable_scale_and_shift": False,
         "data_layout": "NCHW", **attrs})
    with pytest.raises(ti.TillerError) as info:
        ti.create_predictor(ti.Config(str(model), str(params_path)))
    msg = str(info.value)
    assert "data_norm" in msg and all(n in msg for n in named), msg
