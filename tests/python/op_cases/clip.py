"""Gradient-clipping ops of training programs' optimizer section:
squared_l2_norm (ClipGradByGlobalNorm sums them) and clip_by_norm
(ClipGradByNorm). PIR programs use paddle._C_ops; legacy programs append the
legacy op verbatim."""
from __future__ import annotations

import numpy as np

from op_harness import Case

rng = np.random.default_rng(2468)
C = lambda p: p._C_ops  # noqa: E731


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _sq_l2(name, x):
    return Case("squared_l2_norm", name, {"x": x}, api=lambda p, x: C(p).squared_l2_norm(x),
                legacy=("squared_l2_norm", {"X": ["x"]}, ["Out"], {}))


def _clip(name, x, max_norm):
    return Case("clip_by_norm", name, {"x": x},
                api=lambda p, x, m=max_norm: C(p).clip_by_norm(x, m),
                legacy=("clip_by_norm", {"X": ["x"]}, ["Out"], {"max_norm": max_norm}))


CASES = [
    _sq_l2("matrix", f32(7, 13)),
    _sq_l2("vector_large", f32(5000)),
    _sq_l2("zeros", np.zeros((3, 4), np.float32)),
    _clip("above", f32(6, 9), 1.0),        # norm ~7: scaled down to 1
    _clip("below", f32(6, 9, scale=0.01), 1.0),  # norm ~0.07: unchanged
    _clip("zeros", np.zeros((4, 5), np.float32), 0.5),
    _clip("tiny_max_norm", f32(3, 3), 1e-20),
]
