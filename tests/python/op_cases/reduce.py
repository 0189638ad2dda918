"""Reductions: reduce_sum/mean/max/min/prod over dim lists, negative dims,
keep_dim and reduce_all, for float32 and (except mean) int32/int64."""
from __future__ import annotations

import numpy as np

from op_harness import Case

rng = np.random.default_rng(31)

# (shape, dim, keep_dim, reduce_all); dim None = every axis (PIR: axis=None).
REDUCE = [((3, 17), [1], False, False), ((3, 17), [0], True, False),
          ((2, 3, 4, 5), [1, 2], False, False), ((2, 3, 4, 5), [0, 2], True, False),
          ((2, 3, 4, 5), [-1, -3], False, False), ((2, 1, 5), [1], False, False),
          ((2, 3, 4), None, False, True), ((2, 3, 4), None, True, True), ((7,), [0], False, False),
          ((2, 3, 4, 5), [0, 1, 3], False, False)]

API = {"reduce_sum": "sum", "reduce_mean": "mean", "reduce_max": "max", "reduce_min": "min",
       "reduce_prod": "prod"}


def arr(shape, dtype, op):
    if op == "reduce_prod":  # keep products of up to 60 factors in range
        if np.dtype(dtype).kind == "f":
            return (rng.uniform(0.8, 1.25, size=shape) * rng.choice([-1, 1], size=shape)).astype(dtype)
        return rng.choice([-1, 1, 1, 1, 2], size=shape).astype(dtype)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-3, 3, size=shape).astype(dtype)
    return rng.integers(-50, 50, size=shape).astype(dtype)


CASES: list[Case] = []
for op, fn in API.items():
    dtypes = ("float32",) if op == "reduce_mean" else ("float32", "int32", "int64")
    for dt in dtypes:
        for i, (shape, dim, keep, all_) in enumerate(REDUCE):
            if dt != "float32" and i % 2:
                continue  # integer coverage: every other layout is enough
            x = arr(shape, dt, op)
            attrs = {"dim": dim or [], "keep_dim": keep, "reduce_all": all_}
            # Paddle's sum of int32 gives int64 (PIR); the legacy op keeps
            # the input dtype unless out_dtype says otherwise.
            api = lambda p, x, f=fn, d=dim, k=keep: getattr(p, f)(x, d, keepdim=k)
            CASES.append(Case(op, f"{dt}_{i}", {"x": x}, api=api,
                              legacy=(op, {"X": ["x"]}, ["Out"], attrs)))
# Legacy out_dtype: int32 summed as int64. PIR sums bool as int64 (Paddle's
# Python API cannot build that in a legacy program).
CASES.append(Case("reduce_sum", "out_dtype_i64", {"x": rng.integers(-9, 9, (3, 5)).astype(np.int32)},
                  formats=("legacy",),
                  legacy=("reduce_sum", {"X": ["x"]}, [("Out", "int64")],
                          {"dim": [1], "keep_dim": False, "reduce_all": False, "out_dtype": 3})))
CASES.append(Case("reduce_sum", "bool", {"x": rng.integers(0, 2, (3, 5)).astype(bool)},
                  api=lambda p, x: p.sum(x, axis=0), formats=("pir",)))
# dim empty without reduce_all also reduces every axis.
CASES.append(Case("reduce_max", "empty_dim", {"x": arr((3, 4), "float32", "reduce_max")},
                  formats=("legacy",),
                  legacy=("reduce_max", {"X": ["x"]}, ["Out"], {"dim": [], "keep_dim": False,
                                                              "reduce_all": False})))
# Long rows and a large column reduction (vectorized partial sums).
_big = rng.uniform(-3, 3, size=(64, 700)).astype(np.float32)
for _i, _dim in enumerate([[1], [0]]):
    CASES.append(Case("reduce_sum", f"large{_i}", {"x": _big},
                      api=lambda p, x, d=_dim: p.sum(x, d),
                      legacy=("reduce_sum", {"X": ["x"]}, ["Out"], {"dim": _dim, "keep_dim": False,
                                                                  "reduce_all": False})))
    CASES.append(Case("reduce_max", f"large{_i}", {"x": _big}, api=lambda p, x, d=_dim: p.max(x, d),
                      legacy=("reduce_max", {"X": ["x"]}, ["Out"], {"dim": _dim, "keep_dim": False,
                                                                  "reduce_all": False})))
