"""Tensor-manipulation ops: reshape/transpose/flatten/squeeze family, slicing,
concat/split/stack, expand/tile, cast, constants (fill_*, assign_*), shape,
flip, meshgrid, unstack. Data movement is compared bit-exactly.

PIR programs use Paddle's Python API. Legacy programs append the legacy op
verbatim (same attributes as Paddle 2.x writes). Tensor-valued shape/axis
operands of legacy programs are persistable int tensors (compile-time known,
as Tiller requires); Paddle 3.3 cannot emit flatten2 or expand (v1), which are
written directly with a numpy reference."""
from __future__ import annotations

import numpy as np

from op_harness import exact_case, written_case

rng = np.random.default_rng(777)


def x(shape, dtype=np.float32):
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-3, 3, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.integers(-50, 50, size=shape).astype(dtype)


C = exact_case
written = written_case


def pir_and_written(op, name, inputs, api, ref, legacy_op, in_slots, attrs, params=None):
    """Ops with an XShape output (and cases with int parameters): Paddle's
    executor cannot fetch XShape, and LayerHelper programs cannot hold int
    parameters, so the legacy case is written directly with a numpy
    reference; the PIR case is checked against Paddle."""
    params = params or {}
    out = ref(**inputs, **params)
    cases = []
    if api is not None:
        cases.append(C(op, name, inputs, api=api, legacy=None, formats=("pir",), params=params or None))
    cases.append(written(op, f"{name}w", inputs,
                         (legacy_op, in_slots, [("Out", o.dtype, o.shape) for o in out[:1]], attrs),
                         ref, params=params or None))
    return cases


CASES: list[Case] = []

# ---- transpose2 --------------------------------------------------------------
for i, (shape, perm, dt) in enumerate([((3, 4), [1, 0], np.float32), ((2, 3, 4), [2, 0, 1], np.int64),
                                       ((2, 1, 3, 5), [0, 3, 1, 2], np.float32),
                                       ((4, 5, 6), [-1, 0, 1], np.int32)]):
    pos = [a % len(perm) for a in perm]
    CASES += pir_and_written("transpose2", f"{i}", {"x": x(shape, dt)},
                             lambda p, v, perm=pos: p.transpose(v, perm),
                             lambda x, perm=pos: [np.transpose(x, perm)],
                             "transpose2", {"X": ["x"]}, {"axis": perm, "data_format": "AnyLayout"})

# ---- reshape2 -----------------------------------------------------------------
for i, (shape, target, dt, np_target) in enumerate([
        ((3, 4), [2, -1], np.float32, (2, -1)), ((2, 3, 4), [0, 12], np.int64, (2, 12)),
        ((6,), [1, 2, 3, 1], np.float32, (1, 2, 3, 1)), ((2, 1, 5), [-1], np.int32, (-1,))]):
    CASES += pir_and_written("reshape2", f"{i}", {"x": x(shape, dt)},
                             lambda p, v, t=target: p.reshape(v, t),
                             lambda x, t=np_target: [x.reshape(t)],
                             "reshape2", {"X": ["x"]}, {"shape": target})
# Target shape as a tensor operand: a legacy int32 parameter; in PIR a
# combine of a 0-D full and an int.
CASES += pir_and_written("reshape2", "tensor", {"x": x((4, 6))},
                         lambda p, v: p.reshape(v, [p.full([], 8, "int64"), -1]),
                         lambda x, s=None: [x.reshape(3, -1, 2)],
                         "reshape2", {"X": ["x"], "Shape": ["s"]}, {"shape": []},
                         params={"s": np.array([3, -1, 2], np.int32)})[1:]
CASES.append(C("reshape2", "tensorlist", {"x": x((4, 6))},
               api=lambda p, v: p.reshape(v, [p.full([], 8, "int64"), -1]),
               legacy=None, formats=("pir",)))

