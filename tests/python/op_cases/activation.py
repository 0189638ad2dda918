"""Activation ops. Inputs are drawn inside each function's domain; shapes
include a size-1 dim and an odd length so vector tails are exercised.

PIR programs come from Paddle's Python API; legacy ones append the legacy
op verbatim (Paddle 3.3's Python API cannot trace most activations in
legacy mode). Attributes Paddle 3.3's kernels no longer honour (swish beta,
relu6 threshold, hard_swish threshold/scale/offset) and ops it can no longer
emit (brelu) are checked as written legacy programs against numpy
references of the documented formulas, as older saved models carry them."""
from __future__ import annotations

import numpy as np

from op_harness import Case

rng = np.random.default_rng(1234)
SHAPES = [(3, 17), (2, 1, 33)]


def x(shape, lo=-3.0, hi=3.0, dtype=np.float32):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def unary(op, fn, lo=-3.0, hi=3.0, legacy_attrs=None, tag="", shapes=SHAPES, **kw):
    """Cases of a unary op X -> Out over `shapes`. Legacy programs get the op
    appended verbatim with `legacy_attrs`."""
    legacy_attrs = {} if legacy_attrs is None else legacy_attrs
    cases = []
    for i, shape in enumerate(shapes):
        legacy = (op, {"X": ["x"]}, ["Out"], legacy_attrs)
        cases.append(Case(op, f"{tag}{i}", {"x": x(shape, lo, hi)}, api=lambda p, v, fn=fn: fn(p, v),
                          legacy=legacy, **kw))
    return cases


def ints(op, fn, lo=-50, hi=50, tag="", **kw):
    """Integer cases (int32 and int64) of a unary op; results must be exact.
    `kw` are the legacy attributes."""
    cases = []
    for dt in (np.int32, np.int64):
        v = rng.integers(lo, hi, size=(3, 7)).astype(dt)
        cases.append(Case(op, f"{tag}{np.dtype(dt).name}", {"x": v}, api=lambda p, t, fn=fn: fn(p, t),
                          legacy=(op, {"X": ["x"]}, ["Out"], kw), exact=True))
    return cases


def written(op, tag, inputs, attrs, ref, params=None, out_shape=None):
    """Legacy-only program written directly, checked against numpy `ref`."""
    first = next(iter(inputs.values()))
    slots = {"X": ["x"]}
    if params:
        slots.update({k.capitalize(): [k] for k in params})
    out = ("Out", first.dtype.type, out_shape or first.shape)
    return Case(op, f"written_{tag}", inputs, legacy=(op, slots, [out], attrs), params=params,
                reference=ref, formats=("legacy",))


F = lambda p: p.nn.functional  # noqa: E731

