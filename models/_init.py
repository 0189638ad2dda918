"""Deterministic, numpy-driven parameter initialisation shared by the zoo.

Parameters are set from a numpy RNG (not Paddle's initialisers) so the same
preset and seed give bit-identical weights in every process and in both PIR
and legacy-program export modes.
"""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn as nn


def _set(p: paddle.Tensor, value: np.ndarray) -> None:
    p.set_value(value.astype(np.float32).reshape(p.shape))


def init_transformer(model: nn.Layer, seed: int, std: float = 0.02) -> None:
    """PaddleNLP-style init (normal(0, initializer_range)) plus small random
    biases and LayerNorm affine terms so that none of them is an identity."""
    rng = np.random.default_rng(seed)
    for _, layer in model.named_sublayers(include_self=True):
        if isinstance(layer, (nn.Linear, nn.Embedding)):
            _set(layer.weight, rng.normal(0.0, std, layer.weight.shape))
            if isinstance(layer, nn.Linear) and layer.bias is not None:
                _set(layer.bias, rng.normal(0.0, std, layer.bias.shape))
        elif isinstance(layer, nn.LayerNorm):
            _set(layer.weight, 1.0 + rng.normal(0.0, 0.1, layer.weight.shape))
            _set(layer.bias, rng.normal(0.0, 0.1, layer.bias.shape))


def init_convnet(model: nn.Layer, seed: int) -> None:
    """Kaiming-normal conv weights, random BatchNorm affine terms and running
    statistics (so inference-mode batch_norm is not an identity), small FC."""
    rng = np.random.default_rng(seed)
    for _, layer in model.named_sublayers(include_self=True):
        if isinstance(layer, nn.Conv2D):
            w = layer.weight
            fan_in = int(np.prod(w.shape[1:]))
            _set(w, rng.normal(0.0, np.sqrt(2.0 / fan_in), w.shape))
            if layer.bias is not None:
                _set(layer.bias, rng.normal(0.0, 0.01, layer.bias.shape))
        elif isinstance(layer, (nn.BatchNorm2D, nn.BatchNorm)):
            c = layer.weight.shape
            _set(layer.weight, rng.uniform(0.5, 1.0, c))
            _set(layer.bias, rng.normal(0.0, 0.1, c))
            _set(layer._mean, rng.normal(0.0, 0.1, c))
            _set(layer._variance, rng.uniform(0.5, 1.5, c))
        elif isinstance(layer, nn.Linear):
            fan_in = layer.weight.shape[0]
            _set(layer.weight, rng.normal(0.0, 1.0 / np.sqrt(fan_in), layer.weight.shape))
            _set(layer.bias, rng.normal(0.0, 0.01, layer.bias.shape))
