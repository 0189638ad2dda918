"""Quantize an exported zoo model to int8 with Paddle's own static post-training
quantization (``paddle.static.quantization.PostTrainingQuantization``,
``onnx_format=True``): the program Paddle writes has ``quantize_linear`` /
``dequantize_linear`` pairs on the inputs of every quantized matmul and
convolution, weights stored as int8 with per-channel scales.

Python::

    from models.export import export
    from models.quantize import quantize
    fp32 = export("bert-tiny", "/tmp/fp32", "legacy")
    int8 = quantize(fp32, "/tmp/int8", batches=4, batch=2, seq_len=16)  # -> ExportedModel

Command line (prints the ExportedModel as JSON)::

    python -m models.quantize --model DIR --out DIR [--batches N] [--batch N]
        [--seq-len N] [--algo abs_max] [--weights channel_wise_abs_max]

Paddle 3.3.1 quantizes only legacy ProgramDesc models, in a process started
with ``FLAGS_enable_pir_api=0``: ``quantize`` runs itself as such a
subprocess. Calibration inputs are the zoo's generated inputs
(``make_inputs(preset, batch, seq_len, seed=i)`` for batch i), so nothing is
downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .export import INFO_FILE, MODEL_PREFIX, ExportedModel, _paths
from .zoo import make_inputs

_REPO_ROOT = Path(__file__).resolve().parent.parent
QUANTIZABLE = ["conv2d", "depthwise_conv2d", "mul", "matmul", "matmul_v2"]


def _quantize_here(model_dir: Path, out_dir: Path, batches: int, batch: int, seq_len: int,
                   algo: str, weights: str) -> None:
    import paddle
    from paddle.static.quantization import PostTrainingQuantization

    info = json.loads((model_dir / INFO_FILE).read_text())
    if info["format"] != "legacy":
        raise ValueError(f"{model_dir}: Paddle quantizes legacy-format models only, "
                         f"this one is {info['format']}")
    preset = info["preset"]
    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())

    def calibration():
        for i in range(batches):
            yield make_inputs(preset, batch=batch, seq_len=seq_len, seed=1000 + i,
                              **info["config"])

    ptq = PostTrainingQuantization(
        executor=exe, model_dir=str(model_dir), model_filename=MODEL_PREFIX + ".pdmodel",
        params_filename=MODEL_PREFIX + ".pdiparams", data_loader=calibration,
        batch_nums=batches, algo=algo, round_type="round", quantizable_op_type=QUANTIZABLE,
        weight_quantize_type=weights, activation_quantize_type="range_abs_max",
        onnx_format=True, is_full_quantize=False, optimize_model=False)
    ptq.quantize()
    out_dir.mkdir(parents=True, exist_ok=True)
    ptq.save_quantized_model(str(out_dir), model_filename=MODEL_PREFIX + ".pdmodel",
                             params_filename=MODEL_PREFIX + ".pdiparams")
    info.update(quantized={"algo": algo, "weights": weights, "batches": batches,
                           "batch": batch, "seq_len": seq_len})
    (out_dir / INFO_FILE).write_text(json.dumps(info, indent=1))


def quantize(model: ExportedModel, out_dir, batches: int = 8, batch: int = 2,
             seq_len: int = 16, algo: str = "abs_max",
             weights: str = "channel_wise_abs_max") -> ExportedModel:
    """Quantize the legacy-format export ``model`` into ``out_dir`` with
    ``batches`` calibration batches of ``batch`` generated inputs."""
    if model.fmt != "legacy":
        raise ValueError(f"Paddle quantizes legacy-format models only, got {model.fmt}")
    out_dir = Path(out_dir).resolve()
    cmd = [sys.executable, "-m", "models.quantize", "--model", model.dir, "--out", str(out_dir),
           "--batches", str(batches), "--batch", str(batch), "--seq-len", str(seq_len),
           "--algo", algo, "--weights", weights]
    env = dict(os.environ)
    env["FLAGS_enable_pir_api"] = "0"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(_REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("GLOG_minloglevel", "2")
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=str(_REPO_ROOT), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"quantize subprocess failed ({r.returncode}): {' '.join(cmd)}\n"
                           f"{r.stdout[-4000:]}\n{r.stderr[-8000:]}")
    return _paths(out_dir, "legacy", model.preset, time.perf_counter() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m models.quantize",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a legacy-format export directory")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--batches", type=int, default=8, help="calibration batches")
    ap.add_argument("--batch", type=int, default=2, help="inputs per calibration batch")
    ap.add_argument("--seq-len", type=int, default=16, help="sequence length (text models)")
    ap.add_argument("--algo", default="abs_max", help="Paddle's PTQ algo (abs_max, avg, KL...)")
    ap.add_argument("--weights", default="channel_wise_abs_max",
                    choices=["channel_wise_abs_max", "abs_max"])
    a = ap.parse_args(argv)
    if os.environ.get("FLAGS_enable_pir_api", "1").lower() not in ("0", "false", "off", "no"):
        ap.error("run with FLAGS_enable_pir_api=0 (or call models.quantize.quantize)")
    out = Path(a.out).resolve()
    _quantize_here(Path(a.model).resolve(), out, a.batches, a.batch, a.seq_len, a.algo, a.weights)
    print(_paths(out, "legacy", json.loads((out / INFO_FILE).read_text())["preset"], 0.0)
          .to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