CASES = [
    *unary("abs", lambda p, v: p.abs(v)),
    *ints("abs", lambda p, v: p.abs(v)),
    *unary("exp", lambda p, v: p.exp(v)),
    *unary("log", lambda p, v: p.log(v), 0.01, 5.0),
    *unary("log2", lambda p, v: p.log2(v), 0.01, 50.0),
    *unary("log10", lambda p, v: p.log10(v), 0.01, 500.0),
    *unary("sqrt", lambda p, v: p.sqrt(v), 0.0, 5.0),
    *unary("rsqrt", lambda p, v: p.rsqrt(v), 0.05, 5.0),
    *unary("relu", lambda p, v: F(p).relu(v)),
    *unary("sigmoid", lambda p, v: F(p).sigmoid(v), -8.0, 8.0),
    *unary("tanh", lambda p, v: p.tanh(v)),
    *unary("gelu", lambda p, v: F(p).gelu(v)),
    *unary("gelu", lambda p, v: F(p).gelu(v, approximate=True), legacy_attrs={"approximate": True},
           tag="tanh"),
    *unary("erf", lambda p, v: p.erf(v)),
    *unary("square", lambda p, v: p.square(v)),
    *ints("square", lambda p, v: p.square(v)),
    *unary("reciprocal", lambda p, v: p.reciprocal(v), 0.1, 4.0),
    *unary("silu", lambda p, v: F(p).silu(v)),
    *unary("sin", lambda p, v: p.sin(v)),
    *unary("cos", lambda p, v: p.cos(v)),
    *unary("tan", lambda p, v: p.tan(v), -1.4, 1.4),
    *unary("asin", lambda p, v: p.asin(v), -0.99, 0.99),
    *unary("acos", lambda p, v: p.acos(v), -0.99, 0.99),
    *unary("atan", lambda p, v: p.atan(v), -6.0, 6.0),
    *unary("sinh", lambda p, v: p.sinh(v), -5.0, 5.0),
    *unary("cosh", lambda p, v: p.cosh(v), -5.0, 5.0),
    *unary("asinh", lambda p, v: p.asinh(v), -6.0, 6.0),
    *unary("acosh", lambda p, v: p.acosh(v), 1.01, 8.0),
    *unary("atanh", lambda p, v: p.atanh(v), -0.95, 0.95),
    *unary("expm1", lambda p, v: p.expm1(v), -3.0, 3.0),
    *unary("floor", lambda p, v: p.floor(v)),
    *ints("floor", lambda p, v: p.floor(v)),
    *unary("ceil", lambda p, v: p.ceil(v)),
    *ints("ceil", lambda p, v: p.ceil(v)),
    *unary("sign", lambda p, v: p.sign(v)),
    *ints("sign", lambda p, v: p.sign(v)),
    *unary("log1p", lambda p, v: p.log1p(v), -0.9, 5.0),
    *unary("softsign", lambda p, v: F(p).softsign(v), -10.0, 10.0),
    *unary("logsigmoid", lambda p, v: F(p).log_sigmoid(v), -30.0, 30.0),
    *unary("tanh_shrink", lambda p, v: F(p).tanhshrink(v)),
    *unary("mish", lambda p, v: F(p).mish(v), -8.0, 25.0, legacy_attrs={"threshold": 20.0}),
    *unary("mish", lambda p, v: p._C_ops.mish(v, 1.5), legacy_attrs={"threshold": 1.5}, tag="th",
           shapes=SHAPES[:1]),
    *unary("selu", lambda p, v: F(p).selu(v)),
    *unary("selu", lambda p, v: F(p).selu(v, 1.2, 0.8), legacy_attrs={"scale": 1.2, "alpha": 0.8},
           tag="attrs", shapes=SHAPES[:1]),
    *unary("hard_shrink", lambda p, v: F(p).hardshrink(v), legacy_attrs={"threshold": 0.5}),
    *unary("hard_shrink", lambda p, v: F(p).hardshrink(v, 1.2), legacy_attrs={"threshold": 1.2},
           tag="th", shapes=SHAPES[:1]),
    *unary("softshrink", lambda p, v: F(p).softshrink(v), legacy_attrs={"lambda": 0.5}),
    *unary("softshrink", lambda p, v: F(p).softshrink(v, 1.1), legacy_attrs={"lambda": 1.1},
           tag="l", shapes=SHAPES[:1]),
    *unary("thresholded_relu", lambda p, v: F(p).thresholded_relu(v),
           legacy_attrs={"threshold": 1.0}),
    *unary("thresholded_relu", lambda p, v: F(p).thresholded_relu(v, 0.4, -0.25),
           legacy_attrs={"threshold": 0.4, "value": -0.25}, tag="tv", shapes=SHAPES[:1]),
    *unary("leaky_relu", lambda p, v: F(p).leaky_relu(v, 0.1), legacy_attrs={"alpha": 0.1}),
    *unary("leaky_relu", lambda p, v: F(p).leaky_relu(v), legacy_attrs={"alpha": 0.01}, tag="def",
           shapes=SHAPES[:1]),
    *unary("elu", lambda p, v: F(p).elu(v, 0.7), legacy_attrs={"alpha": 0.7}),
    *unary("elu", lambda p, v: F(p).elu(v), legacy_attrs={"alpha": 1.0}, tag="def",
           shapes=SHAPES[:1]),
    *unary("celu", lambda p, v: F(p).celu(v, 0.7), legacy_attrs={"alpha": 0.7}),
    *unary("celu", lambda p, v: F(p).celu(v), legacy_attrs={"alpha": 1.0}, tag="def",
           shapes=SHAPES[:1]),
    *unary("celu", lambda p, v: F(p).celu(v, -1.5), legacy_attrs={"alpha": -1.5}, tag="neg",
           shapes=SHAPES[:1]),
    *unary("hard_swish", lambda p, v: F(p).hardswish(v), -5.0, 5.0),
    *unary("hard_sigmoid", lambda p, v: F(p).hardsigmoid(v), -5.0, 5.0,
           legacy_attrs={"slope": 1.0 / 6, "offset": 0.5}),
    *unary("hard_sigmoid", lambda p, v: F(p).hardsigmoid(v, 0.2, 0.3), -5.0, 5.0,
           legacy_attrs={"slope": 0.2, "offset": 0.3}, tag="attrs", shapes=SHAPES[:1]),
    *unary("relu6", lambda p, v: F(p).relu6(v), -2.0, 8.0, legacy_attrs={"threshold": 6.0}),
    *unary("softplus", lambda p, v: F(p).softplus(v, beta=2.0, threshold=5.0), -5.0, 5.0,
           legacy_attrs={"beta": 2.0, "threshold": 5.0}),
    *unary("softplus", lambda p, v: F(p).softplus(v), -30.0, 30.0,
           legacy_attrs={"beta": 1.0, "threshold": 20.0}, tag="def", shapes=SHAPES[:1]),
    *unary("swish", lambda p, v: F(p).swish(v), legacy_attrs={"beta": 1.0}),
    *unary("pow", lambda p, v: p.pow(v, 2.5), 0.0, 4.0, legacy_attrs={"factor": 2.5}),
    *unary("pow", lambda p, v: p.pow(v, 3.0), legacy_attrs={"factor": 3.0}, tag="cube",
           shapes=SHAPES[:1]),
    *unary("pow", lambda p, v: p.pow(v, -1.5), 0.2, 4.0, legacy_attrs={"factor": -1.5}, tag="neg",
           shapes=SHAPES[:1]),
    # Integer pow truncates the factor to an integer first: 2.5 acts as 2.
    *ints("pow", lambda p, v: p.pow(v, 2.5), factor=2.5),
    *ints("pow", lambda p, v: p.pow(v, 3.0), -9, 9, factor=3.0, tag="cube"),
    *unary("clip", lambda p, v: p.clip(v, -1.0, 1.5), legacy_attrs={"min": -1.0, "max": 1.5}),
    *unary("clip", lambda p, v: p.clip(v, min=0.5), legacy_attrs={"min": 0.5, "max": 3.4e38},
           tag="min", shapes=SHAPES[:1]),
    *unary("clip", lambda p, v: p.clip(v, max=-0.5), legacy_attrs={"min": -3.4e38, "max": -0.5},
           tag="max", shapes=SHAPES[:1]),
]

