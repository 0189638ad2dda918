"""Elementwise binary ops (arithmetic, comparison, logic) with numpy
broadcasting, Paddle's legacy `axis` alignment (legacy programs only: Paddle
3.3's API broadcasts numpy-style, i.e. axis = -1) and int32/int64 operands."""
from __future__ import annotations

import numpy as np

from op_harness import Case, exact_case

rng = np.random.default_rng(2024)

# (x shape, y shape): same shape, scalar-like, row bias, column, size-1 dims
# on both sides, y of higher rank than x.
BCAST = [((3, 17), (3, 17)), ((2, 3, 4), (4,)), ((2, 1, 5), (3, 1)), ((4, 1), (1, 6)),
         ((5,), (2, 3, 5)), ((2, 3), (1,))]
# Legacy `axis`: y (or x, the lower-rank operand) is aligned with the other
# operand starting at dim `axis`; trailing size-1 dims are allowed.
AXIS = [((2, 3, 4, 5), (3, 4), 1), ((3, 3, 3, 3), (3, 3), 0), ((2, 3, 4, 5), (2, 3), 0), ((2, 3, 4, 5), (4, 1), 2),
        ((2, 3, 4, 5), (3, 4, 5), -1), ((3, 4), (2, 3, 4, 5), 1)]


def arr(shape, dtype, lo=-3.0, hi=3.0):
    if np.dtype(dtype).kind == "f":
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    return rng.integers(int(lo), int(hi) + 1, size=shape).astype(dtype)


def nonzero(shape, dtype, lo, hi):
    a = arr(shape, dtype, lo, hi)
    a[a == 0] = 1
    if np.dtype(dtype).kind == "f":  # keep divisors away from 0
        a = np.where(np.abs(a) < 0.25, np.float32(0.5), a).astype(dtype)
    return a


def binary(op, api, dtypes=("float32",), ylo=-3.0, yhi=3.0, xlo=-3.0, xhi=3.0, y_nonzero=False,
           out_dtype=None, pairs=BCAST, **kw):
    cases = []
    for dt in dtypes:
        for i, (xs, ys) in enumerate(pairs):
            x = arr(xs, dt, xlo, xhi)
            y = nonzero(ys, dt, ylo, yhi) if y_nonzero else arr(ys, dt, ylo, yhi)
            out = "Out" if out_dtype is None else ("Out", out_dtype)
            cases.append(Case(op, f"{dt}_{i}", {"x": x, "y": y}, api=api,
                              legacy=(op, {"X": ["x"], "Y": ["y"]}, [out], {"axis": -1}), **kw))
        for i, (xs, ys, axis) in enumerate(AXIS):
            x = arr(xs, dt, xlo, xhi)
            y = nonzero(ys, dt, ylo, yhi) if y_nonzero else arr(ys, dt, ylo, yhi)
            out = "Out" if out_dtype is None else ("Out", out_dtype)
            cases.append(Case(op, f"{dt}_axis{i}", {"x": x, "y": y}, formats=("legacy",),
                              legacy=(op, {"X": ["x"], "Y": ["y"]}, [out], {"axis": axis}), **kw))
    return cases


INTS = ("float32", "int32", "int64")

CASES = [
    *binary("elementwise_add", lambda p, x, y: p.add(x, y), INTS),
    *binary("elementwise_sub", lambda p, x, y: p.subtract(x, y), INTS),
    *binary("elementwise_mul", lambda p, x, y: p.multiply(x, y), INTS),
    *binary("elementwise_div", lambda p, x, y: p.divide(x, y), ("float32",), y_nonzero=True),
    *binary("elementwise_max", lambda p, x, y: p.maximum(x, y), INTS),
    *binary("elementwise_min", lambda p, x, y: p.minimum(x, y), INTS),
    # Positive bases keep float pow real; integer exponents stay small.
    *binary("elementwise_pow", lambda p, x, y: p.pow(x, y), ("float32",), xlo=0.1, xhi=3.0),
    *binary("elementwise_pow", lambda p, x, y: p.pow(x, y), ("int32", "int64"), xlo=-4, xhi=4,
            ylo=0, yhi=4),
    # Signs of both operands vary: the remainder takes the divisor's sign.
    *binary("elementwise_mod", lambda p, x, y: p.remainder(x, y), ("float32",), xlo=-9, xhi=9,
            y_nonzero=True),
    *binary("elementwise_mod", lambda p, x, y: p.remainder(x, y), ("int32", "int64"), xlo=-20,
            xhi=20, ylo=-6, yhi=6, y_nonzero=True),
]

