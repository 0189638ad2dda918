"""Indexing and search ops: gather, where, top_k(_v2), argsort, one_hot(_v2),
lookup_table(_v2). Integer results (indices, one-hot rows, gathers) are
compared exactly.

Ties: Paddle orders tied values only under argsort(stable=True) (index
order, both directions); Tiller's sort is always stable. Cases with ties use
stable=True; others draw distinct floats so every index is determined.
top_k with sorted=False leaves the order unspecified, so those cases compare
order-free reductions (row sums of values and of indices) instead.
Paddle 3.3 cannot emit top_k (v1), one_hot (v1) or lookup_table (v1): they
are written directly with numpy references."""
from __future__ import annotations

import numpy as np

from op_harness import Case, exact_case, written_case

rng = np.random.default_rng(2468)


def distinct(shape, dtype=np.float32):
    """Distinct values (a shuffled range, scaled), so sort order is unique."""
    n = int(np.prod(shape))
    if np.dtype(dtype).kind == "f":
        v = (rng.permutation(n).astype(np.float64) - n / 2) * 0.37
    else:  # whole numbers: n / 2 would give -0.5 and 0.5, both 0 as integers
        v = rng.permutation(n).astype(np.float64) - n // 2
    return v.reshape(shape).astype(dtype)


C = exact_case
written = written_case


CASES: list[Case] = []

# ---- gather ---------------------------------------------------------------------
for i, (shape, idx, axis, it, dt) in enumerate([
        ((5, 3), [0, 4, 2, 2], 0, np.int64, np.float32), ((4, 6), [5, 0, 1], 1, np.int32, np.float32),
        ((3, 4, 5), [2, 1], -1, np.int64, np.int64), ((6,), [3, 3, 0, 5, 1], 0, np.int32, np.int32)]):
    ins = {"x": distinct(shape, dt), "index": np.array(idx, it)}
    CASES.append(C("gather", f"{i}", ins, api=lambda p, v, ix, a=axis: p.gather(v, ix, axis=a),
                   legacy=("gather", {"X": ["x"], "Index": ["index"]}, ["Out"], {"axis": axis})))

# ---- gather_nd (negative indices count from the end) ---------------------------------
for i, (shape, idx, it, dt) in enumerate([
        ((2, 3, 4), [[1, -1], [0, 2], [1, 0]], np.int64, np.float32),
        ((4, 5), [[[3, 1]], [[0, 4]]], np.int32, np.float32),
        ((3, 4, 2), [[2], [0], [-3]], np.int64, np.int64),
        ((2, 3), [[1, 2], [0, 0], [-1, -3]], np.int32, np.float64)]):
    ins = {"x": distinct(shape, dt), "index": np.array(idx, it)}
    CASES.append(C("gather_nd", f"{i}", ins, api=lambda p, v, ix: p.gather_nd(v, ix),
                   legacy=("gather_nd", {"X": ["x"], "Index": ["index"]}, ["Out"], {})))

# ---- index_select (as gather along dim) -------------------------------------------
for i, (shape, idx, dim, it, dt) in enumerate([
        ((5, 3), [0, 4, 2, 2], 0, np.int64, np.float32), ((4, 6), [5, 0, 1], 1, np.int32, np.float32),
        ((3, 4, 5), [4, 1], -1, np.int64, np.int64), ((2, 3, 4), [2, 0, 2], -2, np.int32, np.float64)]):
    ins = {"x": distinct(shape, dt), "index": np.array(idx, it)}
    CASES.append(C("index_select", f"{i}", ins,
                   api=lambda p, v, ix, d=dim: p.index_select(v, ix, axis=d),
                   legacy=("index_select", {"X": ["x"], "Index": ["index"]}, ["Out"], {"dim": dim})))

# ---- masked_fill (PIR; Paddle 2.6 writes it as where) --------------------------------
for i, (xs, ms, dt, value) in enumerate([((3, 4), (3, 4), np.float32, -1.5), ((2, 3, 4), (3, 1), np.float32, 7.0),
                                         ((4, 5), (5,), np.int64, 9), ((2, 3), (2, 3), np.float64, np.inf)]):
    ins = {"x": distinct(xs, dt), "m": rng.integers(0, 2, size=ms).astype(bool)}
    CASES.append(C("masked_fill", f"{i}", ins, formats=("pir",),
                   api=lambda p, v, m, val=value: p.masked_fill(v, m, val), legacy=None))