# float64: the same kernels' double path.
for _op, _fn, _lo, _hi, _attrs in [
        ("exp", lambda p, v: p.exp(v), -5.0, 5.0, {}),
        ("tanh", lambda p, v: p.tanh(v), -5.0, 5.0, {}),
        ("acos", lambda p, v: p.acos(v), -0.99, 0.99, {}),
        ("logsigmoid", lambda p, v: F(p).log_sigmoid(v), -30.0, 30.0, {}),
        ("mish", lambda p, v: F(p).mish(v), -8.0, 25.0, {"threshold": 20.0}),
        ("selu", lambda p, v: F(p).selu(v), -3.0, 3.0, {}),
        ("softshrink", lambda p, v: F(p).softshrink(v, 0.7), -3.0, 3.0, {"lambda": 0.7}),
        ("gelu", lambda p, v: F(p).gelu(v), -3.0, 3.0, {}),
        ("clip", lambda p, v: p.clip(v, -0.5, 0.5), -3.0, 3.0, {"min": -0.5, "max": 0.5})]:
    CASES.append(Case(_op, "f64", {"x": x((3, 17), _lo, _hi, np.float64)},
                      api=lambda p, v, fn=_fn: fn(p, v),
                      legacy=(_op, {"X": ["x"]}, ["Out"], _attrs)))

# round: ties (k + 0.5) go to even in Paddle 3; decimals scale first.
_halves = (rng.integers(-6, 6, size=(4, 9)) + 0.5).astype(np.float32)
CASES += [Case("round", "ties", {"x": _halves}, api=lambda p, v: p.round(v),
               legacy=("round", {"X": ["x"]}, ["Out"], {}))]
CASES += unary("round", lambda p, v: p.round(v), -20.0, 20.0)
CASES += ints("round", lambda p, v: p.round(v))
CASES += unary("round", lambda p, v: p.round(v, decimals=2), legacy_attrs={"decimals": 2},
               tag="d2", shapes=SHAPES[:1])
CASES += unary("round", lambda p, v: p.round(v, decimals=-1), -200.0, 200.0,
               legacy_attrs={"decimals": -1}, tag="dm1", shapes=SHAPES[:1])

# prelu: alpha is a parameter; modes all / channel (both layouts) / element.
def _prelu(tag, shape, mode, fmt, alpha_shape):
    a = rng.uniform(-0.5, 0.5, size=alpha_shape).astype(np.float32)
    return Case("prelu", tag, {"x": x(shape)}, params={"alpha": a},
                api=lambda p, v, w: p._C_ops.prelu(v, w, fmt, mode),
                legacy=("prelu", {"X": ["x"], "Alpha": ["alpha"]}, ["Out"],
                        {"mode": mode, "data_format": fmt}))


