"""Writes the option-by-option section of docs/MIGRATION.md from the option
registry as built (tiller::training::IpuOptions::Specs(), and the Python-only
options of tiller.IpuStrategy.PYTHON_OPTIONS), between its markers:

    <!-- options:begin (scripts/gen_migration.py) -->
    ...
    <!-- options:end -->

    .venv/bin/python scripts/gen_migration.py [--check]

Run it after changing an option; tests/python/migration_doc_test.py fails
while the committed section and the registry disagree (--check exits 1).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "MIGRATION.md"
BEGIN = "<!-- options:begin (scripts/gen_migration.py) -->"
END = "<!-- options:end -->"

# What each kind of support means next to Paddle's IPU build.
KINDS = {
    "honoured": ("Honoured", "Tiller does what the option says on its devices; the note says "
                             "where that differs from the IPU."),
    "not_yet": ("Refused off their default", "The option would change results and Tiller "
                                             "does not do it yet: its default is taken, any "
                                             "other value is refused with a message naming "
                                             "it, never ignored."),
    "no_effect": ("Accepted without effect", "The option tunes the IPU toolchain (memory, "
                                             "scheduling, outlining, reports, tensor "
                                             "locations): it is taken with Paddle's type "
                                             "checked, read back by get_option, and named "
                                             "once in a notice; nothing it could change "
                                             "exists on Tiller's devices, and no result "
                                             "depends on it."),
}


def _value(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _type(v) -> str:
    """The type as Paddle's get_option names it."""
    return {bool: "bool", int: "uint64", float: "double", str: "string", list: "vector",
            dict: "map"}.get(type(v), type(v).__name__)


def generate() -> str:
    """The section's text for the tiller this interpreter imports."""
    sys.path.insert(0, str(REPO / "python"))
    import tiller._tiller as native
    from tiller.ipu import IpuStrategy

    specs = native.IpuOptions.specs()
    out = [BEGIN, "",
           "Generated from the option registry (`IpuOptions::Specs()`, "
           "src/runtime/ipu_option_specs.cc, and `tiller.IpuStrategy.PYTHON_OPTIONS`); do not edit "
           "by hand.", ""]
    for kind, (title, meaning) in KINDS.items():
        rows = [s for s in specs if s[1] == kind and not s[4]]
        if kind == "honoured":
            rows_py = sorted(IpuStrategy.PYTHON_OPTIONS.items())
        else:
            rows_py = []
        out += [f"### {title} ({len(rows) + len(rows_py)})", "", meaning, "",
                "| Option | Type | Default | On Tiller |", "|---|---|---|---|"]
        for name, _, default, description, _ in rows:
            out.append(f"| `{name}` | {_type(default)} | `{_cell(_value(default))}` | "
                       f"{_cell(description)} |")
        for name, description in rows_py:
            out.append(f"| `{name}` | Python object | - | {_cell(description)} |")
        out.append("")
    own = [s for s in specs if s[4]]
    out += [f"### Tiller's own ({len(own)})", "",
            "Options Paddle's registry does not have, for what Tiller adds (threads, traces, "
            "pipeline schedules, dynamic loss scaling, ...). A Paddle script never sets them; "
            "set_options takes them like the others.", "",
            "| Option | Type | Default | What it does |", "|---|---|---|---|"]
    for name, _, default, description, _ in own:
        out.append(f"| `{name}` | {_type(default)} | `{_cell(_value(default))}` | "
                   f"{_cell(description)} |")
    out += ["", END]
    return "\n".join(out)


def updated(text: str) -> str:
    """The document with its section replaced by a fresh one."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + generate() + text[end:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the document is stale")
    args = ap.parse_args()
    text = DOC.read_text()
    fresh = updated(text)
    if args.check:
        if fresh != text:
            print(f"{DOC} is stale: run scripts/gen_migration.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(fresh)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
