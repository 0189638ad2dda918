"""Tiller: a graph compiler and runtime for PaddlePaddle programs.

``tiller.inference`` mirrors ``paddle.inference``::

    import tiller.inference as infer
    config = infer.Config("model.json", "model.pdiparams")
    predictor = infer.create_predictor(config)
    outputs = predictor.run([input_ids, token_type_ids])
"""
from . import inference
from ._tiller import TillerError

__all__ = ["inference", "TillerError"]
__version__ = "0.1.0"
