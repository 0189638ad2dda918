"""``tiller.ipu_shard_guard`` / ``tiller.set_ipu_shard``: Paddle's manual
sharding annotations (``paddle.static.ipu_shard_guard`` and
``set_ipu_shard``, which refuse to run on a Paddle wheel built without IPU
support), for legacy and PIR programs alike::

    with tiller.ipu_shard_guard(index=0, stage=0):
        h = encoder_half_1(x)
    with tiller.ipu_shard_guard(index=1, stage=1):
        loss = encoder_half_2(h)

Every op the block gains inside the guard gets the attributes ``ipu_index``
(the device of its replica it runs on) and ``ipu_stage`` (its pipeline
stage), as Paddle's guard set them; -1 (the default) leaves an attribute
unset, and an op already annotated by an inner guard keeps its own. Legacy
programs store the attributes (a saved .pdmodel carries them, as Paddle's
did); PIR's serializer drops attributes an op does not declare, so
IpuCompiledProgram writes them into the program it hands to Tiller itself.
"""
from __future__ import annotations

import contextlib

__all__ = ["ipu_shard_guard", "set_ipu_shard"]

ATTRS = ("ipu_index", "ipu_stage")


def _is_pir_program(program) -> bool:
    try:
        import paddle
        return isinstance(program, paddle.pir.Program)
    except (ImportError, AttributeError):
        return False


def _block_ops(program):
    if _is_pir_program(program):
        return list(program.global_block().ops)
    return list(program.current_block().ops)


def _key(op):
    """An op's identity across listings: PIR's operation id; a legacy
    block's Operator objects persist, so the object itself."""
    return ("pir", op.id()) if hasattr(op, "set_int_attr") else ("legacy", id(op))


def _is_builtin(op) -> bool:
    """PIR's builtin ops (a parameter's definition, list packing) compute
    nothing, and its serializer refuses attributes on them (a parameter
    created by a layer inside the guard): they run where their readers do."""
    return hasattr(op, "set_int_attr") and op.name().startswith("builtin.")


def _has(op, name) -> bool:
    if hasattr(op, "has_attr"):
        return op.has_attr(name)
    return False


def _set(op, name, value) -> None:
    if hasattr(op, "set_int_attr"):        # PIR
        op.set_int_attr(name, int(value))
    else:                                   # legacy Operator
        op._set_attr(name, int(value))


@contextlib.contextmanager
def ipu_shard_guard(index=-1, stage=-1):
    """Ops created inside run on device ``index`` of their replica, in
    pipeline stage ``stage`` (-1: not set; Tiller then uses device 0 and
    stage 0, as the original did)."""
    import paddle

    for name, value in (("index", index), ("stage", stage)):
        if not isinstance(value, int) or isinstance(value, bool) or value < -1:
            raise ValueError(f"ipu_shard_guard: {name} must be an integer >= -1, got {value!r}")
    program = paddle.static.default_main_program()
    # By identity, not position: PIR puts parameter ops created inside the
    # guard at the start of the block.
    before = {_key(op) for op in _block_ops(program)}
    try:
        yield
    finally:
        for op in _block_ops(program):
            if _key(op) in before or _is_builtin(op):
                continue
            for name, value in zip(ATTRS, (index, stage)):
                if value >= 0 and not _has(op, name):
                    _set(op, name, value)


def set_ipu_shard(call_func, index=-1, stage=-1):
    """A function or ``paddle.nn.Layer`` whose every call runs inside
    ``ipu_shard_guard(index, stage)``: a function is wrapped and returned; a
    Layer is changed in place (its class becomes a subclass whose
    ``__call__`` enters the guard) and returned."""
    import functools

    import paddle

    if isinstance(call_func, paddle.nn.Layer):
        base = type(call_func)

        def __call__(self, *args, **kwargs):
            with ipu_shard_guard(index=index, stage=stage):
                return base.__call__(self, *args, **kwargs)

        call_func.__class__ = type(base.__name__, (base,), {"__call__": __call__})
        return call_func
    if not callable(call_func):
        raise TypeError(f"set_ipu_shard: expects a paddle.nn.Layer or a function, got "
                        f"{type(call_func).__name__}")

    @functools.wraps(call_func)
    def wrapper(*args, **kwargs):
        with ipu_shard_guard(index=index, stage=stage):
            return call_func(*args, **kwargs)

    return wrapper


def pir_annotations(program) -> list[dict]:
    """Per op of the PIR program's global block, in order, the shard
    attributes it carries ({} for most)."""
    out = []
    for op in program.global_block().ops:
        out.append({name: op.int_attr(name) for name in ATTRS if op.has_attr(name)})
    return out


def stamp_pir_json(path: str, annotations: list[dict]) -> int:
    """Writes ``annotations`` (pir_annotations of the program serialized at
    ``path``) into the JSON's global-block ops as int32 attributes. Returns
    how many ops were stamped."""
    import json

    if not any(annotations):
        return 0
    with open(path) as f:
        doc = json.load(f)
    ops = doc["program"]["regions"][0]["blocks"][0]["ops"]
    if len(ops) != len(annotations):
        raise RuntimeError(f"{path}: {len(ops)} serialized ops for {len(annotations)} in the "
                           "program; cannot place the ipu_shard_guard annotations")
    stamped = 0
    for op, attrs in zip(ops, annotations):
        for name, value in attrs.items():
            op.setdefault("A", []).append({"AT": {"#": "0.a_i32", "D": int(value)}, "N": name})
        stamped += bool(attrs)
    with open(path, "w") as f:
        json.dump(doc, f)
    return stamped