CASES += [
    _prelu("all", (2, 3, 4, 5), "all", "NCHW", (1,)),
    _prelu("all_2d", (3, 17), "all", "NCHW", (1,)),
    _prelu("channel_nchw", (2, 3, 4, 5), "channel", "NCHW", (3,)),
    _prelu("channel_nhwc", (2, 4, 5, 3), "channel", "NHWC", (3,)),
    _prelu("channel_ncl", (2, 6, 7), "channel", "NCHW", (6,)),
    _prelu("channel_1", (2, 1, 4, 5), "channel", "NCHW", (1,)),
    _prelu("element", (2, 3, 4, 5), "element", "NCHW", (1, 3, 4, 5)),
    _prelu("element_nhwc", (2, 4, 5, 3), "element", "NHWC", (1, 4, 5, 3)),
]

# clip with bounds fed as tensors at run time, and integer clip.
_cx = x((3, 17))
CASES += [
    Case("clip", "tensors", {"x": _cx, "mn": np.array([-0.7], np.float32),
                             "mx": np.array([1.2], np.float32)},
         api=lambda p, v, lo, hi: p.clip(v, lo, hi),
         legacy=("clip", {"X": ["x"], "Min": ["mn"], "Max": ["mx"]}, ["Out"],
                 {"min": -3.4e38, "max": 3.4e38})),
    Case("clip", "min_tensor", {"x": _cx, "mn": np.array([0.3], np.float32)},
         api=lambda p, v, lo: p.clip(v, lo, 2.0),
         legacy=("clip", {"X": ["x"], "Min": ["mn"]}, ["Out"], {"min": -1.0, "max": 2.0})),
]
for _dt in (np.int32, np.int64):
    _ci = rng.integers(-20, 20, size=(4, 6)).astype(_dt)
    CASES.append(Case("clip", f"int_{np.dtype(_dt).name}", {"x": _ci},
                      api=lambda p, v: p.clip(v, -5, 7),
                      legacy=("clip", {"X": ["x"]}, ["Out"], {"min": -5.0, "max": 7.0}),
                      exact=True))

# pow with a FactorTensor fed at run time (legacy only: the Python API turns
# a tensor exponent into elementwise_pow).
CASES.append(Case("pow", "factor_tensor", {"x": x((3, 17), 0.1, 3.0),
                                           "f": np.array([1.7], np.float32)},
                  legacy=("pow", {"X": ["x"], "FactorTensor": ["f"]}, ["Out"], {"factor": 1.0}),
                  formats=("legacy",)))

# brelu (hardtanh): PIR programs spell it pd_op.hardtanh; legacy programs
# from Paddle before 2.x's rename are written directly.
CASES += unary("brelu", lambda p, v: F(p).hardtanh(v), -3.0, 3.0, formats=("pir",))
CASES += unary("brelu", lambda p, v: F(p).hardtanh(v, -0.5, 2.0), formats=("pir",), tag="attrs",
               shapes=SHAPES[:1])


def _brelu_ref(t_min, t_max):
    return lambda x: [np.where(x <= t_min, t_min, np.where(x >= t_max, t_max, x)).astype(x.dtype)]


CASES += [
    written("brelu", "def", {"x": x((4, 5), -5.0, 30.0)}, {"t_min": 0.0, "t_max": 24.0},
            _brelu_ref(np.float32(0.0), np.float32(24.0))),
    written("brelu", "attrs", {"x": x((2, 1, 9))}, {"t_min": -1.0, "t_max": 1.5},
            _brelu_ref(np.float32(-1.0), np.float32(1.5))),
]

# Attributes of older legacy programs that Paddle 3.3 ignores.
_xs = x((3, 11), -6.0, 6.0)
CASES += [
    written("swish", "beta", {"x": _xs}, {"beta": 2.0},
            lambda x: [(x / (1 + np.exp(-2.0 * x.astype(np.float64)))).astype(np.float32)]),
    written("relu6", "threshold", {"x": _xs}, {"threshold": 4.0},
            lambda x: [np.minimum(np.maximum(x, 0), np.float32(4.0))]),
    written("hard_swish", "attrs", {"x": _xs}, {"threshold": 5.0, "scale": 4.0, "offset": 2.5},
            lambda x: [(x.astype(np.float64) * np.clip(x + 2.5, 0, 5.0) / 4.0).astype(np.float32)]),
]

# A program written directly with a numpy reference keeps relu's route tested.
_xw = x((4, 5))
CASES.append(Case("relu", "written", {"x": _xw}, legacy=("relu", {"X": ["x"]}, [("Out", np.float32, (4, 5))], {}),
                  reference=lambda x: [np.maximum(x, 0)], formats=("legacy",)))
