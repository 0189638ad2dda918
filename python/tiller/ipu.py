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
    prog.save("ckpt/step")                        # or load(); paddle.static's format
    prog.weights_to_host()                        # parameters + optimizer state -> scope

The program is compiled whole: Tiller keeps the forward ops and the loss,
differentiates them itself, and applies the optimizer ops the program holds
(Paddle's own backward ops are dropped). Both program forms work: Paddle 3
PIR programs (the default) and legacy ProgramDesc programs
(``FLAGS_enable_pir_api=0``).

This module only adapts Paddle's Python objects to Tiller's C++ training
API (include/tiller/training.h, ipu_options.h), which a C++ program uses
directly: it serializes the live program, copies state between the Paddle
scope and the session, passes the strategy's options through (validated
in C++), reads the program's LR scheduler before each step, and calls the
session's checkpoint save/load (state roles and the .pdparams/.pdopt split
are C++'s).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import warnings

import numpy as np

from . import _tiller, shard
from . import distributed as _distributed
from ._tiller import TillerError

__all__ = ["IpuStrategy", "IpuCompiledProgram", "Executor", "TillerError"]


class IpuStrategy:
    """Compilation options, with the names and defaults of Paddle's
    IpuStrategy. Tiller's C++ side (``tiller::training::IpuOptions``,
    include/tiller/ipu_options.h) validates them: unknown names, and options
    Tiller does not implement yet set to other than their defaults, are
    refused; options that only tune the IPU toolchain are accepted with a
    warning. The options set_options takes in Python only (they hold Python
    objects) are PYTHON_OPTIONS."""

    # set_options names whose values are Python objects, not option values
    # (docs/MIGRATION.md lists them with the C++ registry).
    PYTHON_OPTIONS = {
        "compilation_progress_logger":
            "honoured: a callable (progress, total), called as each step compiles, from 0 to "
            "compilation_progress_total (Paddle's default logger wrote to its log at 10% steps; "
            "Tiller has none by default)",
        "custom_op":
            "honoured: a dict {paddle_op, popart_op, domain, version}, as add_custom_op (Tiller "
            "runs the Paddle op from a loaded custom-op library; the PopART name is kept)",
    }

    def __init__(self):
        self._init(_tiller.IpuOptions())
        # Made in dygraph mode, the strategy patches paddle.jit.to_static, as
        # Paddle's did (tiller/dygraph.py). Tiller itself needs no Paddle.
        try:
            import paddle
        except ImportError:
            return
        if paddle.in_dynamic_mode():
            self.register_patch()

    @classmethod
    def _wrapping(cls, options):
        """A strategy over existing options (a strategy's _ipu_strategy)."""
        strategy = cls.__new__(cls)
        strategy._init(options)
        return strategy

    def _init(self, options):
        self._options = options
        self._progress_logger = None
        self._noted = set()
        self._patterns = {}
        self._custom_ops = []
        # Paddle's attributes: custom ops added, and whether options changed
        # since the last compile (set_options of anything but 'lr').
        self.has_custom_ops = False
        self.custom_op_names = []
        self.need_compile = True
        self._optimizer = None

    # -- Paddle's setters ------------------------------------------------------
    def set_graph_config(self, num_ipus=1, is_training=True, micro_batch_size=1,
                         enable_manual_shard=False):
        self._options.set_graph_config(num_ipus, is_training, micro_batch_size,
                                       enable_manual_shard)

    def set_pipelining_config(self, enable_pipelining=False, batches_per_step=1,
                              enable_gradient_accumulation=False, accumulation_factor=1):
        self._options.set_pipelining_config(enable_pipelining, batches_per_step,
                                            enable_gradient_accumulation, accumulation_factor)

    def set_precision_config(self, enable_fp16=False):
        self._options.set_precision_config(enable_fp16)

    def add_custom_op(self, paddle_op, popart_op=None, domain="custom.ops", version=1):
        # Tiller runs custom ops from shared libraries (tiller.inference.
        # load_custom_op_library); the name mapping is kept for reference.
        self._custom_ops.append((paddle_op, popart_op or paddle_op, domain, version))
        self._options.add_custom_op(paddle_op, popart_op or paddle_op, domain, version)
        self.custom_op_names.append(paddle_op)
        self.has_custom_ops = True

    def get_all_option_names(self):
        """Every option name set_options takes (Paddle's registry and
        Tiller's own)."""
        return self._options.get_all_option_names()

    # -- Paddle's dygraph-to-static path (tiller/dygraph.py) ---------------------
    def register_patch(self):
        """Makes paddle.jit.to_static(full_graph=True) layers train through
        Tiller with this strategy (done by the constructor in dygraph mode);
        breaks to_static on Paddle's own executor until release_patch()."""
        from . import dygraph
        dygraph.register_patch(self)

    def release_patch(self):
        """Restores Paddle's to_static."""
        from . import dygraph
        dygraph.release_patch()

    def set_optimizer(self, optimizer):
        """The dygraph optimizer whose update a traced training step applies
        (its class, hyperparameters and LR scheduler; Tiller keeps the state)."""
        import paddle
        if not paddle.in_dynamic_mode():
            raise TillerError("Only needs to set optimizer in dynamic mode.")
        self._optimizer = optimizer
        self.need_compile = True

    def parse_optimizer(self, optimizer):
        """Paddle's: {'is_dynamic': True, 'lr': the optimizer's current rate}."""
        from paddle.optimizer.lr import LRScheduler
        lr = optimizer._learning_rate
        return {"is_dynamic": True, "lr": lr() if isinstance(lr, LRScheduler) else lr}

    def set_options(self, options):
        if not isinstance(options, dict):
            raise TillerError(f"set_options expects a dict, got {type(options).__name__}")
        if set(options) - {"lr"}:
            self.need_compile = True
        for key, value in options.items():
            if key == "compilation_progress_logger":
                # A callable (progress, total), as Paddle's registry took it.
                self._options.set_compilation_progress_logger(value)
                self._progress_logger = value
                continue
            if key == "accumulate_outer_fragment" and isinstance(value, dict):
                # PopART's {schedule: [virtual graph ids]}: kept as strings,
                # as the registry keeps every map.
                value = {str(k): ",".join(str(i) for i in v) if isinstance(v, (list, tuple))
                         else v for k, v in value.items()}
            if key == "custom_op":
                # Paddle's dict form of add_custom_op.
                if not isinstance(value, dict) or "paddle_op" not in value:
                    raise TillerError("option 'custom_op' takes a dict with paddle_op (and "
                                      f"popart_op, domain, version), got {value!r}")
                self.add_custom_op(value["paddle_op"], value.get("popart_op"),
                                   value.get("domain", "custom.ops"), value.get("version", 1))
                continue
            note = self._options.set(key, value)
            if note is not None and key not in self._noted:
                self._noted.add(key)
                # Under an MPI launcher every rank runs the same script:
                # rank 0 alone says it.
                if _distributed.is_main_process():
                    warnings.warn(f"tiller: {note}", stacklevel=2)

    def get_option(self, name):
        """The option's value (Paddle's ``get_option``: the 'value' of
        ``_ipu_strategy.get_option``)."""
        return self._options.get(name)

    @property
    def _ipu_strategy(self):
        """Paddle's ``core.IpuStrategy`` of the strategy, which Paddle's own
        tests read: ``get_option(name)`` is ``{'name', 'type', 'value'}``
        (type bool, uint64, double, string, vector or map),
        ``get_all_option_names()``."""
        return self._options

    def enable_pattern(self, name):
        self._patterns[name] = True

    def disable_pattern(self, name):
        self._patterns[name] = False

    @property
    def num_ipus(self):
        return self._options.get("num_ipus")

    @property
    def is_training(self):
        return self._options.get("is_training")

    @property
    def enable_pipelining(self):
        return self._options.get("enable_pipelining")

    @property
    def enable_fp16(self):
        return self._options.get("enable_fp16")


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


