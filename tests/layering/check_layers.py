"""Checks that the build enforces the layers of src/ (CMakeLists.txt,
tiller_layer): every layer compiles against an include view holding only
itself and the layers it uses, so

  * a header of a layer it does not use cannot be included (an include that
    runs upward, such as ir including runtime, fails to build), and
  * the headers of the layers it does use can.

It also checks three rules the build cannot: IR attributes are read with the
typed getters (no default written outside the op schemas) in the layers
below the frontend, op types are compared as ir::Opcode (no comparison of an
op type with a string literal outside the frontend's translators), and the
CLI and the Python module include public headers only.
For each (layer, other layer) pair it compiles a one-line probe with the
layer's own include flags and prints the matrix. It also reads every
#include of each layer's sources and lists any that name a layer outside the
layer's view (which the build would reject too), and checks that tools/ and
python/src include public headers (tiller/...) only.

Exit status 1 on any violation.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

# One header per layer, included by the probes.
PROBE_HEADER = {
    "core": "core/dtype.h",
    "ir": "ir/graph.h",
    "backend": "backend/kernel.h",
    "passes": "passes/pass.h",
    "compile": "compile/memory_plan.h",
    "cpu": "backends/cpu/kernel.h",
    "paddle": "frontend/paddle/program.h",
    "runtime": "runtime/api_types.h",
    "cuda": "backends/cuda/cuda_backend.h",  # only where the CUDA backend is built
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# IR attributes are read with ir::Op's typed getters, whose defaults live in
# the op schemas; a fallback written at the call site is a second default.
FALLBACK_READ = re.compile(r"attrs\.(Int|Float|Bool|Str|Ints|Floats)\(")
TYPED_LAYERS = ("ir", "backend", "passes", "compile", "cpu", "cuda")
# Op types are compared as ir::Opcode (op->is(ir::Opcode::matmul)), never as
# strings: a renamed op type then breaks the build instead of a comparison
# that silently stops matching. The Paddle translators (src/frontend) compare
# Paddle's op types, which are not IR op types.
OPCODE_LIST = re.compile(r"#define TILLER_OPCODES\(X\)(.*?)\n// clang-format on", re.S)
STRING_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def probe(cxx: str, view: Path, extra: list[str], header: str) -> tuple[bool, str]:
    proc = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", "-x", "c++", "-", f"-I{view}", *extra],
                          input=f'#include "{header}"\n', text=True, capture_output=True)
    first = next((l for l in proc.stderr.splitlines() if "error" in l), "")
    return proc.returncode == 0, first.strip()


def layer_of(include: str, layers: list[dict]) -> str | None:
    best = None
    for layer in layers:
        inner = layer["path"].removeprefix("src/") + "/"
        if include.startswith(inner) and (best is None or len(inner) > len(best[1])):
            best = (layer["name"], inner)
    return best[0] if best else None


def opcode_names(source: Path) -> set[str]:
    """The IR op types: the names listed in TILLER_OPCODES (src/ir/opcode.h)."""
    m = OPCODE_LIST.search((source / "src/ir/opcode.h").read_text())
    return set(re.findall(r"X\((\w+)\)", m.group(1))) if m else set()


def strip_comments(text: str) -> str:
    """`text` with its // and /* */ comments blanked (strings kept, lines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text[i] == '"':
            m = STRING_LITERAL.match(text, i)
            j = m.end() if m else i + 1
            out.append(text[i:j])
            i = j
        elif text[i] == "'":
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def op_type_comparisons(source: Path, files: list[Path] | None = None) -> list[str]:
    """file:line of each comparison of an op type with a string literal naming
    an IR op type, in src/ outside src/frontend/: `x.type == "matmul"`,
    `type != "copy"`, `"add" == p->type`, a string copied from an op's type
    (`const std::string& t = op.type; t == "relu"`), and a literal list or
    set of op types that an op's type is looked up in or compared with
    element by element (`kSet.count(op.type)`, `for (auto* n : {"a", "b"})
    if (op.type == n)`)."""
    names = opcode_names(source)
    if not names:
        return ["src/ir/opcode.h: no TILLER_OPCODES list found"]
    lit = "|".join(sorted(names, key=len, reverse=True))
    literal = f'"(?:{lit})"'
    if files is None:
        files = [f for f in sorted((source / "src").rglob("*"))
                 if f.suffix in (".h", ".cc", ".cu", ".cuh") and "frontend" not in f.relative_to(source / "src").parts]
    found = []
    for f in files:
        text = strip_comments(f.read_text())
        lines = text.splitlines()
        # Names that hold an op's type: `type` itself (op.type, a `type`
        # variable) and strings copied from an op's type.
        held = {"type"}
        for m in re.finditer(r"\b(?:std::string_view|std::string|auto)\s*&?\s*(\w+)\s*=\s*"
                             r"[\w.>()\[\]-]*(?:->|\.)type\s*;", text):
            held.add(m.group(1))
        # Names bound to op-type literals: constant lists and sets
        # (`kCheap[] = {"relu", ...}`) and loop variables over them or over
        # a literal list (`for (const char* n : {"add", "sub"})`).
        lists = {m.group(1) for m in re.finditer(
            r"\b(\w+)\s*(?:\[\s*\d*\s*\])?\s*=?\s*\{[^;{}]*" + literal, text)}
        elements = set()
        for m in re.finditer(r"\bfor\s*\([^;:()]*?\b(\w+)\s*:\s*(\w+|\{[^}]*\})\s*\)", text):
            if m.group(2) in lists or re.search(literal, m.group(2)):
                elements.add(m.group(1))
        held_re = "|".join(sorted(held))
        compare = re.compile(
            rf"\b(?:{held_re})\s*[!=]=\s*{literal}|{literal}\s*[!=]=\s*[\w.>()-]*\b(?:{held_re})\b")
        lookups = []
        if elements:
            el = "|".join(sorted(elements))
            lookups.append(re.compile(rf"\b(?:{held_re})\s*[!=]=\s*(?:{el})\b|"
                                      rf"\b(?:{el})\s*[!=]=\s*[\w.>()-]*\b(?:{held_re})\b"))
        if lists:
            ls = "|".join(sorted(lists))
            lookups.append(re.compile(rf"\b(?:{ls})\s*\.\s*(?:count|find|contains)\s*\([^;]*\b(?:{held_re})\b"))
            lookups.append(re.compile(rf"\b(?:find|any_of|count|IsOneOf|OneOf)\s*\([^;]*"
                                      rf"\b(?:{ls})\b[^;]*\b(?:{held_re})\b"))
        # Inline: a literal list an op's type is looked up in.
        lookups.append(re.compile(rf"\b(?:find|any_of|count|contains|IsOneOf|OneOf)\s*\([^;]*"
                                  rf"\b(?:{held_re})\b[^;]*\{{[^;}}]*{literal}"))
        rel = f.relative_to(source)
        for n, line in enumerate(lines, 1):
            if compare.search(line) or any(r.search(line) for r in lookups):
                found.append(f"{rel}:{n}: op type compared with a string literal; compare "
                             f"ir::Opcode (op->is(ir::Opcode::x)): {line.strip()}")
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, type=Path)
    ap.add_argument("--source", required=True, type=Path)
    ap.add_argument("--cxx", default="c++")
    args = ap.parse_args()
    layers = json.loads((args.build / "layers" / "layers.json").read_text())
    names = [l["name"] for l in layers]
    missing = [n for n in names if n not in PROBE_HEADER]
    if missing:
        print(f"check_layers: no probe header for layer(s) {missing}: add them to PROBE_HEADER")
        return 1
    # The frontend's generated protobuf header lives outside the views.
    extra = [f"-I{args.build / 'proto'}", f"-I{args.build / 'proto/src/frontend/paddle'}"]
    failures = []
    print("layer      may include                         probes (+ compiles, - refused)")
    for layer in layers:
        allowed = {layer["name"], *layer["uses"]}
        view = args.build / "layers" / layer["name"]
        marks = []
        for other in names:
            ok, err = probe(args.cxx, view, extra, PROBE_HEADER[other])
            marks.append(("+" if ok else "-") + other)
            if other in allowed and not ok:
                failures.append(f"{layer['name']} may use {other} but '{PROBE_HEADER[other]}' "
                                f"does not compile: {err}")
            if other not in allowed and ok:
                failures.append(f"{layer['name']} must not use {other}, yet "
                                f"'{PROBE_HEADER[other]}' compiles in its view")
        # Public API headers other than the two shared ones stay above the layers.
        ok, _ = probe(args.cxx, view, extra, "tiller/predictor.h")
        if ok and layer["name"] != "runtime":
            failures.append(f"{layer['name']} can include tiller/predictor.h")
        print(f"{layer['name']:<10} {','.join(sorted(allowed)):<35} {' '.join(marks)}")

    # The sources themselves (what the build enforces, read directly).
    for layer in layers:
        allowed = {layer["name"], *layer["uses"]}
        for f in sorted((args.source / layer["path"]).rglob("*")):
            if f.suffix not in (".h", ".cc", ".cu", ".cuh"):
                continue
            for inc in INCLUDE.findall(f.read_text()):
                owner = layer_of(inc, layers)
                if owner and owner not in allowed:
                    failures.append(f"{f.relative_to(args.source)} includes {inc} "
                                    f"(layer {owner}, not used by {layer['name']})")
    # Defaults are written once, in the schemas.
    for layer in layers:
        if layer["name"] not in TYPED_LAYERS:
            continue
        for f in sorted((args.source / layer["path"]).rglob("*")):
            if f.suffix not in (".h", ".cc", ".cu", ".cuh") or f.name in ("attribute.h", "attribute.cc"):
                continue
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if FALLBACK_READ.search(line):
                    failures.append(f"{f.relative_to(args.source)}:{n}: reads an IR attribute "
                                    f"with a fallback; use op.GetX(name) (the schema's default)")
    # Op types are compared as ir::Opcode, not as strings.
    failures += op_type_comparisons(args.source)
    # The CLI and the Python module use the public API only.
    for folder in ("tools", "python/src"):
        for f in sorted((args.source / folder).glob("*.*")):
            for inc in INCLUDE.findall(f.read_text()):
                if layer_of(inc, layers):
                    failures.append(f"{f.relative_to(args.source)} includes internal header {inc}")

    # Demonstration: an upward include in an ir source does not compile.
    ok, err = probe(args.cxx, args.build / "layers" / "ir", extra, "runtime/api_types.h")
    print(f"ir including runtime/api_types.h: {'COMPILES (wrong)' if ok else 'refused: ' + err}")
    if failures:
        print("\n".join(["layering violations:"] + ["  " + x for x in failures]))
        return 1
    print(f"layering: {len(layers)} layers, {len(layers) * (len(layers) + 1)} probes, no violations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
