"""Paddle-Inference-compatible predictor API (``paddle.inference`` names)."""
from ._tiller import (Config, Predictor, PredictorPool, Tensor, TillerError, backend_names,
                      create_predictor, load_backend_library, load_custom_op_library)

__all__ = [
    "Config", "Predictor", "PredictorPool", "Tensor", "TillerError", "create_predictor",
    "load_custom_op_library", "load_backend_library", "backend_names",
]
