"""Math ops: matmul (v1 and v2), bmm, mul, dot, scale, sum (add_n), mean,
cumsum, arg_max/arg_min, p_norm and dist. Shapes cover 1-D operands, batch
broadcasting and size-1 dims; attribute variants are generated per op."""
from __future__ import annotations

import numpy as np

from op_harness import Case

rng = np.random.default_rng(77)
INF = float("inf")


def arr(shape, dtype="float32", lo=-3.0, hi=3.0):
    if np.dtype(dtype).kind == "f":
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    return rng.integers(int(lo), int(hi) + 1, size=shape).astype(dtype)


XY = {"X": ["x"], "Y": ["y"]}  # input slots of the binary ops


CASES: list[Case] = []

# ---- matmul_v2: numpy semantics; 1-D operands; transposes; batch broadcast.
MATMUL = [((3, 4), (4, 5), False, False), ((4, 3), (4, 5), True, False),
          ((3, 4), (5, 4), False, True), ((4, 3), (5, 4), True, True),
          ((2, 1, 3, 4), (5, 4, 6), False, False), ((2, 3, 4), (2, 5, 4), False, True),
          ((4,), (2, 4, 5), False, False), ((3, 4), (4,), False, False), ((4,), (4,), False, False),
          ((4,), (5, 4), False, True), ((1, 7), (7, 1), False, False)]
for i, (xs, ys, tx, ty) in enumerate(MATMUL):
    CASES.append(Case("matmul_v2", f"m{i}", {"x": arr(xs), "y": arr(ys)},
                      api=lambda p, x, y, tx=tx, ty=ty: p.matmul(x, y, tx, ty),
                      legacy=("matmul_v2", XY, ["Out"], {"trans_x": tx, "trans_y": ty})))

# Integer matmul_v2. Paddle 3.3's integer CPU kernel is unreliable as a
# reference: it corrupted the heap ("corrupted size vs. prev_size") or hung on
# these shapes in some runs, and returns [2, 1, 3, 6] for [2, 1, 3, 4] x
# [5, 4, 6]. So integer matmul is checked on written legacy programs against
# numpy (exact), which would flake nowhere.
def _np_matmul(x, y, tx, ty):
    if tx and x.ndim >= 2:
        x = np.swapaxes(x, -1, -2)
    if ty and y.ndim >= 2:
        y = np.swapaxes(y, -1, -2)
    return [np.matmul(x, y)]


for dt in ("int32", "int64"):
    for i in (0, 3, 4, 6):
        xs, ys, tx, ty = MATMUL[i]
        x_arr, y_arr = arr(xs, dt, -5, 5), arr(ys, dt, -5, 5)
        out = _np_matmul(x_arr, y_arr, tx, ty)[0]
        CASES.append(Case("matmul_v2", f"{dt}_m{i}", {"x": x_arr, "y": y_arr}, formats=("legacy",),
                          legacy=("matmul_v2", XY, [("Out", np.dtype(dt), out.shape)],
                                  {"trans_x": tx, "trans_y": ty}),
                          reference=lambda x, y, tx=tx, ty=ty: _np_matmul(x, y, tx, ty),
                          exact=True))

# ---- legacy matmul (v1): transpose_X/Y, alpha; run by Paddle's executor.
MATMUL_V1 = [((3, 4), (4, 5), False, False, 1.0), ((4, 3), (4, 5), True, False, 0.5),
             ((2, 3, 4), (2, 5, 4), False, True, 2.0), ((2, 4, 3), (4, 5), True, False, 1.0),
             ((3, 4), (4,), False, False, 1.0), ((4,), (4, 5), False, False, 1.5)]
for i, (xs, ys, tx, ty, alpha) in enumerate(MATMUL_V1):
    CASES.append(Case("matmul", f"m{i}", {"x": arr(xs), "y": arr(ys)}, formats=("legacy",),
                      legacy=("matmul", XY, ["Out"],
                              {"transpose_X": tx, "transpose_Y": ty, "alpha": alpha})))

