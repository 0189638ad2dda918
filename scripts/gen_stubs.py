"""Writes python/tiller/_tiller.pyi, the type stub of the compiled module, with
pybind11-stubgen (pinned in requirements.txt) from the module as built.

    .venv/bin/python scripts/gen_stubs.py [--out FILE]

Run it after changing a binding (python/src/); tests/python/stubs_test.py
fails while the committed stub and the module disagree.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STUB = REPO / "python" / "tiller" / "_tiller.pyi"


def generate() -> str:
    """The stub text for the `tiller._tiller` this interpreter imports."""
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(REPO / "python"), os.environ.get("PYTHONPATH", "")]))
        # --exit-code: a signature the tool cannot spell fails here instead
        # of landing in the stub as a comment.
        subprocess.run([sys.executable, "-m", "pybind11_stubgen", "tiller._tiller", "-o", out,
                        "--exit-code"], check=True, env=env, capture_output=True, text=True)
        return (Path(out) / "tiller" / "_tiller.pyi").read_text()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(STUB))
    args = ap.parse_args()
    Path(args.out).write_text(generate())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
