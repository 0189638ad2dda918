"""Paddle as a build with IPU support whose devices are Tiller's.

A Paddle IPU script runs unmodified after one line::

    import tiller; tiller.patch_paddle()

or with no edit at all::

    python -m tiller.patch script.py [args...]

After ``patch_paddle()``:

* ``paddle.is_compiled_with_ipu()`` (and ``paddle.device`` / ``paddle.base.core``'s)
  is true, ``paddle.device.get_ipu_device_count()`` gives the devices Tiller
  offers (``TILLER_IPU_DEVICE_COUNT``, default 64: CPU devices are virtual);
* ``paddle.IPUPlace()`` / ``paddle.static.IPUPlace()`` make a place that
  Paddle's executor runs as the CPU (the startup program, eval clones), and
  ``paddle.set_device("ipu")`` selects it;
* ``paddle.static.IpuStrategy`` / ``IpuCompiledProgram`` (also as
  ``paddle.base.compiler``'s) / ``ipu_shard_guard`` / ``set_ipu_shard`` are
  Tiller's (``tiller.ipu``, ``tiller.shard``), and so is ``core.IpuBackend``
  (``ipu_compiler._backend.weights_to_host()``);
* ``paddle.static.Executor.run(compiled, feed, fetch_list)`` runs a compiled
  IPU program through Tiller; any other program goes to Paddle as before;
* ``paddle.inference.Config``'s ``enable_ipu``, ``set_ipu_config``,
  ``set_ipu_custom_info`` and ``load_ipu_config`` work, and
  ``paddle.inference.create_predictor`` of a config with the IPU enabled
  returns Tiller's predictor (``tiller.inference``, the same API); other
  configs get Paddle's.

``unpatch_paddle()`` restores everything (tests use it). Patching twice is
harmless.
"""
from __future__ import annotations

import os
import runpy
import sys

__all__ = ["patch_paddle", "unpatch_paddle", "is_patched"]

# (owner object, attribute name, original value or _MISSING) in patch order.
_saved: list = []
_MISSING = object()


class IPUPlace:
    """Paddle's IPUPlace as Tiller offers it: an IPU device that Paddle's own
    executor (which runs startup programs and anything not compiled for
    the IPU) sees as the CPU."""

    def __init__(self, device_id: int = 0):
        self.device_id = int(device_id)

    def __repr__(self) -> str:
        return f"Place(ipu:{self.device_id})"

    def __eq__(self, other) -> bool:
        return isinstance(other, IPUPlace) and other.device_id == self.device_id

    def __hash__(self) -> int:
        return hash(("ipu", self.device_id))


def _device_count() -> int:
    value = os.environ.get("TILLER_IPU_DEVICE_COUNT", "64")
    try:
        count = int(value)
    except ValueError:
        count = -1
    if count < 1:
        raise ValueError(f"TILLER_IPU_DEVICE_COUNT must be a positive integer, got {value!r}")
    return count


def _set(owner, name: str, value) -> None:
    _saved.append((owner, name, getattr(owner, name, _MISSING)))
    setattr(owner, name, value)


