"""Block pruning of a zoo transformer's projection weights (issue 44's static
sparsity): every paddle.nn.Linear inside the encoder (attention q/k/v/out
projections and both FFN layers) keeps a seeded random `1 - sparsity` of its
blocks and zeroes the rest, as block magnitude pruning leaves a model (which
blocks survive does not matter to speed or to the check against the dense
math on the same weights). Exports like models.export.export.

    python -m models.prune --preset bert-base --sparsity 0.9 --block 16x16 --out DIR
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def prune_blocks(w: np.ndarray, sparsity: float, block: tuple[int, int],
                 rng: np.random.Generator) -> np.ndarray:
    """`w` [K, N] with round(sparsity * blocks) of its block x block tiles zeroed."""
    bk, bn = block
    k, n = w.shape
    if k % bk or n % bn:
        raise ValueError(f"{k}x{n} is not tiled by {bk}x{bn}")
    blocks = (k // bk) * (n // bn)
    zero = rng.permutation(blocks)[:int(round(sparsity * blocks))]
    out = w.copy().reshape(k // bk, bk, n // bn, bn)
    out[zero // (n // bn), :, zero % (n // bn), :] = 0.0
    return out.reshape(k, n)


def asp_block_pruner(sparsity: float, block=(16, 16), seed: int = 0):
    """A pruning function for Paddle's ASP (`paddle.incubate.asp.add_supported_layer(
    layer, fn)`): each weight the blocks tile gets a mask zeroing round(sparsity x blocks)
    of its blocks (prune_blocks) and comes back masked; any other weight stays dense
    (a mask of ones). ASP calls it as fn(weight, m, n, func_name, param_name)."""
    rng = np.random.default_rng(seed)

    def prune(w, m, n, func_name, param_name):
        if w.shape[0] % block[0] or w.shape[1] % block[1]:
            return w, np.ones_like(w)
        mask = prune_blocks(np.ones_like(w), sparsity, block, rng)
        return w * mask, mask

    return prune


def prune_encoder(model, sparsity: float, block=(16, 16), seed: int = 0) -> int:
    """Prunes the encoder's Linear weights in place; returns how many."""
    import paddle

    rng = np.random.default_rng(seed)
    count = 0
    for name, layer in model.named_sublayers():
        if isinstance(layer, paddle.nn.Linear) and ".encoder." in f".{name}.":
            w = layer.weight.numpy()
            layer.weight.set_value(prune_blocks(w, sparsity, block, rng))
            count += 1
    return count


def export_pruned(preset: str, out_dir, sparsity: float, block=(16, 16), seed: int = 0,
                  batch=None, seq_len=None):
    """A zoo model with its encoder pruned, saved for inference (PIR)."""
    import paddle

    from .export import MODEL_PREFIX
    from .zoo import build_model, input_specs

    model = build_model(preset, seed)
    n = prune_encoder(model, sparsity, block, seed)
    if not n:
        raise ValueError(f"{preset}: no encoder Linear layers to prune")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paddle.jit.save(model, str(out_dir / MODEL_PREFIX), input_spec=input_specs(preset, batch, seq_len))
    return out_dir / MODEL_PREFIX


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="bert-base")
    ap.add_argument("--sparsity", type=float, default=0.9)
    ap.add_argument("--block", default="16x16")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    block = tuple(int(v) for v in a.block.split("x"))
    print(export_pruned(a.preset, a.out, a.sparsity, block))


if __name__ == "__main__":
    main()
