"""Writes legacy Paddle programs (ProgramDesc protobuf + combined .pdiparams)
directly, for ops that paddlepaddle 3.3 can no longer emit (mul,
lookup_table, brelu, flatten2, ...) but that saved models still contain.
Uses the framework_pb2 schema shipped in the paddle wheel; the parameter
records follow Paddle's tensor serializer (docs/PADDLE_FORMATS.md)."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
from paddle.base.proto import framework_pb2 as fpb

DTYPES = {np.dtype("float32"): "FP32", np.dtype("float64"): "FP64", np.dtype("int32"): "INT32",
          np.dtype("int64"): "INT64", np.dtype("bool"): "BOOL", np.dtype("float16"): "FP16",
          np.dtype("int8"): "INT8", np.dtype("uint8"): "UINT8", np.dtype("int16"): "INT16"}


def _vt(name: str) -> int:
    return fpb.VarType.Type.Value(name)


def _tensor_var(block, name, dtype, shape, persistable=False):
    v = block.vars.add()
    v.name = name
    v.persistable = persistable
    v.type.type = _vt("DENSE_TENSOR")
    t = v.type.dense_tensor.tensor
    t.data_type = _vt(DTYPES[np.dtype(dtype)])
    t.dims.extend(int(d) for d in shape)
    return v


def _set_attr(op, name, value):
    a = op.attrs.add()
    a.name = name
    A = fpb.AttrType
    if isinstance(value, bool):
        a.type, a.b = A.Value("BOOLEAN"), value
    elif isinstance(value, (int, np.integer)):
        if -2**31 <= value < 2**31:
            a.type, a.i = A.Value("INT"), int(value)
        else:
            a.type, a.l = A.Value("LONG"), int(value)
    elif isinstance(value, float):
        a.type, a.f = A.Value("FLOAT"), value
    elif isinstance(value, str):
        a.type, a.s = A.Value("STRING"), value
    elif isinstance(value, (list, tuple)):
        if all(isinstance(x, bool) for x in value) and value:
            a.type = A.Value("BOOLEANS")
            a.bools.extend(value)
        elif all(isinstance(x, (int, np.integer)) for x in value):
            a.type = A.Value("INTS")
            a.ints.extend(int(x) for x in value)
        elif all(isinstance(x, str) for x in value):
            a.type = A.Value("STRINGS")
            a.strings.extend(value)
        else:
            a.type = A.Value("FLOATS")
            a.floats.extend(float(x) for x in value)
    else:
        raise TypeError(f"attribute {name}: unsupported value {value!r}")


def _add_op(block, op_type, inputs, outputs, attrs):
    op = block.ops.add()
    op.type = op_type
    for slot, names in inputs.items():
        v = op.inputs.add()
        v.parameter = slot
        v.arguments.extend(names)
    for slot, names in outputs.items():
        v = op.outputs.add()
        v.parameter = slot
        v.arguments.extend(names)
    for k, val in attrs.items():
        _set_attr(op, k, val)
    return op


def tensor_record(arr: np.ndarray) -> bytes:
    desc = fpb.VarType.TensorDesc()
    desc.data_type = _vt(DTYPES[arr.dtype])
    desc.dims.extend(arr.shape)
    d = desc.SerializeToString()
    return (struct.pack("<I", 0) + struct.pack("<Q", 0) + struct.pack("<I", 0) +
            struct.pack("<i", len(d)) + d + np.ascontiguousarray(arr).tobytes())


def write_program(out_dir: Path, op_type: str, feeds: dict, params: dict, inputs: dict,
                  outputs: dict, attrs: dict) -> tuple[Path, Path]:
    """One-op program: feeds (name -> array) are inputs, params (name ->
    array) persistable; `inputs`/`outputs` map slots to variable names;
    `outputs` values are (names, dtype, shape) per slot; an output may name
    an input variable (an in-place update, as Paddle writes optimizer ops).
    Every output var is fetched, in slot order. Returns (model.pdmodel,
    model.pdiparams)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    prog = fpb.ProgramDesc()
    block = prog.blocks.add()
    block.idx, block.parent_idx = 0, -1
    feed = block.vars.add()
    feed.name, feed.persistable = "feed", True
    feed.type.type = _vt("FEED_MINIBATCH")
    fetch = block.vars.add()
    fetch.name, fetch.persistable = "fetch", True
    fetch.type.type = _vt("FETCH_LIST")
    for name, arr in feeds.items():
        _tensor_var(block, name, arr.dtype, arr.shape)
    for name, arr in params.items():
        _tensor_var(block, name, arr.dtype, arr.shape, persistable=True)
    out_names = []
    for slot, (names, dtype, shape) in outputs.items():
        for n in names:
            if n not in feeds and n not in params:
                _tensor_var(block, n, dtype, shape)
            out_names.append(n)
    for col, name in enumerate(feeds):
        _add_op(block, "feed", {"X": ["feed"]}, {"Out": [name]}, {"col": col})
    _add_op(block, op_type, inputs, {s: v[0] for s, v in outputs.items()}, attrs)
    for col, name in enumerate(out_names):
        _add_op(block, "fetch", {"X": [name]}, {"Out": ["fetch"]}, {"col": col})
    model = out_dir / "model.pdmodel"
    model.write_bytes(prog.SerializeToString())
    params_path = out_dir / "model.pdiparams"
    if params:
        params_path.write_bytes(b"".join(tensor_record(params[n]) for n in sorted(params)))
    return model, params_path
