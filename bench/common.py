"""Shared pieces of the demo and the benchmarks: timing Tiller and Paddle
Inference on the same inputs in the same process, and the machine's GEMM
rate measured in the run."""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for p in (REPO / "python", REPO):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import numpy as np  # noqa: E402

# BERT-Base forward FLOPs per sequence at seq 128 (MISSION.md); other
# lengths are estimated by the dense + attention formula below.
BERT_BASE_GFLOP_SEQ128 = 22.35


def bert_gflop(layers: int, hidden: int, inter: int, seq: int, batch: int) -> float:
    """Forward GFLOP of a BERT encoder: QKV/output projections, FFN and the
    two attention matmuls (2 FLOPs per multiply-add)."""
    dense = 2 * seq * (4 * hidden * hidden + 2 * hidden * inter)
    attention = 2 * 2 * seq * seq * hidden
    return batch * layers * (dense + attention) / 1e9


def pretrain_train_gflop(cfg, batch: int) -> float:
    """GFLOP of one BERT pretraining step (models.training.PretrainConfig
    ``cfg``): 3x the forward matmul FLOPs (backward = input and weight
    gradients), encoder plus pooler, NSP, MLM transform and the decoder tied
    to the word embeddings (bench_training.py's docstring has the formula)."""
    c, s = cfg.bert, cfg.seq_len
    h, inter, vocab = c.hidden_size, c.intermediate_size, c.vocab_size
    encoder = bert_gflop(c.num_layers, h, inter, s, batch) * 1e9
    p = batch * cfg.max_predictions
    heads = 2 * batch * h * h + 4 * batch * h + 2 * p * h * h + 2 * p * h * vocab
    return 3 * (encoder + heads) / 1e9


def cpu_model_and_flags() -> tuple[str, set]:
    """The CPU model name and its /proc/cpuinfo flags."""
    model, flags = "?", set()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        if line.startswith("model name") and model == "?":
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[1].split())
    return model, flags


def cpu_description() -> str:
    """The CPU model, its count and the ISA extensions that matter here."""
    model, flags = cpu_model_and_flags()
    isa = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16",
                       "amx_int8") if f in flags]
    return f"{model} ({os.cpu_count()} cpus; {' '.join(isa)})"


def tiller_predictor(model_file: str, params_file: str, threads: int,
                     precision: str = "float32"):
    import tiller.inference as ti

    config = ti.Config(model_file, params_file)
    config.set_cpu_math_library_num_threads(threads)
    config.set_precision(precision)
    return ti.create_predictor(config)


def _gemm_rate(predictor, n: int, reps: int) -> float:
    """2 n^3 / the best of `reps` runs of the n x n GEMM model, in G per s."""
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    predictor.run([a])
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        predictor.run([a])
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e9


def save_gemm_model(n: int, prefix: str) -> None:
    """Saves the one-layer model y = x W (x: [n, n], no bias) as a Paddle
    inference model at `prefix` (the format this process saves: legacy
    when FLAGS_enable_pir_api=0)."""
    import paddle

    was_dynamic = paddle.in_dynamic_mode()
    paddle.enable_static()
    main, start = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, start):
        x = paddle.static.data("x", [n, n], "float32")
        y = paddle.static.nn.fc(x, n, bias_attr=False)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(start)
    paddle.static.save_inference_model(prefix, [x], [y], exe, program=main)
    if was_dynamic:
        paddle.disable_static()


def gemm_gflops(threads: int, precision: str = "float32", n: int = 4096,
                reps: int = 3) -> float:
    """The machine's GEMM rate as oneDNN reaches it now: a one-layer model
    (y = x W, n x n x n) run by Tiller in `precision` on `threads` threads,
    best of `reps` runs. In bfloat16 it includes casting x (n^2 elements
    against 2n^3 flops). Benchmarks print their rates against this figure,
    measured in the same run (the project's machines differ)."""
    import tempfile

    from models import export

    with tempfile.TemporaryDirectory() as d:
        save_gemm_model(n, f"{d}/gemm")
        model_file, params_file = export.resolve_model(f"{d}/gemm")
        predictor = tiller_predictor(model_file, params_file, threads, precision)
    return _gemm_rate(predictor, n, reps)


_INT8_GEMM_MODEL = r"""
import sys, numpy as np, paddle
from paddle.static.quantization import PostTrainingQuantization
n, d = int(sys.argv[1]), sys.argv[2]
sys.path.insert(0, sys.argv[3])
import common
common.save_gemm_model(n, f"{d}/fp32/model")
paddle.enable_static()
exe = paddle.static.Executor(paddle.CPUPlace())
a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
ptq = PostTrainingQuantization(
    executor=exe, model_dir=f"{d}/fp32", model_filename="model.pdmodel",
    params_filename="model.pdiparams", data_loader=lambda: iter([{"x": a}]), batch_nums=1,
    algo="abs_max", weight_quantize_type="channel_wise_abs_max", onnx_format=True)
ptq.quantize()
ptq.save_quantized_model(f"{d}/int8", model_filename="model.pdmodel",
                         params_filename="model.pdiparams")
"""


def int8_gemm_gops(threads: int, n: int = 4096, reps: int = 3) -> float:
    """The machine's int8 GEMM rate as Tiller reaches it now: the one-layer
    model of gemm_gflops quantized by Paddle's post-training quantization
    (in a child process: Paddle quantizes legacy programs only), run by
    Tiller (int8 x int8 -> int32 on oneDNN, quantizing x: n^2 elements
    against 2n^3 operations), best of `reps` runs. Giga-operations/s."""
    import os
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, FLAGS_enable_pir_api="0", GLOG_minloglevel="2")
        r = subprocess.run([sys.executable, "-c", _INT8_GEMM_MODEL, str(n), d,
                            os.path.dirname(os.path.abspath(__file__))], env=env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"int8 GEMM model: {r.stderr.strip()[-400:]}")
        predictor = tiller_predictor(f"{d}/int8/model.pdmodel", f"{d}/int8/model.pdiparams",
                                     threads)
    return _gemm_rate(predictor, n, reps)


def time_tiller(predictor, inputs: dict, warmup: int, iters: int) -> tuple[float, list]:
    """Median ms of feed + run + fetch, and the outputs of the last run."""
    names = predictor.get_input_names()
    arrays = [np.ascontiguousarray(inputs[n]) for n in names]
    outs = predictor.run(arrays)
    times = []
    for i in range(warmup + iters):
        t0 = time.perf_counter()
        outs = predictor.run(arrays)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), outs


def time_paddle(model_file: str, inputs: dict, threads: int, warmup: int, iters: int,
                bf16: bool = False):
    """Median ms of Paddle Inference (its CPU defaults: IR optimization and
    oneDNN on; bf16: its enable_mkldnn_bfloat16 path) and the outputs of its
    last run, in output order."""
    from models import export

    predictor = export.create_predictor(model_file, threads=threads, bf16=bf16)
    times = []
    outs = None
    for i in range(warmup + iters + 1):
        t0 = time.perf_counter()
        export._feed(predictor, inputs)
        predictor.run()
        outs = export._fetch(predictor)
        if i > warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), list(outs.values())


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0


def threads_default() -> int:
    return int(os.environ.get("TILLER_BENCH_THREADS", str(os.cpu_count() or 1)))
