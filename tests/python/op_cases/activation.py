"""Activation ops. Inputs are drawn inside each function's domain; shapes
include a size-1 dim and an odd length so vector tails are exercised."""
from __future__ import annotations

import numpy as np

from op_harness import Case

rng = np.random.default_rng(1234)
SHAPES = [(3, 17), (2, 1, 33)]


def x(shape, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def unary(op, fn, lo=-3.0, hi=3.0, legacy_attrs=None, tag="", **kw):
    """Cases of a unary op X -> Out over SHAPES. Legacy programs get the op
    appended verbatim with `legacy_attrs` (Paddle 3.3's Python API cannot
    trace most activations in legacy mode)."""
    legacy_attrs = {} if legacy_attrs is None else legacy_attrs
    cases = []
    for i, shape in enumerate(SHAPES):
        legacy = (op, {"X": ["x"]}, ["Out"], legacy_attrs)
        cases.append(Case(op, f"{tag}{i}", {"x": x(shape, lo, hi)}, api=lambda p, v, fn=fn: fn(p, v),
                          legacy=legacy, **kw))
    return cases


F = lambda p: p.nn.functional  # noqa: E731

CASES = [
    *unary("abs", lambda p, v: p.abs(v)),
    *unary("exp", lambda p, v: p.exp(v)),
    *unary("log", lambda p, v: p.log(v), 0.01, 5.0),
    *unary("sqrt", lambda p, v: p.sqrt(v), 0.0, 5.0),
    *unary("rsqrt", lambda p, v: p.rsqrt(v), 0.05, 5.0),
    *unary("relu", lambda p, v: F(p).relu(v)),
    *unary("sigmoid", lambda p, v: F(p).sigmoid(v), -8.0, 8.0),
    *unary("tanh", lambda p, v: p.tanh(v)),
    *unary("gelu", lambda p, v: F(p).gelu(v)),
    *unary("gelu", lambda p, v: F(p).gelu(v, approximate=True), legacy_attrs={"approximate": True}, tag="tanh")[:1],
    *unary("erf", lambda p, v: p.erf(v)),
    *unary("square", lambda p, v: p.square(v)),
    *unary("reciprocal", lambda p, v: p.reciprocal(v), 0.1, 4.0),
    *unary("silu", lambda p, v: F(p).silu(v)),
    *unary("sin", lambda p, v: p.sin(v)),
    *unary("cos", lambda p, v: p.cos(v)),
    *unary("floor", lambda p, v: p.floor(v)),
    *unary("ceil", lambda p, v: p.ceil(v)),
    *unary("sign", lambda p, v: p.sign(v)),
    *unary("log1p", lambda p, v: p.log1p(v), -0.9, 5.0),
    *unary("leaky_relu", lambda p, v: F(p).leaky_relu(v, 0.1), legacy_attrs={"alpha": 0.1}),
    *unary("elu", lambda p, v: F(p).elu(v, 0.7), legacy_attrs={"alpha": 0.7}),
    *unary("hard_swish", lambda p, v: F(p).hardswish(v), -5.0, 5.0),
    *unary("hard_sigmoid", lambda p, v: F(p).hardsigmoid(v), -5.0, 5.0,
           legacy_attrs={"slope": 1.0 / 6, "offset": 0.5}),
    *unary("relu6", lambda p, v: F(p).relu6(v), -2.0, 8.0, legacy_attrs={"threshold": 6.0}),
    *unary("softplus", lambda p, v: F(p).softplus(v, beta=2.0, threshold=5.0), -5.0, 5.0,
           legacy_attrs={"beta": 2.0, "threshold": 5.0}),
    *unary("swish", lambda p, v: F(p).swish(v), legacy_attrs={"beta": 1.0}),
]

# A program written directly (legacy_writer.py) with a numpy reference: the
# route for ops Paddle 3.3 can no longer emit. relu keeps the route tested.
_xw = x((4, 5))
CASES.append(Case("relu", "written", {"x": _xw}, legacy=("relu", {"X": ["x"]}, [("Out", np.float32, (4, 5))], {}),
                  reference=lambda x: [np.maximum(x, 0)], formats=("legacy",)))
