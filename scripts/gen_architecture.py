"""Writes docs/ARCHITECTURE.md's list of the compile's passes from the pass
objects as built (`tiller passes`: each pass's name, its one-line summary
and when it runs, in pipeline order, the CPU backend's own passes included),
between its markers:

    <!-- passes:begin (scripts/gen_architecture.py) -->
    ...
    <!-- passes:end -->

    .venv/bin/python scripts/gen_architecture.py [--check]

Run it after adding, renaming or reordering a pass, or changing its summary;
tests/python/architecture_doc_test.py fails while the committed list and the
built pipeline disagree (--check exits 1). TILLER_BUILD_DIR names the build
(default: build/).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "ARCHITECTURE.md"
BEGIN = "<!-- passes:begin (scripts/gen_architecture.py) -->"
END = "<!-- passes:end -->"


def tiller_binary() -> Path:
    return Path(os.environ.get("TILLER_BUILD_DIR", REPO / "build")) / "bin" / "tiller"


def generate() -> str:
    listing = subprocess.run([str(tiller_binary()), "passes"], check=True, capture_output=True,
                             text=True).stdout
    return "\n".join([
        BEGIN, "",
        "Generated from the pass objects (`tiller passes`: "
        "`compile::RewritePipeline` and `compile::PlacementPipeline`, each pass's name and "
        "summary where it is declared, in brackets when it runs); do not edit by hand.",
        "", "```", listing.rstrip("\n"), "```", "", END])


def updated(text: str) -> str:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        sys.exit(f"{DOC}: markers {BEGIN!r} ... {END!r} not found")
    return text[:start] + generate() + text[end + len(END):]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the list is stale")
    args = ap.parse_args()
    text = DOC.read_text()
    new = updated(text)
    if args.check:
        if new != text:
            print(f"{DOC.relative_to(REPO)}: the pass list is stale; run scripts/gen_architecture.py")
            return 1
        return 0
    if new != text:
        DOC.write_text(new)
        print(f"updated {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
