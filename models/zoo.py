"""Preset registry: build a model, its input specs and matching inputs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from . import bert, ernie, mobilenet, resnet, unet


@dataclass(frozen=True)
class ModelSpec:
    preset: str
    family: str                        # "bert" | "ernie" | one of IMAGE_FAMILIES
    config: Any
    inputs: tuple                      # ((name, dtype), ...)
    outputs: tuple                     # (name, ...)
    builder: Callable


# Families whose single input is an image batch x [batch, 3, S, S].
IMAGE_FAMILIES = ("resnet", "mobilenet", "unet")


def _families():
    out = {}
    for name, cfg in bert.PRESETS.items():
        out[name] = ModelSpec(name, "bert", cfg, bert.INPUTS, bert.OUTPUTS, bert.BertModel)
    for name, cfg in ernie.PRESETS.items():
        out[name] = ModelSpec(name, "ernie", cfg, ernie.inputs_for(cfg), ernie.OUTPUTS,
                              ernie.ErnieModel)
    for name, cfg in resnet.PRESETS.items():
        out[name] = ModelSpec(name, "resnet", cfg, resnet.INPUTS, resnet.OUTPUTS, resnet.ResNet)
    for name, cfg in mobilenet.PRESETS.items():
        out[name] = ModelSpec(name, "mobilenet", cfg, mobilenet.INPUTS, mobilenet.OUTPUTS,
                              mobilenet.MobileNet)
    for name, cfg in unet.PRESETS.items():
        out[name] = ModelSpec(name, "unet", cfg, unet.INPUTS, unet.OUTPUTS, unet.UNet)
    return out


PRESETS: dict[str, ModelSpec] = _families()


def get_spec(preset: str, **overrides) -> ModelSpec:
    """Look up a preset; keyword overrides replace config fields
    (e.g. ``get_spec("bert-tiny", num_layers=4)``)."""
    if preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; known: {sorted(PRESETS)}")
    spec = PRESETS[preset]
    if overrides:
        cfg = replace(spec.config, **overrides)
        inputs = ernie.inputs_for(cfg) if spec.family == "ernie" else spec.inputs
        spec = replace(spec, config=cfg, inputs=inputs)
    return spec


def build_model(preset: str, seed: int = 0, **overrides):
    """Build the model in eval mode with deterministic (numpy-seeded) weights."""
    import paddle

    from ._init import init_convnet, init_transformer

    spec = get_spec(preset, **overrides)
    paddle.seed(seed)
    # Fresh name scope: parameter names (and so the .pdiparams order) do not
    # depend on what else this process built before.
    with paddle.utils.unique_name.guard():
        model = spec.builder(spec.config)
    if spec.family in IMAGE_FAMILIES:
        init_convnet(model, seed)
    else:
        init_transformer(model, seed, spec.config.initializer_range)
    model.eval()
    return model


def input_specs(preset: str, batch=None, seq_len=None, **overrides):
    """paddle.static.InputSpec list; None dims are dynamic (-1)."""
    import paddle

    spec = get_spec(preset, **overrides)
    if spec.family in IMAGE_FAMILIES:
        s = spec.config.image_size
        shape = [batch, 3, s, s]
        return [paddle.static.InputSpec(shape, dt, name) for name, dt in spec.inputs]
    return [paddle.static.InputSpec([batch, seq_len], dt, name) for name, dt in spec.inputs]


def make_inputs(preset: str, batch: int = 2, seq_len: int = 16, seed: int = 0,
                **overrides) -> dict[str, np.ndarray]:
    """Deterministic inputs. Token models get ids in [1, vocab) with padding
    (pad_token_id) at the end of every row of length >= 2, so the attention
    mask matters; token types are 0 then 1 (sentence pair); ResNet gets an
    N(0, 1) float32 image batch (``seq_len`` is ignored)."""
    spec = get_spec(preset, **overrides)
    rng = np.random.default_rng(seed)
    cfg = spec.config
    if spec.family in IMAGE_FAMILIES:
        s = cfg.image_size
        return {"x": rng.standard_normal((batch, 3, s, s)).astype(np.float32)}
    ids = rng.integers(1, cfg.vocab_size, size=(batch, seq_len), dtype=np.int64)
    ids[ids == cfg.pad_token_id] = cfg.pad_token_id + 1
    types = np.zeros((batch, seq_len), dtype=np.int64)
    for b in range(batch):
        n_pad = 0
        if seq_len >= 2:
            n_pad = int(rng.integers(1, max(1, seq_len // 3) + 1))
        valid = seq_len - n_pad
        ids[b, valid:] = cfg.pad_token_id
        types[b, (valid + 1) // 2:valid] = 1
    out = {"input_ids": ids, "token_type_ids": types}
    if any(name == "task_type_ids" for name, _ in spec.inputs):
        task = rng.integers(0, cfg.task_type_vocab_size, size=(batch, 1), dtype=np.int64)
        out["task_type_ids"] = np.repeat(task, seq_len, axis=1)
    return out


def eager_forward(model, spec: ModelSpec, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the dynamic-graph model; returns output name -> numpy array."""
    import paddle

    args = [paddle.to_tensor(inputs[name]) for name, _ in spec.inputs]
    with paddle.no_grad():
        outs = model(*args)
    if not isinstance(outs, (tuple, list)):
        outs = (outs,)
    return {name: o.numpy() for name, o in zip(spec.outputs, outs)}
