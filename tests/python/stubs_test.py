"""The committed type stub of the compiled module (python/tiller/_tiller.pyi)
matches the module as built: regenerated with the pinned pybind11-stubgen, it
is the same text, and it is valid Python naming every public name."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _gen_stubs():
    spec = importlib.util.spec_from_file_location("gen_stubs", REPO / "scripts" / "gen_stubs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_stub_matches_the_built_module():
    gen = _gen_stubs()
    committed = gen.STUB.read_text()
    fresh = gen.generate()
    assert fresh == committed, (
        "python/tiller/_tiller.pyi is stale: run `.venv/bin/python scripts/gen_stubs.py` "
        "after changing a binding")


def test_stub_is_python_and_covers_the_public_names():
    import tiller._tiller as native

    tree = ast.parse((REPO / "python" / "tiller" / "_tiller.pyi").read_text())
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    public = {n for n in dir(native) if not n.startswith("_")}
    # Module attributes that are not classes or functions (none today) would
    # appear as annotated assignments.
    defined |= {n.target.id for n in tree.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    assert public <= defined, f"not in the stub: {sorted(public - defined)}"
    assert "pybind11_stubgen" not in (REPO / "python" / "tiller" / "_tiller.pyi").read_text(), \
        "the stub must not import the generator's own types"
