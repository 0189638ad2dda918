"""Paddle's IPU static-graph API (``paddle.static.IpuStrategy`` /
``IpuCompiledProgram``) on Tiller, so a Paddle IPU training script moves over
with an import changed::

    strategy = tiller.IpuStrategy()
    strategy.set_graph_config(is_training=True, micro_batch_size=8)
    prog = tiller.IpuCompiledProgram(main_program, scope=scope,
                                     ipu_strategy=strategy).compile(feed_names, [loss])
    for batch in batches:
        loss_value, = prog.run(feed=batch)       # one step: forward, backward, update
        scheduler.step()                          # LR schedulers work as with Paddle
    prog.weights_to_host()                        # parameters + optimizer state -> scope
    paddle.static.save(main_program, "ckpt/step")

The program is compiled whole: Tiller keeps the forward ops and the loss,
differentiates them itself, and applies the optimizer ops the program holds
(Paddle's own backward ops are dropped). Both program forms work: Paddle 3
PIR programs (the default) and legacy ProgramDesc programs
(``FLAGS_enable_pir_api=0``).
"""
from __future__ import annotations

import os
import pickle
import tempfile
import warnings

import numpy as np

from . import _tiller
from ._tiller import TillerError

__all__ = ["IpuStrategy", "IpuCompiledProgram", "Executor", "TillerError"]

# Options Tiller honours, with Paddle's defaults.
_HONOURED = {
    "is_training": True,
    "num_ipus": 1,
    "micro_batch_size": 1,
    "batches_per_step": 1,
    "random_seed": 0,
    "runtime_options.enable_eval": False,
    "enable_manual_shard": False,
    "enable_pipelining": False,
    "enable_gradient_accumulation": False,
    "accumulation_factor": 1,
    "enable_fp16": False,
    "loss_scaling": 1.0,
    "use_no_bias_optimizer": False,
    "enable_replicated_graphs": False,
    "replicated_graph_count": 1,
    # Check every op's output for NaN/Inf, naming the step and the first op
    # (PopART's floating-point checks; Paddle's FLAGS_check_nan_inf). Off,
    # only the loss is checked, before any update.
    "enable_floating_point_checks": False,
    # Tiller's own: CPU threads of the step (Paddle's CPU executor uses its
    # math-library thread setting the same way).
    "num_threads": 0,
}

# Options that change results; accepted only at their defaults until Tiller
# implements them, so a script never silently trains something else.
_NOT_YET = {k: _HONOURED[k] for k in (
    "enable_pipelining", "enable_gradient_accumulation", "accumulation_factor", "enable_fp16",
    "loss_scaling", "enable_replicated_graphs", "replicated_graph_count", "batches_per_step",
    "num_ipus", "enable_manual_shard")}

# Paddle/PopART options that tune the IPU toolchain and have no meaning on
# Tiller's backends: accepted, with one note.
_NO_EFFECT = {
    "need_avg_shard", "max_weight_norm", "accl1_type", "accl2_type", "accl3_type",
    "weight_decay_mode", "available_memory_proportion", "enable_distribution",
    "scaled_optimizer_state", "onnx_dump_path", "enable_half_partial",
    "accumulation_and_replication_reduction_type", "auto_recomputation",
    "enable_stochastic_rounding", "enable_outlining", "global_replication_factor",
    "global_replica_offset", "enable_distributed_replicated_graphs",
    "automatic_loss_scaling_settings.enabled",
    "automatic_loss_scaling_settings.bin_edge_location",
    "automatic_loss_scaling_settings.threshold_upper_count_proportion",
    "partials_type_matmuls", "enable_prefetch_datastreams", "default_prefetch_buffering_depth",
    "cache_path", "enable_engine_caching", "location_optimizer", "location_weight",
    "location_activation", "location_accumulator", "engine_options", "convolution_options",
}