# ---- bmm.
for i, (xs, ys) in enumerate([((2, 3, 4), (2, 4, 5)), ((1, 5, 2), (1, 2, 1)), ((3, 1, 6), (3, 6, 4))]):
    CASES.append(Case("bmm", f"b{i}", {"x": arr(xs), "y": arr(ys)}, api=lambda p, x, y: p.bmm(x, y),
                      legacy=("bmm", XY, ["Out"], {})))


# ---- mul (fluid fc): Paddle 3.3 cannot emit it; written program + reference.
def _mul_ref(xn, yn):
    def ref(x, y):
        xm = x.reshape(int(np.prod(x.shape[:xn])), -1)
        ym = y.reshape(int(np.prod(y.shape[:yn])), -1)
        return [(xm.astype(np.float64) @ ym).astype(np.float32).reshape(x.shape[:xn] + y.shape[yn:])]
    return ref


for i, (xs, ys, xn, yn) in enumerate([((3, 4), (4, 5), 1, 1), ((2, 3, 4), (12, 5), 1, 1),
                                      ((2, 3, 4), (4, 5), 2, 1), ((2, 3, 4), (4, 2, 3), 2, 1),
                                      ((6, 2, 2), (2, 2, 3, 2), 1, 2)]):
    out_shape = xs[:xn] + ys[yn:]
    CASES.append(Case("mul", f"w{i}", {"x": arr(xs), "y": arr(ys)}, formats=("legacy",),
                      legacy=("mul", XY, [("Out", np.float32, out_shape)],
                              {"x_num_col_dims": xn, "y_num_col_dims": yn}),
                      reference=_mul_ref(xn, yn)))

# ---- dot: 1-D and row-wise 2-D, float and integer.
for dt in ("float32", "int32", "int64"):
    for i, shape in enumerate([(7,), (3, 5), (1, 4)]):
        CASES.append(Case("dot", f"{dt}_{i}", {"x": arr(shape, dt), "y": arr(shape, dt)},
                          api=lambda p, x, y: p.dot(x, y), legacy=("dot", XY, ["Out"], {})))

# ---- scale: bias before/after scale; integer inputs truncate scale and bias.
for i, (dt, s, b, after) in enumerate([("float32", 2.5, 0.5, True), ("float32", -1.5, 2.0, False),
                                       ("float32", 0.0, 1.0, True), ("int32", 3.0, 2.0, True),
                                       ("int64", 2.0, -1.0, False), ("int64", 2.5, 1.7, True)]):
    CASES.append(Case("scale", f"s{i}", {"x": arr((3, 1, 5), dt)},
                      api=lambda p, x, s=s, b=b, a=after: p.scale(x, s, b, a),
                      legacy=("scale", {"X": ["x"]}, ["Out"],
                              {"scale": s, "bias": b, "bias_after_scale": after})))

# The other integer widths Paddle's scale takes wrap (int8 / uint8 / int16,
# values chosen to overflow); float16 rounds the product, then the sum.
for i, (dt, lo, hi, s, b, after) in enumerate([("int8", -60, 60, 3.0, 2.0, True),
                                               ("uint8", 0, 255, 2.7, 1.0, False),
                                               ("int16", -9000, 9000, -4.0, 3.5, True),
                                               ("float16", -3, 3, 2.5, 0.7, True),
                                               ("float16", -3, 3, -1.5, 0.3, False)]):
    CASES.append(Case("scale", f"w{i}", {"x": arr((3, 1, 5), dt, lo, hi)},
                      api=lambda p, x, s=s, b=b, a=after: p.scale(x, s, b, a),
                      legacy=("scale", {"X": ["x"]}, ["Out"],
                              {"scale": s, "bias": b, "bias_after_scale": after})))