# ---- where ----------------------------------------------------------------------
for i, (cs, xs, ys, dt) in enumerate([((3, 4), (3, 4), (3, 4), np.float32),
                                      ((3, 1), (1, 4), (3, 4), np.float32),
                                      ((2, 3, 4), (4,), (3, 1), np.int64),
                                      ((5,), (5,), (1,), np.int32)]):
    ins = {"c": rng.integers(0, 2, size=cs).astype(bool), "x": distinct(xs, dt), "y": distinct(ys, dt)}
    CASES.append(C("where", f"{i}", ins, api=lambda p, c, v, w: p.where(c, v, w),
                   legacy=("where", {"Condition": ["c"], "X": ["x"], "Y": ["y"]}, [("Out", str(np.dtype(dt)))], {}),
                   formats=("pir",) if cs != xs or cs != ys else ("pir", "legacy")))

# ---- top_k_v2 / top_k -------------------------------------------------------------
for i, (shape, k, axis, largest, dt) in enumerate([
        ((4, 9), 3, -1, True, np.float32), ((4, 9), 1, 0, False, np.float32),
        ((2, 5, 6), 4, 1, True, np.int64), ((7,), 7, 0, False, np.int32), ((3, 1, 4), 2, -1, True, np.float64)]):
    CASES.append(C("top_k_v2", f"{i}", {"x": distinct(shape, dt)},
                   api=lambda p, v, k=k, a=axis, l=largest: p.topk(v, k, a, l),
                   legacy=("top_k_v2", {"X": ["x"]}, ["Out", ("Indices", "int64")],
                           {"k": k, "axis": axis, "largest": largest, "sorted": True})))
# k as a tensor operand.
CASES.append(C("top_k_v2", "ktensor", {"x": distinct((3, 8))},
               api=lambda p, v: p.topk(v, p.full([1], 3, "int32")), legacy=None, formats=("pir",)))
CASES.append(C("top_k_v2", "ktensor_legacy", {"x": distinct((3, 8))}, params={"k": np.array([5], np.int32)},
               api=None, legacy=("top_k_v2", {"X": ["x"], "K": ["k"]}, ["Out", ("Indices", "int64")],
                                 {"k": 1, "axis": -1, "largest": True, "sorted": True}),
               formats=("legacy",)))


def _unsorted(p, v, k, axis, largest):
    vals, ids = p.topk(v, k, axis, largest, sorted=False)
    return p.sum(vals, axis), p.sum(ids, axis)


for i, (shape, k, axis, largest) in enumerate([((4, 9), 3, -1, True), ((6, 5), 2, 0, False)]):
    CASES.append(Case("top_k_v2", f"unsorted{i}", {"x": distinct(shape)},
                      api=lambda p, v, k=k, a=axis, l=largest: _unsorted(p, v, k, a, l),
                      formats=("pir",)))


def _topk_ref(x, k):
    ids = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    return [np.take_along_axis(x, ids, -1), ids.astype(np.int64)]


for i, (shape, k) in enumerate([((4, 9), 3), ((2, 3, 5), 5), ((6,), 2)]):
    xa = distinct(shape)
    out_shape = shape[:-1] + (k,)
    CASES.append(written("top_k", f"{i}", {"x": xa},
                         ("top_k", {"X": ["x"]}, [("Out", np.float32, out_shape), ("Indices", np.int64, out_shape)],
                          {"k": k}), lambda x, k=k: _topk_ref(x, k)))

# ---- argsort ----------------------------------------------------------------------
for i, (shape, axis, desc, dt) in enumerate([((4, 9), -1, False, np.float32), ((4, 9), 0, True, np.float32),
                                             ((2, 5, 6), 1, True, np.int64), ((8,), 0, False, np.int32),
                                             ((3, 1, 4), -3, False, np.float64)]):
    CASES.append(C("argsort", f"{i}", {"x": distinct(shape, dt)},
                   api=lambda p, v, a=axis, d=desc: [p.sort(v, a, d), p.argsort(v, a, d)],
                   legacy=("argsort", {"X": ["x"]}, ["Out", ("Indices", "int64")],
                           {"axis": axis, "descending": desc})))