# ---- flatten_contiguous_range / flatten2 -------------------------------------
for i, (shape, start, stop) in enumerate([((2, 3, 4), 1, -1), ((2, 3, 4, 5), 0, 1),
                                          ((2, 3, 4, 5), -3, -2), ((3, 1, 2), 0, -1)]):
    r = len(shape)
    a, b = start % r, stop % r
    new_shape = shape[:a] + (int(np.prod(shape[a:b + 1])),) + shape[b + 1:]
    CASES += pir_and_written("flatten_contiguous_range", f"{i}", {"x": x(shape)},
                             lambda p, v, a=start, b=stop: p.flatten(v, a, b),
                             lambda x, s=new_shape: [x.reshape(s)],
                             "flatten_contiguous_range", {"X": ["x"]},
                             {"start_axis": start, "stop_axis": stop})
for i, (shape, axis) in enumerate([((2, 3, 4), 1), ((2, 3, 4, 5), 3), ((2, 3), 0), ((3, 4), 2)]):
    xa = x(shape)
    outer = int(np.prod(shape[:axis]))
    CASES.append(written("flatten2", f"{i}", {"x": xa},
                         ("flatten2", {"X": ["x"]}, [("Out", np.float32, (outer, xa.size // outer))],
                          {"axis": axis}),
                         lambda x, outer=outer: [x.reshape(outer, -1)]))

# ---- squeeze2 / unsqueeze2 ----------------------------------------------------
def _squeeze(x, axes):
    axes = [a % x.ndim for a in axes] or [i for i, d in enumerate(x.shape) if d == 1]
    return [x.reshape([d for i, d in enumerate(x.shape) if not (i in axes and d == 1)])]


for i, (shape, axes) in enumerate([((1, 3, 1, 4), [0]), ((1, 3, 1, 4), [-2, 0]), ((1, 3, 1, 4), []),
                                   ((2, 1, 3), [1, 2])]):
    CASES += pir_and_written("squeeze2", f"{i}", {"x": x(shape, np.int64 if i == 1 else np.float32)},
                             lambda p, v, a=axes: p.squeeze(v, a),
                             lambda x, a=axes: _squeeze(x, a),
                             "squeeze2", {"X": ["x"]}, {"axes": axes})


def _unsqueeze(x, axes):
    s = list(x.shape)
    for a in axes:
        s.insert(a if a >= 0 else a + len(s) + 1, 1)
    return [x.reshape(s)]


for i, (shape, axes) in enumerate([((3, 4), [0]), ((3, 4), [-1]), ((3, 4), [0, 2]), ((2,), [1, -1])]):
    CASES += pir_and_written("unsqueeze2", f"{i}", {"x": x(shape, np.int32 if i == 2 else np.float32)},
                             lambda p, v, a=axes: p.unsqueeze(v, a),
                             lambda x, a=axes: _unsqueeze(x, a),
                             "unsqueeze2", {"X": ["x"]}, {"axes": axes})
CASES += pir_and_written("unsqueeze2", "tensor", {"x": x((3, 4))}, None,
                         lambda x, a=None: _unsqueeze(x, [1]),
                         "unsqueeze2", {"X": ["x"], "AxesTensor": ["a"]}, {"axes": []},
                         params={"a": np.array([1], np.int32)})

# ---- cast ---------------------------------------------------------------------
# VarType codes: bool 0, int16 1, int32 2, int64 3, fp16 4, fp32 5, fp64 6, uint8 20, int8 21.
VT = {"bool": 0, "int16": 1, "int32": 2, "int64": 3, "float16": 4, "float32": 5, "float64": 6,
      "uint8": 20, "int8": 21}
_cast_src = {"float32": x((3, 5)) * 20, "int64": x((3, 5), np.int64), "int32": x((2, 7), np.int32),
             "bool": x((4, 3), bool), "float64": x((3, 4), np.float64) * 20}
for src, arr in _cast_src.items():
    for dst in ["float32", "float64", "int32", "int64", "bool", "uint8", "int8", "int16", "float16"]:
        if dst == src:
            continue
        a = arr
        if dst in ("uint8",):
            a = np.abs(arr)  # negative floats -> uint8 are undefined in C++
        CASES.append(C("cast", f"{src}_{dst}", {"x": a},
                       api=lambda p, v, d=dst: p.cast(v, d),
                       legacy=("cast", {"X": ["x"]}, [("Out", dst)],
                               {"in_dtype": VT[src], "out_dtype": VT[dst]})))

# ---- concat / stack / split / unstack -----------------------------------------
for i, (shapes, axis, dt) in enumerate([([(2, 3), (4, 3)], 0, np.float32),
                                        ([(2, 3, 1), (2, 3, 2), (2, 3, 3)], -1, np.int64),
                                        ([(2, 1, 4), (2, 5, 4)], 1, np.int32)]):
    ins = {f"x{k}": x(s, dt) for k, s in enumerate(shapes)}
    CASES.append(C("concat", f"{i}", ins, api=lambda p, *vs, a=axis: p.concat(list(vs), a),
                   legacy=("concat", {"X": list(ins)}, ["Out"], {"axis": axis})))
CASES += pir_and_written("concat", "axistensor", {"x0": x((2, 3)), "x1": x((2, 2))}, None,
                         lambda x0, x1, ax=None: [np.concatenate([x0, x1], 1)],
                         "concat", {"X": ["x0", "x1"], "AxisTensor": ["ax"]}, {"axis": 0},
                         params={"ax": np.array([1], np.int64)})
for i, (shape, n, axis, dt) in enumerate([((3, 4), 2, 0, np.float32), ((2, 3), 3, -1, np.int64),
                                          ((2, 1, 3), 2, 1, np.float32), ((4,), 3, 0, np.int32)]):
    ins = {f"x{k}": x(shape, dt) for k in range(n)}
    CASES.append(C("stack", f"{i}", ins, api=lambda p, *vs, a=axis: p.stack(list(vs), a),
                   legacy=("stack", {"X": list(ins)}, ["Y"], {"axis": axis})))
for i, (shape, num, sections, axis) in enumerate([((6, 4), 3, [], 0), ((2, 9), 0, [2, -1, 3], -1),
                                                  ((4, 6, 2), 0, [1, 5], 1), ((4, 6), 2, [], -1)]):
    nout = num or len(sections)
    CASES.append(C("split", f"{i}", {"x": x(shape, np.int64 if i == 1 else np.float32)},
                   api=lambda p, v, n=num, s=sections, a=axis: p.split(v, n or s, a),
                   # Paddle 3.3's legacy split kernel rejects a negative axis
                   # ("Expected idx >= 0"), so legacy programs get it normalized.
                   legacy=("split", {"X": ["x"]}, [("Out", None, nout)],
                           {"num": num, "sections": sections, "axis": axis % len(shape)})))
for i, (shape, axis) in enumerate([((3, 4), 0), ((2, 3, 4), -1), ((2, 1, 3), 1)]):
    n = shape[axis]
    CASES.append(C("unstack", f"{i}", {"x": x(shape)},
                   api=lambda p, v, a=axis: p.unstack(v, a),
                   legacy=("unstack", {"X": ["x"]}, [("Y", None, n)], {"axis": axis, "num": n})))

# ---- slice / strided_slice -----------------------------------------------------
for i, (shape, axes, starts, ends, dec) in enumerate([
        ((5, 6), [0], [1], [4], []), ((5, 6), [1, 0], [-3, 0], [100, -1], []),
        ((4, 5, 6), [2], [2], [3], [2]), ((4, 5, 6), [0, 2], [-1, 1], [10000, 4], [0]),
        ((3, 4), [1], [3], [1], [])]):
    CASES.append(C("slice", f"{i}", {"x": x(shape, np.int64 if i == 2 else np.float32)},
                   api=None, legacy=("slice", {"Input": ["x"]}, ["Out"],
                                     {"axes": axes, "starts": starts, "ends": ends,
                                      "infer_flags": [1] * len(axes), "decrease_axis": dec}),
                   formats=("legacy",)))
CASES += [
    C("slice", "api0", {"x": x((5, 6, 7))}, api=lambda p, v: v[1:4, -2:], legacy=None, formats=("pir",)),
    C("slice", "api1", {"x": x((5, 6, 7))}, api=lambda p, v: v[2, :, 3], legacy=None, formats=("pir",)),
    C("slice", "api2", {"x": x((5, 6))}, api=lambda p, v: p.slice(v, [0, 1], [1, -5], [3, 100]),
      legacy=None, formats=("pir",)),
]
CASES += pir_and_written("slice", "tensor", {"x": x((5, 6))}, None,
                         lambda x, s=None, e=None: [x[1:4, 2:5]],
                         "slice", {"Input": ["x"], "StartsTensor": ["s"], "EndsTensor": ["e"]},
                         {"axes": [0, 1], "starts": [-1, -1], "ends": [-1, -1], "infer_flags": [-1, -1],
                          "decrease_axis": []},
                         params={"s": np.array([1, 2], np.int64), "e": np.array([4, 5], np.int64)})
for i, (shape, axes, starts, ends, strides, dec) in enumerate([
        ((7, 6), [0], [1], [6], [2], []), ((7, 6), [1], [-1], [-7], [-1], []),
        ((4, 5, 6), [0, 2], [3, 5], [0, -100], [-2, -3], []),
        ((4, 5, 6), [1, 2], [2, 0], [3, 6], [1, 2], [1]),
        ((5, 6), [0, 1], [4, 4], [3, 0], [-1, -2], [0])]):
    CASES.append(C("strided_slice", f"{i}", {"x": x(shape, np.int32 if i == 1 else np.float32)},
                   api=None, legacy=("strided_slice", {"Input": ["x"]}, ["Out"],
                                     {"axes": axes, "starts": starts, "ends": ends, "strides": strides,
                                      "infer_flags": [1] * len(axes), "decrease_axis": dec}),
                   formats=("legacy",)))
CASES += [
    C("strided_slice", "api0", {"x": x((7, 6))}, api=lambda p, v: p.strided_slice(v, [0, 1], [6, -1], [0, -7], [-2, -1]),
      legacy=None, formats=("pir",)),
    C("strided_slice", "api1", {"x": x((4, 5, 6))}, api=lambda p, v: v[::-1, 1, ::2], legacy=None,
      formats=("pir",)),
]

# ---- expand_v2 / expand_as_v2 / expand (v1) / tile -----------------------------
for i, (shape, target, dt) in enumerate([((3, 1), [3, 4], np.float32), ((1, 4), [2, 3, 4], np.int64),
                                         ((2, 1, 3), [-1, 5, -1], np.float32), ((1,), [4], np.int32)]):
    CASES.append(C("expand_v2", f"{i}", {"x": x(shape, dt)}, api=lambda p, v, t=target: p.expand(v, t),
                   legacy=("expand_v2", {"X": ["x"]}, ["Out"], {"shape": target})))
for i, (shape, yshape) in enumerate([((3, 1), (3, 4)), ((1, 4), (2, 3, 4)), ((2, 1, 1), (2, 3, 5))]):
    CASES.append(C("expand_as_v2", f"{i}", {"x": x(shape), "y": x(yshape)},
                   api=lambda p, v, w: p.expand_as(v, w),
                   legacy=("expand_as_v2", {"X": ["x"], "Y": ["y"]}, ["Out"], {"target_shape": list(yshape)})))
for i, (shape, times) in enumerate([((2, 3), [2, 1]), ((1, 3, 2), [3, 2, 1]), ((4,), [3])]):
    xa = x(shape)
    CASES.append(written("expand", f"{i}", {"x": xa},
                         ("expand", {"X": ["x"]}, [("Out", np.float32, tuple(np.multiply(shape, times)))],
                          {"expand_times": times}),
                         lambda x, t=times: [np.tile(x, t)]))
for i, (shape, reps, dt) in enumerate([((2, 3), [2, 1], np.float32), ((2, 3), [3], np.int64),
                                       ((3,), [2, 1, 2], np.float32), ((1, 2, 1), [2, 3, 4], np.int32)]):
    CASES.append(C("tile", f"{i}", {"x": x(shape, dt)}, api=lambda p, v, r=reps: p.tile(v, r),
                   legacy=("tile", {"X": ["x"]}, ["Out"], {"repeat_times": reps})))

# ---- flip / meshgrid -------------------------------------------------------------
for i, (shape, axes, dt) in enumerate([((3, 4), [0], np.float32), ((3, 4, 5), [0, -1], np.int64),
                                       ((2, 3, 4), [1, 2, 0], np.float32), ((6,), [-1], np.int32)]):
    CASES.append(C("flip", f"{i}", {"x": x(shape, dt)}, api=lambda p, v, a=axes: p.flip(v, a),
                   legacy=("flip", {"X": ["x"]}, ["Out"], {"axis": axes})))
for i, (sizes, dt) in enumerate([((3, 4), np.float32), ((2, 1, 3), np.int64), ((5,), np.float32)]):
    ins = {f"x{k}": x((n,), dt) for k, n in enumerate(sizes)}
    CASES.append(C("meshgrid", f"{i}", ins, api=lambda p, *vs: p.meshgrid(*vs),
                   legacy=("meshgrid", {"X": list(ins)}, [("Out", None, len(ins))], {})))

# ---- shape / assign / share_data / fill_* / assign_value --------------------------
for i, (shape, dt) in enumerate([((2, 3), np.float32), ((1, 4, 5), np.int64), ((7,), np.float32)]):
    CASES.append(C("shape", f"{i}", {"x": x(shape, dt)}, api=lambda p, v: p.shape(v),
                   legacy=("shape", {"Input": ["x"]}, [("Out", "int32")], {})))
for i, (shape, dt) in enumerate([((2, 3), np.float32), ((4,), np.int64), ((2, 2), bool)]):
    CASES.append(C("assign", f"{i}", {"x": x(shape, dt)}, api=lambda p, v: p.assign(v),
                   legacy=("assign", {"X": ["x"]}, ["Out"], {})))
CASES.append(C("share_data", "0", {"x": x((3, 4))}, api=None,
               legacy=("share_data", {"X": ["x"]}, ["Out"], {}), formats=("legacy",)))
for i, (shape, value, dt) in enumerate([((2, 3), 1.5, None), ((3, 4), 7.0, "int64"), ((2, 2), 0.0, "bool"),
                                        ((1, 5), -2.0, "int32"), ((3,), 2.25, "float64")]):
    CASES.append(C("fill_any_like", f"{i}", {"x": x(shape)},
                   api=lambda p, v, val=value, d=dt: p.full_like(v, val, d),
                   legacy=("fill_any_like", {"X": ["x"]}, [("Out", d := dt or "float32")],
                           {"value": value, "dtype": VT[d] if dt else -1})))


def _fill_constant(shape, value, dt):
    # The fill's result is added to an input so the program has a feed.
    def api(p, v):
        return p.full(shape, value, dt) + p.cast(v, dt) * 0
    return api


for i, (shape, value, dt) in enumerate([((2, 3), 1.5, "float32"), ((3,), 7, "int64"), ((2, 2), -3, "int32")]):
    CASES.append(C("fill_constant", f"{i}", {"x": np.zeros(shape, np.float32)},
                   api=_fill_constant(list(shape), value, dt), legacy=None, formats=("pir",)))
for i, (vals, dt) in enumerate([([1.5, -2.0, 3.25, 0.5], "float32"), ([1, 2, 3, 2**40], "int64"),
                                ([4, -5, 6, 7], "int32"), ([True, False, True, True], "bool")]):
    arr = np.array(vals, dtype=dt).reshape(2, 2)
    CASES.append(C("assign_value", f"{i}", {"x": np.zeros((2, 2), np.float32)},
                   api=lambda p, v, a=arr: p.assign(a) + p.cast(v, str(a.dtype)) * 0
                   if a.dtype != bool else p.logical_or(p.assign(a), p.cast(v, "bool")),
                   legacy=None, formats=("pir",)))

# Legacy fill_constant / assign_value: programs without feeds, written directly.
for i, (shape, value, dt, extra) in enumerate([((2, 3), 1.5, "float32", {}), ((3,), 7.0, "int64", {}),
                                               ((2, 2), -3.0, "int32", {}), ((4,), 0.0, "bool", {}),
                                               ((2, 2), 0.0, "float32", {"str_value": "-inf"}),
                                               ((1, 3), 0.0, "float64", {"str_value": "2.5"})]):
    ref = np.full(shape, float(extra.get("str_value", value)), dtype=dt)
    CASES.append(written("fill_constant", f"w{i}", {},
                         ("fill_constant", {}, [("Out", ref.dtype, shape)],
                          {"shape": list(shape), "value": value, "dtype": VT[dt], **extra}),
                         lambda ref=ref: [ref]))
CASES.append(written("fill_constant", "shapetensor", {},
                     ("fill_constant", {"ShapeTensor": ["s"]}, [("Out", np.float32, (2, 4))],
                      {"shape": [], "value": 0.25, "dtype": 5}),
                     lambda s: [np.full((2, 4), 0.25, np.float32)], params={"s": np.array([2, 4], np.int64)}))
for i, (attr, vals, dt) in enumerate([("fp32_values", [1.5, -2.0, 3.25, 0.5, 1e-3, 7.0], "float32"),
                                      ("int64_values", [1, -2, 3, 2**31 - 1, 0, 5], "int64"),
                                      ("int32_values", [4, -5, 6, 7, 8, 9], "int32"),
                                      ("bool_values", [1, 0, 1, 1, 0, 0], "bool")]):
    ref = np.array(vals).astype(dt).reshape(2, 3)
    CASES.append(written("assign_value", f"w{i}", {},
                         ("assign_value", {}, [("Out", ref.dtype, (2, 3))],
                          {"shape": [2, 3], "dtype": VT[dt], attr: vals}),
                         lambda ref=ref: [ref]))

# Tensor-valued operands in PIR (builtin.combine of 0-D fulls -> *TensorList).
CASES += [
    C("slice", "pir_tensorlist", {"x": x((5, 6))},
      api=lambda p, v: p.slice(v, [0, 1], [p.full([], 1, "int64"), 2], [4, p.full([], 5, "int32")]),
      legacy=None, formats=("pir",)),
    C("tile", "pir_tensorlist", {"x": x((2, 3))},
      api=lambda p, v: p.tile(v, [p.full([], 2, "int32"), 3]), legacy=None, formats=("pir",)),
    C("expand_v2", "pir_tensorlist", {"x": x((3, 1))},
      api=lambda p, v: p.expand(v, [2, 3, p.full([], 4, "int32")]), legacy=None, formats=("pir",)),
    C("split", "pir_axis_tensor", {"x": x((4, 6))},
      api=lambda p, v: p.split(v, [2, -1], p.full([], 1, "int64")), legacy=None, formats=("pir",)),
]
CASES.append(C("squeeze2", "pir_tensorlist", {"x": x((1, 3, 1, 4))},
               api=lambda p, v: p.squeeze(v, [p.full([], 2, "int64")]), legacy=None, formats=("pir",)))

# Ops composed from other IR ops (frontend/paddle/translate/composed.cc).
# A NaN where each case's mask drops it (upper triangle for tril, lower for
# triu): 0, as Paddle's select.
_lo, _up = x((2, 4, 5)), x((2, 4, 5))
_lo[0, 1, 3] = np.nan
_up[1, 3, 0] = np.nan
for _i, (_fn, _lower, _diag) in enumerate([("tril", True, 0), ("tril", True, -1), ("triu", False, 1),
                                           ("triu", False, -2)]):
    CASES.append(C("tril_triu", f"{_fn}{_i}", {"x": _lo if _lower else _up},
                   api=lambda p, v, f=_fn, d=_diag: getattr(p, f)(v, d),
                   legacy=("tril_triu", {"X": ["x"]}, ["Out"], {"lower": _lower, "diagonal": _diag})))
CASES.append(C("tril_triu", "int64", {"x": x((3, 3), np.int64)}, api=lambda p, v: p.triu(v),
               legacy=("tril_triu", {"X": ["x"]}, ["Out"], {"lower": False, "diagonal": 0})))
for _i, (_shape, _r, _fmt) in enumerate([((2, 8, 3, 3), 2, "NCHW"), ((1, 9, 2, 4), 3, "NCHW"),
                                         ((2, 3, 3, 8), 2, "NHWC")]):
    CASES.append(C("pixel_shuffle", f"{_i}", {"x": x(_shape)},
                   api=lambda p, v, r=_r, f=_fmt: p.nn.functional.pixel_shuffle(v, r, f),
                   legacy=("pixel_shuffle", {"X": ["x"]}, ["Out"],
                           {"upscale_factor": _r, "data_format": _fmt})))
for _i, (_shape, _shifts, _axis) in enumerate([((3, 4), [1, -2], [0, 1]), ((3, 4), [5], []),
                                               ((2, 3, 4), [7], [-1]), ((5,), [-6], [0])]):
    CASES.append(C("roll", f"{_i}", {"x": x(_shape)},
                   api=lambda p, v, s=_shifts, a=_axis: p.roll(v, s, a or None),
                   legacy=("roll", {"X": ["x"]}, ["Out"], {"shifts": _shifts, "axis": _axis})))
for _i, (_shape, _axis) in enumerate([((3, 4), 1), ((2, 3, 4), 0), ((2, 3, 4), -1)]):
    _n = _shape[_axis]
    CASES.append(C("unbind", f"{_i}", {"x": x(_shape)},
                   api=lambda p, v, a=_axis: p.unbind(v, a),
                   legacy=("unbind", {"X": ["x"]}, [("Out", None, _n)], {"axis": _axis})))
# scatter: rows replaced (overwrite: a repeated index keeps its later
# update) or summed into zeroed rows (not overwrite); int32 and int64
# indices, [N, 1] indices, negative ones (from the end, as Paddle), 1-D
# and 3-D x.
_srng = np.random.default_rng(779)
for _i, (_xs, _ids, _over) in enumerate([((5, 3), [0, 2, 4], True), ((5, 3), [1, 3, 1], True),
                                         ((5, 3), [1, 3, 1], False), ((6,), [2, 5], True),
                                         ((4, 2, 3), [3, 0], False), ((4, 2), [[2], [0], [2]], True),
                                         ((5, 2), [-1, 2, -5], False)]):
    _idx = np.array(_ids, np.int32 if _i == 3 else np.int64)
    _upd = (len(_ids), *_xs[1:])
    CASES.append(C("scatter", f"{_i}",
                   {"x": _srng.uniform(-3, 3, size=_xs).astype(np.float32), "ids": _idx,
                    "u": _srng.uniform(-3, 3, size=_upd).astype(np.float32)},
                   api=lambda p, v, i, u, o=_over: p.scatter(v, i, u, overwrite=o),
                   legacy=("scatter", {"X": ["x"], "Ids": ["ids"], "Updates": ["u"]}, ["Out"],
                           {"overwrite": _over}), exact=_over))
# linspace (constant Start, Stop, Num: Paddle's values bit for bit; the
# result is added to the zeroed feed so that the program has an input).
for _i, (_a, _b, _n, _dt) in enumerate([(0.0, 1.0, 7, "float32"), (-3.3, 10.1, 50, "float32"),
                                        (2.0, 2.0, 1, "float32"), (5.0, -5.0, 4, "float32"),
                                        (0, 10, 4, "int64"), (-7, 20, 6, "int32")]):
    CASES.append(C("linspace", f"{_i}", {"x": np.zeros((1,), np.float32)},
                   api=lambda p, v, a=_a, b=_b, n=_n, d=_dt: p.linspace(a, b, n, d)
                   + p.cast(v, d) * 0, legacy=None))