def _fetch_key(item):
    """A fetch target as run() compares them: its name, or a PIR value
    without one."""
    if isinstance(item, str):
        return item
    name = getattr(item, "name", None) if not _is_pir_value(item) or \
        getattr(item, "has_name", False) else None
    return name if isinstance(name, str) else item


def _is_pir_value(item):
    try:
        import paddle
        return isinstance(item, paddle.pir.Value)
    except (ImportError, AttributeError):
        return False


def _same_fetch(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return a.is_same(b) if hasattr(a, "is_same") else a is b


def _fetch_label(key):
    return key if isinstance(key, str) else f"<unnamed value {key.get_defining_op().name()}>"


def _rank(target):
    """The declared rank of a fetch target (a legacy Variable or a PIR
    value)."""
    shape = getattr(target, "shape", None)
    return len(shape) if shape is not None else 1


def _has_backward(program):
    """Whether the program holds Paddle's backward ops (optimizer.minimize)."""
    if _is_pir(program):
        return any(op.name().endswith("_grad") for op in program.global_block().ops)
    return any(op.type.endswith("_grad") for op in program.global_block().ops)


def _find_value(program, item, data=False):
    """A feed (data=True: by name) or fetch target of the program as the
    Value (PIR) or Variable (legacy) save_inference_model takes."""
    if not isinstance(item, str):
        return item
    block = program.global_block()
    if not _is_pir(program):
        if not block.has_var(item):
            raise TillerError(f"'{item}' is not a variable of the program")
        return block.var(item)
    found = None
    for op in block.ops:
        if data and op.name() == "pd_op.data" and op.attrs().get("name") == item:
            return op.result(0)
        if not data:
            for r in op.results():
                if r.has_name and r.name == item:
                    found = r  # the last value of that name, as the program ends
    if found is None:
        raise TillerError(f"'{item}' is not a {'data' if data else 'named'} value of the program")
    return found


@contextlib.contextmanager
def _batch_statistics_kept(program):
    """While an inference program is saved: its batch_norm ops that use
    batch statistics (is_test = false, no use_global_stats) get
    trainable_statistics = true, then their attributes are put back.

    Paddle's IPU build compiled the program as built: a batch_norm with
    is_test = false normalized by the batch's statistics (PopART's
    training-mode batch normalization, in inference too), as Paddle's CPU
    executor does. save_inference_model sets is_test = true on every op, so
    the saved model would use the running statistics; trainable_statistics
    keeps the batch statistics through that, in Paddle's own terms (Paddle's
    kernels and Paddle Inference read is_test + trainable_statistics as
    batch statistics), and Tiller's predictor reads it the same way.
    Dropout needs nothing: Paddle's IPU build ran an is_test = false dropout
    of an inference program as the identity, as the saved model does."""
    changed = []
    if _is_pir(program):
        for op in program.global_block().ops:
            if op.name() not in ("pd_op.batch_norm", "pd_op.batch_norm_"):
                continue
            attrs = op.attrs()
            if attrs.get("is_test") or attrs.get("use_global_stats") \
                    or attrs.get("trainable_statistics"):
                continue
            changed.append(op)
        put = lambda op, on: op.set_bool_attr("trainable_statistics", on)  # noqa: E731
    else:
        for block in program.blocks:
            for op in block.ops:
                if op.type != "batch_norm" or any(
                        op.has_attr(a) and op.attr(a)
                        for a in ("is_test", "use_global_stats", "trainable_statistics")):
                    continue
                changed.append(op)
        put = lambda op, on: op._set_attr("trainable_statistics", on)  # noqa: E731
    for op in changed:
        put(op, True)
    try:
        yield
    finally:
        for op in changed:
            put(op, False)


class IpuBackend:
    """Paddle's ``core.IpuBackend`` as Tiller offers it, every method of it:
    ``get_instance``, ``weights_to_host``, ``set_scope``,
    ``set_ipu_strategy``, ``detach``, ``reset`` and ``save_model_proto``.

    Paddle kept one backend per process, acting on the program compiled
    last; ``IpuBackend.get_instance()`` is that one here, and each
    IpuCompiledProgram's ``_backend`` (``ipu_compiler._backend
    .weights_to_host()`` in Paddle's IPU scripts) acts on its own program.
    As in Paddle, ``weights_to_host`` of an inference program writes
    nothing (Paddle logged a warning), ``detach`` and ``reset`` are
    harmless before any compile (Paddle's tests call ``reset()`` in
    tearDown), and ``reset`` drops the compiled program, which must be
    compiled again before it runs."""

    _instance = None
    _last = None  # the IpuCompiledProgram compiled last

    def __init__(self, program=None):
        self._program = program

    @classmethod
    def get_instance(cls):
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def _target(self):
        return self._program if self._program is not None else IpuBackend._last

    def _compiled(self, what):
        program = self._target()
        if program is None or not program._compiled():
            raise TillerError(f"IpuBackend.{what}(): no program has been compiled"
                              + (" since reset()" if program is not None else ""))
        return program

    def weights_to_host(self):
        """Writes the trained parameters and optimizer state into the
        backend's scope (before paddle.static.save)."""
        self._compiled("weights_to_host").weights_to_host()

    def weights_to_device(self):
        self._compiled("weights_to_device").weights_to_device()

    def set_scope(self, scope):
        """The scope weights_to_host writes into and a compile reads the
        weights from (Paddle's compile sets it to the program's)."""
        program = self._target()
        if program is not None:
            program._scope = scope
        self._scope = scope

    def set_ipu_strategy(self, strategy):
        """The strategy of the next compile of the backend's program: an
        IpuStrategy or its ``_ipu_strategy``."""
        if isinstance(strategy, _tiller.IpuOptions):
            options = strategy
        elif isinstance(strategy, IpuStrategy):
            options = strategy._options
        else:
            raise TillerError(f"IpuBackend.set_ipu_strategy() takes an IpuStrategy, got "
                              f"{type(strategy).__name__}")
        program = self._target()
        if program is not None:
            program._strategy = strategy if isinstance(strategy, IpuStrategy) else \
                IpuStrategy._wrapping(options)

    def detach(self):
        """Paddle released the IPUs; Tiller's CPU devices hold nothing to
        release (the compiled program keeps running)."""

    def reset(self):
        """Drops the compiled program (its devices, memory and trained state
        not written back by weights_to_host); it runs again after the next
        compile(), as in Paddle."""
        program = self._target()
        if program is not None:
            program._release()

    def save_model_proto(self, path):
        """Paddle wrote the ONNX model PopART compiled; Tiller compiles
        Paddle's program itself and has no ONNX form of it, so this fails
        rather than write something else under that name."""
        program = self._compiled("save_model_proto")
        raise TillerError(
            f"IpuBackend.save_model_proto({os.fspath(path)!r}): Paddle wrote PopART's ONNX model "
            "here; Tiller runs Paddle's program without an ONNX form. The program it compiled "
            f"is {program.program_path} (paddle.static.save_inference_model or "
            "IpuCompiledProgram.save() write a model or checkpoint)")


class IpuCompiledProgram:
    """A Paddle training (or eval) program compiled by Tiller; an inference
    program (is_training=False, no optimizer) runs on Tiller's predictor.

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
        self._predictor = None  # an inference program's (see compile())
        self._tmp = None
        # Paddle's scripts called ipu_compiler._backend.weights_to_host().
        self._backend = IpuBackend(self)

    def compile(self, feed_list, fetch_list):
        """Compiles the program; feed_list: variable names (data ops),
        fetch_list: names or variables (the loss, metrics). Returns self."""
        feed_names = [_fetch_name(f) for f in feed_list]
        self._release()
        self._tmp = tempfile.TemporaryDirectory(prefix="tiller_prog_")
        IpuBackend._last = self
        # What run()'s fetch_list may name: the targets compiled, by name
        # (or, for PIR values without one, by identity).
        self._fetch_items = list(fetch_list)
        if not _has_backward(self.org_program):
            if self._strategy.is_training:
                raise TillerError("IpuCompiledProgram: is_training is True but the program has "
                                  "no backward part (call optimizer.minimize(loss)); for "
                                  "inference set_graph_config(is_training=False)")
            return self._compile_inference(feed_names, fetch_list)
        if _is_pir(self.org_program):
            path, fetch_names = self._save_pir(fetch_list)
        else:
            path = os.path.join(self._tmp.name, "main.pdmodel")
            with open(path, "wb") as f:
                f.write(self.org_program.desc.serialize_to_string())
            fetch_names = [_fetch_name(f) for f in fetch_list]
        # The program file Tiller compiled (tiller.plan can read it too).
        self.program_path = path
        self._session = _tiller.TrainingSession(path, feed_names, fetch_names,
                                                self._strategy._options)
        self.weights_to_device()
        return self

    def _compile_inference(self, feed_names, fetch_list):
        """An inference program (is_training=False, no optimizer): saved as
        an inference model from the scope and run by Tiller's predictor with
        the strategy's devices, replicas, micro-batches and precision (what
        Paddle Inference's enable_ipu / set_ipu_config mean)."""
        import paddle

        from . import inference

        program = self.org_program
        if self._strategy._options.get("synthetic_data_mode"):
            raise TillerError("synthetic_data_mode: Tiller replaces the data of training programs "
                              "only; an inference program (is_training=False) runs its feeds")
        pir = _is_pir(program)
        feeds = [_find_value(program, n, data=True) for n in feed_names]
        fetches = [_find_value(program, f) for f in fetch_list]
        prefix = os.path.join(self._tmp.name, "model")
        with paddle.static.scope_guard(self._scope), _batch_statistics_kept(program):
            paddle.static.save_inference_model(prefix, feeds, fetches,
                                               paddle.static.Executor(paddle.CPUPlace()),
                                               program=program)
        self.program_path = prefix + (".json" if pir else ".pdmodel")
        config = inference.Config(self.program_path, prefix + ".pdiparams")
        o = self._strategy._options
        config.set_cpu_math_library_num_threads(o.num_threads)
        replicas = o.get("replicated_graph_count") if o.get("enable_replicated_graphs") else 1
        devices = max(1, o.get("num_ipus") // replicas)
        batches = o.get("batches_per_step")
        # Always the IPU execution model: a run's feeds hold its
        # micro-batches, a dynamic first dim is micro_batch_size.
        config.enable_ipu(devices, o.get("micro_batch_size"), o.get("enable_pipelining"), batches)
        config.set_ipu_config(False, replicas)
        if o.get("enable_fp16"):
            half = o.get("half_dtype")
            config.set_precision("half" if half == "auto" else half)
        if self._strategy._progress_logger is not None:
            config.set_compile_progress_logger(self._strategy._progress_logger,
                                               o.get("compilation_progress_total"))
        self._predictor = inference.create_predictor(config)
        # Paddle's IPU executor returned each fetch as [replicas, batches
        # per step, one micro-batch's value...], the leading dims only where
        # enabled / > 1: the predictor's [micro-batches x rows, ...] is
        # reshaped to that (the same bytes, as PopART's anchors held them).
        self._fetch_lead = ([replicas] if o.get("enable_replicated_graphs") else []) + \
            ([batches] if batches > 1 else [])
        self._fetch_ranks = [_rank(f) for f in fetches]
        self._micro_batches = replicas * batches
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
                item = _find_value(program, item)
                name = f"tiller_fetch_{i}"
                out = paddle._pir_ops.fetch(item, name, i)
                added.append(out.get_defining_op())
                names.append(name)
        path = os.path.join(self._tmp.name, "main.json")
        try:
            paddle.core.serialize_pir_program(program, path)
            # ipu_shard_guard's attributes, which PIR's serializer drops.
            shard.stamp_pir_json(path, shard.pir_annotations(program))
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

    def _compiled(self):
        return self._session is not None or self._predictor is not None

    def _release(self):
        """Drops what compile() made (IpuBackend.reset())."""
        self._session = None
        self._predictor = None

    def _fetch_indices(self, fetch_list):
        """The positions among the compiled fetch targets of run()'s
        fetch_list (None: all, in compile order). Paddle returned the
        values of the variables named; one that was not compiled has none,
        which Tiller says instead of returning something else."""
        if fetch_list is None:
            return None
        compiled = [_fetch_key(f) for f in self._fetch_items]
        indices = []
        for item in fetch_list:
            key = _fetch_key(item)
            found = [i for i, c in enumerate(compiled) if _same_fetch(key, c)]
            if not found:
                names = ", ".join(repr(_fetch_label(c)) for c in compiled)
                raise TillerError(
                    f"run(): fetch_list item {_fetch_label(key)!r} was not compiled; "
                    f"compile(feed_list, fetch_list) compiled the fetch targets [{names}] (compile "
                    "again to fetch others)")
            indices.append(found[0])
        return indices

    def _require_training(self, what):
        if self._predictor is not None:
            raise TillerError(f"{what}: this is an inference program (is_training=False): it "
                              "has no trained state; its weights were read from the scope at "
                              "compile()")
        if self._session is None:
            raise TillerError(f"{what} before compile()")

    def weights_to_device(self):
        """Copies parameters and optimizer state from the scope into Tiller."""
        self._require_training("weights_to_device()")
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
        paddle.static.save, or to continue with Paddle's executor). An
        inference program changes no weights: nothing to write."""
        import paddle
        if self._predictor is not None:
            return
        self._require_training("weights_to_host()")
        place = paddle.CPUPlace()
        for info in self._session.state_info():
            t = self._tensor(info.name)
            value = self._session.get_state(info.name)
            old_shape = tuple(np.array(t).shape)
            if old_shape != tuple(value.shape) and int(np.prod(old_shape, dtype=np.int64)) == value.size:
                value = value.reshape(old_shape)
            t.set(value, place)

    # -- checkpoints -------------------------------------------------------
    def save(self, path_prefix, protocol=4):
        """Writes a checkpoint in paddle.static.save's format from Tiller's
        state: <prefix>.pdparams (parameters) and <prefix>.pdopt (optimizer
        state, learning rate), pickles of name -> numpy array split as
        paddle.static.save splits them, so paddle.static.load /
        set_program_state or load() resume from it, and <prefix>.tiller.json
        (Tiller's manifest: the step, loss scaling, a hash per tensor). A save
        killed at any point leaves a checkpoint that loads: the new files are
        renamed into place only once all are written, the current ones kept
        as <prefix>.prev.* until the new set is whole, and load() falls back
        on them (saying so) when a save was interrupted."""
        self._require_training("save()")
        if protocol != 4:
            raise TillerError(f"save(protocol={protocol!r}): Tiller writes pickle protocol 4 "
                              "(paddle.static.save's default)")
        self._session.save_checkpoint(os.fspath(path_prefix))

    def load(self, path_prefix):
        """Sets Tiller's state from a checkpoint written by save() or by
        paddle.static.save (<prefix>.pdparams and, when the optimizer has
        state, <prefix>.pdopt). Every persistable variable of the program must
        be in it, with its shape; a refused checkpoint changes nothing."""
        self._require_training("load()")
        self._session.load_checkpoint(os.fspath(path_prefix))

    def _set_learning_rate(self):
        """Paddle's executor writes the program's LR scheduler value into the
        learning-rate variable before every run; so does Tiller. With the
        options is_dynamic (Paddle's dygraph path) the rate is the option
        lr."""
        options = self._strategy._options
        if options.get("is_dynamic"):
            self._session.set_learning_rate(float(options.get("lr")))
            return
        sched = getattr(self.org_program, "lr_scheduler", None)
        if sched is not None:
            self._session.set_learning_rate(float(sched()))

    @property
    def lr_scheduler(self):
        """The program's LR scheduler, as on the program Paddle's compile()
        returned: scripts step ``compiled.lr_scheduler`` between runs (and
        test ``hasattr(compiled, "lr_scheduler")`` first), so it must be the
        very object the executor reads before every run. Absent (an
        AttributeError, so hasattr is False) when the program has none."""
        sched = getattr(self.org_program, "lr_scheduler", None)
        if sched is None:
            raise AttributeError("the program has no lr_scheduler (its optimizer's learning "
                                 "rate is a float)")
        return sched

    # -- running -------------------------------------------------------------
    def run(self, feed=None, fetch_list=None):
        """One step (training, or forward only with runtime_options.enable_eval
        or is_training=False). Returns the values of fetch_list's targets, each
        one of those compiled (by name or variable), in its order; without
        fetch_list every compiled target in compile() order. Each value holds
        every micro-batch's: [replicas, accumulation_factor, batches_per_step,
        one micro-batch's value...], each leading dim present where enabled
        (> 1 for batches_per_step), as Paddle's IPU executor returned them."""
        if not self._compiled():
            raise TillerError("IpuCompiledProgram.run() before compile()"
                              + (" (IpuBackend.reset() dropped the compiled program)"
                                 if self._tmp is not None else ""))
        indices = self._fetch_indices(fetch_list)
        if self._predictor is not None:
            feed = dict(feed or {})
            names = self._predictor.get_input_names()
            missing = [n for n in names if n not in feed]
            if missing:
                raise TillerError(f"run(): no feed for {missing}")
            outs = self._predictor.run([np.asarray(feed[n]) for n in names])
            outs = [self._ipu_shape(o, r) for o, r in zip(outs, self._fetch_ranks)]
        else:
            feed = dict(feed or {})
            self._set_learning_rate()
            arrays = {k: np.asarray(v) for k, v in feed.items()}
            outs = self._session.run(arrays, self._strategy._options.eval_only)
        return outs if indices is None else [outs[i] for i in indices]

    def _ipu_shape(self, out, rank):
        """An inference output ([micro-batches x rows, ...]) as Paddle's IPU
        executor shaped it."""
        if not self._fetch_lead:
            return out
        micro = () if rank == 0 else (out.shape[0] // self._micro_batches,) + out.shape[1:]
        return out.reshape(tuple(self._fetch_lead) + micro)

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
