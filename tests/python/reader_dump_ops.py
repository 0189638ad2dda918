"""Prints the op types a saved Paddle model uses, with their attributes, for
checking the reader's op table against real exports.

  .venv/bin/python tests/python/reader_dump_ops.py MODEL.pdmodel|MODEL.json [--all]

Without --all each op type is shown once (first occurrence) with a count.
"""
import collections
import json
import sys


def legacy_ops(path):
    from paddle.base.proto import framework_pb2
    prog = framework_pb2.ProgramDesc()
    prog.ParseFromString(open(path, "rb").read())
    names = {v: k for k, v in framework_pb2.AttrType.items()}
    for op in prog.blocks[0].ops:
        attrs = {}
        for a in op.attrs:
            kind = names[a.type]
            if a.name.startswith("op_") or a.name in ("with_quant_attr", "op_device"):
                continue
            val = {"INT": a.i, "FLOAT": a.f, "STRING": a.s, "INTS": list(a.ints),
                   "FLOATS": list(a.floats), "STRINGS": list(a.strings), "BOOLEAN": a.b,
                   "BOOLEANS": list(a.bools), "LONG": a.l, "LONGS": list(a.longs),
                   "FLOAT64": a.float64, "FLOAT64S": list(a.float64s),
                   "SCALAR": str(a.scalar).replace("\n", " "),
                   "SCALARS": [str(s).replace("\n", " ") for s in a.scalars]}.get(kind, "?")
            attrs[a.name] = f"{kind}:{val}"
        ins = {v.parameter: list(v.arguments) for v in op.inputs}
        outs = {v.parameter: list(v.arguments) for v in op.outputs}
        yield op.type, ins, outs, attrs


def pir_ops(path):
    prog = json.load(open(path))
    print("base_code:", prog["base_code"])
    for op in prog["program"]["regions"][0]["blocks"][0]["ops"]:
        name = op["#"]
        if name == "p":
            yield "p", {}, op["O"]["%"], {"A": op["A"], "OA": op["OA"]}
            continue
        attrs = {a["N"]: f'{a["AT"]["#"]}:{a["AT"].get("D")}' for a in op.get("A", [])}
        ins = [i["%"] for i in op.get("I", [])]
        outs = [o["%"] for o in op.get("O", [])]
        yield name, ins, outs, attrs


def main():
    path = sys.argv[1]
    show_all = "--all" in sys.argv
    ops = list(pir_ops(path) if path.endswith(".json") else legacy_ops(path))
    counts = collections.Counter(op[0] for op in ops)
    seen = set()
    for t, ins, outs, attrs in ops:
        if show_all or t not in seen:
            print(f"{t} x{counts[t]}: in={ins} out={outs} attrs={attrs}")
        seen.add(t)
    print("op types:", " ".join(sorted(counts)))


if __name__ == "__main__":
    main()
