"""Make ``paddle.jit.save`` able to write a legacy ProgramDesc (.pdmodel) again.

Paddle 3.3.1 still writes ``model.pdmodel`` when started with
``FLAGS_enable_pir_api=0``, but many of its Python APIs (``paddle.matmul``,
``F.gelu``, ``paddle.tanh``, ``paddle.multiply``, ``paddle.sqrt``, ...) are now
bare ``paddle._C_ops`` functions that only accept PIR ``Value``s, so tracing a
BERT in legacy mode fails with "argument (position 1) must be Value, but got
Variable". ResNet-style models (conv2d, batch_norm, pool2d, relu, linear)
are unaffected.

``install()`` wraps those functions: in dynamic or PIR mode the original runs;
in legacy static mode the wrapper appends the same legacy op Paddle 2.x
appended (``matmul_v2`` with trans_x/trans_y, ``gelu`` with approximate,
``tanh``, ``elementwise_mul`` ...), so the written .pdmodel looks like one
exported by Paddle 2.x. Only call it in a process that exports legacy programs.
"""

from __future__ import annotations

import sys

_installed = False


def _legacy_mode() -> bool:
    from paddle.base.framework import in_dygraph_mode, in_pir_mode

    return not in_dygraph_mode() and not in_pir_mode()


def _append(op_type, inputs, attrs, dtype, out_dtype=None):
    from paddle.base.layer_helper import LayerHelper

    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference(dtype=out_dtype or dtype)
    helper.append_op(type=op_type, inputs=inputs, outputs={"Out": [out]}, attrs=attrs)
    return out


def _matmul(x, y, transpose_x=False, transpose_y=False, name=None):
    return _append("matmul_v2", {"X": [x], "Y": [y]},
                   {"trans_x": bool(transpose_x), "trans_y": bool(transpose_y)}, x.dtype)


def _gelu(x, approximate=False, name=None):
    if isinstance(approximate, str):
        approximate = approximate == "tanh"
    return _append("gelu", {"X": [x]}, {"approximate": bool(approximate)}, x.dtype)


def _unary(op_type):
    def f(x, name=None):
        return _append(op_type, {"X": [x]}, {}, x.dtype)
    f.__name__ = op_type
    return f


def _binary(op_type):
    def f(x, y, name=None):
        return _append(op_type, {"X": [x], "Y": [y]}, {"axis": -1}, x.dtype)
    f.__name__ = op_type
    return f


def _softplus(x, beta=1, threshold=20, name=None):
    return _append("softplus", {"X": [x]}, {"beta": float(beta), "threshold": float(threshold)},
                   x.dtype)


_SHIMS = {
    "matmul": _matmul,
    "gelu": _gelu,
    "softplus": _softplus,
    "multiply": _binary("elementwise_mul"),
    "maximum": _binary("elementwise_max"),
    "minimum": _binary("elementwise_min"),
    **{n: _unary(n) for n in ("tanh", "sqrt", "rsqrt", "exp", "sigmoid", "abs", "log",
                              "floor", "ceil", "cos", "sin", "round")},
}


# Internal op tables and decomposition rules: they never run in legacy mode.
_SKIP_MODULES = ("_C_ops", "_pir_ops", "libpaddle", "decomposition", "incubate.autograd",
                 "generated_tensor_methods_patch")


def _wrap(orig, legacy):
    def wrapper(*args, **kwargs):
        if _legacy_mode():
            return legacy(*args, **kwargs)
        return orig(*args, **kwargs)
    wrapper.__name__ = getattr(orig, "__name__", legacy.__name__)
    wrapper.__doc__ = getattr(orig, "__doc__", None)
    wrapper.__wrapped_legacy__ = True
    return wrapper


def install() -> list[str]:
    """Patch every paddle module attribute bound to one of the C ops above.
    Returns the patched ``module.name`` list (idempotent)."""
    global _installed
    import paddle  # noqa: F401  (import all paddle submodules first)
    import paddle.nn.functional  # noqa: F401
    from paddle import _C_ops
    from paddle.base.dygraph import generated_tensor_methods_patch as gen

    targets = {}
    for name, legacy in _SHIMS.items():
        for src in (getattr(_C_ops, name, None), getattr(gen, "_" + name, None)):
            if src is not None:
                targets[id(src)] = (name, src, legacy)
    patched = []
    if _installed:
        return patched
    for modname, mod in list(sys.modules.items()):
        if not modname.startswith("paddle") or mod is None or any(
                s in modname for s in _SKIP_MODULES):
            continue
        for attr in [n for n in _SHIMS] + ["_" + n for n in _SHIMS]:
            obj = getattr(mod, attr, None)
            if obj is not None and id(obj) in targets:
                name, src, legacy = targets[id(obj)]
                try:
                    setattr(mod, attr, _wrap(src, legacy))
                    patched.append(f"{modname}.{attr}")
                except (AttributeError, TypeError):
                    pass
    _installed = True
    return patched
