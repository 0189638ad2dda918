"""Op inventory of a saved Paddle inference program (legacy or PIR).

    python -m models.inventory DIR_OR_PREFIX [...]      # markdown to stdout
    python -m models.inventory --zoo [--update docs/OP_INVENTORY.md]

* legacy (.pdmodel): parsed with Paddle's own protobuf classes
  (``paddle.base.proto.framework_pb2.ProgramDesc``), so it works in a
  process of either PIR mode.
* PIR (.json): read as JSON, exactly the file the C++ loader reads; op names
  are mapped from the dialect ids ("1.matmul" -> "pd_op.matmul"). Operands
  produced by ``full`` / ``full_int_array`` (e.g. the shape of reshape, the
  scale of scale, dropout's p) are shown inline as ``in[i]=full_int_array(...)``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

# Bookkeeping attributes that say nothing about the computation.
NOISE_ATTRS = {"op_callstack", "op_device", "op_namescope", "op_role", "op_role_var",
               "with_quant_attr", "struct_name", "place", "stop_gradient"}
_DIALECTS = {"0": "builtin", "1": "pd_op", "2": "cf", "3": "custom_op", "4": "dist"}


def _f(x: float) -> float:
    """float32 attrs printed at float32 precision (1e-12, not 9.99999996e-13)."""
    return float(f"{x:.7g}")


def _legacy_attr(a):
    from paddle.base.proto import framework_pb2 as pb

    T = pb.AttrType
    t = a.type
    if t == T.INT: return a.i
    if t == T.FLOAT: return _f(a.f)
    if t == T.STRING: return a.s
    if t == T.INTS: return list(a.ints)
    if t == T.FLOATS: return [_f(x) for x in a.floats]
    if t == T.STRINGS: return list(a.strings)
    if t == T.BOOLEAN: return a.b
    if t == T.BOOLEANS: return list(a.bools)
    if t == T.BLOCK: return f"block{a.block_idx}"
    if t == T.LONG: return a.l
    if t == T.BLOCKS: return list(a.blocks_idx)
    if t == T.LONGS: return list(a.longs)
    if t == T.FLOAT64S: return list(a.float64s)
    if t == T.VAR: return f"var:{a.var_name}"
    if t == T.VARS: return [f"var:{v}" for v in a.vars_name]
    if t == T.FLOAT64: return a.float64
    if t == T.SCALAR: return _scalar(a.scalar)
    if t == T.SCALARS: return [_scalar(s) for s in a.scalars]
    return f"<type {t}>"


def _scalar(s):
    for f in ("b", "i", "r"):
        if s.HasField(f):
            return getattr(s, f)
    return str(s)


def legacy_ops(model_file) -> list[dict]:
    """[{type, attrs, inputs, outputs}] for block 0 of a .pdmodel."""
    from paddle.base.proto import framework_pb2 as pb

    prog = pb.ProgramDesc()
    prog.ParseFromString(Path(model_file).read_bytes())
    out = []
    for op in prog.blocks[0].ops:
        out.append({
            "type": op.type,
            "attrs": {a.name: _legacy_attr(a) for a in op.attrs if a.name not in NOISE_ATTRS},
            "inputs": {v.parameter: list(v.arguments) for v in op.inputs},
            "outputs": {v.parameter: list(v.arguments) for v in op.outputs},
        })
    return out


def _pir_attr(at):
    kind, d = at.get("#"), at.get("D")
    if kind == "0.a_array":
        return [_pir_attr(x) for x in d]
    if isinstance(d, float):
        return _f(d)
    return d


def _pir_name(n: str) -> str:
    dialect, _, rest = n.partition(".")
    if n == "p":
        return "builtin.parameter"
    return f"{_DIALECTS.get(dialect, dialect)}.{rest}" if rest else n


def pir_ops(model_file) -> list[dict]:
    """[{type, attrs, operands}] for the top block of a PIR model.json;
    constant operands from full/full_int_array are resolved inline."""
    j = json.loads(Path(model_file).read_text())
    ops = j["program"]["regions"][0]["blocks"][0]["ops"]
    producer = {}
    out = []
    for op in ops:
        name = _pir_name(op["#"])
        if op["#"] == "p":
            attrs = {"parameter_name": op["A"][3]}
        else:
            attrs = {a["N"]: _pir_attr(a["AT"]) for a in op.get("A", [])
                     if a["N"] not in NOISE_ATTRS}
        results = op.get("O", [])
        if isinstance(results, dict):
            results = [results]
        operands = []
        for i, v in enumerate(op.get("I", [])):
            vid = v.get("%", 0)
            if vid == 0:
                operands.append("null")
            elif vid in producer and producer[vid][0] in ("pd_op.full", "pd_op.full_int_array"):
                pname, pattrs = producer[vid]
                val = pattrs.get("value")
                operands.append(f"{pname.split('.')[1]}({val})")
            else:
                operands.append(producer.get(vid, ("?",))[0])
        for r in results:
            producer[r["%"]] = (name, attrs)
        out.append({"type": name, "attrs": attrs, "operands": operands})
    return out


def program_ops(model) -> tuple[str, list[dict]]:
    """("pir"|"legacy", ops) for a directory / prefix / model file."""
    from .export import resolve_model

    model_file, _ = resolve_model(model)
    if model_file.endswith(".json"):
        return "pir", pir_ops(model_file)
    return "legacy", legacy_ops(model_file)


def op_counts(model) -> Counter:
    return Counter(op["type"] for op in program_ops(model)[1])


def _fmt(v):
    s = json.dumps(v, default=str)
    return s if len(s) <= 400 else s[:397] + "..."


def markdown(model, title: str | None = None, max_variants: int = 8) -> str:
    fmt, ops = program_ops(model)
    counts = Counter(op["type"] for op in ops)
    lines = [f"### {title or model} ({fmt}, {len(ops)} ops)", "",
             "| op | count |", "|---|---|"]
    lines += [f"| `{t}` | {c} |" for t, c in sorted(counts.items())]
    lines += ["", "Attribute variants (count x attrs; PIR: constant operands inline):", ""]
    variants = defaultdict(Counter)
    for op in ops:
        if op["type"] in ("builtin.parameter",):
            continue
        key = {k: v for k, v in op["attrs"].items()}
        if "operands" in op and any(o.startswith("full") or o == "null" for o in op["operands"]):
            key["operands"] = op["operands"]
        variants[op["type"]][_fmt(key)] += 1
    if fmt == "legacy":
        slots = {}
        for op in ops:
            slots.setdefault(op["type"], (sorted(k for k, v in op["inputs"].items() if v),
                                          sorted(k for k, v in op["outputs"].items() if v)))
        lines.append("Slots (inputs -> outputs, non-empty):")
        lines.append("")
        for t in sorted(slots):
            i, o = slots[t]
            lines.append(f"- `{t}`: {', '.join(i)} -> {', '.join(o)}")
        lines.append("")
        lines.append("Attributes:")
        lines.append("")
    for t in sorted(variants):
        vs = variants[t].most_common()
        for v, c in vs[:max_variants]:
            lines.append(f"- `{t}` x{c}: `{v}`")
        if len(vs) > max_variants:
            lines.append(f"- `{t}`: ... {len(vs) - max_variants} more variants")
    return "\n".join(lines) + "\n"


GENERATED_MARKER = "<!-- generated below by: python -m models.inventory --zoo --update docs/OP_INVENTORY.md -->"
TINY_PRESETS = ("bert-tiny", "ernie-tiny", "resnet-tiny")


def zoo_markdown(presets=TINY_PRESETS) -> str:
    """Export each preset in both formats (seed 0, dynamic dims) into a temp
    dir and render the inventory of every program."""
    import tempfile

    from .export import FORMATS, export

    parts = []
    with tempfile.TemporaryDirectory() as tmp:
        for preset in presets:
            for fmt in FORMATS:
                exp = export(preset, Path(tmp) / f"{preset}-{fmt}", fmt)
                parts.append(markdown(exp, title=f"{preset} / {fmt}"))
    return "\n".join(parts)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__)
        return 2
    if argv[0] == "--zoo":
        text = zoo_markdown()
        if len(argv) >= 3 and argv[1] == "--update":
            doc = Path(argv[2])
            head = doc.read_text() if doc.exists() else ""
            head = head.split(GENERATED_MARKER)[0].rstrip() + "\n\n" if head else ""
            doc.write_text(head + GENERATED_MARKER + "\n\n" + text)
        else:
            print(text)
        return 0
    for m in argv:
        print(markdown(m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
