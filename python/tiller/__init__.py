"""Tiller: a graph compiler and runtime for PaddlePaddle programs.

``tiller.inference`` mirrors ``paddle.inference``::

    import tiller.inference as infer
    config = infer.Config("model.json", "model.pdiparams")
    predictor = infer.create_predictor(config)
    outputs = predictor.run([input_ids, token_type_ids])

``tiller.IpuStrategy`` / ``tiller.IpuCompiledProgram`` mirror Paddle's IPU
static-graph API for training (see ``tiller.ipu``); ``tiller.ipu_shard_guard``
and ``tiller.set_ipu_shard`` its manual sharding (see ``tiller.shard``).
``tiller.patch_paddle()`` makes Paddle itself an IPU build on Tiller, so a
Paddle IPU script runs unmodified after that one line (``tiller.patch``).
``tiller.distributed`` helps a script run as several processes of an MPI job
(``mpirun -np N``; Paddle's ``enable_distribution`` options).
``tiller.plan`` predicts per-device memory and step time of a configuration
on a device profile (cpu, ipu-mk2, ipu-bow, h200) without running it.
"""
from . import inference
from ._tiller import TillerError, plan
from .ipu import Executor, IpuCompiledProgram, IpuStrategy
from .shard import ipu_shard_guard, set_ipu_shard

__all__ = ["inference", "TillerError", "IpuStrategy", "IpuCompiledProgram", "Executor",
           "ipu_shard_guard", "set_ipu_shard", "plan", "patch_paddle", "unpatch_paddle",
           "cmake_prefix_path", "about"]
__version__ = "0.1.0"


def about() -> str:
    """What this Tiller is and what it runs at here: its version, the CPU,
    the instruction-set level chosen for its kernels and why
    (``TILLER_MAX_ISA`` caps it, as ``ONEDNN_MAX_CPU_ISA`` caps oneDNN), and
    oneDNN's choice. ``print(tiller.about())``; the same as ``tiller info``."""
    from ._tiller import cpu_isa_info, describe_cpu_isa

    text = f"tiller {__version__}\n" + describe_cpu_isa()
    error = cpu_isa_info()["error"]
    return text + f"error: {error}" if error else text.rstrip("\n")


def cmake_prefix_path() -> str:
    """The prefix holding Tiller's CMake package (lib/cmake/Tiller), headers
    and library in an installed package: pass it as CMAKE_PREFIX_PATH so that
    ``find_package(Tiller)`` gives ``Tiller::tiller``. (A source checkout
    installs that tree with ``cmake --install build --prefix DIR``.)"""
    from pathlib import Path

    here = Path(__file__).resolve().parent
    if not (here / "lib" / "cmake" / "Tiller" / "TillerConfig.cmake").is_file():
        raise FileNotFoundError(
            f"{here} holds no CMake package (lib/cmake/Tiller): this tiller runs from a source "
            "checkout; install it with pip, or run `cmake --install build --prefix DIR` and use "
            "DIR")
    return str(here)


def patch_paddle() -> None:
    """Makes ``paddle`` an IPU build on Tiller (see ``tiller.patch``)."""
    from .patch import patch_paddle as patch

    patch()


def unpatch_paddle() -> None:
    """Undoes patch_paddle() (see ``tiller.patch``)."""
    from .patch import unpatch_paddle as unpatch

    unpatch()
