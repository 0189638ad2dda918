"""Paddle-Inference-compatible predictor API: every ``paddle.inference`` name,
so a script moves over by changing its import::

    import tiller.inference as paddle_infer   # instead of paddle.inference

docs/INFERENCE_API.md lists each name and what Tiller does with it: honoured,
accepted without effect (and why), or refused with a TillerError saying why
(GPU, XPU, TensorRT, ... : Tiller runs on CPU devices).
"""
from __future__ import annotations

from ._tiller import (Config, DataType, PlaceType, Predictor, PredictorPool, Tensor,
                      TillerError, backend_names, convert_to_mixed_precision, create_predictor,
                      get_num_bytes_of_data_type, get_trt_compile_version,
                      get_trt_runtime_version, get_version, load_backend_library,
                      load_custom_op_library)

# Paddle's PrecisionType is its Config.Precision (Float32, Int8, Half, Bfloat16).
PrecisionType = Config.Precision


class XpuConfig:
    """Paddle's XPU settings. Tiller has no XPU backend: constructing one
    raises, as Config.set_xpu_config would."""

    def __init__(self, *args, **kwargs):
        raise TillerError("XpuConfig: no XPU backend; Tiller runs on CPU devices "
                          "(Config.set_devices)")


class InternalUtils:
    """Paddle's TensorRT helpers (paddle.inference.InternalUtils). Tiller
    does not use TensorRT (its CUDA backend runs GPU models): each raises."""

    @staticmethod
    def _refuse(name: str):
        raise TillerError(f"InternalUtils.{name}: TensorRT needs a GPU and NVIDIA's engine, "
                          "which Tiller does not use; its CUDA backend runs models on GPUs "
                          "(Config.enable_use_gpu)")

    @staticmethod
    def disable_tensorrt_half_ops(*args, **kwargs):
        InternalUtils._refuse("disable_tensorrt_half_ops")

    @staticmethod
    def set_transformer_maskid(*args, **kwargs):
        InternalUtils._refuse("set_transformer_maskid")

    @staticmethod
    def set_transformer_posid(*args, **kwargs):
        InternalUtils._refuse("set_transformer_posid")


__all__ = [
    "Config", "DataType", "PlaceType", "PrecisionType", "Tensor", "Predictor",
    "create_predictor", "get_version", "get_trt_compile_version", "get_trt_runtime_version",
    "convert_to_mixed_precision", "get_num_bytes_of_data_type", "PredictorPool", "XpuConfig",
    "InternalUtils", "TillerError", "load_custom_op_library", "load_backend_library",
    "backend_names",
]
