"""Static block sparsity (issue 44): a BERT whose encoder projections are
block-pruned (models/prune.py) runs its linears on the block-sparse kernel
(the block_sparse_linear pass), with Paddle Inference's outputs on the same
pruned weights.

Tolerance: rel 1e-4 of each output's largest magnitude (the acceptance
bound): the kernel sums each output over the nonzero blocks in row order,
the dense GEMM in its own, so results differ by float32 rounding through
the encoder's layers.
"""
from __future__ import annotations

import numpy as np
import pytest

import tiller.inference as ti
from models import make_inputs
from models.export import paddle_infer
from models.prune import export_pruned, prune_blocks


@pytest.mark.parametrize("block", [(16, 16), (1, 8)])
@pytest.mark.parametrize("sparsity", [0.9, 0.75])
def test_pruned_bert_runs_block_sparse_with_paddles_outputs(tmp_path, block, sparsity):
    prefix = export_pruned("bert-tiny", tmp_path, sparsity, block, seed=3)
    inputs = make_inputs("bert-tiny", batch=2, seq_len=16)
    want = list(paddle_infer(str(prefix), inputs).values())
    pred = ti.create_predictor(ti.Config(str(prefix) + ".json", str(prefix) + ".pdiparams"))
    for name in pred.get_input_names():
        pred.get_input_handle(name).copy_from_cpu(inputs[name])
    pred.run()
    have = [pred.get_output_handle(n).copy_to_cpu() for n in pred.get_output_names()]
    for h, w in zip(have, want):
        err = np.max(np.abs(h - w)) / max(1e-6, float(np.max(np.abs(w))))
        assert err <= 1e-4, f"rel diff {err:.3g}"
    # Every encoder linear: 2 layers x (q|k|v merged, out, 2 FFN) in bert-tiny.
    report = pred.summary()["compile_report"]
    assert "+ linear_block_sparse x8" in report, report


def test_dense_weights_stay_dense(tmp_path):
    prefix = export_pruned("bert-tiny", tmp_path, 0.5, (16, 16), seed=3)  # below the pass's 70%
    pred = ti.create_predictor(ti.Config(str(prefix) + ".json", str(prefix) + ".pdiparams"))
    inputs = make_inputs("bert-tiny", batch=2, seq_len=16)
    for name in pred.get_input_names():
        pred.get_input_handle(name).copy_from_cpu(inputs[name])
    pred.run()
    assert "linear_block_sparse" not in pred.summary()["compile_report"]


def test_prune_blocks_zeroes_whole_blocks():
    w = np.arange(1, 1 + 32 * 48, dtype=np.float32).reshape(32, 48)
    p = prune_blocks(w, 0.5, (16, 16), np.random.default_rng(0))
    tiles = p.reshape(2, 16, 3, 16).transpose(0, 2, 1, 3).reshape(6, -1)
    zero = [bool(np.all(t == 0)) for t in tiles]
    assert sum(zero) == 3 and all(np.all(t != 0) for t, z in zip(tiles, zero) if not z)