# A scale computed at run time (Paddle's ScaleTensor: the legacy op's input,
# PIR's scale operand; fed here, or computed by the program): its value
# converts to x's dtype (a float factor truncates for integer x).
# (x dtype, scale dtype, scale shape, scale, bias, bias_after_scale)
SCALE_TENSOR = [("float32", "float32", (1,), 2.5, 0.5, True),
                ("float32", "float32", (1,), -1.5, 2.0, False),
                ("float32", "float32", (), 3.0, 0.0, True),
                ("float64", "float32", (1,), 0.3, -1.0, True),
                ("float32", "float64", (1,), 1.7, 0.25, False),
                ("float32", "int32", (1,), 3, 1.0, True),
                ("int32", "float32", (1,), -2.5, 1.7, True),
                ("int64", "float32", (1,), 2.5, -1.7, False),
                ("int8", "float32", (1,), 3.0, 2.0, True),
                ("float16", "float32", (1,), 2.5, 0.7, True)]
for i, (dt, sdt, sshape, s, b, after) in enumerate(SCALE_TENSOR):
    lo, hi = (-60, 60) if dt == "int8" else (-3, 3)
    CASES.append(Case("scale", f"tensor{i}",
                      {"x": arr((3, 1, 5), dt, lo, hi), "s": np.full(sshape, s, sdt)},
                      api=lambda p, x, t, b=b, a=after: p.scale(x, t, b, a),
                      legacy=("scale", {"X": ["x"], "ScaleTensor": ["s"]}, ["Out"],
                              {"scale": 1.0, "bias": b, "bias_after_scale": after})))
CASES.append(Case("scale", "computed", {"x": arr((4, 6)), "y": arr((3,), lo=0.5, hi=2.0)},
                  api=lambda p, x, y: p.scale(x, p.mean(y), 0.5), formats=("pir",)))

# ---- sum of several tensors (PIR add_n).
for i, (n, dt) in enumerate([(2, "float32"), (3, "float32"), (4, "int64"), (1, "float32"),
                             (3, "int32")]):
    ins = {f"x{k}": arr((3, 4), dt) for k in range(n)}
    CASES.append(Case("sum", f"n{i}", ins, api=lambda p, *xs: p.add_n(list(xs)),
                      legacy=("sum", {"X": list(ins)}, ["Out"], {})))

# ---- mean of all elements (PIR mean_all).
for i, shape in enumerate([(3, 17), (2, 1, 5), (1,)]):
    CASES.append(Case("mean", f"m{i}", {"x": arr(shape)}, api=lambda p, x: p._C_ops.mean_all(x),
                      legacy=("mean", {"X": ["x"]}, ["Out"], {})))

# ---- cumsum: axis (negative), flatten, exclusive, reverse; ints.
CUMSUM = [((3, 17), 1, False, False, False), ((3, 17), 0, False, True, False),
          ((2, 3, 4), -1, False, False, True), ((2, 3, 4), 1, False, True, True),
          ((2, 3, 4), -3, False, False, False), ((2, 3, 4), -1, True, False, False),
          ((2, 3, 4), -1, True, True, True)]
for dt in ("float32", "int32", "int64"):
    for i, (shape, axis, flat, excl, rev) in enumerate(CUMSUM):
        CASES.append(Case("cumsum", f"{dt}_{i}", {"x": arr(shape, dt)},
                          api=lambda p, x, a=axis, f=flat, e=excl, r=rev: p._C_ops.cumsum(x, a, f, e, r),
                          legacy=("cumsum", {"X": ["x"]}, ["Out"],
                                  {"axis": axis, "flatten": flat, "exclusive": excl, "reverse": rev})))

# ---- cumprod: dim (negative), exclusive and reverse (PIR only: Paddle 2.6's
# op has dim alone), zeros and negatives in the running products; ints
# (wrapping around past their range, as Paddle's kernel does); 0-d.
CUMPROD = [((3, 17), 1, False, False), ((3, 17), 0, False, False), ((2, 3, 4), -1, False, False),
           ((2, 3, 4), -3, False, False), ((2, 3, 4), 1, True, False), ((2, 3, 4), -1, False, True),
           ((2, 3, 4), 2, True, True)]