# Comparisons: integer-valued operands so that equality actually occurs.
for _op, _fn in [("equal", "equal"), ("not_equal", "not_equal"), ("greater_than", "greater_than"),
                 ("less_than", "less_than")]:
    for _dt in INTS:
        for _i, (_xs, _ys) in enumerate(BCAST[:4]):
            _x = rng.integers(-2, 3, size=_xs).astype(_dt)
            _y = rng.integers(-2, 3, size=_ys).astype(_dt)
            CASES.append(Case(_op, f"{_dt}_{_i}", {"x": _x, "y": _y},
                              api=lambda p, x, y, fn=_fn: getattr(p, fn)(x, y),
                              legacy=(_op, {"X": ["x"], "Y": ["y"]}, [("Out", "bool")],
                                      {"axis": -1, "force_cpu": False})))
    # Paddle 3.3 infers compare shapes numpy-style but its kernels honour
    # `axis`, so only shapes that broadcast both ways can be built; these
    # give different answers under the two alignments.
    for _axis in (0, 1):
        _x = rng.integers(-1, 2, size=(3, 3, 3, 3)).astype(np.float32)
        _y = rng.integers(-1, 2, size=(3, 3)).astype(np.float32)
        CASES.append(Case(_op, f"axis{_axis}", {"x": _x, "y": _y}, formats=("legacy",),
                          legacy=(_op, {"X": ["x"], "Y": ["y"]}, [("Out", "bool")], {"axis": _axis})))

def _bool_binary_cases(op):
    """op on bool operands of the first four broadcast shapes."""
    for i, (xs, ys) in enumerate(BCAST[:4]):
        x = rng.integers(0, 2, size=xs).astype(bool)
        y = rng.integers(0, 2, size=ys).astype(bool)
        CASES.append(Case(op, f"bool_{i}", {"x": x, "y": y},
                          api=lambda p, x, y, op=op: getattr(p, op)(x, y),
                          legacy=(op, {"X": ["x"], "Y": ["y"]}, [("Out", "bool")], {})))


# Logic ops on bool operands (and on numbers, which Paddle reads as != 0).
for _op in ("logical_and", "logical_or"):
    _bool_binary_cases(_op)
    for _dt in ("float32", "int64"):
        _x = rng.integers(-1, 2, size=(3, 5)).astype(_dt)
        _y = rng.integers(-1, 2, size=(3, 5)).astype(_dt)
        CASES.append(Case(_op, f"{_dt}", {"x": _x, "y": _y},
                          api=lambda p, x, y, op=_op: getattr(p, op)(x, y),
                          legacy=(_op, {"X": ["x"], "Y": ["y"]}, [("Out", "bool")], {})))
for _i, _shape in enumerate([(3, 17), (2, 1, 5), ()]):
    CASES.append(Case("logical_not", f"bool_{_i}", {"x": rng.integers(0, 2, size=_shape).astype(bool)},
                      api=lambda p, x: p.logical_not(x),
                      legacy=("logical_not", {"X": ["x"]}, [("Out", "bool")], {})))
for _dt in ("float32", "int32"):
    CASES.append(Case("logical_not", _dt, {"x": rng.integers(-1, 2, size=(4, 6)).astype(_dt)},
                      api=lambda p, x: p.logical_not(x),
                      legacy=("logical_not", {"X": ["x"]}, [("Out", "bool")], {})))

# Bitwise ops: on bool operands (masks: Paddle's `&`, `|`, `^`, `~` on bool
# tensors build them) the logical ops; on integers bitwise, negative values
# (two's complement) and the extremes included; float operands are refused
# (api_test).
def _ints(shape, dt):
    info = np.iinfo(dt)
    a = rng.integers(-70, 70, size=shape).astype(dt) if info.min < 0 else \
        rng.integers(0, 250, size=shape).astype(dt)
    a.flat[:2] = [info.min, info.max]
    return a


for _op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    _bool_binary_cases(_op)
    for _dt, (_xs, _ys) in zip(("int32", "int64", "int16", "uint8", "int8"),
                               [BCAST[0], BCAST[1], BCAST[3], BCAST[0], BCAST[2]]):
        CASES.append(exact_case(_op, _dt, {"x": _ints(_xs, _dt), "y": _ints(_ys, _dt)},
                                api=lambda p, x, y, op=_op: getattr(p, op)(x, y),
                                legacy=(_op, {"X": ["x"], "Y": ["y"]}, ["Out"], {})))
for _i, _shape in enumerate([(3, 17), ()]):
    CASES.append(Case("bitwise_not", f"bool_{_i}", {"x": rng.integers(0, 2, size=_shape).astype(bool)},
                      api=lambda p, x: p.bitwise_not(x),
                      legacy=("bitwise_not", {"X": ["x"]}, [("Out", "bool")], {})))
for _dt in ("int32", "int64", "int16", "uint8", "int8"):
    CASES.append(exact_case("bitwise_not", _dt, {"x": _ints((4, 6), _dt)},
                            api=lambda p, x: p.bitwise_not(x),
                            legacy=("bitwise_not", {"X": ["x"]}, ["Out"], {})))
