"""Models quantized by Paddle's own post-training quantization
(models/quantize.py: PostTrainingQuantization, onnx_format, int8 weights with
per-channel scales) load and run in Tiller, and what Tiller cannot reproduce
is refused at load.

Reference: Paddle Inference on the same quantized model with oneDNN off,
which runs the quantize/dequantize pairs in float32 (bit-identical to
Paddle's executor). Tolerance: parity_test's 1e-4 (scaled by max(1, |ref|)).
Both sides compute the same integers and the same float products; what
differs is the summation order of the float32 matmuls and convolutions
(~1e-6 here). A different rounding of a quantized activation would move an
output by about one quantum (scale / 127, ~1e-2 on these models) and fail.
The quantized outputs are also checked to differ from the float32 model's
by more than that bound, so a model whose quantization was dropped cannot
pass.
"""
from __future__ import annotations

import numpy as np
import pytest

import legacy_writer
import tiller.inference as ti
from models import export
from models.quantize import quantize

TOL = 1e-4


@pytest.fixture(scope="module")
def quantized(zoo, tmp_path_factory):
    root = tmp_path_factory.mktemp("int8")
    made = {}

    def get(preset):
        if preset not in made:
            fp32 = zoo.export(preset, "legacy")
            made[preset] = (fp32, quantize(fp32, root / preset, batches=4, batch=2, seq_len=16))
        return made[preset]

    return get


@pytest.mark.parametrize("preset", ["bert-tiny", "resnet-tiny"])
def test_paddle_ptq_model_matches_paddle(quantized, preset):
    fp32, int8 = quantized(preset)
    program = open(int8.model_file, "rb").read()
    assert b"quantize_linear" in program and b"dequantize_linear" in program
    inputs = export.make_inputs(preset, batch=3, seq_len=24, seed=9)
    ref = export.paddle_infer(int8.dir, inputs, mkldnn=False)
    ref_fp32 = export.paddle_infer(fp32.dir, inputs, mkldnn=False)
    predictor = ti.create_predictor(ti.Config(int8.model_file, int8.params_file))
    outs = predictor.run([inputs[n] for n in predictor.get_input_names()])
    for (name, r), r32, t in zip(ref.items(), ref_fp32.values(), outs):
        assert t.shape == r.shape and t.dtype == r.dtype, name
        err = np.abs(t.astype(np.float64) - r) / np.maximum(1.0, np.abs(r))
        assert err.max() <= TOL, f"{name}: max scaled error {err.max():.3g}"
        assert np.abs(r - r32).max() > 10 * TOL, f"{name}: quantization changed nothing"


def _write(tmp_path, op, attrs):
    x = np.zeros((2, 3), np.float32)
    params = {"scale": np.ones((1,), np.float32), "zero_point": np.zeros((1,), np.int32)}
    return legacy_writer.write_program(
        tmp_path, op, {"x": x}, params, {"X": ["x"], "Scale": ["scale"],
                                         "ZeroPoint": ["zero_point"]},
        {"Y": (["y"], np.float32, x.shape)}, attrs)


@pytest.mark.parametrize("op", ["quantize_linear", "dequantize_linear"])
@pytest.mark.parametrize("attrs,named", [
    ({"qmax": 448}, ["qmax", "448", "e4m3"]),
    ({"qmax": 57344}, ["qmax", "57344", "e5m2"]),
    ({"is_test": False}, ["is_test", "false"]),
])
def test_unreproducible_quantization_is_refused_at_load(tmp_path, op, attrs, named):
    model, params = _write(tmp_path, op, {"quant_axis": -1, "bit_length": 8, **attrs})
    with pytest.raises(ti.TillerError) as info:
        ti.create_predictor(ti.Config(str(model), str(params)))
    msg = str(info.value)
    for part in [op, str(model)] + named:
        assert part in msg, msg


def test_scale_of_the_wrong_size_is_refused_naming_it(tmp_path):
    # Per channel along axis 1 of a [2, 3] input needs 3 scales, not 1.
    model, params = _write(tmp_path, "quantize_linear", {"quant_axis": 1, "bit_length": 8})
    with pytest.raises(ti.TillerError) as info:
        ti.create_predictor(ti.Config(str(model), str(params)))
    msg = str(info.value)
    assert "quantize_linear" in msg and "scale" in msg and "3" in msg, msg
