"""The interpreters tests run child processes in - this one (Paddle 3.3.1)
and .venv-paddle2's (Paddle 2.6.2, which scripts/setup.sh creates) - and the
environment that lets a child import tiller from the checkout (and, with
with_repo, the repository's models package)."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PADDLE2 = str(REPO / ".venv-paddle2" / "bin" / "python")


def paddle2() -> str:
    """The Paddle 2.6.2 interpreter; fails the test when it is missing."""
    assert Path(PADDLE2).is_file(), f"{PADDLE2} is missing: run scripts/setup.sh"
    return PADDLE2


def child_env(with_repo: bool = False, **extra: str) -> dict[str, str]:
    """os.environ plus `extra`, with python/ (and the repository) first on
    PYTHONPATH."""
    env = dict(os.environ, **extra)
    paths = [str(REPO / "python")] + ([str(REPO)] if with_repo else [])
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    return env
