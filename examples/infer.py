"""Runs an exported Paddle inference model with Tiller from Python, needing
only numpy (no paddlepaddle):

    python examples/infer.py MODEL_DIR [--batch 2] [--seq-len 16] [--max-id 2] [--save out.npz]

MODEL_DIR holds model.json or model.pdmodel with model.pdiparams (what
``paddle.jit.save`` / ``paddle.static.save_inference_model`` write). Inputs
are made up from a fixed seed: integer inputs uniform in [0, --max-id) (ids
an embedding table of any size, token types included, holds), float inputs
normal; dynamic dimensions take --batch, then --seq-len. Prints each
output's shape and first values; --save writes inputs and outputs (.npz).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import tiller.inference as infer


def make_inputs(predictor, batch: int, seq_len: int, max_id: int = 2,
                seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in predictor.get_input_names():
        dynamic = iter([batch, seq_len])
        shape = [d if d >= 0 else next(dynamic, 1) for d in predictor.get_input_shape(name)]
        dtype = np.dtype(predictor.get_input_type(name))
        if np.issubdtype(dtype, np.integer):
            feeds[name] = rng.integers(0, max_id, size=shape).astype(dtype)
        else:
            feeds[name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--max-id", type=int, default=2, help="integer inputs are in [0, MAX_ID)")
    ap.add_argument("--save", help="write the inputs and outputs to this .npz file")
    args = ap.parse_args(argv)
    predictor = infer.create_predictor(infer.Config(args.model_dir))
    feeds = make_inputs(predictor, args.batch, args.seq_len, args.max_id)
    outputs = predictor.run([feeds[n] for n in predictor.get_input_names()])
    for name, value in zip(predictor.get_output_names(), outputs):
        print(f"{name} {list(value.shape)} {value.dtype}: {value.reshape(-1)[:4]}")
    if args.save:
        np.savez(args.save, **{f"input:{k}": v for k, v in feeds.items()},
                 **{f"output:{k}": v for k, v in zip(predictor.get_output_names(), outputs)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
