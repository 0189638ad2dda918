"""Inference benchmark: Tiller vs Paddle Inference (and ONNX Runtime where
paddle2onnx converts the model) on the same exported model, same inputs,
same process, same thread count. Prints median latency, the ratio to each
peer and, for BERT, achieved GFLOP/s and % of the machine's fp32 GEMM rate
measured in the same run (common.gemm_gflops); the CPU and its ISA first.

    .venv/bin/python bench/bench_inference.py [--models bert-base,resnet50] [--batches 1,4]
    .venv/bin/python bench/bench_inference.py --bf16 [--models bert-base,ernie-3.0-base]

--bf16 times, in the same run, Tiller in float32 and in bfloat16
(Config.set_precision) and Paddle Inference's own bfloat16 path
(enable_mkldnn_bfloat16), and prints Tiller's bf16 speed-up over its fp32,
its ratio to Paddle's bf16, how far bf16 outputs are from fp32's (Tiller's
from Tiller's, and Paddle's bf16 from Paddle's own fp32, for reference),
and the bf16 rate against the machine's bf16 GEMM rate measured in the run
(a 4096^3 bf16 matmul through oneDNN, as Tiller calls it: the ceiling a
GEMM-bound model can reach).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import common
import numpy as np
from models import export


def onnx_session(model_dir: Path, threads: int):
    """An ONNX Runtime session on the paddle2onnx conversion, or a reason."""
    try:
        import onnxruntime as ort
        import paddle2onnx
    except ImportError as e:
        return None, f"not installed ({e})"
    model_file, params_file = export.resolve_model(model_dir)
    onnx_path = model_dir / "model.onnx"
    try:
        if not onnx_path.exists():
            paddle2onnx.export(model_file, params_file, str(onnx_path), opset_version=13)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        return ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"]), ""
    except Exception as e:  # conversion or load failure: report, do not hide
        return None, f"paddle2onnx/onnxruntime failed: {str(e).splitlines()[0][:120]}"


def time_onnx(sess, inputs, warmup, iters):
    feed = {i.name: inputs[i.name] for i in sess.get_inputs()}
    times = []
    for k in range(warmup + iters):
        t0 = time.perf_counter()
        sess.run(None, feed)
        if k >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def exported(preset: str, args):
    """The preset's model in args.format under args.out, exported on first
    use: (directory, model file, parameter file)."""
    model_dir = Path(args.out) / f"{preset}-{args.format}"
    if not (model_dir / "model.pdiparams").exists():
        print(f"exporting {preset} ...", flush=True)
        export.export(preset, model_dir, args.format)
    return (model_dir, *export.resolve_model(model_dir))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="bert-base,ernie-3.0-base,resnet50")
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=common.threads_default())
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--format", default="pir", choices=["pir", "legacy"])
    ap.add_argument("--out", default=str(common.REPO / "build" / "bench"))
    ap.add_argument("--bf16", action="store_true",
                    help="Tiller fp32 vs Tiller bf16 vs Paddle Inference bf16")
    args = ap.parse_args()
    if args.bf16:
        return main_bf16(args)

    print(f"CPU: {common.cpu_description()}")
    peak = common.gemm_gflops(args.threads)
    print(f"machine fp32 GEMM rate measured now (4096^3 matmul via oneDNN, {args.threads} "
          f"threads): {peak:.0f} GFLOP/s")
    rows = []
    for preset in args.models.split(","):
        model_dir, model_file, params_file = exported(preset, args)
        predictor = common.tiller_predictor(model_file, params_file, args.threads)
        sess, why = onnx_session(model_dir, args.threads)
        for batch in map(int, args.batches.split(",")):
            inputs = export.make_inputs(preset, batch=batch, seq_len=args.seq_len, seed=0)
            print(f"{preset} batch {batch}: Tiller ...", flush=True)
            t_ms, t_out = common.time_tiller(predictor, inputs, 2, args.iters)
            print(f"{preset} batch {batch}: Paddle Inference ...", flush=True)
            p_ms, p_out = common.time_paddle(model_file, inputs, args.threads, 2, args.iters)
            diff = max(common.max_abs_diff(a, b) for a, b in zip(t_out, p_out))
            o_ms = None
            if sess is not None:
                print(f"{preset} batch {batch}: ONNX Runtime ...", flush=True)
                o_ms = time_onnx(sess, inputs, 2, args.iters)
            gflops = ""
            if preset.startswith(("bert-base", "ernie-3.0-base")):
                g = common.bert_gflop(12, 768, 3072, args.seq_len, batch) / (t_ms / 1e3)
                gflops = f"{g:.0f} GFLOP/s ({100 * g / peak:.0f}% of the GEMM rate)"
            rows.append((preset, batch, t_ms, p_ms, o_ms, diff, gflops, why))

    print(f"\nthreads {args.threads}, seq_len {args.seq_len}, median of {args.iters} runs, fp32")
    print(f"{'model':<16}{'batch':>6}{'tiller ms':>11}{'paddle ms':>11}{'ort ms':>9}"
          f"{'vs paddle':>11}{'vs ort':>8}{'max|diff|':>11}  rate")
    for preset, batch, t, p, o, diff, gflops, why in rows:
        o_s = f"{o:9.2f}" if o else f"{'-':>9}"
        r_o = f"{o / t:7.2f}x" if o else f"{'-':>8}"
        print(f"{preset:<16}{batch:>6}{t:11.2f}{p:11.2f}{o_s}{p / t:10.2f}x{r_o}{diff:11.1e}  {gflops}")
    for preset, *_, why in rows:
        if why:
            print(f"note: ONNX Runtime skipped for {preset}: {why}")
            break
    return 0


def main_bf16(args) -> int:
    print(f"CPU: {common.cpu_description()}")
    peak = common.gemm_gflops(args.threads, "bfloat16")
    print(f"machine bf16 GEMM rate measured now (4096^3 matmul via oneDNN, {args.threads} threads): "
          f"{peak:.0f} GFLOP/s")
    rows = []
    for preset in args.models.split(","):
        _, model_file, params_file = exported(preset, args)
        fp32 = common.tiller_predictor(model_file, params_file, args.threads)
        bf16 = common.tiller_predictor(model_file, params_file, args.threads, "bfloat16")
        for batch in map(int, args.batches.split(",")):
            inputs = export.make_inputs(preset, batch=batch, seq_len=args.seq_len, seed=0)
            print(f"{preset} batch {batch}: Tiller fp32, Tiller bf16, Paddle bf16 ...", flush=True)
            # Interleaved twice, best of the two medians: load on a shared
            # machine hits all three alike.
            t32, tb, pb = [], [], []
            for _ in range(2):
                ms, out32 = common.time_tiller(fp32, inputs, 2, args.iters)
                t32.append(ms)
                ms, outb = common.time_tiller(bf16, inputs, 2, args.iters)
                tb.append(ms)
                ms, _ = common.time_paddle(model_file, inputs, args.threads, 2, args.iters,
                                           bf16=True)
                pb.append(ms)
            diff = max(common.max_abs_diff(a, b) for a, b in zip(outb, out32))
            # Paddle's bf16 against Paddle's fp32 on the same inputs: how far
            # the peer's half precision strays, the yardstick for `diff`.
            _, paddle_b = common.time_paddle(model_file, inputs, args.threads, 0, 1, bf16=True)
            _, paddle_32 = common.time_paddle(model_file, inputs, args.threads, 0, 1)
            pdiff = max(common.max_abs_diff(a, b) for a, b in zip(paddle_b, paddle_32))
            gflops = ""
            if preset.startswith(("bert-base", "ernie-3.0-base")):
                g = common.bert_gflop(12, 768, 3072, args.seq_len, batch) / (min(tb) / 1e3)
                gflops = f"{g:.0f} GFLOP/s ({100 * g / peak:.0f}%)"
            rows.append((preset, batch, min(t32), min(tb), min(pb), diff, pdiff, gflops))
    print(f"\nthreads {args.threads}, seq_len {args.seq_len}, best of 2 interleaved medians of "
          f"{args.iters} runs")
    print(f"{'model':<16}{'batch':>6}{'tiller fp32':>13}{'tiller bf16':>13}{'paddle bf16':>13}"
          f"{'bf16/fp32':>11}{'vs paddle bf16':>16}{'max|bf16-fp32|':>16}{'paddle own':>12}"
          f"  bf16 rate (% of the GEMM rate)")
    for preset, batch, t32, tb, pb, diff, pdiff, gflops in rows:
        print(f"{preset:<16}{batch:>6}{t32:13.2f}{tb:13.2f}{pb:13.2f}{t32 / tb:10.2f}x"
              f"{tb / pb:15.2f}x{diff:16.1e}{pdiff:12.1e}  {gflops}")
    print("max|bf16-fp32|: Tiller bf16 vs Tiller fp32; paddle own: Paddle Inference bf16 vs "
          "Paddle Inference fp32, same inputs")
    print("targets (issue 10): bf16 >= 1.6x fp32 with AVX512_BF16, >= 3x with AMX; "
          "<= 0.8x Paddle Inference's bf16 latency; outputs within 2e-2 of fp32")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
