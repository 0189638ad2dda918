"""An op used with an attribute value Tiller does not handle must fail when
the model is loaded, naming the op, the attribute and the value — never run
and give a wrong answer. Programs are written directly (legacy_writer.py) so
any attribute value can be expressed."""
from __future__ import annotations

import numpy as np
import pytest

import legacy_writer
import tiller.inference as ti

X = np.zeros((1, 2, 4, 4), np.float32)

CASES = [
    ("pool2d", {"X": ["x"]}, (1, 2, 2, 2),
     {"pooling_type": "lp", "ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0]}, "lp"),
    ("pool2d", {"X": ["x"]}, (1, 2, 2, 2),
     {"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0],
      "padding_algorithm": "BOGUS"}, "BOGUS"),
    ("dropout", {"X": ["x"]}, X.shape,
     {"dropout_prob": 0.5, "is_test": True, "dropout_implementation": "sideways"}, "sideways"),
    ("prelu", {"X": ["x"], "Alpha": ["alpha"]}, X.shape, {"mode": "diagonal"}, "diagonal"),
    ("matmul", {"X": ["x"], "Y": ["x"]}, (1, 2, 4, 4), {"head_number": 4}, "head_number"),
]


@pytest.mark.parametrize("op,inputs,out_shape,attrs,value", CASES,
                         ids=[f"{c[0]}-{c[4]}" for c in CASES])
def test_unhandled_attribute_fails_at_load(tmp_path, op, inputs, out_shape, attrs, value):
    params = {"alpha": np.ones((1,), np.float32)} if "Alpha" in inputs else {}
    model, params_path = legacy_writer.write_program(
        tmp_path, op, {"x": X}, params, inputs, {"Out": (["out"], np.float32, out_shape)}, attrs)
    config = ti.Config(str(model), str(params_path) if params else "")
    predictor = ti.create_predictor(config)
    with pytest.raises(ti.TillerError) as info:
        predictor.run([X])  # compiling for the feed shapes is where attributes are read
    msg = str(info.value)
    assert op in msg and value in msg and str(model) in msg, msg
