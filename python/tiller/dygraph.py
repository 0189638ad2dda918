"""Paddle's IPU dygraph-to-static path on Tiller.

Paddle's IPU scripts trained a dygraph Layer whose ``forward`` is decorated
with ``paddle.jit.to_static(full_graph=True)`` like this::

    strategy = paddle.static.IpuStrategy()        # in dygraph mode: patches to_static
    strategy.set_graph_config(is_training=True, micro_batch_size=1)
    strategy.set_optimizer(optim)
    for batch in data:
        pred, loss = model(x, label)               # forward, backward and update
    paddle.base.core.IpuBackend.get_instance().weights_to_host()
    strategy.release_patch()

A call of the model runs one whole training step: the program to_static
traced, with the optimizer's update appended, compiled by Tiller. Its last
output is the loss (of a returned dict: the value under "loss"); calls
return what forward returned (tuples, lists, dicts), as Paddle does. With ``tiller.IpuStrategy`` (or after
``tiller.patch_paddle()``), creating the strategy in dygraph mode replaces
how Paddle's to_static runs a call (``ASTStaticFunction._perform_call``): the
program it traces is compiled by Tiller (``IpuCompiledProgram``) instead of
run by Paddle; the
layer's parameters share their memory with the compiled program's scope, so
``weights_to_host()`` writes the trained values into the Layer (its
``state_dict()``). ``release_patch()`` restores Paddle's to_static.

What Paddle's IPU path did and Tiller does too: one training program per
strategy, compiled again when the strategy's options changed
(``need_compile``; it starts from the trained weights, the optimizer's
moments reset, with a warning); the optimizer's learning-rate scheduler read
before every step. A program traced in eval mode (``model.eval()``) runs
forward only on the weights training reached. Refused with a message: the
SOT path (``to_static`` without ``full_graph=True``), optimizers built on
parameter groups, optimizers that cover only some of the layer's trainable
parameters, a last output that is not a one-element floating-point loss, and a
second training signature (other input shapes) for one strategy. Paddle 3's
PIR programs and Paddle 2.6's legacy programs both work.
"""
from __future__ import annotations

import collections
import copy
import contextlib
import warnings
import weakref

import numpy as np

from ._tiller import TillerError

# (owner, attribute, original) of every patch in place, restored in reverse.
_patched = []
# The to_static functions that hold programs Tiller compiled (weakly: a
# function's layer may go away); release_patch() drops those programs.
_functions = weakref.WeakSet()


def register_patch(strategy):
    """Runs calls of to_static functions through Tiller while ``strategy`` is
    the active one (a later strategy replaces an earlier one's patch).

    Only calls are routed: Paddle's own uses of a traced program
    (``paddle.jit.save``, ``get_concrete_program``) keep Paddle's cache and
    programs, which Tiller never changes (it traces its own copy)."""
    from paddle.jit.dy2static.program_translator import (ASTStaticFunction, CacheKey,
                                                         SymbolicStaticFunction)

    release_patch()

    def perform_call(function, *args, **kwargs):
        # What ASTStaticFunction.get_concrete_program keys its cache by.
        args, kwargs = function._function_spec.unified_args_and_kwargs(args, kwargs)
        specs, kwarg_specs = function._function_spec.args_to_input_spec(args, kwargs)
        train = function._is_train_mode()
        # Paddle 3: a property; Paddle 2.6: the attribute itself.
        instance = (function.class_instance if hasattr(type(function), "class_instance")
                    else function._class_instance)
        key = CacheKey(function._function_spec, specs, kwarg_specs, instance,
                       **function._kwargs, with_hook=False, is_train=train)
        layers = function.__dict__.setdefault("_tiller_layers", {})
        _functions.add(function)
        layer = layers.get(hash(key))
        if layer is None or strategy.need_compile:
            concrete, _ = function._program_cache._build_once(key)
            layer = CompiledLayer(strategy, concrete, instance is not None, train,
                                  replaces=layer)
            layers[hash(key)] = layer
        return layer(args)

    def refuse_sot(function, *args, **kwargs):
        raise TillerError(
            f"{getattr(function, '_function_name', 'a to_static function')}: Paddle's IPU "
            "dygraph-to-static path (an IpuStrategy made in dygraph mode) runs "
            "paddle.jit.to_static(full_graph=True) functions only; this one uses the "
            "symbolic (SOT) translation. Decorate it with full_graph=True, or call "
            "strategy.release_patch() to run it on Paddle")

    for cls, replacement in ((ASTStaticFunction, perform_call),
                             (SymbolicStaticFunction, refuse_sot)):
        _patched.append((cls, "_perform_call", cls.__dict__["_perform_call"]))
        cls._perform_call = replacement


def release_patch():
    """Restores Paddle's to_static and forgets the programs Tiller compiled
    for it (the functions run on Paddle again)."""
    while _patched:
        owner, name, original = _patched.pop()
        setattr(owner, name, original)
    for function in list(_functions):
        function.__dict__.pop("_tiller_layers", None)
    _functions.clear()


