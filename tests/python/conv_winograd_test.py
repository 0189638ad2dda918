"""Winograd convolutions (backends/cpu/passes/conv_winograd.cc): a ResNet-18 exported by
Paddle runs its 3x3 stride-1 convolutions with Winograd's algorithm (the
second of each basic block with its residual and relu fused), matches Paddle
Inference, and the switch (Config.switch_winograd, `tiller --no-winograd`)
turns it off.

Tolerances: against Paddle, parity_test's 1e-4 scaled elementwise error;
Winograd against Tiller's own direct kernels, 2e-5 of the largest output
(measured 1e-6-3e-6: the transforms round float32 sums a few times more than
a direct convolution does, see tests/cpp/conv_winograd_test.cc).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tiller.inference as ti
from models import export

REPO = Path(__file__).resolve().parents[2]
TILLER = Path(os.environ.get("TILLER_BUILD_DIR", REPO / "build")) / "bin" / "tiller"
# ResNet-18's basic blocks hold 16 3x3 convolutions; stages 2-4 open with a
# strided one, which Winograd's tiles do not cover.
STRIDE_ONE_3X3 = 13


def _predictor(model, winograd: bool):
    config = ti.Config(model.model_file, model.params_file)
    config.set_cpu_math_library_num_threads(2)
    if not winograd:
        config.switch_winograd(False)
    assert config.winograd() == winograd
    return ti.create_predictor(config)


@pytest.mark.parametrize("fmt", ["pir", "legacy"])
def test_resnet18_runs_winograd_and_matches_paddle(zoo, fmt):
    model = zoo.export("resnet18", fmt, image_size=32)
    inputs = export.make_inputs("resnet18", batch=3, seed=12, image_size=32)
    (want,) = export.paddle_infer(model.dir, inputs, threads=1).values()
    outs = {}
    for winograd in (True, False):
        predictor = _predictor(model, winograd)
        (outs[winograd],) = predictor.run([inputs[n] for n in predictor.get_input_names()])
        graph = predictor.summary()["graph"]
        chosen = graph.count('algorithm="winograd"')
        assert chosen == (STRIDE_ONE_3X3 if winograd else 0), graph
        if winograd:
            assert "conv_winograd" in predictor.summary()["compile_report"]
        err = np.abs(outs[winograd].astype(np.float64) - want) / np.maximum(1.0, np.abs(want))
        assert err.max() <= 1e-4, f"winograd={winograd}: max scaled error {err.max():.3g}"
    scale = np.abs(outs[False]).max()
    assert scale > 1e-2
    assert np.abs(outs[True] - outs[False]).max() <= 2e-5 * scale


def test_cli_no_winograd_switch(zoo):
    model = zoo.export("resnet18", "pir", image_size=32)

    def passes(*extra):
        res = subprocess.run([str(TILLER), "info", model.model_file, "--passes",
                              "--shape", "x=1x3x32x32", *extra],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        return res.stdout

    assert "conv_winograd" in passes()
    assert "conv_winograd" not in passes("--no-winograd")