def _inference_config(base):
    """paddle.inference.Config with Paddle Inference's IPU calls recorded
    (each checked at once on a scratch Tiller config, so a bad value fails
    where it is set) and replayed on the Tiller config create_predictor
    makes."""
    from . import inference

    class Config(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._tiller_calls = []
            self._tiller_ipu = False

        def _tiller_record(self, name, *args, **kwargs):
            getattr(inference.Config(), name)(*args, **kwargs)  # validates now
            self._tiller_calls.append((name, args, kwargs))

        def enable_ipu(self, *args, **kwargs):
            self._tiller_record("enable_ipu", *args, **kwargs)
            self._tiller_ipu = True

        def set_ipu_config(self, *args, **kwargs):
            self._tiller_record("set_ipu_config", *args, **kwargs)

        def set_ipu_custom_info(self, *args, **kwargs):
            self._tiller_record("set_ipu_custom_info", *args, **kwargs)

        def load_ipu_config(self, *args, **kwargs):
            self._tiller_record("load_ipu_config", *args, **kwargs)

        def use_ipu(self):
            return self._tiller_ipu

        def _tiller_config(self):
            if self.model_dir():
                config = inference.Config(self.model_dir())
            else:
                config = inference.Config(self.prog_file(), self.params_file())
            config.set_cpu_math_library_num_threads(self.cpu_math_library_num_threads())
            for name, args, kwargs in self._tiller_calls:
                getattr(config, name)(*args, **kwargs)
            return config

    Config.__name__ = Config.__qualname__ = "Config"
    Config.__module__ = base.__module__
    return Config


def is_patched() -> bool:
    return bool(_saved)


def patch_paddle() -> None:
    """Makes the imported (or importable) ``paddle`` an IPU build on Tiller."""
    if _saved:
        return
    import paddle
    import paddle.static
    from paddle.base import core

    from . import ipu, shard

    def is_compiled_with_ipu() -> bool:
        return True

    cpu = paddle.CPUPlace
    executor_cls = paddle.static.Executor
    original_init = executor_cls.__init__
    original_run = executor_cls.run
    original_set_device = paddle.set_device

    def executor_init(self, place=None):
        # Paddle's executor runs what is not compiled for the IPU on the CPU.
        original_init(self, cpu() if isinstance(place, IPUPlace) or place is None else place)

    def executor_run(self, program=None, feed=None, fetch_list=None, *args, **kwargs):
        if isinstance(program, ipu.IpuCompiledProgram):
            return program.run(feed=feed, fetch_list=fetch_list)
        return original_run(self, program, feed, fetch_list, *args, **kwargs)

    def set_device(device):
        if isinstance(device, str) and device.split(":")[0].lower() == "ipu":
            index = int(device.split(":")[1]) if ":" in device else 0
            if not 0 <= index < _device_count():
                raise ValueError(f"set_device({device!r}): Tiller offers "
                                 f"{_device_count()} IPU devices")
            original_set_device("cpu")
            return IPUPlace(index)
        return original_set_device(device)

    for owner in (paddle, paddle.device, core):
        if hasattr(owner, "is_compiled_with_ipu"):
            _set(owner, "is_compiled_with_ipu", is_compiled_with_ipu)
    for owner in (paddle.device, core):
        _set(owner, "get_ipu_device_count", _device_count)
    for owner in (paddle, paddle.static, paddle.framework, paddle.device, paddle.base, core):
        if hasattr(owner, "IPUPlace"):
            _set(owner, "IPUPlace", IPUPlace)
    _set(paddle, "set_device", set_device)
    if getattr(paddle.device, "set_device", None) is original_set_device:
        _set(paddle.device, "set_device", set_device)
    _set(core, "IpuBackend", ipu.IpuBackend)
    # paddle.static re-exports paddle.base.compiler's classes; scripts (and
    # Paddle's own IPU tests) reach them through either.
    import paddle.base.compiler as base_compiler

    for owner in (paddle.static, paddle.base, base_compiler):
        if hasattr(owner, "IpuStrategy"):
            _set(owner, "IpuStrategy", ipu.IpuStrategy)
            _set(owner, "IpuCompiledProgram", ipu.IpuCompiledProgram)
    _set(paddle.static, "ipu_shard_guard", shard.ipu_shard_guard)
    _set(paddle.static, "set_ipu_shard", shard.set_ipu_shard)
    _set(executor_cls, "__init__", executor_init)
    _set(executor_cls, "run", executor_run)

    import paddle.inference

    from . import inference

    config_cls = _inference_config(paddle.inference.Config)
    original_create = paddle.inference.create_predictor

    def create_predictor(config):
        if isinstance(config, config_cls) and config.use_ipu():
            return inference.create_predictor(config._tiller_config())
        return original_create(config)

    _set(paddle.inference, "Config", config_cls)
    _set(paddle.inference, "create_predictor", create_predictor)


def unpatch_paddle() -> None:
    """Undoes patch_paddle(), newest change first."""
    while _saved:
        owner, name, value = _saved.pop()
        if value is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, value)


def main(argv=None) -> int:
    """``python -m tiller.patch script.py [args...]``: runs the script as
    ``__main__`` after patch_paddle()."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m tiller.patch SCRIPT [ARGS...]\n"
              "Runs a Paddle IPU script unmodified, with Paddle's IPU API on Tiller.",
              file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    script = argv[0]
    if not os.path.isfile(script):
        print(f"tiller.patch: no such script: {script}", file=sys.stderr)
        return 2
    patch_paddle()
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
