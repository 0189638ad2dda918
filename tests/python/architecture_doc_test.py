"""docs/ARCHITECTURE.md's list of the compile's passes is generated from the
pass objects (scripts/gen_architecture.py, `tiller passes`): the committed
list is what the built pipeline gives, so it cannot drift from the code."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_architecture",
                                                  REPO / "scripts" / "gen_architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_architecture_pass_list_matches_the_pipeline():
    gen = _gen()
    text = gen.DOC.read_text()
    assert gen.updated(text) == text, (
        "docs/ARCHITECTURE.md's pass list is stale: run "
        "`.venv/bin/python scripts/gen_architecture.py` after changing a pass")


def test_every_pass_of_the_pipelines_is_listed_once():
    section = _gen().generate()
    names = [line.split()[0] for line in section.splitlines()
             if line.startswith("  ") and line.split()]
    assert len(names) == len(set(names)), names
    for name in ("place_updates", "fuse_linear", "mixed_precision", "half_fallback",
                 "conv_winograd", "blocked_convs", "placement", "split_processes"):
        assert name in names, name


def test_passes_refuses_an_unknown_backend_by_name():
    import subprocess
    proc = subprocess.run([str(_gen().tiller_binary()), "passes", "--devices", "cpu,nope"],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc
    assert "no backend 'nope' (registered: cpu" in proc.stderr, proc.stderr