# Ties with stable=True: equal values keep index order in both directions.
for i, (shape, axis, desc) in enumerate([((5, 12), -1, False), ((5, 12), -1, True), ((10, 3), 0, True)]):
    xt = rng.integers(0, 4, size=shape).astype(np.float32)
    CASES.append(C("argsort", f"ties{i}", {"x": xt},
                   api=lambda p, v, a=axis, d=desc: p.argsort(v, a, d, stable=True),
                   legacy=("argsort", {"X": ["x"]}, ["Out", ("Indices", "int64")],
                           {"axis": axis, "descending": desc, "stable": True})))

# ---- one_hot_v2 / one_hot ------------------------------------------------------------
for i, (shape, depth, it) in enumerate([((6,), 5, np.int64), ((2, 3), 4, np.int32), ((3, 1), 7, np.int64)]):
    ids = rng.integers(0, depth, size=shape).astype(it)
    CASES.append(C("one_hot_v2", f"{i}", {"ids": ids},
                   api=lambda p, v, d=depth: p.nn.functional.one_hot(v, d),
                   legacy=("one_hot_v2", {"X": ["ids"]}, [("Out", "float32")],
                           {"depth": depth, "dtype": 5, "allow_out_of_range": False})))
# Out-of-range ids with allow_out_of_range give zero rows. Paddle 3.3's CPU
# kernel rejects them anyway, so this case is written with a numpy reference.
_oor = np.array([0, 5, 2, -1, 9], np.int64)
CASES.append(written("one_hot_v2", "oor", {"ids": _oor},
                     ("one_hot_v2", {"X": ["ids"]}, [("Out", np.float32, (5, 4))],
                      {"depth": 4, "dtype": 5, "allow_out_of_range": True}),
                     lambda ids: [np.stack([np.eye(4, dtype=np.float32)[i] if 0 <= i < 4
                                            else np.zeros(4, np.float32) for i in ids])]))


def _one_hot_ref(ids, depth):
    flat = ids.reshape(ids.shape[:-1])
    out = np.zeros(flat.shape + (depth,), np.float32)
    ok = (flat >= 0) & (flat < depth)
    np.put_along_axis(out, np.where(ok, flat, 0)[..., None], 1.0, -1)
    out[~ok] = 0
    return [out]


for i, (shape, depth, it) in enumerate([((6, 1), 5, np.int64), ((2, 3, 1), 4, np.int32)]):
    ids = rng.integers(0, depth, size=shape).astype(it)
    out_shape = shape[:-1] + (depth,)
    CASES.append(written("one_hot", f"{i}", {"ids": ids},
                         ("one_hot", {"X": ["ids"]}, [("Out", np.float32, out_shape)],
                          {"depth": depth, "dtype": 5, "allow_out_of_range": False}),
                         lambda ids, d=depth: _one_hot_ref(ids, d)))

# ---- lookup_table_v2 / lookup_table ---------------------------------------------------
for i, (ids_shape, vocab, dim, pad, it) in enumerate([((4,), 10, 8, -1, np.int64), ((2, 3), 7, 5, 2, np.int64),
                                                      ((3, 2), 6, 4, -1, np.int32)]):
    ids = rng.integers(0, vocab, size=ids_shape).astype(it)
    if pad >= 0:
        ids.flat[0] = pad
    w = rng.uniform(-1, 1, size=(vocab, dim)).astype(np.float32)
    CASES.append(C("lookup_table_v2", f"{i}", {"ids": ids}, params={"w": w},
                   api=lambda p, v, w, pad=pad: p.nn.functional.embedding(v, w, padding_idx=None if pad < 0 else pad),
                   legacy=("lookup_table_v2", {"Ids": ["ids"], "W": ["w"]}, ["Out"],
                           {"padding_idx": pad, "is_sparse": False})))
for i, (ids_shape, vocab, dim, pad) in enumerate([((4, 1), 10, 8, -1), ((2, 3, 1), 7, 5, 3)]):
    ids = rng.integers(0, vocab, size=ids_shape).astype(np.int64)
    if pad >= 0:
        ids.flat[0] = pad
    w = rng.uniform(-1, 1, size=(vocab, dim)).astype(np.float32)

    def _ref(ids, w, pad=pad):
        out = w[ids[..., 0]]
        if pad >= 0:
            out[ids[..., 0] == pad] = 0
        return [out]
    CASES.append(written("lookup_table", f"{i}", {"ids": ids},
                         ("lookup_table", {"Ids": ["ids"], "W": ["w"]},
                          [("Out", np.float32, ids_shape[:-1] + (dim,))], {"padding_idx": pad}),
                         _ref, params={"w": w}))