def _static_optimizer(optimizer):
    """A copy of the dygraph optimizer (same class and hyperparameters, the
    same LR scheduler object) without its parameters and state, which
    ``minimize`` in static mode turns into update ops of the program."""
    static = copy.copy(optimizer)
    static._parameter_list = None
    static._param_groups = None
    static._learning_rate_map = {}
    static._accumulators = collections.defaultdict(dict)
    static._accumulators_holder = {}
    static._opti_name_list = []
    static._param_device_map = {}
    static._auxiliary_vars = {}
    static._already_create_accumulator = set()
    static._master_weights = {}
    if hasattr(static, "_master_grads"):
        static._master_grads = {}
    if hasattr(static, "_param_dict"):
        static._param_dict = {k: [[], []] for k in optimizer._param_dict}
    return static


@contextlib.contextmanager
def _static_mode():
    """Paddle's static mode for the block (minimize, the startup program and
    saving need it), then dygraph mode again if the caller was in it."""
    import paddle

    was_dynamic = paddle.in_dynamic_mode()
    paddle.enable_static()
    try:
        yield
    finally:
        if was_dynamic:
            paddle.disable_static()


class CompiledLayer:
    """What Paddle's to_static calls in place of its partial program: the
    traced program compiled by Tiller. With a training strategy, a call of a
    program traced in training mode is one training step (the optimizer's
    update appended), and a program traced in eval mode (``model.eval()``)
    runs forward only on the weights training has reached (compiled again
    when they changed since). With is_training False, the program is
    compiled for inference once, on the layer's weights."""

    def __init__(self, strategy, concrete, is_method, train, replaces=None):
        import paddle

        self._strategy = strategy
        self._concrete = concrete
        program = concrete.main_program
        pir = hasattr(paddle, "pir") and isinstance(program, paddle.pir.Program)
        # Tensors among the traced arguments: PIR data values, or the legacy
        # program's feed variables (Paddle 2.x).
        kind = paddle.pir.Value if pir else paddle.static.Variable
        inputs = [v for v in paddle.utils.flatten(
            list(concrete.inputs[1:] if is_method else concrete.inputs)) if isinstance(v, kind)]
        self._feed_names = [_feed_name(v) for v in inputs]
        # What forward returned (nested lists, tuples, dicts), flattened as
        # Paddle flattens it; calls return the same structure.
        self._structure = concrete.outputs
        self._outputs = [v for v in paddle.utils.flatten(concrete.outputs)
                         if isinstance(v, kind)]
        if not self._outputs:
            raise TillerError("the to_static function returned no tensor: nothing to run")
        # The loss: the last output, or a returned dict's "loss".
        self._loss = self._outputs[-1]
        nested = concrete.outputs
        while isinstance(nested, (list, tuple)) and len(nested) == 1:
            nested = nested[0]
        if isinstance(nested, dict) and isinstance(nested.get("loss"), kind):
            self._loss = nested["loss"]
        self._params = {p.name: p for p in _parameters(concrete)}
        self._trains = bool(strategy.is_training and train)
        state = _state(strategy)
        if replaces is not None:
            # Options changed since (need_compile): the new program starts
            # from the weights the old one reached.
            if replaces._trains:
                replaces.weights_to_host()
                warnings.warn("tiller: the IpuStrategy's options changed, so the to_static "
                              "program is compiled again: it starts from the trained "
                              "parameters, with the optimizer's state (moments) reset",
                              stacklevel=4)
                state.trainer = None
        if self._trains and state.trainer is not None:
            raise TillerError(
                f"to_static traced a second training program (feeds {self._describe(inputs)}) "
                "for the same IpuStrategy: Tiller's IPU dygraph path trains one program per "
                "strategy, as Paddle's did; keep the inputs' shapes fixed (for example "
                "DataLoader(drop_last=True))")
        if self._trains:
            with _static_mode():
                self._append_optimizer(strategy, concrete, self._loss)
        self._compiled = None
        self._version = -1  # the training steps the compiled weights have seen
        self._compile()
        strategy.need_compile = False
        if self._trains:
            state.trainer = self

    def _compile(self):
        """Compiles the program on the layer's current weights (and, for
        training, the optimizer state the startup program initializes)."""
        import paddle

        from .ipu import IpuBackend, IpuCompiledProgram

        state = _state(self._strategy)
        if not self._trains and state.trainer is not None:
            state.trainer.weights_to_host()
        scope = paddle.static.Scope()
        with _static_mode(), paddle.static.scope_guard(scope):
            paddle.static.Executor(paddle.CPUPlace()).run(self._concrete.startup_program)
        # The layer's parameters and the scope share their memory:
        # weights_to_host() writes the trained values into the layer.
        for name, param in self._params.items():
            scope.var(name).get_tensor()._share_data_with(param.value().get_tensor())
        options = self._strategy._options
        inference = not self._trains and options.get("is_training")
        if inference:
            # An eval-mode trace under a training strategy: compiled for
            # inference (the strategy's devices and precision).
            options.set("is_training", False)
        try:
            with _static_mode():
                self._compiled = IpuCompiledProgram(self._concrete.main_program, scope=scope,
                                                    ipu_strategy=self._strategy).compile(
                    self._feed_names, self._outputs)
        finally:
            if inference:
                options.set("is_training", True)
        if state.trainer is not None and state.trainer is not self:
            # IpuBackend.get_instance().weights_to_host() means the trained weights.
            IpuBackend._last = state.trainer._compiled
        self._version = state.steps

    @staticmethod
    def _describe(inputs):
        return ", ".join(f"{_feed_name(v)} {list(v.shape)}" for v in inputs)

    @staticmethod
    def _append_optimizer(strategy, concrete, loss):
        import paddle

        optimizer = getattr(strategy, "_optimizer", None)
        if optimizer is None:
            raise TillerError("IpuStrategy: is_training is True but no optimizer was given: call "
                              "strategy.set_optimizer(optimizer) before the first step")
        if loss.dtype not in (paddle.float32, paddle.float64, paddle.float16, paddle.bfloat16):
            raise TillerError(f"the loss (forward's last output, or its dict's 'loss') is "
                              f"{loss.dtype}, not a floating-point value")
        if int(np.prod(loss.shape or [1])) != 1:
            raise TillerError(f"the loss (forward's last output, or its dict's 'loss') has shape "
                              f"{loss.shape}: "
                              "a training step needs a one-element loss (reduce it, e.g. "
                              "paddle.mean, or paddle.incubate.identity_loss)")
        if any(isinstance(g, dict) for g in optimizer._param_groups or []):
            raise TillerError("IpuStrategy.set_optimizer: an optimizer built on parameter groups "
                              "(a list of dicts) is not supported by Tiller's dygraph-to-static "
                              "path; give it the layer's parameters()")
        trainable = {p.name for p in _parameters(concrete) if not p.stop_gradient}
        covered = {p.name for p in (optimizer._parameter_list or [])}
        if covered and covered != trainable:
            raise TillerError(f"IpuStrategy.set_optimizer: the optimizer updates "
                              f"{sorted(covered)}, the layer trains {sorted(trainable)}: "
                              "Tiller's dygraph-to-static path updates every trainable "
                              "parameter of the traced layer")
        with paddle.static.program_guard(concrete.main_program, concrete.startup_program):
            _static_optimizer(optimizer).minimize(loss)

    def __call__(self, args):
        import paddle

        # The tensor arguments, flattened as the trace flattened them (numpy
        # arrays are tensors to to_static too).
        tensors = [a for a in paddle.utils.flatten(list(args))
                   if isinstance(a, (paddle.Tensor, np.ndarray))]
        if len(tensors) != len(self._feed_names):
            raise TillerError(f"the traced forward takes {len(self._feed_names)} tensors "
                              f"({self._feed_names}), got {len(tensors)}")
        feed = {n: t.numpy() if isinstance(t, paddle.Tensor) else t
                for n, t in zip(self._feed_names, tensors)}
        state = _state(self._strategy)
        if not self._trains and self._version != state.steps:
            self._compile()  # training moved the weights since
        results = self._compiled.run(feed=feed)
        if self._trains:
            state.steps += 1
        results = paddle.utils.pack_sequence_as(
            self._structure, [paddle.to_tensor(r) for r in results])
        # As Paddle's partial program: a structure of one element is that element.
        while isinstance(results, (list, tuple)) and len(results) == 1:
            results = results[0]
        return results

    def weights_to_host(self):
        """The compiled program's parameters written into the layer (and its
        optimizer state into the program's own scope)."""
        if self._trains:
            self._compiled.weights_to_host()


def _feed_name(value):
    """The feed name of a traced input: a PIR data op's name, or a legacy
    program's variable name."""
    op = getattr(value, "get_defining_op", None)
    return op().attrs()["name"] if op is not None else value.name


def _parameters(concrete):
    """The traced layer's parameters: Paddle 3 gives (parameters, buffers),
    Paddle 2 a list of parameters and buffers."""
    params = concrete.parameters
    if not params:
        return []
    if isinstance(params, (tuple, list)) and params and isinstance(params[0], (tuple, list)):
        return list(params[0])
    return [p for p in params if getattr(p, "trainable", False) or not p.stop_gradient]


class _StrategyState:
    """A strategy's dygraph bookkeeping: its training program (one) and the
    training steps run, which tell eval programs their weights are stale."""

    def __init__(self):
        self.trainer = None
        self.steps = 0


def _state(strategy):
    if getattr(strategy, "_dygraph", None) is None:
        strategy._dygraph = _StrategyState()
    return strategy._dygraph
