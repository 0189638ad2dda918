"""Export zoo models as Paddle inference models and run Paddle Inference on them.

Python::

    from models.export import export, make_inputs, paddle_infer, paddle_bench
    exp = export("bert-tiny", "/tmp/m", "pir")        # -> ExportedModel
    exp.model_file, exp.params_file                   # /tmp/m/model.json, /tmp/m/model.pdiparams
    feeds = make_inputs("bert-tiny", batch=2, seq_len=16, seed=0)
    outs = paddle_infer(exp.dir, feeds, threads=1)    # {paddle output name: ndarray}
    ms = paddle_bench(exp.dir, feeds, threads=2, warmup=3, iters=20)

Command line (prints the ExportedModel as JSON)::

    python -m models.export --preset bert-tiny --format pir --out DIR
        [--batch N] [--seq-len N] [--seed S] [--set num_layers=4 ...] [--list]

Formats:
  * "pir": Paddle 3's default, ``model.json`` + ``model.pdiparams``.
  * "legacy": ``model.pdmodel`` (ProgramDesc) + ``model.pdiparams``
    (+ ``model.pdiparams.info``). Paddle only writes these when
    ``FLAGS_enable_pir_api=0`` is in the environment *before* ``import paddle``,
    so a PIR-mode process exports legacy models through a subprocess
    (``python -m models.export``), and vice versa. The legacy process also
    installs :mod:`models._legacy_compat` (Paddle 3.3.1 cannot trace
    matmul/gelu/tanh in legacy mode without it).

Every export directory also gets ``export_info.json``: preset, config, seed,
format, input names/dtypes/shapes and the zoo's output names, in the order
of Paddle's fetch list.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .zoo import PRESETS, build_model, get_spec, input_specs, make_inputs  # noqa: F401

FORMATS = ("pir", "legacy")
MODEL_PREFIX = "model"
INFO_FILE = "export_info.json"
_REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ExportedModel:
    dir: str
    prefix: str           # dir/model
    model_file: str       # dir/model.json or dir/model.pdmodel
    params_file: str      # dir/model.pdiparams
    fmt: str
    preset: str
    seconds: float = 0.0  # wall time of the export (including any subprocess)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


def current_process_format() -> str:
    """The format ``paddle.jit.save`` writes in this process."""
    if "paddle" in sys.modules:
        import paddle

        return "pir" if paddle.get_flags(["FLAGS_enable_pir_api"])["FLAGS_enable_pir_api"] \
            else "legacy"
    v = os.environ.get("FLAGS_enable_pir_api", "1").strip().lower()
    return "legacy" if v in ("0", "false", "off", "no") else "pir"


def _paths(out_dir: Path, fmt: str, preset: str, seconds: float) -> ExportedModel:
    prefix = out_dir / MODEL_PREFIX
    model_file = prefix.with_suffix(".json" if fmt == "pir" else ".pdmodel")
    params = prefix.with_suffix(".pdiparams")
    for f in (model_file, params):
        if not f.is_file():
            raise RuntimeError(f"export of {preset} ({fmt}) did not write {f}")
    return ExportedModel(str(out_dir), str(prefix), str(model_file), str(params), fmt, preset,
                         seconds)


def _export_here(preset, out_dir: Path, fmt, batch, seq_len, seed, overrides):
    import paddle

    if fmt == "legacy":
        from . import _legacy_compat

        _legacy_compat.install()
    spec = get_spec(preset, **overrides)
    model = build_model(preset, seed, **overrides)
    specs = input_specs(preset, batch, seq_len, **overrides)
    out_dir.mkdir(parents=True, exist_ok=True)
    paddle.jit.save(model, str(out_dir / MODEL_PREFIX), input_spec=specs)
    info = {
        "preset": preset, "family": spec.family, "format": fmt, "seed": seed,
        "config": dataclasses.asdict(spec.config),
        "inputs": [{"name": s.name, "dtype": dt, "shape": list(s.shape)}
                   for s, (_, dt) in zip(specs, spec.inputs)],
        "outputs": list(spec.outputs),
        "paddle_version": paddle.__version__,
    }
    (out_dir / INFO_FILE).write_text(json.dumps(info, indent=1))


def export(model_name_or_preset: str, out_dir, fmt: str = "pir", batch: int | None = None,
           seq_len: int | None = None, seed: int = 0, **overrides) -> ExportedModel:
    """Build ``model_name_or_preset`` (with config ``overrides``) from ``seed``,
    eval mode, and save an inference model into ``out_dir``. ``batch`` /
    ``seq_len`` None -> dynamic (-1) dims. Returns the written paths."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    get_spec(model_name_or_preset, **overrides)  # validate early
    out_dir = Path(out_dir).resolve()
    t0 = time.perf_counter()
    if fmt == current_process_format():
        _export_here(model_name_or_preset, out_dir, fmt, batch, seq_len, seed, overrides)
    else:
        cmd = [sys.executable, "-m", "models.export", "--preset", model_name_or_preset,
               "--format", fmt, "--out", str(out_dir), "--seed", str(seed)]
        if batch is not None:
            cmd += ["--batch", str(batch)]
        if seq_len is not None:
            cmd += ["--seq-len", str(seq_len)]
        for k, v in overrides.items():
            cmd += ["--set", f"{k}={json.dumps(v)}"]
        env = dict(os.environ)
        env["FLAGS_enable_pir_api"] = "0" if fmt == "legacy" else "1"
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env.setdefault("GLOG_minloglevel", "2")
        r = subprocess.run(cmd, env=env, cwd=str(_REPO_ROOT), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"export subprocess failed ({r.returncode}): {' '.join(cmd)}\n"
                               f"{r.stdout[-4000:]}\n{r.stderr[-8000:]}")
    return _paths(out_dir, fmt, model_name_or_preset, time.perf_counter() - t0)


