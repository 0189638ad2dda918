"""Runs every op-harness case (op_cases/) through Tiller and compares with
the outputs Paddle's executor produced for the same saved program.

Tolerance for float results: rtol 1e-5 / atol 1e-6 unless a case states
another (with its reason); integer, bool and data-movement results must be
bit-exact.
"""
from __future__ import annotations

import numpy as np
import pytest

import op_harness
import tiller.inference as ti

CASES = op_harness.all_cases()
PARAMS = [pytest.param(c, fmt, id=f"{c.id}[{fmt}]") for c in CASES for fmt in c.formats]


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("ops")
    status = {fmt: op_harness.generate_in_subprocess(fmt, root) for fmt in ("pir", "legacy")}
    return root, status


@pytest.mark.parametrize("case,fmt", PARAMS)
def test_op_matches_paddle(generated, case, fmt):
    root, status = generated
    err = status[fmt].get(case.id, "the generator never reached this case")
    assert err == "", f"Paddle could not build {case.id} as a {fmt} program:\n{err}"
    d = op_harness.case_dir(root, case, fmt)
    model = d / ("model.json" if fmt == "pir" else "model.pdmodel")
    params = d / "model.pdiparams"
    config = ti.Config(str(model), str(params)) if params.exists() else ti.Config(str(model), "")
    predictor = ti.create_predictor(config)
    inputs = dict(np.load(d / "inputs.npz"))
    outs = predictor.run([inputs[n] for n in predictor.get_input_names()])
    refs = np.load(d / "outputs.npz")
    refs = [refs[f"arr_{i}"] for i in range(len(refs.files))]
    assert len(outs) == len(refs)
    for i, (got, ref) in enumerate(zip(outs, refs)):
        assert got.shape == ref.shape, f"output {i}: shape {got.shape} vs Paddle {ref.shape}"
        assert got.dtype == ref.dtype, f"output {i}: dtype {got.dtype} vs Paddle {ref.dtype}"
        if case.exact or ref.dtype.kind in "iub":
            np.testing.assert_array_equal(got, ref, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(got, ref, rtol=case.rtol, atol=case.atol, err_msg=f"output {i}")


def pytest_terminal_summary_counts():
    ops = {c.op for c in CASES}
    return len(PARAMS), len(CASES), len(ops)
