"""Reductions: reduce_sum/mean/max/min/prod over dim lists, negative dims,
keep_dim and reduce_all, for float32 and (except mean) int32/int64; and
logsumexp (float32 and float64) over the same layouts, magnitudes whose
exp overflows float32, and inf / NaN / all -inf rows."""
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

# ---- logsumexp: axis lists (an empty one reduces every axis, as does
# reduce_all whatever axis says), keepdim; the row, column and strided
# layouts of the kernel; values far beyond exp's float32 range (88), which
# only a max-shifted sum survives; Paddle's results for non-finite rows (an
# inf or NaN in a row gives NaN, a row of -inf NaN, -inf beside finite
# values drops out).
LSE = [((3, 17), [1], False, False), ((3, 17), [0], True, False),
       ((2, 3, 4, 5), [1, 2], False, False), ((2, 3, 4, 5), [0, 2], True, False),
       ((2, 3, 4, 5), [-1, -3], False, False), ((2, 3, 4), [], False, False),
       ((2, 3, 4), [], True, False), ((2, 3, 4), [1], False, True),
       ((2, 3, 4), [0, 1, 2], True, False), ((7,), [0], False, False), ((64, 700), [1], False, False),
       ((64, 700), [0], False, False)]
for _i, (_shape, _axis, _keep, _all) in enumerate(LSE):
    for _dt in ("float32", "float64") if _i % 3 == 0 else ("float32",):
        # Paddle's API derives reduce_all itself: [] or every axis -> all.
        _api_axis = None if (_all or not _axis) else _axis
        CASES.append(Case("logsumexp", f"{_dt}_{_i}", {"x": arr(_shape, _dt, "logsumexp")},
                          api=lambda p, x, a=_api_axis, k=_keep: p.logsumexp(x, a, keepdim=k),
                          legacy=("logsumexp", {"X": ["x"]}, ["Out"],
                                  {"axis": _axis, "keepdim": _keep, "reduce_all": _all})))
_far = (rng.uniform(500, 1000, size=(4, 9)) * rng.choice([-1, 1], size=(4, 1))).astype(np.float32)
_odd = np.array([[1.0, np.inf, 2.0, 0.5], [-np.inf, -np.inf, -np.inf, -np.inf],
                 [np.nan, 1.0, 2.0, 0.5], [-np.inf, 0.0, 1.0, -2.0]], np.float32)
for _name, _x in (("far", _far), ("nonfinite", _odd)):
    for _j, _axis in enumerate([[1], [0]]):
        CASES.append(Case("logsumexp", f"{_name}{_j}", {"x": _x},
                          api=lambda p, x, a=_axis: p.logsumexp(x, a),
                          legacy=("logsumexp", {"X": ["x"]}, ["Out"],
                                  {"axis": _axis, "keepdim": False, "reduce_all": False})))

# reduce_all / reduce_any (paddle.all / paddle.any) over bool, and over
# numbers (0 false, NaN true) in PIR programs, whose API takes them.
for op, fn in (("reduce_all", "all"), ("reduce_any", "any")):
    for i, (shape, dim, keep, all_) in enumerate(REDUCE[:8]):
        # mostly true for all, mostly false for any, so both answers occur
        x = rng.random(shape) < (0.85 if op == "reduce_all" else 0.15)
        attrs = {"dim": dim or [], "keep_dim": keep, "reduce_all": all_}
        CASES.append(Case(op, f"bool_{i}", {"x": x}, exact=True,
                          api=lambda p, x, f=fn, d=dim, k=keep: getattr(p, f)(x, d, keepdim=k),
                          legacy=(op, {"X": ["x"]}, [("Out", "bool")], attrs)))
    v = rng.integers(0, 3, (4, 6)).astype(np.float32)
    v[1, :] = 1.0
    v[2, 3] = np.nan
    CASES.append(Case(op, "float32", {"x": v}, exact=True, formats=("pir",),
                      api=lambda p, x, f=fn: getattr(p, f)(x, axis=1)))
