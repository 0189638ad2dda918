"""``python -m tiller ARGS`` (and the ``tiller`` command a pip install puts
on the PATH) run Tiller's command-line tool: ``info``, ``run``, ``bench``,
``train``, ``plan``, ``ops`` (``python -m tiller --help``).

``python -m tiller --cmake-prefix-path`` prints the directory to give CMake
(``-DCMAKE_PREFIX_PATH=...``) so that ``find_package(Tiller)`` finds the C++
library and headers installed with the package.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path


def cli_path() -> Path:
    """The ``tiller`` executable: inside an installed package
    (``tiller/bin``), else the build directory of a source checkout
    ($TILLER_BUILD_DIR, or build/ beside python/)."""
    here = Path(__file__).resolve().parent
    candidates = [here / "bin" / "tiller"]
    if os.environ.get("TILLER_BUILD_DIR"):
        candidates.append(Path(os.environ["TILLER_BUILD_DIR"]) / "bin" / "tiller")
    candidates.append(here.parents[1] / "build" / "bin" / "tiller")
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise FileNotFoundError("the tiller executable was not found (looked for "
                            + ", ".join(str(c) for c in candidates)
                            + "): install the package with pip, or build the source tree")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--cmake-prefix-path"]:
        from . import cmake_prefix_path

        print(cmake_prefix_path())
        return 0
    try:
        exe = cli_path()
    except FileNotFoundError as e:
        print(f"tiller: {e}", file=sys.stderr)
        return 2
    # Replace this process: exit codes, signals and the terminal are the CLI's.
    os.execv(exe, [str(exe), *args])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
