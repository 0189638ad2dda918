"""Runs every op-harness case (op_cases/) through Tiller and compares with
the outputs Paddle's executor produced for the same saved program.

Tolerance for float results: rtol 1e-5 / atol 1e-6 unless a case states
another (with its reason); integer, bool and data-movement results must be
bit-exact.

Half precision: the float cases of the ops that multiply in half (the
"bfloat16 GEMM" rows of `tiller ops`) have a variant with every float input
on the bfloat16 grid (op_harness.half_variant), run again with Tiller's
bfloat16 and float16 precision against Paddle's float32 result on those
inputs (the float32 upcast of half operands), at the issue's rtol/atol 1e-2
(bfloat16) and 1e-3 (float16). Half operands multiply exactly in float32
and accumulate in float32, so what the bounds leave room for is summation
order; a wrong kernel, layout or transpose misses them by far.
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


HALF_TOL = {"bfloat16": 1e-2, "float16": 1e-3}
HALF_PARAMS = [pytest.param(c, fmt, p, id=f"{c.id}[{fmt}-{p}]") for c in CASES if c.half
               for fmt in c.formats for p in HALF_TOL]


def _run_case(root, status, case, fmt, precision=None):
    """(Tiller's outputs, Paddle's, Tiller's compile report) for one generated
    case."""
    err = status[fmt].get(case.id, "the generator never reached this case")
    assert err == "", f"Paddle could not build {case.id} as a {fmt} program:\n{err}"
    d = op_harness.case_dir(root, case, fmt)
    model = d / ("model.json" if fmt == "pir" else "model.pdmodel")
    params = d / "model.pdiparams"
    config = ti.Config(str(model), str(params)) if params.exists() else ti.Config(str(model), "")
    if precision:
        config.set_precision(precision)
    predictor = ti.create_predictor(config)
    inputs = dict(np.load(d / "inputs.npz"))
    outs = predictor.run([inputs[n] for n in predictor.get_input_names()])
    refs = np.load(d / "outputs.npz")
    refs = [refs[f"arr_{i}"] for i in range(len(refs.files))]
    assert len(outs) == len(refs)
    return outs, refs, predictor.summary()["compile_report"]


@pytest.mark.parametrize("case,fmt", PARAMS)
def test_op_matches_paddle(generated, case, fmt):
    root, status = generated
    outs, refs, _ = _run_case(root, status, case, fmt)
    for i, (got, ref) in enumerate(zip(outs, refs)):
        assert got.shape == ref.shape, f"output {i}: shape {got.shape} vs Paddle {ref.shape}"
        assert got.dtype == ref.dtype, f"output {i}: dtype {got.dtype} vs Paddle {ref.dtype}"
        if case.exact or ref.dtype.kind in "iub":
            np.testing.assert_array_equal(got, ref, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(got, ref, rtol=case.rtol, atol=case.atol, err_msg=f"output {i}")


@pytest.mark.parametrize("case,fmt,precision", HALF_PARAMS)
def test_op_in_half_precision_matches_paddle_on_half_operands(generated, case, fmt, precision):
    root, status = generated
    outs, refs, report = _run_case(root, status, case, fmt, precision)
    # The half path ran: the mixed-precision pass rewrote the op.
    pass_line = next(line for line in report.splitlines() if "mixed_precision" in line)
    assert " 0 rewrites" not in pass_line, report
    tol = HALF_TOL[precision]
    for i, (got, ref) in enumerate(zip(outs, refs)):
        assert got.shape == ref.shape and got.dtype == ref.dtype, f"output {i}"
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, err_msg=f"output {i}")


def test_half_ops_are_the_ops_tiller_multiplies_in_half():
    """op_harness.HALF_OPS is the set of `tiller ops` rows whose translation
    multiplies in half precision, so the half cases cannot drift from it."""
    from cli_test import _ops_table

    half = {}
    _ops_table(half)
    gemm = {op for op, how in half.items() if how.startswith("bfloat16 GEMM")}
    assert gemm == set(op_harness.HALF_OPS)
    assert {c.op for c in CASES if c.half} == gemm, "every such op has half cases"


def pytest_terminal_summary_counts():
    ops = {c.op for c in CASES}
    return len(PARAMS), len(CASES), len(ops)
