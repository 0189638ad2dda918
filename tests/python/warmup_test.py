"""Config.enable_warmup (issue 46): a predictor made for serving compiles for
the given input shapes and runs on zeros at creation, so the first request
pays no compile; the caller's inputs are untouched, and bad warm-up shapes
are refused at creation naming the input."""
from __future__ import annotations

import numpy as np
import pytest

import tiller.inference as ti
from models import make_inputs


@pytest.fixture(scope="module")
def bert(zoo):
    return zoo.export("bert-tiny", "pir")


def _config(m, calls=None):
    config = ti.Config(m.model_file, m.params_file)
    if calls is not None:
        config.set_compile_progress_logger(lambda done, total: calls.append(done))
    return config


def _run(predictor, inputs):
    for name in predictor.get_input_names():
        predictor.get_input_handle(name).copy_from_cpu(inputs[name])
    predictor.run()
    return [predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()]


def test_warmup_compiles_at_creation_and_the_first_request_reuses_it(bert):
    inputs = make_inputs("bert-tiny", batch=1, seq_len=16)
    shapes = {name: list(v.shape) for name, v in inputs.items()}

    plain_calls, warm_calls = [], []
    plain = ti.create_predictor(_config(bert, plain_calls))
    # BERT's inputs are dynamic in both dims: without warm-up nothing compiles
    # for real shapes until the first run.
    assert plain_calls == []

    config = _config(bert, warm_calls)
    config.enable_warmup(shapes, runs=2)
    assert config.warmup_runs() == 2 and config.warmup_shapes() == shapes
    warm = ti.create_predictor(config)
    assert warm_calls and warm_calls[-1] == 100, warm_calls  # compiled while being created
    compiled_at_creation = len(warm_calls)

    expected = _run(plain, inputs)
    got = _run(warm, inputs)
    assert len(warm_calls) == compiled_at_creation, "the first request compiled again"
    # The same compiled kernels on the same values: the warm-up's zeros left
    # nothing behind (identical up to float32 rounding of the same kernels).
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)


def test_a_warmed_up_predictor_still_needs_every_input(bert):
    inputs = make_inputs("bert-tiny", batch=1, seq_len=16)
    config = _config(bert)
    config.enable_warmup({name: list(v.shape) for name, v in inputs.items()})
    predictor = ti.create_predictor(config)
    first = predictor.get_input_names()[0]
    predictor.get_input_handle(first).copy_from_cpu(inputs[first])
    # The warm-up ran on the executable's own buffers: the inputs not set
    # here are still unset, not zeros.
    with pytest.raises(ti.TillerError, match="not set|no value|set its"):
        predictor.run()


def test_an_input_with_a_dynamic_dim_past_the_first_needs_its_warmup_shape(bert):
    config = _config(bert)
    config.enable_warmup({})
    with pytest.raises(ti.TillerError, match=r"EnableWarmup: input '\w+' is declared \[-1, -1\]: "
                                             r"give its warm-up shape"):
        ti.create_predictor(config)


def test_a_dynamic_first_dim_defaults_to_one(zoo):
    m = zoo.export("resnet-tiny", "pir")
    calls = []
    config = _config(m, calls)
    declared = ti.create_predictor(_config(m)).get_input_shape("x")
    if declared[0] != -1 or any(d < 0 for d in declared[1:]):
        pytest.skip(f"resnet-tiny's input is declared {declared}")
    config.enable_warmup()
    ti.create_predictor(config)
    assert calls and calls[-1] == 100


def test_warmup_shapes_are_checked(bert):
    config = _config(bert)
    config.enable_warmup({"no_such_input": [1, 16]})
    with pytest.raises(ti.TillerError, match=r"EnableWarmup: model has no input named "
                                             r"'no_such_input' \(inputs: "):
        ti.create_predictor(config)

    name = ti.create_predictor(_config(bert)).get_input_names()[0]
    config = _config(bert)
    config.enable_warmup({name: [1, 16, 3]})
    with pytest.raises(ti.TillerError, match=rf"EnableWarmup: input '{name}' is declared "
                                             r"\[-1, -1\], the warm-up shape \[1, 16, 3\] does "
                                             r"not fit it"):
        ti.create_predictor(config)

    with pytest.raises(ti.TillerError, match=r"every dim must be >= 1"):
        _config(bert).enable_warmup({name: [0, 16]})
    with pytest.raises(ti.TillerError, match=r"runs must be >= 0, got -1"):
        _config(bert).enable_warmup({}, runs=-1)


def test_warmup_is_refused_with_the_ipu_mode(bert):
    inputs = make_inputs("bert-tiny", batch=1, seq_len=16)
    config = _config(bert)
    config.enable_ipu(1, 1)
    config.enable_warmup({name: list(v.shape) for name, v in inputs.items()})
    with pytest.raises(ti.TillerError, match="EnableWarmup: not with EnableIpu"):
        ti.create_predictor(config)
