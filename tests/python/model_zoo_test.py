"""The reference pipeline itself: zoo presets export in both Paddle formats,
and Paddle Inference on the exported files reproduces the dynamic-graph
(eager) model. If these fail, no Tiller-vs-Paddle comparison means anything."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

TINY_PRESETS = ("bert-tiny", "ernie-tiny", "resnet-tiny")
FORMATS = ("pir", "legacy")

ATOL = 1e-5


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("preset", TINY_PRESETS)
def test_export_writes_expected_files(zoo, preset, fmt):
    exp = zoo.export(preset, fmt)
    d = Path(exp.dir)
    names = {p.name for p in d.iterdir()}
    if fmt == "pir":
        assert "model.json" in names and "model.pdmodel" not in names
        head = json.loads(Path(exp.model_file).read_text())["base_code"]
        assert head["magic"] == "pir"
    else:
        assert "model.pdmodel" in names and "model.json" not in names
    assert "model.pdiparams" in names
    info = json.loads((d / "export_info.json").read_text())
    assert info["preset"] == preset and info["format"] == fmt
    # Dynamic dims everywhere except channels / image size.
    for inp in info["inputs"]:
        assert inp["shape"][0] == -1


@pytest.mark.parametrize("preset", TINY_PRESETS)
def test_both_formats_hold_identical_weights(zoo, preset):
    """Same preset + seed -> byte-identical .pdiparams in both formats (same
    parameter names, same sorted order, same values)."""
    exps = zoo.legacy_and_pir(preset)
    a = Path(exps["pir"].params_file).read_bytes()
    b = Path(exps["legacy"].params_file).read_bytes()
    assert a == b


@pytest.mark.parametrize("ir_optim", [True, False], ids=["ir", "noir"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("preset", TINY_PRESETS)
def test_paddle_inference_matches_eager(zoo, eager_reference, preset, fmt, ir_optim):
    from models.export import output_names, paddle_infer

    exp = zoo.export(preset, fmt)
    inputs, ref = eager_reference(preset, batch=2, seq_len=16)
    outs = paddle_infer(exp.dir, inputs, threads=1, ir_optim=ir_optim)
    assert list(output_names(exp)) == list(ref)
    assert len(outs) == len(ref)
    for (pname, got), (name, want) in zip(outs.items(), ref.items()):
        assert got.shape == want.shape, (name, pname)
        diff = float(np.abs(got - want).max())
        assert diff < ATOL, f"{preset}/{fmt}/{name} ({pname}): max abs diff {diff}"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("preset", ["bert-tiny", "resnet-tiny"])
def test_dynamic_shapes(zoo, eager_reference, preset, fmt):
    """One export serves other batch sizes and sequence lengths."""
    from models.export import paddle_infer

    exp = zoo.export(preset, fmt)
    inputs, ref = eager_reference(preset, batch=3, seq_len=7, input_seed=1)
    outs = paddle_infer(exp.dir, inputs, threads=1)
    for got, want in zip(outs.values(), ref.values()):
        assert got.shape == want.shape
        assert float(np.abs(got - want).max()) < ATOL


def test_make_inputs_pad_and_range():
    from models import get_spec, make_inputs

    for preset in ("bert-tiny", "ernie-tiny"):
        cfg = get_spec(preset).config
        x = make_inputs(preset, batch=4, seq_len=12, seed=3)
        ids = x["input_ids"]
        assert ids.dtype == np.int64 and ids.shape == (4, 12)
        assert ids.min() >= 0 and ids.max() < cfg.vocab_size
        assert (ids[:, -1] == cfg.pad_token_id).all()          # every row padded at the end
        assert (ids[:, 0] != cfg.pad_token_id).all()
        assert x["token_type_ids"].max() < cfg.type_vocab_size
        if preset == "ernie-tiny":
            assert x["task_type_ids"].max() < cfg.task_type_vocab_size
    img = make_inputs("resnet-tiny", batch=2)["x"]
    assert img.shape == (2, 3, 64, 64) and img.dtype == np.float32


def test_attention_mask_matters(eager_reference):
    """Padding changes the valid positions' outputs only through the mask:
    the same valid tokens with more padding give the same valid outputs."""
    import paddle

    from models import build_model

    model = build_model("bert-tiny")
    ids = np.array([[5, 6, 7, 8, 0, 0]], dtype=np.int64)
    ids_more_pad = np.array([[5, 6, 7, 8, 0, 0, 0, 0]], dtype=np.int64)
    with paddle.no_grad():
        a = model(paddle.to_tensor(ids), paddle.to_tensor(np.zeros_like(ids)))[0].numpy()
        b = model(paddle.to_tensor(ids_more_pad),
                  paddle.to_tensor(np.zeros_like(ids_more_pad)))[0].numpy()
    np.testing.assert_allclose(a[:, :4], b[:, :4], atol=1e-5)


@pytest.mark.parametrize("preset,fmt,ops", [
    ("bert-tiny", "legacy", {"matmul_v2", "gelu", "layer_norm", "softmax", "lookup_table_v2",
                             "reshape2", "transpose2", "tanh", "slice", "dropout"}),
    ("bert-tiny", "pir", {"pd_op.matmul", "pd_op.gelu", "pd_op.layer_norm", "pd_op.softmax",
                          "pd_op.embedding", "pd_op.reshape", "pd_op.transpose", "pd_op.tanh"}),
    ("resnet-tiny", "legacy", {"conv2d", "batch_norm", "relu", "pool2d", "elementwise_add",
                               "flatten_contiguous_range", "matmul_v2"}),
    ("resnet-tiny", "pir", {"pd_op.conv2d", "pd_op.batch_norm_", "pd_op.relu", "pd_op.pool2d",
                            "pd_op.flatten", "pd_op.matmul"}),
])
def test_program_op_inventory(zoo, preset, fmt, ops):
    from models.inventory import op_counts

    counts = op_counts(zoo.export(preset, fmt))
    missing = ops - set(counts)
    assert not missing, f"{preset}/{fmt} lacks {missing}; has {sorted(counts)}"


@pytest.mark.slow
def test_bert_base_exports_and_matches(zoo, eager_reference):
    from models.export import paddle_infer

    exp = zoo.export("bert-base", "pir")
    inputs, ref = eager_reference("bert-base", batch=1, seq_len=32)
    outs = paddle_infer(exp.dir, inputs, threads=2)
    for got, want in zip(outs.values(), ref.values()):
        assert float(np.abs(got - want).max()) < 1e-4
