"""A second backend, split placement and copies (issue 8).

tests/backend/test_backend.cc is a minimal backend built outside src/ as a
library (build/lib/libtiller_test_backend.so) and loaded at run time; its
devices are not host-accessible and it has naive kernels for add, sub, mul,
equal, cast and transpose. With devices ["test", "cpu"] and first-supported
placement, BERT-tiny's forward is split between the two: the test device
takes the ops it has kernels for, the CPU the rest, and the compiler inserts
a copy wherever a value crosses. The naive kernels compute each element
exactly as the CPU's do (IEEE add/sub/mul, comparisons, casts, data
movement), so the split run must equal the CPU-only run bit for bit.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tiller.inference as ti

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TILLER_BUILD_DIR", REPO / "build"))
LIBRARY = BUILD / "lib" / "libtiller_test_backend.so"
TILLER = BUILD / "bin" / "tiller"


@pytest.fixture(scope="module")
def test_backend():
    assert LIBRARY.exists(), f"{LIBRARY} is built with the C++ tests (ninja tiller_test_backend)"
    ti.load_backend_library(str(LIBRARY))
    assert "test" in ti.backend_names()
    return str(LIBRARY)


def _inputs(seed=0, batch=2, seq=16):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 100, (batch, seq)).astype(np.int64),
            (rng.random((batch, seq)) > 0.5).astype(np.int64)]


def _predictor(exp, devices, placement):
    config = ti.Config(exp.model_file, exp.params_file)
    config.set_devices(devices)
    config.set_placement(placement)
    return ti.create_predictor(config)


@pytest.mark.parametrize("fmt", ["pir", "legacy"])
def test_bert_tiny_split_across_test_and_cpu_matches_cpu_exactly(zoo, test_backend, fmt):
    exp = zoo.export("bert-tiny", fmt, batch=2, seq_len=16)
    inputs = _inputs()
    cpu = _predictor(exp, ["cpu"], "by_shard").run(inputs)
    split = _predictor(exp, ["test", "cpu"], "first_supported")
    got = split.run(inputs)
    for a, b in zip(cpu, got):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b), f"max |diff| {np.abs(a - b).max()}"
    report = split.summary()["compile_report"]
    placed = re.search(r"test:0: (\d+) ops \(([^)]*)\)", report)
    assert placed and int(placed.group(1)) > 0, report
    # The test backend runs add, sub, mul, equal, cast and transpose; BERT's
    # transposes are folded into its attention matmuls (fold_transpose).
    assert "add" in placed.group(2) and "equal" in placed.group(2), report
    assert re.search(r"fold_transpose\s+\d+ rewrites.*- transpose x\d+", report), report
    copies = re.search(r"insert_copies\s+(\d+) rewrites.*\+ copy x(\d+)", report)
    assert copies and int(copies.group(2)) > 0, report


def test_a_device_list_without_the_backend_is_cpu_only(zoo, test_backend):
    exp = zoo.export("bert-tiny", "pir", batch=2, seq_len=16)
    predictor = _predictor(exp, ["cpu"], "first_supported")
    predictor.run(_inputs())
    text = predictor.summary()["compile_report"]
    assert re.search(r"insert_copies\s+0 rewrites", text) and "copy x" not in text, text


def test_copies_are_visible_in_tiller_info_passes(zoo, test_backend):
    exp = zoo.export("bert-tiny", "pir", batch=2, seq_len=16)
    out = subprocess.run([str(TILLER), "info", exp.model_file, "--shape", "input_ids=2x16",
                          "--shape", "token_type_ids=2x16", "--passes", "--devices", "test,cpu",
                          "--placement", "first_supported", "--backend-library", test_backend],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "devices: test:0 (1 thread) cpu:0 (1 thread)" in text, text
    for stage in ("fuse_linear", "fuse_activation", "placement", "insert_copies"):
        assert re.search(rf"^\s+{stage}\s+\d+ rewrites", text, re.M), f"{stage} missing:\n{text}"
    assert re.search(r"insert_copies\s+\d+ rewrites.*\+ copy x\d+", text), text
    assert re.search(r"test:0: \d+ ops \(.*add", text), text


def test_unknown_backend_and_bad_library_are_clear_errors(zoo, tmp_path):
    exp = zoo.export("bert-tiny", "pir", batch=2, seq_len=16)
    config = ti.Config(exp.model_file, exp.params_file)
    config.set_devices(["tpu"])
    with pytest.raises(ti.TillerError, match="no backend named 'tpu'.*registered: .*cpu"):
        ti.create_predictor(config)
    with pytest.raises(ti.TillerError, match="first_supported"):
        config.set_placement("random")
    bogus = tmp_path / "libnot_a_backend.so"
    bogus.write_bytes(b"not an ELF file")
    with pytest.raises(ti.TillerError, match=str(bogus)):
        ti.load_backend_library(str(bogus))


def test_a_device_that_cannot_run_an_op_is_refused_naming_it(zoo, test_backend):
    # By shard, everything goes to device 0: the test device has no matmul.
    exp = zoo.export("bert-tiny", "pir", batch=2, seq_len=16)
    config = ti.Config(exp.model_file, exp.params_file)
    config.set_devices(["test", "cpu"])
    with pytest.raises(ti.TillerError, match=r"cannot run on test:0: no test kernel for op"):
        p = ti.create_predictor(config)
        p.run(_inputs())


def test_tiller_backends_loads_libraries_for_any_front_end(zoo, tmp_path):
    exp = zoo.export("bert-tiny", "pir", batch=2, seq_len=16)
    env = dict(os.environ, TILLER_BACKENDS=f"{tmp_path / 'missing.so'}:{LIBRARY}")
    out = subprocess.run([str(TILLER), "info", exp.model_file, "--passes", "--devices", "test,cpu",
                          "--placement", "first_supported"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    # The bad path is reported and skipped; the good one is loaded.
    assert "TILLER_BACKENDS" in out.stderr and "missing.so" in out.stderr
    assert re.search(r"\+ copy x\d+", out.stdout), out.stdout
