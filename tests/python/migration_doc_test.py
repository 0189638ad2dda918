"""docs/MIGRATION.md's option-by-option section is generated from the option
registry (scripts/gen_migration.py): the committed text is what the built
registry gives, so it cannot drift from what set_options does."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_migration",
                                                  REPO / "scripts" / "gen_migration.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_migration_options_section_matches_the_registry():
    gen = _gen()
    text = gen.DOC.read_text()
    assert gen.updated(text) == text, (
        "docs/MIGRATION.md's options section is stale: run "
        "`.venv/bin/python scripts/gen_migration.py` after changing an option")


def test_every_option_has_a_row():
    import tiller._tiller as native
    from tiller.ipu import IpuStrategy

    section = _gen().generate()
    for name, *_ in native.IpuOptions.specs():
        assert f"| `{name}` |" in section, name
    for name in IpuStrategy.PYTHON_OPTIONS:
        assert f"| `{name}` |" in section, name
