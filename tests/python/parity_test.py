"""Tiller vs Paddle Inference on models exported by paddlepaddle itself, in
both file formats (PIR JSON and legacy ProgramDesc).

Tolerance: |tiller - paddle| <= 1e-4 * max(1, |paddle|) elementwise (the
issue's max-abs 1e-4, relative for large values). Both sides run fp32 with
different summation orders (oneDNN blocking vs Paddle's kernels), which
moves results by ~1e-6 on these sizes; 1e-4 leaves room for that and
nothing else.
"""
from __future__ import annotations

import numpy as np
import pytest

import tiller.inference as ti
from models import export

TOL = 1e-4


def run_tiller(model, inputs, threads=1):
    config = ti.Config(model.model_file, model.params_file)
    config.set_cpu_math_library_num_threads(threads)
    predictor = ti.create_predictor(config)
    outs = predictor.run([inputs[n] for n in predictor.get_input_names()])
    return predictor, outs


def assert_matches_paddle(model, inputs, threads=1, paddle_mkldnn=None):
    ref = export.paddle_infer(model.dir, inputs, threads=1, mkldnn=paddle_mkldnn)
    predictor, outs = run_tiller(model, inputs, threads)
    assert predictor.get_output_names() == list(ref.keys())
    for (name, r), t in zip(ref.items(), outs):
        assert t.shape == r.shape, name
        assert t.dtype == r.dtype, name
        err = np.abs(t.astype(np.float64) - r) / np.maximum(1.0, np.abs(r))
        assert err.max() <= TOL, f"{name}: max scaled error {err.max():.3g}"


@pytest.mark.parametrize("fmt", ["pir", "legacy"])
@pytest.mark.parametrize("preset", ["bert-tiny", "ernie-tiny", "resnet-tiny"])
@pytest.mark.parametrize("batch", [1, 4])
def test_tiny_models_match_paddle(zoo, preset, fmt, batch):
    model = zoo.export(preset, fmt)
    inputs = export.make_inputs(preset, batch=batch, seq_len=24, seed=batch)
    assert_matches_paddle(model, inputs)


@pytest.mark.parametrize("fmt", ["pir", "legacy"])
def test_bert_base_layers_at_seq_128(zoo, fmt):
    """Two layers of BERT-Base (hidden 768, 12 heads, FFN 3072) at seq 128:
    the real GEMM shapes and head split, small enough for CI."""
    model = zoo.export("bert-base", fmt, num_layers=2, vocab_size=2048)
    inputs = export.make_inputs("bert-base", batch=2, seq_len=128, seed=3, vocab_size=2048)
    assert_matches_paddle(model, inputs, threads=2)


def test_ernie_base_layers(zoo):
    model = zoo.export("ernie-3.0-base", "pir", num_layers=2, vocab_size=2048)
    inputs = export.make_inputs("ernie-3.0-base", batch=1, seq_len=64, seed=5, vocab_size=2048)
    assert_matches_paddle(model, inputs)


@pytest.mark.parametrize("fmt", ["pir", "legacy"])
def test_resnet50_structure(zoo, fmt):
    """ResNet-50 (bottleneck blocks, 3-4-6-3) on 64x64 images."""
    model = zoo.export("resnet50", fmt, image_size=64)
    inputs = export.make_inputs("resnet50", batch=2, seed=7, image_size=64)
    assert_matches_paddle(model, inputs, threads=2)


def test_shape_change_recompiles_and_caches(zoo):
    model = zoo.export("bert-tiny", "pir")
    config = ti.Config(model.model_file, model.params_file)
    predictor = ti.create_predictor(config)
    for seq in (8, 32, 8):
        inputs = export.make_inputs("bert-tiny", batch=3, seq_len=seq, seed=seq)
        outs = predictor.run([inputs[n] for n in predictor.get_input_names()])
        ref = export.paddle_infer(model.dir, inputs)
        for r, t in zip(ref.values(), outs):
            assert t.shape == r.shape
            np.testing.assert_allclose(t, r, atol=TOL, rtol=TOL)


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["bert-base", "ernie-3.0-base", "resnet50"])
@pytest.mark.parametrize("fmt", ["pir", "legacy"])
@pytest.mark.parametrize("batch", [1, 4])
def test_full_size_models_match_paddle(zoo, preset, fmt, batch):
    model = zoo.export(preset, fmt)
    inputs = export.make_inputs(preset, batch=batch, seq_len=128, seed=11)
    assert_matches_paddle(model, inputs, threads=2)


@pytest.mark.parametrize("fmt", ["pir", "legacy"])
@pytest.mark.parametrize("preset", ["mobilenet-tiny", "unet-tiny"])
@pytest.mark.parametrize("batch", [1, 3])
def test_more_real_models_match_paddle(zoo, preset, fmt, batch):
    """Issue 3's two extra real models: a MobileNetV3-style CNN (depthwise
    convs, hard_swish, squeeze-excite) and a UNet-style net
    (conv2d_transpose, bilinear interpolation, concat skips)."""
    model = zoo.export(preset, fmt)
    inputs = export.make_inputs(preset, batch=batch, seed=batch + 20)
    # Paddle Inference 3.3.1's oneDNN executor rejects the PIR bilinear_interp
    # (its float-array `scale` attribute: "ConvertPirAttribute2RuntimeAttribute
    # not support ArrayAttribute<DoubleAttribute>"); its plain CPU kernels serve
    # as the reference there.
    mkldnn = False if (preset, fmt) == ("unet-tiny", "pir") else None
    assert_matches_paddle(model, inputs, paddle_mkldnn=mkldnn)
