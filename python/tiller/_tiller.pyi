"""
Tiller: compiled inference and training for PaddlePaddle programs
"""
from __future__ import annotations
import numpy
import typing
__all__ = ['Config', 'DataType', 'IpuOptions', 'PlaceType', 'Predictor', 'PredictorPool', 'StateTensorInfo', 'Tensor', 'TensorInfo', 'TillerError', 'TrainingSession', 'TrainingSummary', 'backend_names', 'compute_gradients', 'convert_to_mixed_precision', 'cpu_isa_info', 'create_predictor', 'describe_cpu_isa', 'get_num_bytes_of_data_type', 'get_trt_compile_version', 'get_trt_runtime_version', 'get_version', 'load_backend_library', 'load_custom_op_library', 'paddle_state_roles', 'plan', 'read_paddle_pickle', 'read_paddle_program_ops', 'supported_paddle_ops', 'write_paddle_pickle']
class Config:
    class Precision:
        """
        Members:
        
          Float32
        
          Int8
        
          Half
        
          Bfloat16
        """
        Bfloat16: typing.ClassVar[Config.Precision]  # value = <Precision.Bfloat16: 3>
        Float32: typing.ClassVar[Config.Precision]  # value = <Precision.Float32: 0>
        Half: typing.ClassVar[Config.Precision]  # value = <Precision.Half: 2>
        Int8: typing.ClassVar[Config.Precision]  # value = <Precision.Int8: 1>
        __members__: typing.ClassVar[dict[str, Config.Precision]]  # value = {'Float32': <Precision.Float32: 0>, 'Int8': <Precision.Int8: 1>, 'Half': <Precision.Half: 2>, 'Bfloat16': <Precision.Bfloat16: 3>}
        @staticmethod
        def _pybind11_conduit_v1_(*args, **kwargs):
            ...
        def __eq__(self, other: typing.Any) -> bool:
            ...
        def __getstate__(self) -> int:
            ...
        def __hash__(self) -> int:
            ...
        def __index__(self) -> int:
            ...
        def __init__(self, value: int) -> None:
            ...
        def __int__(self) -> int:
            ...
        def __ne__(self, other: typing.Any) -> bool:
            ...
        def __repr__(self) -> str:
            ...
        def __setstate__(self, state: int) -> None:
            ...
        def __str__(self) -> str:
            ...
        @property
        def name(self) -> str:
            ...
        @property
        def value(self) -> int:
            ...
    Bfloat16: typing.ClassVar[Config.Precision]  # value = <Precision.Bfloat16: 3>
    Float32: typing.ClassVar[Config.Precision]  # value = <Precision.Float32: 0>
    Half: typing.ClassVar[Config.Precision]  # value = <Precision.Half: 2>
    Int8: typing.ClassVar[Config.Precision]  # value = <Precision.Int8: 1>
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
    @typing.overload
    def __init__(self) -> None:
        ...
    @typing.overload
    def __init__(self, config: Config) -> None:
        ...
    @typing.overload
    def __init__(self, model_dir: str) -> None:
        ...
    @typing.overload
    def __init__(self, prog_file: str, params_file: str) -> None:
        """
        A program file and its parameter file, or (Paddle 3) a directory and a model prefix
        """
    def collect_shape_range_info(self, *args, **kwargs) -> None:
        """
        shape range files tune TensorRT's dynamic shapes, which Tiller does not use: it compiles once per set of input shapes
        """
    def cpu_keep_warm_ms(self) -> int:
        ...
    def cpu_math_library_num_threads(self) -> int:
        ...
    def delete_pass(self, pass_name: str) -> None:
        """
        Raises: Paddle's pass names are not Tiller's passes
        """
    def devices(self) -> list[str]:
        ...
    def disable_glog_info(self) -> None:
        """
        Recorded: Tiller writes no info logs
        """
    def disable_gpu(self) -> None:
        ...
    def disable_mkldnn(self) -> None:
        """
        No effect: Tiller has no other CPU kernels to switch to (mkldnn_enabled() stays True)
        """
    def disable_mkldnn_fc_passes(self) -> None:
        """
        No effect: Tiller's linear fusion changes results by float32 rounding at most
        """
    def disable_onednn(self) -> None:
        """
        No effect: Tiller has no other CPU kernels to switch to (onednn_enabled() stays True)
        """
    def disable_onednn_fc_passes(self) -> None:
        """
        No effect: Tiller's linear fusion changes results by float32 rounding at most
        """
    def disable_onnxruntime(self) -> None:
        """
        No effect: it is never on
        """
    def dist_config(self, *args, **kwargs) -> None:
        """
        Paddle's distributed inference is not implemented; tiller.distributed runs replicas and pipeline stages across the processes of an MPI job
        """
    def enable_cinn(self) -> None:
        """
        Raises: Tiller compiles the program itself
        """
    def enable_custom_device(self, device_type: str, device_id: int = 0, precision: Config.Precision = ...) -> None:
        """
        Raises: Tiller's devices are backends chosen with set_devices
        """
    def enable_custom_passes(self, passes: list[str] = [], custom_pass_only: bool = False) -> None:
        """
        Only an empty list: Paddle's passes do not run on Tiller's IR
        """
    def enable_dlnne(self, *args, **kwargs) -> None:
        """
        no DLNNE backend; Tiller runs on CPU devices (Config.set_devices)
        """
    def enable_ipu(self, ipu_device_num: int = 1, ipu_micro_batch_size: int = 1, ipu_enable_pipelining: bool = False, ipu_batches_per_step: int = 1) -> None:
        """
        Paddle Inference's IPU settings on CPU devices: sharded, pipelined, replicated runs
        """
    def enable_lite_engine(self, *args, **kwargs) -> None:
        """
        Paddle Lite subgraphs: Tiller compiles the whole program itself
        """
    def enable_low_precision_io(self, x: bool = True) -> None:
        """
        Only False: inputs and outputs keep the model's types
        """
    def enable_memory_optim(self, x: bool = True) -> None:
        """
        No effect: Tiller always plans memory (a liveness-based plan per input shapes)
        """
    def enable_mkldnn(self) -> None:
        """
        No effect: Tiller's CPU kernels are oneDNN's
        """
    def enable_mkldnn_bfloat16(self) -> None:
        ...
    def enable_mkldnn_int8(self, mkldnn_int8_enabled_op_types: typing.Iterable = set()) -> None:
        """
        No effect without op types: a quantized model runs its int8 ops in int8 as it is
        """
    def enable_new_executor(self, x: bool = True) -> None:
        """
        Recorded, no effect: Tiller has one executor
        """
    def enable_new_ir(self, x: bool = True) -> None:
        """
        Recorded, no effect: Tiller reads PIR and legacy programs alike
        """
    def enable_onednn(self) -> None:
        """
        No effect: Tiller's CPU kernels are oneDNN's
        """
    def enable_onednn_bfloat16(self) -> None:
        ...
    def enable_onednn_int8(self, onednn_int8_enabled_op_types: typing.Iterable = set()) -> None:
        """
        No effect without op types: a quantized model runs its int8 ops in int8 as it is
        """
    def enable_onnxruntime(self) -> None:
        """
        Raises: Tiller is not ONNX Runtime
        """
    def enable_opencl(self, *args, **kwargs) -> None:
        """
        no OpenCL backend; Tiller runs on CPU devices (Config.set_devices)
        """
    def enable_openvino_engine(self, inference_precision: Config.Precision = ...) -> None:
        """
        Raises: Tiller is not OpenVINO
        """
    def enable_ort_optimization(self, *args, **kwargs) -> None:
        """
        Tiller runs the Paddle program with its own compiler and kernels, not ONNX Runtime
        """
    def enable_profile(self) -> None:
        """
        Times every op; the predictor prints the per-op table to stderr at its end
        """
    def enable_quantizer(self, *args, **kwargs) -> None:
        """
        Paddle's oneDNN quantizer is not implemented; `tiller quantize` quantizes a float32 model from calibration inputs, and a quantized model runs in int8 as it is
        """
    def enable_save_optim_model(self, save_optimized_model: bool = False) -> None:
        """
        Only False: Tiller writes no optimized model
        """
    def enable_tensorrt_dla(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def enable_tensorrt_engine(self, workspace_size: int = 1073741824, max_batch_size: int = 1, min_subgraph_size: int = 3, precision_mode: Config.Precision = ..., use_static: bool = False, use_calib_mode: bool = True, use_cuda_graph: bool = False) -> None:
        """
        Raises: TensorRT needs a GPU
        """
    def enable_tensorrt_explicit_quantization(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def enable_tensorrt_inspector(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def enable_tensorrt_memory_optim(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def enable_tensorrt_varseqlen(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def enable_trace(self, path: str) -> None:
        """
        Tiller's own: after every run, write a Chrome / Perfetto trace of the runs so far to path (a lane per device, lanes of copies and collectives).
        """
    def enable_tuned_tensorrt_dynamic_shape(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def enable_use_gpu(self, memory_pool_init_size_mb: int, device_id: int = 0, precision_mode: Config.Precision = ...) -> None:
        """
        The GPU device_id first, the CPU for what the CUDA backend lacks (first supported); precision_mode as set_precision takes it
        """
    def enable_warmup(self, shapes: dict[str, list[int]] = {}, runs: int = 1) -> None:
        """
        Tiller's own, for serving: at creation compile for these input shapes ({name: [dims]}; an input not named takes its declared dims, a dynamic first dim as 1) and run `runs` times on zeros, so the first request pays no compile. Inputs set later are untouched.
        """
    def enable_xpu(self, l3_size: int = 16776192, l3_locked: bool = False, conv_autotune: bool = False, conv_autotune_file: str = '', transformer_encoder_precision: str = 'int16', transformer_encoder_adaptive_seqlen: bool = False, enable_multi_stream: bool = False) -> None:
        """
        Raises: no XPU backend
        """
    def exp_disable_mixed_precision_ops(self, black_list: typing.Iterable) -> None:
        """
        Only an empty set: mixed precision covers matmul, linear, conv2d
        """
    def exp_disable_tensorrt_dynamic_shape_ops(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def exp_disable_tensorrt_ops(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def exp_disable_tensorrt_subgraph(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def exp_enable_mixed_precision_ops(self, white_list: typing.Iterable) -> None:
        """
        Only an empty set: mixed precision covers matmul, linear, conv2d
        """
    def exp_enable_use_cutlass(self, *args, **kwargs) -> None:
        """
        not in Tiller's CUDA backend; Config.enable_use_gpu (or set_devices(['cuda:0', 'cpu'])) runs models on a GPU
        """
    def exp_sparse_conv_using_buffer(self, *args, **kwargs) -> None:
        """
        not in Tiller's CUDA backend; Config.enable_use_gpu (or set_devices(['cuda:0', 'cpu'])) runs models on a GPU
        """
    def exp_specify_tensorrt_subgraph_precision(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def fraction_of_gpu_memory_for_pool(self) -> float:
        ...
    def glog_info_disabled(self) -> bool:
        ...
    def gpu_device_id(self) -> int:
        ...
    def ir_optim(self) -> bool:
        ...
    def lite_engine_enabled(self) -> bool:
        """
        Always False: Tiller has no such engine
        """
    def load_custom_op_library(self, path: str) -> None:
        ...
    def load_ipu_config(self, config_path: str) -> None:
        ...
    def mark_trt_engine_outputs(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def memory_pool_init_size_mb(self) -> int:
        ...
    def mkldnn_enabled(self) -> bool:
        ...
    def mkldnn_int8_enabled(self) -> bool:
        ...
    def model_dir(self) -> str:
        ...
    def model_from_memory(self) -> bool:
        ...
    def new_ir_enabled(self) -> bool:
        ...
    def nnadapter(self, *args, **kwargs) -> None:
        """
        no NNAdapter devices; Tiller runs on CPU devices (Config.set_devices)
        """
    def onednn_enabled(self) -> bool:
        ...
    def onednn_int8_enabled(self) -> bool:
        ...
    def onnxruntime_enabled(self) -> bool:
        ...
    def openvino_engine_enabled(self) -> bool:
        ...
    def params_file(self) -> str:
        ...
    def pass_builder(self, *args, **kwargs) -> None:
        """
        Paddle's pass builder edits Paddle's passes; Tiller runs its own (`tiller info --passes` lists them) and switch_ir_optim(False) turns them off
        """
    def placement(self) -> str:
        ...
    def precision(self) -> str:
        ...
    def prog_file(self) -> str:
        ...
    def quantizer_config(self, *args, **kwargs) -> None:
        """
        Paddle's oneDNN quantizer is not implemented; `tiller quantize` quantizes a float32 model from calibration inputs, and a quantized model runs in int8 as it is
        """
    def random_seed(self) -> int:
        ...
    def set_bfloat16_op(self, op_types: typing.Iterable) -> None:
        """
        Only an empty set: bfloat16 covers matmul, linear and conv2d
        """
    def set_compile_progress_logger(self, logger: typing.Any, total: int = 100) -> None:
        """
        Tiller's own (Paddle's IPU compilation_progress_logger): logger(progress, total) is called while the predictor compiles, from 0 to total; None: none.
        """
    def set_cpu_keep_warm_ms(self, ms: int) -> None:
        """
        Tiller's own, for serving: how long the CPU threads spin (yielding) after a run before they sleep, so a request after an idle gap does not wait for them to wake. -1 (default): 100 ms with one device, else 0; 0: sleep at once; at most 10000. TILLER_KEEP_WARM_MS overrides it.
        """
    def set_cpu_math_library_num_threads(self, cpu_math_library_num_threads: int) -> None:
        ...
    def set_devices(self, backends: list[str]) -> None:
        """
        Backends to compile for, in preference order (default ['cpu'])
        """
    def set_dist_config(self, *args, **kwargs) -> None:
        """
        Paddle's distributed inference is not implemented; tiller.distributed runs replicas and pipeline stages across the processes of an MPI job
        """
    def set_ipu_config(self, ipu_enable_fp16: bool = False, ipu_replica_num: int = 1, ipu_available_memory_proportion: float = 1.0, ipu_enable_half_partial: bool = False, ipu_enable_model_runtime_executor: bool = False) -> None:
        ...
    def set_ipu_custom_info(self, ipu_custom_ops_info: list[list[str]] = [], ipu_custom_patterns: dict[str, bool] = {}) -> None:
        ...
    def set_mkldnn_cache_capacity(self, capacity: int = 0) -> None:
        """
        No effect: Tiller keeps one compiled step per set of input shapes
        """
    def set_mkldnn_op(self, op_types: typing.Iterable) -> None:
        """
        No effect: every op runs Tiller's (oneDNN) kernels
        """
    @typing.overload
    def set_model(self, prog_file: str, params_file: str) -> None:
        ...
    @typing.overload
    def set_model(self, model_dir: str) -> None:
        ...
    def set_model_buffer(self, prog_buffer: bytes, prog_size: int, params_buffer: bytes, params_size: int) -> None:
        """
        The model from memory: the bytes of the program file and of its parameter file
        """
    def set_model_dir(self, model_dir: str) -> None:
        ...
    def set_onednn_cache_capacity(self, capacity: int = 0) -> None:
        """
        No effect: Tiller keeps one compiled step per set of input shapes
        """
    def set_onednn_op(self, op_types: typing.Iterable) -> None:
        """
        No effect: every op runs Tiller's (oneDNN) kernels
        """
    def set_optim_cache_dir(self, opt_cache_dir: str) -> None:
        """
        Recorded, no effect: nothing is cached on disk
        """
    def set_optimization_level(self, opt_level: int = 2) -> None:
        """
        0: basic passes only (switch_ir_optim(False)); 1-4: Tiller's passes
        """
    def set_params_file(self, x: str) -> None:
        ...
    def set_placement(self, policy: str) -> None:
        """
        'by_shard' (default) or 'first_supported'
        """
    @typing.overload
    def set_precision(self, precision: str) -> None:
        """
        'float32', 'bfloat16', 'float16' or 'half': matmul / linear / conv2d multiply in that type with float32 accumulation
        """
    @typing.overload
    def set_precision(self, precision: Config.Precision) -> None:
        """
        Paddle's PrecisionType: Float32, Half (float16) or Bfloat16; Int8 raises
        """
    def set_prog_file(self, x: str) -> None:
        ...
    def set_random_seed(self, seed: int) -> None:
        ...
    def set_tensorrt_optimization_level(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def set_trt_dynamic_shape_info(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def set_xpu_config(self, *args, **kwargs) -> None:
        """
        no XPU backend; Tiller runs on CPU devices (Config.set_devices)
        """
    def set_xpu_device_id(self, *args, **kwargs) -> None:
        """
        no XPU backend; Tiller runs on CPU devices (Config.set_devices)
        """
    def shape_range_info_collected(self) -> bool:
        """
        Always False: Tiller has no such engine
        """
    def shape_range_info_path(self) -> str:
        """
        Always empty: Tiller collects no shape ranges
        """
    def specify_input_name(self) -> bool:
        ...
    def summary(self) -> str:
        """
        A table of the settings, as Paddle's
        """
    def switch_ir_debug(self, x: int = True, passes: list[str] = []) -> None:
        """
        Recorded, no graph dumps: predictor.summary()['compile_report'] says what the passes did
        """
    def switch_ir_optim(self, x: bool = True) -> None:
        ...
    def switch_specify_input_names(self, x: bool = True) -> None:
        """
        Recorded, no effect: inputs are always set by name
        """
    def switch_use_feed_fetch_ops(self, x: int = True) -> None:
        """
        No effect, as in Paddle
        """
    def switch_winograd(self, x: bool = True) -> None:
        ...
    def tensorrt_dla_enabled(self) -> bool:
        """
        Always False: Tiller has no such engine
        """
    def tensorrt_dynamic_shape_enabled(self) -> bool:
        """
        Always False: Tiller has no such engine
        """
    def tensorrt_engine_enabled(self) -> bool:
        ...
    def tensorrt_explicit_quantization_enabled(self) -> bool:
        """
        Always False: Tiller has no such engine
        """
    def tensorrt_inspector_enabled(self) -> bool:
        """
        Always False: Tiller has no such engine
        """
    def tensorrt_optimization_level(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def tensorrt_precision_mode(self, *args, **kwargs) -> None:
        """
        TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs models on GPUs (Config.enable_use_gpu)
        """
    def tensorrt_varseqlen_enabled(self) -> bool:
        """
        Always False: Tiller has no such engine
        """
    def to_native_config(self, *args, **kwargs) -> None:
        """
        NativeConfig (Paddle's legacy predictor) is not part of Tiller
        """
    def trt_allow_build_at_runtime(self) -> bool:
        """
        Always False: Tiller has no such engine
        """
    def tuned_tensorrt_dynamic_shape(self) -> bool:
        """
        Always False: Tiller has no such engine
        """
    def use_feed_fetch_ops_enabled(self) -> bool:
        ...
    def use_gpu(self) -> bool:
        ...
    def use_opencl(self) -> bool:
        """
        Always False: Tiller has no such engine
        """
    def use_optimized_model(self, x: bool = True) -> None:
        """
        No effect: Tiller keeps no optimized model on disk
        """
    def use_xpu(self) -> bool:
        ...
    def warmup_runs(self) -> int:
        ...
    def warmup_shapes(self) -> dict[str, list[int]]:
        ...
    def winograd(self) -> bool:
        ...
    def xpu_config(self, *args, **kwargs) -> None:
        """
        no XPU backend; Tiller runs on CPU devices (Config.set_devices)
        """
    def xpu_device_id(self) -> int:
        ...
class DataType:
    """
    Element types, with Paddle Inference's names
    
    Members:
    
      FLOAT32
    
      FLOAT16
    
      BFLOAT16
    
      FLOAT64
    
      INT8
    
      UINT8
    
      INT16
    
      INT32
    
      INT64
    
      BOOL
    """
    BFLOAT16: typing.ClassVar[DataType]  # value = <DataType.BFLOAT16: 2>
    BOOL: typing.ClassVar[DataType]  # value = <DataType.BOOL: 9>
    FLOAT16: typing.ClassVar[DataType]  # value = <DataType.FLOAT16: 1>
    FLOAT32: typing.ClassVar[DataType]  # value = <DataType.FLOAT32: 0>
    FLOAT64: typing.ClassVar[DataType]  # value = <DataType.FLOAT64: 3>
    INT16: typing.ClassVar[DataType]  # value = <DataType.INT16: 6>
    INT32: typing.ClassVar[DataType]  # value = <DataType.INT32: 7>
    INT64: typing.ClassVar[DataType]  # value = <DataType.INT64: 8>
    INT8: typing.ClassVar[DataType]  # value = <DataType.INT8: 4>
    UINT8: typing.ClassVar[DataType]  # value = <DataType.UINT8: 5>
    __members__: typing.ClassVar[dict[str, DataType]]  # value = {'FLOAT32': <DataType.FLOAT32: 0>, 'FLOAT16': <DataType.FLOAT16: 1>, 'BFLOAT16': <DataType.BFLOAT16: 2>, 'FLOAT64': <DataType.FLOAT64: 3>, 'INT8': <DataType.INT8: 4>, 'UINT8': <DataType.UINT8: 5>, 'INT16': <DataType.INT16: 6>, 'INT32': <DataType.INT32: 7>, 'INT64': <DataType.INT64: 8>, 'BOOL': <DataType.BOOL: 9>}
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: int) -> None:
        ...
    def __int__(self) -> int:
        ...
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: int) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class IpuOptions:
    """
    Paddle's IpuStrategy options, validated by Tiller (include/tiller/ipu_options.h).
    """
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
    @staticmethod
    def specs() -> list:
        """
        [(name, 'honoured' | 'not_yet' | 'no_effect', default or None, description, tiller_own)]: tiller_own marks Tiller's options that Paddle's registry lacks.
        """
    def __init__(self) -> None:
        ...
    def add_custom_op(self, paddle_op: str, popart_op: str, domain: str, version: int) -> None:
        ...
    def get(self, name: str) -> typing.Any:
        ...
    def get_all_option_names(self) -> list[str]:
        ...
    def get_option(self, name: str) -> dict:
        """
        Paddle's core.IpuStrategy.get_option: {'name', 'type' (bool, uint64, double, string, vector or map), 'value'}.
        """
    def is_set(self, name: str) -> bool:
        ...
    def set(self, name: str, value: typing.Any) -> typing.Any:
        """
        Sets one option; returns the note of an option that has no effect on Tiller, else None. Raises TillerError for unknown names, wrong types and options not implemented yet set to other than their default.
        """
    def set_compilation_progress_logger(self, logger: typing.Any) -> None:
        """
        Paddle's compilation_progress_logger: called as logger(progress, total) while a step compiles (total: compilation_progress_total); None: none.
        """
    def set_graph_config(self, num_ipus: int = 1, is_training: bool = True, micro_batch_size: int = 1, enable_manual_shard: bool = False) -> None:
        ...
    def set_pipelining_config(self, enable_pipelining: bool = False, batches_per_step: int = 1, enable_gradient_accumulation: bool = False, accumulation_factor: int = 1) -> None:
        ...
    def set_precision_config(self, enable_fp16: bool = False) -> None:
        ...
    @property
    def eval_only(self) -> bool:
        ...
    @property
    def num_threads(self) -> int:
        ...
class PlaceType:
    """
    Paddle Inference's places; Tiller's tensors are on CPU
    
    Members:
    
      UNK
    
      CPU
    
      GPU
    
      XPU
    
      CUSTOM
    """
    CPU: typing.ClassVar[PlaceType]  # value = <PlaceType.CPU: 0>
    CUSTOM: typing.ClassVar[PlaceType]  # value = <PlaceType.CUSTOM: 4>
    GPU: typing.ClassVar[PlaceType]  # value = <PlaceType.GPU: 1>
    UNK: typing.ClassVar[PlaceType]  # value = <PlaceType.UNK: -1>
    XPU: typing.ClassVar[PlaceType]  # value = <PlaceType.XPU: 2>
    __members__: typing.ClassVar[dict[str, PlaceType]]  # value = {'UNK': <PlaceType.UNK: -1>, 'CPU': <PlaceType.CPU: 0>, 'GPU': <PlaceType.GPU: 1>, 'XPU': <PlaceType.XPU: 2>, 'CUSTOM': <PlaceType.CUSTOM: 4>}
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: int) -> None:
        ...
    def __int__(self) -> int:
        ...
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: int) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class Predictor:
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
    def __init__(self, config: Config) -> None:
        ...
    def clear_intermediate_tensor(self) -> None:
        """
        No effect: intermediate tensors live in the compiled arenas, reused by every run
        """
    def clone(self) -> Predictor:
        """
        A predictor of the same model for another thread: shares the program and the parameters, has its own devices, inputs and compiled steps (Paddle's clone()).
        """
    def enable_profiling(self, on: bool = True) -> None:
        """
        Times every op of later runs (what profile() returns).
        """
    def get_input_handle(self, name: str) -> Tensor:
        ...
    def get_input_names(self) -> list[str]:
        ...
    def get_input_shape(self, name: str) -> list[int]:
        ...
    def get_input_type(self, name: str) -> str:
        """
        numpy's name of the input's declared type ('float32', 'int64', ...)
        """
    def get_output_handle(self, name: str) -> Tensor:
        ...
    def get_output_names(self) -> list[str]:
        ...
    def op_histogram(self) -> dict[str, int]:
        ...
    def profile(self, by_shape: bool = False) -> list[tuple[str, float, int]]:
        """
        [(op type, total ms, calls)] of the runs made while profiling, largest first; by_shape: one entry per op type and input shapes.
        """
    def register_input_hook(self, hookfunc: typing.Any) -> None:
        """
        Raises: Tiller runs a compiled graph, not Paddle's ops
        """
    def register_output_hook(self, hookfunc: typing.Any) -> None:
        """
        Raises: Tiller runs a compiled graph, not Paddle's ops
        """
    def run(self, inputs: typing.Any = None) -> typing.Any:
        """
        run(): on the inputs set through the handles. run(inputs): one numpy array per input, in get_input_names() order; returns the outputs as numpy arrays (as paddle.Tensors when the inputs were paddle.Tensors).
        """
    def summary(self) -> dict:
        ...
    def try_shrink_memory(self) -> int:
        """
        No effect; returns 0 bytes released (the arenas are planned, not pooled)
        """
class PredictorPool:
    """
    `size` predictors of one config (the first and its clones), one per serving thread (Paddle's paddle.inference.PredictorPool).
    """
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
    def __init__(self, config: Config, size: int = 1) -> None:
        ...
    def __len__(self) -> int:
        ...
    def retrieve(self, idx: int) -> Predictor:
        """
        The predictor of index idx (Paddle 3's spelling).
        """
    def retrive(self, idx: int) -> Predictor:
        """
        The predictor of index idx (Paddle 2's spelling).
        """
class StateTensorInfo(TensorInfo):
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
    def __repr__(self) -> str:
        ...
    @property
    def file(self) -> typing.Any:
        """
        the checkpoint file paddle.static.save puts it in: '.pdparams', '.pdopt' or None
        """
    @property
    def role(self) -> str:
        """
        parameter, statistic, optimizer_state, learning_rate or other
        """
class Tensor:
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
    def copy_from_cpu(self, data: typing.Any) -> None:
        """
        A numpy array (or a paddle.Tensor) of the input's dtype
        """
    def copy_to_cpu(self) -> numpy.ndarray:
        ...
    def lod(self) -> list[list[int]]:
        """
        Always empty: Tiller's tensors are dense
        """
    def name(self) -> str:
        ...
    @typing.overload
    def reshape(self, shape: list[int]) -> None:
        ...
    @typing.overload
    def reshape(self, size: int) -> None:
        ...
    def set_lod(self, lod: list[list[int]]) -> None:
        """
        Only an empty LoD is accepted
        """
    def shape(self) -> list[int]:
        ...
    def share_external_data(self, data: typing.Any) -> None:
        """
        A paddle.Tensor's values, copied (Tiller's inputs live in its own arenas)
        """
    def share_external_data_by_ptr_name(self, *args, **kwargs) -> None:
        """
        Raises: raw device pointers (not in Tiller's CUDA backend)
        """
    def type(self) -> DataType:
        """
        The element type (paddle.inference.DataType)
        """
class TensorInfo:
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
    def __repr__(self) -> str:
        ...
    @property
    def dtype(self) -> numpy.dtype[typing.Any]:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def shape(self) -> list[int]:
        ...
class TillerError(RuntimeError):
    pass
class TrainingSession:
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
    @typing.overload
    def __init__(self, program_path: str, feed_names: list[str], fetch_names: list[str], options: IpuOptions) -> None:
        ...
    @typing.overload
    def __init__(self, program_path: str, feed_names: list[str], fetch_names: list[str], num_threads: int = 1, random_seed: int = 0, check_nan_inf: bool = False, no_bias_optimizer: bool = False) -> None:
        ...
    def enable_profiling(self, on: bool = True) -> None:
        """
        Times every op of later steps (every replica's).
        """
    def get_state(self, name: str) -> numpy.ndarray:
        ...
    def load_checkpoint(self, path_prefix: str) -> None:
        """
        Sets the state from <prefix>.pdparams / .pdopt, checking every variable first.
        """
    def profile(self, by_shape: bool = False, replica: int = 0) -> list[tuple[str, float, int]]:
        """
        [(op type, total ms, calls)] of the steps run while profiling, largest first; by_shape: one entry per op type and input shapes; replica: whose (a collective's time includes its wait for the others).
        """
    def run(self, feed: dict, eval: bool | None = None) -> list:
        """
        One step: feeds by name; returns the fetches (numpy) in fetch order. eval None: as the session's options say.
        """
    def save_checkpoint(self, path_prefix: str) -> None:
        """
        Writes <prefix>.pdparams and <prefix>.pdopt as paddle.static.save does (atomically).
        """
    def set_learning_rate(self, lr: float) -> None:
        """
        Sets every learning-rate variable of the program to lr (as float32 for float32 variables).
        """
    def set_state(self, name: str, value: numpy.ndarray) -> None:
        ...
    def state_info(self) -> list[StateTensorInfo]:
        ...
    def state_names(self) -> list[str]:
        ...
    def summary(self) -> TrainingSummary:
        ...
    def trained_names(self) -> list[str]:
        ...
    @property
    def feed_names(self) -> list[str]:
        ...
    @property
    def fetch_names(self) -> list[str]:
        ...
    @property
    def gradient_statistics(self) -> dict:
        """
        the last update's counts of gradient elements (gradient_statistics)
        """
    @property
    def loss_name(self) -> str:
        ...
    @property
    def loss_scale(self) -> float:
        """
        the loss scale the next update uses
        """
    @property
    def skipped_updates(self) -> int:
        """
        updates dynamic loss scaling skipped (gradients not finite)
        """
    @property
    def step_count(self) -> int:
        ...
class TrainingSummary:
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
    @property
    def arena_bytes(self) -> int:
        ...
    @property
    def compile_pipeline(self) -> str:
        ...
    @property
    def compile_report(self) -> str:
        ...
    @property
    def copied_updates(self) -> int:
        ...
    @property
    def device_memory_bytes(self) -> list[int]:
        ...
    @property
    def graph(self) -> str:
        ...
    @property
    def in_place_updates(self) -> int:
        ...
    @property
    def pipeline_bubble_fraction(self) -> float:
        ...
    @property
    def pipeline_device_busy_ms(self) -> list[float]:
        ...
    @property
    def pipeline_max_in_flight(self) -> int:
        ...
    @property
    def replica_optimizer_state_bytes(self) -> list[int]:
        ...
    @property
    def state_bytes(self) -> int:
        ...
def backend_names() -> list[str]:
    ...
def compute_gradients(model_path: str, params_path: str, feeds: dict, loss_name: str = '', wrt: list[str] = [], training: bool = True, fetch: list[str] = [], step: int = 0, loss_weight: numpy.ndarray | None = None) -> tuple:
    """
    Tiller's gradients of a program's loss: returns (grads by wrt name, fetched values)
    """
def convert_to_mixed_precision(model_file: str, params_file: str, mixed_model_file: str, mixed_params_file: str, mixed_precision: Config.Precision, backend: PlaceType, keep_io_types: bool = True, black_list: typing.Any = set(), **kwargs) -> None:
    """
    Raises: Tiller writes no converted models; set the precision on the Config instead (enable_mkldnn_bfloat16 / set_precision)
    """
def cpu_isa_info() -> dict:
    """
    This CPU's and this build's instruction-set levels and the one chosen under TILLER_MAX_ISA (tiller/backends.h, GetCpuIsaInfo).
    """
def create_predictor(config: Config) -> Predictor:
    ...
def describe_cpu_isa() -> str:
    """
    cpu_isa_info() as lines of text, its error left out (what `tiller info` prints).
    """
def get_num_bytes_of_data_type(dtype: DataType) -> int:
    ...
def get_trt_compile_version() -> tuple[int, int, int]:
    """
    (0, 0, 0): no TensorRT, as Paddle's CPU builds answer
    """
def get_trt_runtime_version() -> tuple[int, int, int]:
    """
    (0, 0, 0): no TensorRT, as Paddle's CPU builds answer
    """
def get_version() -> str:
    """
    Tiller's version, in the shape of Paddle's ('version: X.Y.Z' first)
    """
def load_backend_library(path: str) -> None:
    """
    Load a shared library that registers backends (see include/tiller/backends.h).
    """
def load_custom_op_library(path: str) -> None:
    """
    Load a shared library of custom ops (see include/tiller/custom_op.h).
    """
def paddle_state_roles(program_path: str) -> dict:
    """
    {name: (role, file)} for every persistable variable of a training program; role is parameter/statistic/optimizer_state/learning_rate/other, file the suffix paddle.static.save writes it to (None: neither).
    """
def plan(model: str, train: bool = False, devices: int = 1, replicas: int = 1, micro_batch: int = 1, accumulate: int = 1, batches_per_step: int = 1, profile: str = 'cpu', feeds: list[str] = [], shapes: dict[str, list[int]] = {}, seq_len: int = 128, pipelining: bool = True, fill_drain: bool = False, stages_per_device: int = 1, replicated_tensor_sharding: bool = True, sharding_min_elements: int = 8192, recompute: int = 0, threads: int = 1, params: str = '', precision: str = 'float32', accl_types: list[str] = ['FLOAT', 'FLOAT', 'FLOAT'], ranks: int = 1, rank_link: float = 0.0, rank_latency: float = 0.0, all_reduce_bucket_bytes: int = 33554432, cluster: str = '') -> dict:
    """
    Per-device memory and predicted step time of a configuration on a device profile, without running the model (what `tiller plan` prints is in 'text'; include/tiller/planner.h).
    """
def read_paddle_pickle(path: str) -> dict:
    """
    Arrays of a .pdparams / .pdopt pickle, read by Tiller's C++ reader, in file order.
    """
def read_paddle_program_ops(path: str) -> list:
    """
    The ops of a Paddle program (.json PIR or legacy ProgramDesc) as Tiller reads them: dicts with type, inputs and outputs (slot -> variable names), translatable.
    """
def supported_paddle_ops() -> list[str]:
    ...
def write_paddle_pickle(path: str, arrays: dict) -> None:
    """
    Writes {name: array} as paddle.static.save does (pickle protocol 4), atomically.
    """