class IpuStrategy:
    """Compilation options, with the names and defaults of Paddle's IpuStrategy."""

    def __init__(self):
        self._options = dict(_HONOURED)
        self._noted = set()
        self._patterns = {}
        self._custom_ops = []

    # -- Paddle's setters ------------------------------------------------------
    def set_graph_config(self, num_ipus=1, is_training=True, micro_batch_size=1,
                         enable_manual_shard=False):
        if enable_manual_shard and num_ipus == 1:
            raise TillerError("set_graph_config: enable_manual_shard needs num_ipus > 1")
        self.set_options({"num_ipus": num_ipus, "is_training": is_training,
                          "micro_batch_size": micro_batch_size,
                          "enable_manual_shard": enable_manual_shard})

    def set_pipelining_config(self, enable_pipelining=False, batches_per_step=1,
                              enable_gradient_accumulation=False, accumulation_factor=1):
        if enable_pipelining and not self._options["enable_manual_shard"]:
            raise TillerError("set_pipelining_config: pipelining needs enable_manual_shard "
                              "(set_graph_config(enable_manual_shard=True))")
        self.set_options({"enable_pipelining": enable_pipelining,
                          "batches_per_step": batches_per_step,
                          "enable_gradient_accumulation": enable_gradient_accumulation,
                          "accumulation_factor": accumulation_factor})

    def set_precision_config(self, enable_fp16=False):
        self.set_options({"enable_fp16": enable_fp16})

    def add_custom_op(self, paddle_op, popart_op=None, domain="custom.ops", version=1):
        # Tiller runs custom ops from shared libraries (tiller.inference.
        # load_custom_op_library); the name mapping is kept for reference.
        self._custom_ops.append((paddle_op, popart_op or paddle_op, domain, version))

    def set_options(self, options):
        if not isinstance(options, dict):
            raise TillerError(f"set_options expects a dict, got {type(options).__name__}")
        for key, value in options.items():
            if key in _HONOURED:
                if key in _NOT_YET and value != _NOT_YET[key]:
                    raise TillerError(
                        f"option {key}={value!r} is not implemented by Tiller yet "
                        f"(supported: {_NOT_YET[key]!r})")
                self._options[key] = value
            elif key in _NO_EFFECT:
                self._options[key] = value
                if key not in self._noted:
                    self._noted.add(key)
                    warnings.warn(f"tiller: option '{key}' tunes the IPU toolchain and has no "
                                  "effect on Tiller", stacklevel=2)
            else:
                valid = ", ".join(sorted(set(_HONOURED) | _NO_EFFECT))
                raise TillerError(f"unknown option '{key}'; valid options: {valid}")

    def get_option(self, name):
        if name not in self._options:
            raise TillerError(f"unknown option '{name}'")
        return self._options[name]

    def enable_pattern(self, name):
        self._patterns[name] = True

    def disable_pattern(self, name):
        self._patterns[name] = False

    @property
    def num_ipus(self):
        return self._options["num_ipus"]

    @property
    def is_training(self):
        return self._options["is_training"]

    @property
    def enable_pipelining(self):
        return self._options["enable_pipelining"]

    @property
    def enable_fp16(self):
        return self._options["enable_fp16"]


def _is_pir(program):
    try:
        import paddle
        return isinstance(program, paddle.pir.Program)
    except (ImportError, AttributeError):
        return False


def _fetch_name(item):
    if isinstance(item, str):
        return item
    name = getattr(item, "name", None)
    if isinstance(name, str):
        return name
    raise TillerError(f"fetch_list item {item!r} is neither a name nor a named variable")


