"""Shared pytest setup for Tiller's Python tests.

* Puts the repository root (for ``import models``) and ``python/`` (for
  ``import tiller``) on sys.path.
* ``zoo`` (session fixture): exports zoo presets on demand into one session
  temp dir, cached by (preset, fmt, batch, seq_len, seed, overrides), so each
  model is exported at most once per session. Legacy exports run in a
  subprocess (FLAGS_enable_pir_api=0), about 1.5-2 s each; PIR exports run
  in-process, about 0.3 s each for the tiny presets.
* ``slow`` marker: tests marked ``@pytest.mark.slow`` are skipped unless
  ``--run-slow`` is given or TILLER_RUN_SLOW=1.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
for p in (REPO_ROOT / "python", REPO_ROOT):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

# Keep Paddle quiet and small on the 2-core CI machines.
os.environ.setdefault("GLOG_minloglevel", "2")
os.environ.setdefault("OMP_NUM_THREADS", "1")

TINY_PRESETS = ("bert-tiny", "ernie-tiny", "resnet-tiny")
FORMATS = ("pir", "legacy")


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="run tests marked slow (large models, long benchmarks)")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running test; needs --run-slow or "
                                       "TILLER_RUN_SLOW=1")
    # Paddle's dy2static noise while exporting.
    config.addinivalue_line("filterwarnings",
                            "ignore:Tensor do not have 'place' interface:UserWarning")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow") or os.environ.get("TILLER_RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: use --run-slow or TILLER_RUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


class ZooCache:
    """Session cache of exported models; see ``models.export.export``."""

    def __init__(self, root: Path):
        self.root = root
        self._cache = {}
        self.timings: dict[tuple, float] = {}

    def export(self, preset: str, fmt: str = "pir", batch=None, seq_len=None, seed: int = 0,
               **overrides):
        from models.export import export

        key = (preset, fmt, batch, seq_len, seed, tuple(sorted(overrides.items())))
        if key not in self._cache:
            name = "-".join(str(k) for k in key[:5] if k is not None)
            if overrides:
                name += "-" + "-".join(f"{k}={v}" for k, v in key[5])
            t0 = time.perf_counter()
            self._cache[key] = export(preset, self.root / name, fmt, batch, seq_len, seed,
                                      **overrides)
            self.timings[key] = time.perf_counter() - t0
        return self._cache[key]

    def legacy_and_pir(self, preset: str, **kw):
        return {fmt: self.export(preset, fmt, **kw) for fmt in FORMATS}


@pytest.fixture(scope="session")
def zoo(tmp_path_factory) -> ZooCache:
    return ZooCache(tmp_path_factory.mktemp("zoo"))


@pytest.fixture(scope="session")
def eager_reference():
    """(preset, batch, seq_len, input_seed, model_seed=0) -> (inputs,
    {output name: array}) from the dynamic-graph model, cached per session.
    model_seed must match the seed the compared export used (default 0)."""
    from models import build_model, eager_forward, get_spec, make_inputs

    models_, results = {}, {}

    def get(preset: str, batch: int = 2, seq_len: int = 16, input_seed: int = 0,
            model_seed: int = 0):
        key = (preset, batch, seq_len, input_seed, model_seed)
        if key not in results:
            if (preset, model_seed) not in models_:
                models_[(preset, model_seed)] = build_model(preset, model_seed)
            inputs = make_inputs(preset, batch, seq_len, input_seed)
            results[key] = (inputs, eager_forward(models_[(preset, model_seed)],
                                                  get_spec(preset), inputs))
        return results[key]

    return get


def pytest_terminal_summary(terminalreporter):
    """Counts of the op harness (ops_test.py): checks, cases and ops that passed."""
    passed = [r.nodeid for r in terminalreporter.stats.get("passed", [])
              if "test_op_matches_paddle" in r.nodeid]
    if not passed:
        return
    ids = [n.split("[", 1)[1].rsplit("[", 1)[0] for n in passed]
    ops = {i.split("/")[0] for i in ids}
    terminalreporter.write_line(
        f"op harness: {len(passed)} (op, case, format) checks passed, "
        f"{len(set(ids))} (op, case) pairs, {len(ops)} ops")
