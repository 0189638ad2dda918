"""Random ops (gaussian_random, uniform_random) in both program formats.

Tiller does not reproduce Paddle's random bits: it draws from a seeded
counter-based generator (the op's `seed` attribute when non-zero, else a
per-model default mixed with the op's position). So these tests check what
the numbers must satisfy: shape, dtype, range, and mean/std within bounds
computed from the sample size (6 standard errors: a false failure has odds
of about 1e-9), plus determinism (same seed -> same numbers, two unseeded
ops -> different numbers).

PIR programs come from Paddle's Python API; legacy programs are written
directly (legacy_writer.py) since Paddle 3.3's API builds PIR programs.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import legacy_writer
import tiller.inference as ti

SHAPE = (64, 125)  # 8000 samples


def _run(model, params="", random_seed=None):
    config = ti.Config(str(model), str(params))
    if random_seed is not None:
        config.set_random_seed(random_seed)
    pred = ti.create_predictor(config)
    names = pred.get_input_names()
    return pred.run([np.zeros((1,), np.float32) for _ in names])


def _pir_model(tmp_path, build):
    """A PIR program whose outputs are build(paddle) + x * 0 for a feed x of
    shape [1] (inference programs need a feed)."""
    import paddle

    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [1], "float32")
            outs = [o + paddle.cast(x, o.dtype) * 0 for o in build(paddle)]
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        paddle.static.save_inference_model(str(tmp_path / "model"), [x], outs, exe, program=main)
    finally:
        paddle.disable_static()
    return tmp_path / "model.json"


def _legacy_model(tmp_path, op_type, attrs, dtype=np.float32):
    model, _ = legacy_writer.write_program(
        tmp_path, op_type, {}, {}, {}, {"Out": (["out"], dtype, SHAPE)}, attrs)
    return model


def _check_normal(v, mean, std):
    n = v.size
    assert np.isfinite(v).all()
    assert abs(v.mean() - mean) < 6 * std / math.sqrt(n)
    # The sample std's standard error is about std / sqrt(2n).
    assert abs(v.std() - std) < 6 * std / math.sqrt(2 * n)
    # 8000 normal samples reach beyond 2.5 sigma (P(miss) ~ 1e-20) but not
    # 6.5 sigma (P ~ 6e-7).
    assert (v > mean + 2.5 * std).any() and (v < mean - 2.5 * std).any()
    assert np.abs(v - mean).max() < 6.5 * std


def _check_uniform(v, lo, hi):
    n, width = v.size, hi - lo
    assert (v >= lo).all() and (v < hi).all()
    sd = width / math.sqrt(12)
    assert abs(v.mean() - (lo + hi) / 2) < 6 * sd / math.sqrt(n)
    # Var of U's sample variance: (1/n)(mu4 - sigma^4), mu4 = width^4 / 80.
    var_se = math.sqrt((width**4 / 80 - sd**4) / n)
    assert abs(v.var() - sd**2) < 6 * var_se
    # Extremes come within width/200 of both ends (P(miss) = (1 - 1/200)^n,
    # about 4e-18 for n = 8000).
    assert v.min() < lo + width / 200 and v.max() > hi - width / 200


def test_gaussian_pir(tmp_path):
    model = _pir_model(tmp_path, lambda p: [p.normal(1.5, 2.0, list(SHAPE))])
    (v,) = _run(model)
    assert v.shape == SHAPE
    _check_normal(v.astype(np.float64), 1.5, 2.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_randn_and_rand_dtypes_pir(tmp_path, dtype):
    model = _pir_model(tmp_path, lambda p: [p.randn(list(SHAPE), dtype), p.rand(list(SHAPE), dtype)])
    a, b = _run(model)
    assert a.dtype == np.dtype(dtype) and b.dtype == np.dtype(dtype)
    assert a.shape == SHAPE and b.shape == SHAPE
    _check_normal(a.astype(np.float64), 0.0, 1.0)
    _check_uniform(b.astype(np.float64), 0.0, 1.0)


def test_uniform_pir(tmp_path):
    model = _pir_model(tmp_path, lambda p: [p.uniform(list(SHAPE), "float32", -3.0, 5.0)])
    (v,) = _run(model)
    assert v.shape == SHAPE and v.dtype == np.float32
    _check_uniform(v.astype(np.float64), -3.0, 5.0)


def test_unseeded_ops_differ_and_runs_repeat_pir(tmp_path):
    model = _pir_model(tmp_path, lambda p: [p.rand(list(SHAPE)), p.rand(list(SHAPE))])
    a, b = _run(model)
    assert not np.array_equal(a, b)
    a2, b2 = _run(model)
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, b2)


def test_random_seed_option_pir(tmp_path):
    """Config.set_random_seed (the IPU `random_seed` option) picks the stream
    of ops whose own seed is 0; ops with their own seed keep it."""
    model = _pir_model(tmp_path, lambda p: [p.rand(list(SHAPE)), p.uniform(list(SHAPE), seed=7)])
    default_a, own = _run(model)
    s1_a, s1_own = _run(model, random_seed=1234)
    s1_again, _ = _run(model, random_seed=1234)
    s2_a, _ = _run(model, random_seed=99)
    np.testing.assert_array_equal(s1_a, s1_again)
    assert not np.array_equal(s1_a, s2_a) and not np.array_equal(s1_a, default_a)
    np.testing.assert_array_equal(own, s1_own)
    _check_uniform(s2_a.astype(np.float64), 0.0, 1.0)


def test_seeded_ops_pir(tmp_path):
    model = _pir_model(tmp_path, lambda p: [p.uniform(list(SHAPE), seed=7), p.uniform(list(SHAPE), seed=7),
                                            p.uniform(list(SHAPE), seed=8)])
    a, b, c = _run(model)
    np.testing.assert_array_equal(a, b)  # same seed: same numbers
    assert not np.array_equal(a, c)
    _check_uniform(c.astype(np.float64), 0.0, 1.0)  # paddle.uniform defaults to [0, 1) in 3.3


@pytest.mark.parametrize("dtype,vt", [(np.float32, 5), (np.float64, 6)])
def test_gaussian_legacy(tmp_path, dtype, vt):
    model = _legacy_model(tmp_path, "gaussian_random",
                          {"shape": list(SHAPE), "mean": -0.5, "std": 0.25, "seed": 11, "dtype": vt},
                          dtype)
    (v,) = _run(model)
    assert v.shape == SHAPE and v.dtype == dtype
    _check_normal(v.astype(np.float64), -0.5, 0.25)


@pytest.mark.parametrize("dtype,vt", [(np.float32, 5), (np.float64, 6)])
def test_uniform_legacy(tmp_path, dtype, vt):
    model = _legacy_model(tmp_path, "uniform_random",
                          {"shape": list(SHAPE), "min": 2.0, "max": 3.0, "seed": 0, "dtype": vt,
                           "diag_num": 0, "diag_step": 0, "diag_val": 1.0},
                          dtype)
    (v,) = _run(model)
    assert v.shape == SHAPE and v.dtype == dtype
    _check_uniform(v.astype(np.float64), 2.0, 3.0)


def test_uniform_diag_rejected_legacy(tmp_path):
    model = _legacy_model(tmp_path, "uniform_random",
                          {"shape": list(SHAPE), "min": 0.0, "max": 1.0, "seed": 0, "dtype": 5,
                           "diag_num": 3, "diag_step": 1, "diag_val": 1.0})
    with pytest.raises(Exception, match="diag_num = 3"):
        _run(model)