class IpuCompiledProgram:
    """A Paddle training (or eval) program compiled by Tiller.

    ``program``: a ``paddle.static.Program`` after ``optimizer.minimize`` (PIR
    or legacy); ``scope``: the scope holding its initialized parameters
    (default: paddle's global scope); ``ipu_strategy``: an IpuStrategy.
    """

    def __init__(self, program=None, scope=None, ipu_strategy=None):
        import paddle
        self.org_program = program if program is not None else paddle.static.default_main_program()
        self._scope = scope if scope is not None else paddle.static.global_scope()
        self._strategy = ipu_strategy if ipu_strategy is not None else IpuStrategy()
        self._session = None
        self._tmp = None

    def compile(self, feed_list, fetch_list):
        """Compiles the program; feed_list: variable names (data ops),
        fetch_list: names or variables (the loss, metrics). Returns self."""
        feed_names = [_fetch_name(f) for f in feed_list]
        self._tmp = tempfile.TemporaryDirectory(prefix="tiller_prog_")
        if _is_pir(self.org_program):
            path, fetch_names = self._save_pir(fetch_list)
        else:
            path = os.path.join(self._tmp.name, "main.pdmodel")
            with open(path, "wb") as f:
                f.write(self.org_program.desc.serialize_to_string())
            fetch_names = [_fetch_name(f) for f in fetch_list]
        opts = self._strategy._options
        threads = int(opts.get("num_threads") or 0) or (os.cpu_count() or 1)
        self._session = _tiller.TrainingSession(
            path, feed_names, fetch_names, num_threads=threads,
            random_seed=int(opts.get("random_seed") or 0),
            check_nan_inf=bool(opts.get("enable_floating_point_checks")),
            no_bias_optimizer=bool(opts.get("use_no_bias_optimizer")))
        self.weights_to_device()
        return self

    def _save_pir(self, fetch_list):
        """Serializes a PIR program with one fetch op per fetch target (named
        tiller_fetch_<i>), then removes those ops again from the user's
        program."""
        import paddle
        program = self.org_program
        block = program.global_block()
        added = []
        names = []
        with paddle.static.program_guard(program):
            for i, item in enumerate(fetch_list):
                if isinstance(item, str):
                    value = None
                    for op in block.ops:
                        for r in op.results():
                            if r.has_name and r.name == item:
                                value = r
                    if value is None:
                        raise TillerError(f"fetch target '{item}' is not a named value of the program")
                    item = value
                name = f"tiller_fetch_{i}"
                out = paddle._pir_ops.fetch(item, name, i)
                added.append(out.get_defining_op())
                names.append(name)
        path = os.path.join(self._tmp.name, "main.json")
        try:
            paddle.core.serialize_pir_program(program, path)
        finally:
            for op in reversed(added):
                block.remove_op(op)
        return path, names

    # -- state ---------------------------------------------------------------
    def _tensor(self, name):
        var = self._scope.find_var(name)
        if var is None:
            raise TillerError(f"variable '{name}' is not in the scope: run the startup program "
                              "(or load a checkpoint) before compiling")
        return var.get_tensor()

    def weights_to_device(self):
        """Copies parameters and optimizer state from the scope into Tiller."""
        for info in self._session.state_info():
            value = np.array(self._tensor(info.name))
            if tuple(value.shape) != tuple(info.shape):
                if value.size != int(np.prod(info.shape, dtype=np.int64)):
                    raise TillerError(f"'{info.name}' in the scope has shape {list(value.shape)}, "
                                      f"the program declares {list(info.shape)}")
                value = value.reshape(info.shape)
            self._session.set_state(info.name, np.ascontiguousarray(value, dtype=info.dtype))

    def weights_to_host(self):
        """Writes parameters and optimizer state back into the scope (before
        paddle.static.save, or to continue with Paddle's executor)."""
        import paddle
        place = paddle.CPUPlace()
        for info in self._session.state_info():
            t = self._tensor(info.name)
            value = self._session.get_state(info.name)
            old_shape = tuple(np.array(t).shape)
            if old_shape != tuple(value.shape) and int(np.prod(old_shape, dtype=np.int64)) == value.size:
                value = value.reshape(old_shape)
            t.set(value, place)

    # -- checkpoints -------------------------------------------------------
    def _split_state(self):
        """(parameter names, optimizer-state names) the way paddle.static.save
        splits them between .pdparams and .pdopt."""
        program = self.org_program
        if _is_pir(program):
            from paddle.static.pir_io import get_pir_parameters
            params, opts = get_pir_parameters(program)
            params = [v.name for v in params if v.persistable]
            opts = [v.name for v in opts if v.persistable]
        else:
            from paddle.framework.io_utils import is_belong_to_optimizer, is_parameter
            params = [v.name for v in program.list_vars() if is_parameter(v)]
            opts = [v.name for v in program.list_vars() if is_belong_to_optimizer(v)]
        return params, opts

    def save(self, path_prefix, protocol=4):
        """Writes a checkpoint in paddle.static.save's format from Tiller's
        state: <prefix>.pdparams (parameters) and <prefix>.pdopt (optimizer
        state, learning rate), pickles of name -> numpy array, so
        paddle.static.load / set_program_state or load() resume from it. Each
        file is written to a temporary name and renamed, so an interrupted
        save never leaves a truncated checkpoint."""
        if self._session is None:
            raise TillerError("save() before compile()")
        params, opts = self._split_state()
        known = set(self._session.state_names())
        param_dict = {n: self._session.get_state(n) for n in params if n in known}
        opt_dict = {n: self._session.get_state(n) for n in opts if n in known}
        directory = os.path.dirname(path_prefix)
        if directory:
            os.makedirs(directory, exist_ok=True)
        for suffix, obj in ((".pdparams", param_dict), (".pdopt", opt_dict)):
            final = path_prefix + suffix
            tmp = f"{final}.tmp-{os.getpid()}"
            with open(tmp, "wb") as f:
                pickle.dump(obj, f, protocol=protocol)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)

    def load(self, path_prefix):
        """Sets Tiller's state from a checkpoint written by save() or by
        paddle.static.save (<prefix>.pdparams and, when the optimizer has
        state, <prefix>.pdopt). Every persistable variable of the program must
        be in it, with its shape."""
        if self._session is None:
            raise TillerError("load() before compile()")
        values = {}
        for suffix, required in ((".pdparams", True), (".pdopt", False)):
            path = path_prefix + suffix
            if not os.path.exists(path):
                if required:
                    raise TillerError(f"checkpoint file '{path}' not found")
                continue
            try:
                with open(path, "rb") as f:
                    loaded = pickle.load(f)
            except Exception as e:  # truncated or not a pickle
                raise TillerError(f"checkpoint file '{path}' is corrupt: {e}") from e
            if not isinstance(loaded, dict):
                raise TillerError(f"checkpoint file '{path}' does not hold a dict of arrays")
            values.update(loaded)
        infos = self._session.state_info()
        missing = [i.name for i in infos if i.name not in values]
        if missing:
            raise TillerError(f"checkpoint '{path_prefix}' lacks {len(missing)} variable(s) of the "
                              f"program: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}")
        # Check everything before setting anything: a bad checkpoint leaves
        # the state as it was.
        checked = []
        for info in infos:
            value = np.asarray(values[info.name])
            if value.size != int(np.prod(info.shape, dtype=np.int64)):
                raise TillerError(f"checkpoint '{path_prefix}': '{info.name}' has shape "
                                  f"{list(value.shape)}, the program declares {list(info.shape)}")
            if value.dtype != info.dtype:
                raise TillerError(f"checkpoint '{path_prefix}': '{info.name}' is {value.dtype}, "
                                  f"the program declares {info.dtype}")
            checked.append((info.name, np.ascontiguousarray(value.reshape(info.shape))))
        for name, value in checked:
            self._session.set_state(name, value)

    def _set_learning_rate(self):
        program = self.org_program
        sched = getattr(program, "lr_scheduler", None)
        if sched is None:
            return
        name = getattr(program, "lr_name", None) or getattr(sched, "_var_name", None)
        if not name:
            return
        for info in self._session.state_info():
            if info.name == name:
                self._session.set_state(name, np.full(info.shape, sched(), dtype=info.dtype))
                return

    # -- running -------------------------------------------------------------
    def run(self, feed=None, fetch_list=None):
        """One step (training, or forward only with runtime_options.enable_eval
        or is_training=False). Returns the fetches as numpy arrays in the order
        given to compile(); fetch_list is accepted for Executor.run symmetry
        and must name the same targets when given."""
        if self._session is None:
            raise TillerError("IpuCompiledProgram.run() before compile()")
        if fetch_list is not None and len(fetch_list) != len(self._session.fetch_names):
            raise TillerError(f"run(): {len(fetch_list)} fetch targets, compiled with "
                              f"{len(self._session.fetch_names)}")
        feed = dict(feed or {})
        self._set_learning_rate()
        opts = self._strategy._options
        eval_only = bool(opts["runtime_options.enable_eval"]) or not opts["is_training"]
        arrays = {k: np.asarray(v) for k, v in feed.items()}
        return self._session.run(arrays, eval_only)

    @property
    def session(self):
        """The underlying tiller TrainingSession (state access, summary)."""
        return self._session


class Executor:
    """``paddle.static.Executor`` that also runs IpuCompiledPrograms, so the
    IPU script idiom ``exe.run(compiled, feed=..., fetch_list=[loss])``
    works unchanged; any other program (the startup program, an eval
    clone) goes to Paddle's executor."""

    def __init__(self, place=None):
        import paddle
        self._paddle = paddle.static.Executor(place if place is not None else paddle.CPUPlace())

    def run(self, program=None, feed=None, fetch_list=None, **kwargs):
        if isinstance(program, IpuCompiledProgram):
            return program.run(feed=feed, fetch_list=fetch_list)
        return self._paddle.run(program, feed=feed, fetch_list=fetch_list, **kwargs)

    def close(self):
        self._paddle.close()
