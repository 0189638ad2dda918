"""quantize_linear / dequantize_linear as Paddle's post-training quantization
writes them (legacy programs only: Paddle 3.3's PTQ emits no PIR): per tensor
and per channel, both rounding modes, halfway values, values past the range,
a zero scale, another qmax, int8 weights, observer pairs. The results are
integers or the same float products in the same order: compared bit-exactly.
"""
from __future__ import annotations

import numpy as np

from op_harness import Case

rng = np.random.default_rng(4321)


def q_case(op, tag, x, scale, attrs):
    """One op on input X with a parameter Scale and an all-zero int32
    ZeroPoint (which Paddle ignores)."""
    params = {"scale": np.asarray(scale, np.float32),
              "zero_point": np.zeros(np.asarray(scale).shape, np.int32)}
    slots = {"X": ["x"], "Scale": ["scale"], "ZeroPoint": ["zero_point"]}
    out = ("Y", np.float32)
    return Case(op, tag, {"x": x}, params=params, legacy=(op, slots, [out], attrs),
                formats=("legacy",), exact=True)


# Exactly halfway between integers once multiplied by qmax / s = 1, and past
# the clipping range on both sides; 40 values, so that both the kernel's
# 16-wide vector loop and its scalar tail meet them.
TIES = np.tile(np.array([0.5, 1.5, 2.5, -0.5, -2.5, -127.5, 126.5, 200.0, -300.0, 0.0],
                        np.float32), 4)
X4 = rng.uniform(-3, 3, (2, 3, 4, 5)).astype(np.float32)

CASES = [
    q_case("quantize_linear", "ties_half_even", TIES, [127.0],
           {"quant_axis": -1, "bit_length": 8}),
    q_case("quantize_linear", "ties_half_away", TIES, [127.0],
           {"quant_axis": -1, "bit_length": 8, "round_type": 1}),
    q_case("quantize_linear", "per_tensor", X4, [1.7], {"quant_axis": -1, "bit_length": 8}),
    # A zero scale reads as 1e-6 (every nonzero value clips).
    q_case("quantize_linear", "per_channel_axis0", X4.reshape(2, 60), [2.1, 0.0],
           {"quant_axis": 0, "bit_length": 8}),
    q_case("quantize_linear", "per_channel_axis1", X4, [0.9, 2.5, 3.0],
           {"quant_axis": 1, "bit_length": 8, "round_type": 1}),
    q_case("quantize_linear", "qmax7", X4, [2.0], {"quant_axis": -1, "bit_length": 4, "qmax": 7}),
    q_case("quantize_linear", "observer", X4, [2.0],
           {"quant_axis": -1, "bit_length": 8, "only_observer": True}),
    q_case("dequantize_linear", "per_tensor", np.round(X4 * 40), [1.7],
           {"quant_axis": -1, "bit_length": 8}),
    q_case("dequantize_linear", "per_channel_axis1", np.round(X4 * 40), [0.9, 2.5, 3.0],
           {"quant_axis": 1, "bit_length": 8}),
    # int8 values as PTQ saves weights, per-channel scales along axis 1 (a
    # matmul's output columns) and axis 0 (a conv's output channels). As
    # inputs: Paddle's Assign initializer cannot make an int8 parameter (the
    # PTQ model tests load real int8 weights).
    q_case("dequantize_linear", "int8_axis1",
           rng.integers(-127, 128, (6, 4)).astype(np.int8), [0.5, 1.0, 0.25, 2.0],
           {"quant_axis": 1, "bit_length": 8}),
    q_case("dequantize_linear", "int8_axis0",
           rng.integers(-127, 128, (3, 2, 3, 3)).astype(np.int8), [0.5, 1.0, 0.125],
           {"quant_axis": 0, "bit_length": 8}),
    q_case("dequantize_linear", "qmax7", np.round(X4 * 2), [2.0],
           {"quant_axis": -1, "bit_length": 4, "qmax": 7}),
]