# ---------------------------------------------------------------------------
# Paddle Inference


def resolve_model(model) -> tuple[str, str]:
    """(model_file, params_file) from an ExportedModel, a directory, a prefix
    ("dir/model") or a .json/.pdmodel path. A directory holding both formats
    resolves to model.json."""
    if isinstance(model, ExportedModel):
        return model.model_file, model.params_file
    p = Path(model)
    if p.is_dir():
        p = p / MODEL_PREFIX
    if p.suffix in (".json", ".pdmodel") and p.is_file():
        return str(p), str(p.with_suffix(".pdiparams"))
    for ext in (".json", ".pdmodel"):
        cand = Path(str(p) + ext)
        if cand.is_file():
            return str(cand), str(p) + ".pdiparams"
    raise FileNotFoundError(f"no model.json / model.pdmodel for {model}")


def create_predictor(model, threads: int = 1, ir_optim: bool = True, mkldnn: bool | None = None,
                     bf16: bool = False):
    """A paddle.inference CPU predictor. ``mkldnn`` None keeps Paddle's default
    (oneDNN on for CPU in 3.3.1). ``bf16``: Paddle Inference's own bfloat16
    path (oneDNN on, enable_mkldnn_bfloat16)."""
    import paddle.inference as pi

    model_file, params_file = resolve_model(model)
    config = pi.Config(model_file, params_file)
    config.disable_gpu()
    config.set_cpu_math_library_num_threads(threads)
    config.switch_ir_optim(ir_optim)
    if mkldnn is True:
        config.enable_mkldnn()
    elif mkldnn is False:
        config.disable_mkldnn()
    if bf16:
        config.enable_mkldnn()
        config.enable_mkldnn_bfloat16()
    config.disable_glog_info()
    return pi.create_predictor(config)


def _feed(predictor, inputs):
    names = predictor.get_input_names()
    missing = [n for n in names if n not in inputs]
    if missing:
        raise KeyError(f"inputs missing {missing}; model wants {names}")
    for n in names:
        predictor.get_input_handle(n).copy_from_cpu(np.ascontiguousarray(inputs[n]))


def _fetch(predictor):
    return {n: predictor.get_output_handle(n).copy_to_cpu()
            for n in predictor.get_output_names()}


def paddle_infer(model_dir_or_prefix, inputs: dict, threads: int = 1, ir_optim: bool = True,
                 mkldnn: bool | None = None) -> dict[str, np.ndarray]:
    """Run Paddle Inference once; returns {output name: array} in the
    predictor's output order (PIR models name them fetch_name_0..., legacy
    models after the producing variable; see export_info.json "outputs" for
    the zoo's names in the same order)."""
    predictor = create_predictor(model_dir_or_prefix, threads, ir_optim, mkldnn)
    _feed(predictor, inputs)
    predictor.run()
    return _fetch(predictor)


def paddle_bench(model, inputs: dict, threads: int = 1, warmup: int = 3, iters: int = 10,
                 ir_optim: bool = True, mkldnn: bool | None = None, all_times: bool = False):
    """Median wall ms of one inference (input copy + run + output copy);
    with ``all_times`` the list of per-iteration ms instead (the dev machines
    are shared: look at the minimum too)."""
    predictor = create_predictor(model, threads, ir_optim, mkldnn)
    times = []
    for i in range(warmup + iters):
        t0 = time.perf_counter()
        _feed(predictor, inputs)
        predictor.run()
        _fetch(predictor)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return times if all_times else statistics.median(times)


def output_names(model) -> list[str]:
    """The zoo's logical output names for an export directory (or [])."""
    d = Path(resolve_model(model)[0]).parent
    f = d / INFO_FILE
    return json.loads(f.read_text())["outputs"] if f.is_file() else []


# ---------------------------------------------------------------------------


def _parse_set(items):
    out = {}
    for it in items or []:
        k, _, v = it.partition("=")
        try:
            val = json.loads(v)
        except json.JSONDecodeError:
            val = v
        out[k.strip()] = tuple(val) if isinstance(val, list) else val
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m models.export", description=__doc__.split("\n")[0])
    ap.add_argument("--preset", help="one of the presets (see --list)")
    ap.add_argument("--format", default="pir", choices=FORMATS)
    ap.add_argument("--out", help="output directory")
    ap.add_argument("--batch", type=int, default=None, help="fixed batch (default dynamic)")
    ap.add_argument("--seq-len", type=int, default=None, help="fixed seq len (default dynamic)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override a config field (JSON value), e.g. num_layers=4")
    ap.add_argument("--list", action="store_true", help="list presets and exit")
    a = ap.parse_args(argv)
    if a.list:
        for name, spec in PRESETS.items():
            print(f"{name:18s} {spec.family:7s} {dataclasses.asdict(spec.config)}")
        return 0
    if not a.preset or not a.out:
        ap.error("--preset and --out are required")
    exp = export(a.preset, a.out, a.format, a.batch, a.seq_len, a.seed, **_parse_set(a.set))
    print(exp.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
