"""
Tiller: compiled inference and training for PaddlePaddle programs
"""
from __future__ import annotations
import numpy
import typing
__all__ = ['Config', 'IpuOptions', 'Predictor', 'PredictorPool', 'StateTensorInfo', 'Tensor', 'TensorInfo', 'TillerError', 'TrainingSession', 'TrainingSummary', 'backend_names', 'compute_gradients', 'create_predictor', 'load_backend_library', 'load_custom_op_library', 'paddle_state_roles', 'plan', 'read_paddle_pickle', 'read_paddle_program_ops', 'supported_paddle_ops', 'write_paddle_pickle']
class Config:
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
    @typing.overload
    def __init__(self) -> None:
        ...
    @typing.overload
    def __init__(self, model_dir: str) -> None:
        ...
    @typing.overload
    def __init__(self, prog_file: str, params_file: str) -> None:
        ...
    def cpu_math_library_num_threads(self) -> int:
        ...
    def devices(self) -> list[str]:
        ...
    def disable_gpu(self) -> None:
        ...
    def enable_ipu(self, ipu_device_num: int = 1, ipu_micro_batch_size: int = 1, ipu_enable_pipelining: bool = False, ipu_batches_per_step: int = 1) -> None:
        """
        Paddle Inference's IPU settings on CPU devices: sharded, pipelined, replicated runs
        """
    def enable_mkldnn_bfloat16(self) -> None:
        ...
    def enable_trace(self, path: str) -> None:
        """
        Tiller's own: after every run, write a Chrome / Perfetto trace of the runs so far to path (a lane per device, lanes of copies and collectives).
        """
    def ir_optim(self) -> bool:
        ...
    def load_custom_op_library(self, path: str) -> None:
        ...
    def load_ipu_config(self, config_path: str) -> None:
        ...
    def model_dir(self) -> str:
        ...
    def params_file(self) -> str:
        ...
    def placement(self) -> str:
        ...
    def precision(self) -> str:
        ...
    def prog_file(self) -> str:
        ...
    def random_seed(self) -> int:
        ...
    def set_cpu_math_library_num_threads(self, cpu_math_library_num_threads: int) -> None:
        ...
    def set_devices(self, backends: list[str]) -> None:
        """
        Backends to compile for, in preference order (default ['cpu'])
        """
    def set_ipu_config(self, ipu_enable_fp16: bool = False, ipu_replica_num: int = 1, ipu_available_memory_proportion: float = 1.0, ipu_enable_half_partial: bool = False, ipu_enable_model_runtime_executor: bool = False) -> None:
        ...
    def set_ipu_custom_info(self, ipu_custom_ops_info: list[list[str]] = [], ipu_custom_patterns: dict[str, bool] = {}) -> None:
        ...
    def set_model(self, prog_file: str, params_file: str) -> None:
        ...
    def set_model_dir(self, model_dir: str) -> None:
        ...
    def set_placement(self, policy: str) -> None:
        """
        'by_shard' (default) or 'first_supported'
        """
    def set_precision(self, precision: str) -> None:
        """
        'float32', 'bfloat16', 'float16' or 'half': matmul / linear / conv2d multiply in that type with float32 accumulation
        """
    def set_random_seed(self, seed: int) -> None:
        ...
    def switch_ir_optim(self, x: bool = True) -> None:
        ...
    def switch_winograd(self, x: bool = True) -> None:
        ...
    def winograd(self) -> bool:
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
        [(name, 'honoured' | 'not_yet' | 'no_effect', default or None, description)]
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
class Predictor:
    @staticmethod
    def _pybind11_conduit_v1_(*args, **kwargs):
        ...
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
    def run(self, inputs: typing.Any = None) -> typing.Any:
        ...
    def summary(self) -> dict:
        ...
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
    def copy_from_cpu(self, data: numpy.ndarray) -> None:
        ...
    def copy_to_cpu(self) -> numpy.ndarray:
        ...
    def name(self) -> str:
        ...
    def reshape(self, shape: list[int]) -> None:
        ...
    def shape(self) -> list[int]:
        ...
    def type(self) -> str:
        ...
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
        Times every op of later steps (replica 0's with replicas).
        """
    def get_state(self, name: str) -> numpy.ndarray:
        ...
    def load_checkpoint(self, path_prefix: str) -> None:
        """
        Sets the state from <prefix>.pdparams / .pdopt, checking every variable first.
        """
    def profile(self, by_shape: bool = False) -> list[tuple[str, float, int]]:
        """
        [(op type, total ms, calls)] of the steps run while profiling, largest first; by_shape: one entry per op type and input shapes.
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
def create_predictor(config: Config) -> Predictor:
    ...
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