for dt in ("float32", "float64", "int32", "int64"):
    for i, (shape, dim, excl, rev) in enumerate(CUMPROD):
        x = arr(shape, dt, -2, 2)
        if dt[0] == "f":
            x[np.abs(x) < 0.2] = 0.0
        CASES.append(Case("cumprod", f"{dt}_{i}", {"x": x},
                          api=lambda p, x, d=dim, e=excl, r=rev: p._C_ops.cumprod(x, d, e, r),
                          legacy=("cumprod", {"X": ["x"]}, ["Out"], {"dim": dim}),
                          formats=("pir", "legacy") if not (excl or rev) else ("pir",),
                          exact=dt[0] == "i"))
CASES.append(Case("cumprod", "int32_wraps", {"x": np.full((2, 40), 3, np.int32)},
                  api=lambda p, x: p.cumprod(x, dim=1),
                  legacy=("cumprod", {"X": ["x"]}, ["Out"], {"dim": 1}), exact=True))
CASES.append(Case("cumprod", "scalar", {"x": np.array(1.5, np.float32)},
                  api=lambda p, x: p.cumprod(x, dim=0),
                  legacy=("cumprod", {"X": ["x"]}, ["Out"], {"dim": 0})))

# ---- arg_max / arg_min: keepdims, flatten, index dtype; ties (integers).
ARG = [((3, 17), 1, False, False, "int64"), ((3, 17), 0, True, False, "int64"),
       ((2, 3, 4), -2, False, False, "int32"), ((2, 3, 4), -1, True, False, "int32"),
       ((2, 3, 4), 0, False, True, "int64"), ((2, 3, 4), 0, True, True, "int64"),
       ((5,), 0, False, False, "int64")]
_VT = {"int32": 2, "int64": 3}
for op, fn in (("arg_max", "argmax"), ("arg_min", "argmin")):
    for dt in ("float32", "int32", "int64"):
        for i, (shape, axis, keep, flat, odt) in enumerate(ARG):
            x = arr(shape, dt, -3, 3)
            CASES.append(Case(op, f"{dt}_{i}", {"x": x},
                              api=lambda p, x, f=fn, a=axis, k=keep, fl=flat, o=odt:
                                  getattr(p, f)(x, None if fl else a, k, o),
                              legacy=(op, {"X": ["x"]}, [("Out", odt)],
                                      {"axis": axis, "keepdims": keep, "flatten": flat,
                                       "dtype": _VT[odt]})))

# ---- p_norm: porder 2, 1, inf, -inf, 0, fractional, 3; axis; keepdim; asvector.
PNORM = [(2.0, -1, False, False), (1.0, 0, True, False), (INF, 1, False, False),
         (-INF, -1, True, False), (0.0, 1, False, False), (0.5, -1, False, False),
         (3.0, 0, False, False), (2.0, -1, False, True), (1.5, 0, True, True),
         (INF, 0, False, True), (-2.0, 1, False, False)]
for i, (porder, axis, keep, asvec) in enumerate(PNORM):
    x = arr((3, 4, 5))
    x[0, 0, :2] = 0.0  # zeros matter for porder 0 and -inf
    CASES.append(Case("p_norm", f"p{i}", {"x": x},
                      api=lambda p, x, po=porder, a=axis, k=keep, v=asvec:
                          p._C_ops.p_norm(x, po, a, 1e-12, k, v),
                      legacy=("p_norm", {"X": ["x"]}, ["Out"],
                              {"porder": porder, "axis": axis, "epsilon": 1e-12, "keepdim": keep,
                               "asvector": asvec})))