# The operators, as a model writes them.
CASES.append(Case("bitwise_and", "operators",
                  {"x": rng.integers(0, 2, size=(4, 6)).astype(bool),
                   "y": rng.integers(0, 2, size=(1, 6)).astype(bool)},
                  api=lambda p, x, y: (x & y) | (~x ^ y)))
CASES.append(exact_case("bitwise_and", "operators_int64",
                        {"x": _ints((4, 6), "int64"), "y": _ints((1, 6), "int64")},
                        api=lambda p, x, y: (x & y) | (~x ^ y), legacy=None))

# atan2: every quadrant, the axes, signed zeros and infinities (Paddle's
# kernel is std::atan2); integers give float64; broadcasting (PIR expands
# the operands first; Paddle 2.6's op refuses an X dim larger than Y's).
_a = rng.uniform(-3, 3, size=(5, 8)).astype(np.float32)
_b = rng.uniform(-3, 3, size=(5, 8)).astype(np.float32)
_a[0, :8] = [0.0, -0.0, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf]
_b[0, :8] = [1.0, 1.0, -1.0, -1.0, 0.0, -0.0, np.inf, 2.0]
_a[1, :4] = [np.inf, 2.0, -2.0, 0.0]
_b[1, :4] = [-np.inf, -np.inf, np.inf, 0.0]
for _dt in ("float32", "float64"):
    CASES.append(Case("atan2", _dt, {"x": _a.astype(_dt), "y": _b.astype(_dt)},
                      api=lambda p, x, y: p.atan2(x, y),
                      legacy=("atan2", {"X1": ["x"], "X2": ["y"]}, ["Out"], {})))
for _dt in ("int32", "int64"):
    CASES.append(Case("atan2", _dt, {"x": arr((3, 4), _dt, -3, 3), "y": arr((3, 4), _dt, -3, 3)},
                      api=lambda p, x, y: p.atan2(x, y),
                      legacy=("atan2", {"X1": ["x"], "X2": ["y"]}, [("Out", "float64")], {})))
for _i, (_xs, _ys) in enumerate([((2, 3, 4), (4,)), ((2, 1, 4), (1, 3, 4))]):
    CASES.append(Case("atan2", f"bcast_{_i}", {"x": arr(_xs, "float32"), "y": arr(_ys, "float32")},
                      api=lambda p, x, y: p.atan2(x, y), formats=("pir",)))

# isnan / isinf / isfinite: NaN, both infinities, -0.0 and the largest
# finite float among ordinary values; integers are always finite.
_special = rng.standard_normal((5, 7)).astype(np.float32)
_special.flat[[0, 3, 8, 12, 20, 30]] = [np.nan, np.inf, -np.inf, -0.0, np.finfo(np.float32).max,
                                        -np.nan]
for _op in ("isnan", "isinf", "isfinite"):
    for _dt, _x in (("float32", _special), ("float64", _special.astype(np.float64)),
                    ("int32", rng.integers(-5, 5, size=(3, 4)).astype(np.int32)),
                    ("int64", rng.integers(-5, 5, size=(4,)).astype(np.int64))):
        CASES.append(Case(_op, _dt, {"x": _x}, api=lambda p, x, op=_op: getattr(p, op)(x),
                          legacy=(f"{_op}_v2", {"X": ["x"]}, [("Out", "bool")], {})))

# Integer division in legacy programs (Paddle 3.3's divide() promotes ints
# to float, so the integer kernel is reached only through elementwise_div):
# C++ truncation toward zero, operands of both signs.
for _dt in ("int32", "int64"):
    for _i, (_xs, _ys) in enumerate(BCAST[:3]):
        _x = arr(_xs, _dt, -20, 20)
        _y = nonzero(_ys, _dt, -6, 6)
        CASES.append(Case("elementwise_div", f"{_dt}_{_i}", {"x": _x, "y": _y}, formats=("legacy",),
                          legacy=("elementwise_div", {"X": ["x"], "Y": ["y"]}, ["Out"], {"axis": -1})))
# 0-D operands and a large operand (vectorized loops, long runs).
CASES.append(Case("elementwise_add", "scalar0d", {"x": arr((), "float32"), "y": arr((3, 4), "float32")},
                  api=lambda p, x, y: p.add(x, y),
                  legacy=("elementwise_add", {"X": ["x"], "Y": ["y"]}, ["Out"], {"axis": -1})))
CASES.append(Case("elementwise_mul", "large", {"x": arr((64, 700), "float32"), "y": arr((700,), "float32")},
                  api=lambda p, x, y: p.multiply(x, y),
                  legacy=("elementwise_mul", {"X": ["x"], "Y": ["y"]}, ["Out"], {"axis": -1})))