# ---- dist: p values over broadcast operands.
for i, (p_, xs, ys) in enumerate([(2.0, (3, 4), (3, 4)), (1.0, (3, 4), (4,)), (INF, (2, 3, 4), (3, 1)),
                                  (-INF, (3, 4), (3, 4)), (0.0, (3, 4), (1, 4)),
                                  (0.5, (5,), (5,)), (3.0, (2, 1, 4), (3, 1))]):
    x, y = arr(xs), arr(ys)
    if p_ in (0.0, -INF):  # some equal elements: zero differences
        x[0, :2] = y[..., :2].reshape(-1, 2)[0]
    CASES.append(Case("dist", f"d{i}", {"x": x, "y": y}, api=lambda p, x, y, q=p_: p.dist(x, y, q),
                      legacy=("dist", XY, ["Out"], {"p": p_})))

# ---- addmm (Beta Input + Alpha X @ Y, Input broadcast), mv, logit (eps clip
# or none: outside [0, 1] NaN, as Paddle).
for i, (ins, xs, ys, alpha, beta) in enumerate([((3, 5), (3, 4), (4, 5), 1.0, 1.0),
                                                 ((5,), (3, 4), (4, 5), 2.0, 0.5),
                                                 ((3, 1), (3, 2), (2, 5), -1.5, 0.0)]):
    CASES.append(Case("addmm", f"{i}", {"i": arr(ins), "x": arr(xs), "y": arr(ys)},
                      api=lambda p, a, x, y, al=alpha, be=beta: p.addmm(a, x, y, be, al),
                      legacy=("addmm", {"Input": ["i"], "X": ["x"], "Y": ["y"]}, ["Out"],
                              {"Alpha": alpha, "Beta": beta})))
for i, (xs, k) in enumerate([((3, 4), 4), ((1, 7), 7)]):
    CASES.append(Case("mv", f"{i}", {"x": arr(xs), "v": arr((k,))},
                      api=lambda p, x, v: p.mv(x, v),
                      legacy=("mv", {"X": ["x"], "Vec": ["v"]}, ["Out"], {})))
_p = rng.uniform(0.0, 1.0, size=(4, 6)).astype("float32")
_p[0, :3] = [0.0, 1.0, 1e-5]
for i, eps in enumerate([1e-3, 0.0]):
    CASES.append(Case("logit", f"{i}", {"x": _p}, api=lambda p, x, e=eps: p.logit(x, e),
                      legacy=("logit", {"X": ["x"]}, ["Out"], {"eps": eps})))
CASES.append(Case("logit", "outside", {"x": np.array([[-0.5, 0.25, 1.5]], "float32")},
                  api=lambda p, x: p.logit(x), legacy=("logit", {"X": ["x"]}, ["Out"], {"eps": 0.0})))

# ---- einsum: matmul-like, batched, transposes, full and partial sums,
# outer and dot products, "..." broadcasting (size 1 against 5), implicit
# outputs (the letters held once, sorted, after the "..." dims), three
# operands contracted left to right, and a copy ("ij->ij").
_erng = np.random.default_rng(78)
EINSUM = [("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]),
          ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]),
          ("ijk->kj", [(3, 4, 5)]), ("i,j->ij", [(3,), (4,)]), ("i,i->", [(5,), (5,)]),
          ("ij,ij->ij", [(3, 4), (3, 4)]), ("ij,kj->ik", [(3, 4), (5, 4)]),
          ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)]), ("...i,...i", [(2, 3, 4), (3, 4)]),
          ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
          ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 6)]), (" b i , i k -> k b ", [(2, 3), (3, 4)]),
          ("ij->ij", [(3, 4)]), ("Ab,bC->CA", [(2, 3), (3, 4)])]
for i, (eq, shapes) in enumerate(EINSUM):
    names = [f"x{j}" for j in range(len(shapes))]
    CASES.append(Case("einsum", f"{i}",
                      {n: _erng.uniform(-2.0, 2.0, size=s).astype("float32")
                       for n, s in zip(names, shapes)},
                      api=lambda p, *xs, e=eq: p.einsum(e, *xs),
                      has_half_variant=len(shapes) == 2))
