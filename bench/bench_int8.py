"""int8 benchmark (issue 12): BERT-Base and ResNet-50 quantized by Paddle's own
post-training quantization (models/quantize.py), run by Tiller and by Paddle
Inference (oneDNN int8), and quantized by Tiller itself (`tiller quantize`,
tiller-ptq), against ONNX Runtime's dynamic int8 quantization of the same
float32 model, all in one process, same inputs, 2 threads.

    .venv/bin/python bench/bench_int8.py [--models bert-base,resnet50] [--samples 1000]

Speed: batch 1 and 8, warm-up then the median of interleaved rounds
(bench_zoo's: each engine pauses 0.3 s, runs once apart, then twice timed);
ratio = Tiller int8 (on Paddle's quantization) / ONNX Runtime int8, issue 12's
bound <= 0.90. Tiller on its own quantization (tiller-ptq) and Tiller's and
ONNX Runtime's float32 times are printed beside them.

Accuracy, on `--samples` generated inputs (batches of 8): each int8 engine
against Paddle Inference's float32 result on the float32 model: the largest
absolute difference over every output, and the agreement of the top-1
(argmax over the last dim) of the last output: ResNet-50's class logits;
for BERT-Base the pooled output, a proxy with no labels behind it. Tiller is
within Paddle's own int8 accuracy when its figures are no worse than Paddle
int8's. Tiller int8 is also compared with Paddle Inference run on the same
quantized model without oneDNN (which computes the quantize/dequantize
pairs in float32 as written: the model's exact meaning).

Before the tables: the CPU and its ISA, and the fp32 and int8 GEMM rates
measured now.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

import common
import numpy as np
from bench_inference import onnx_session
from bench_zoo import Engine, convert_to_onnx, ort_engine, tiller_engine, time_rounds
from models import export
from models.quantize import quantize

PRESETS = {"bert-base": {}, "resnet50": {}}
BATCH = 8  # accuracy batches


TILLER = Path(os.environ.get("TILLER_BUILD_DIR", common.REPO / "build")) / "bin" / "tiller"


def prepare(name: str, out: Path, seq_len: int) -> tuple[Path, Path, Path]:
    """(float32 legacy export, its Paddle int8 quantization, Tiller's), made
    once; both quantizations calibrate on 8 batches of 4 generated inputs."""
    fp32, int8, ptq = out / f"{name}-fp32", out / f"{name}-int8", out / f"{name}-tiller-ptq"
    if not (fp32 / "model.pdmodel").exists():
        print(f"{name}: exporting (legacy format) ...", flush=True)
        export.export(name, fp32, "legacy")
    if not (int8 / "model.pdmodel").exists():
        print(f"{name}: Paddle post-training quantization ...", flush=True)
        exp = export._paths(fp32, "legacy", name, 0.0)
        quantize(exp, int8, batches=8, batch=4, seq_len=seq_len)
    if not (ptq / "model.pdmodel").exists():
        print(f"{name}: tiller quantize ...", flush=True)
        calib = out / f"{name}-calibration"
        for i in range(8):
            (calib / str(i)).mkdir(parents=True, exist_ok=True)
            for k, v in inputs_for(name, 4, seq_len, seed=50_000 + i).items():
                np.save(calib / str(i) / f"{k}.npy", v)
        subprocess.run([str(TILLER), "quantize", str(fp32 / "model.pdmodel"), "--calibrate",
                        str(calib), "--output-dir", str(ptq)], check=True, stdout=subprocess.DEVNULL)
    return fp32, int8, ptq


def ort_int8_session(fp32: Path, threads: int):
    """ONNX Runtime on quantize_dynamic (int8 weights, per tensor; uint8
    activations quantized at run time) of the float32 conversion, or a
    reason."""
    why = convert_to_onnx(fp32)
    if why:
        return None, why
    src, dst = fp32 / "model.onnx", fp32 / "model.int8.onnx"
    try:
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic

        if not dst.exists():
            quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        return ort.InferenceSession(str(dst), opts, providers=["CPUExecutionProvider"]), ""
    except Exception as e:
        return None, f"quantize_dynamic/onnxruntime failed: {str(e).splitlines()[0][:160]}"


def paddle_engine(model_dir: Path, threads: int, label: str, mkldnn: bool,
                  int8: bool = False) -> Engine:
    import paddle.inference as pi

    model_file, params_file = export.resolve_model(model_dir)
    config = pi.Config(model_file, params_file)
    config.disable_gpu()
    config.set_cpu_math_library_num_threads(threads)
    config.switch_ir_optim(True)
    if mkldnn:
        config.enable_mkldnn()
        if int8:
            config.enable_mkldnn_int8()
    else:
        config.disable_mkldnn()
    config.disable_glog_info()
    predictor = pi.create_predictor(config)

    def run(inputs):
        export._feed(predictor, inputs)
        predictor.run()
        return list(export._fetch(predictor).values())
    return Engine(label, run)


def inputs_for(name: str, batch: int, seq_len: int, seed: int) -> dict:
    return export.make_inputs(name, batch=batch, seq_len=seq_len, seed=seed)


def accuracy(engines: list, reference: Engine, name: str, samples: int, seq_len: int) -> dict:
    """{label: (max abs diff vs reference, top-1 agreement)} over `samples`
    generated inputs."""
    worst = {e.label: 0.0 for e in engines}
    agree = {e.label: 0 for e in engines}
    total = 0
    for k in range(0, samples, BATCH):
        n = min(BATCH, samples - k)
        inputs = inputs_for(name, n, seq_len, seed=100_000 + k)
        ref = reference.run(inputs)
        top = np.argmax(ref[-1].reshape(n, -1), axis=-1)
        for e in engines:
            outs = e.run(inputs)
            worst[e.label] = max(worst[e.label], max(
                float(np.max(np.abs(np.asarray(a, np.float64) - b))) for a, b in zip(outs, ref)))
            agree[e.label] += int(np.sum(np.argmax(np.asarray(outs[-1]).reshape(n, -1),
                                                   axis=-1) == top))
        total += n
    return {label: (worst[label], agree[label] / total) for label in worst}


LABELS = ["tiller-int8", "tiller-ptq", "paddle-int8", "ort-int8", "tiller-fp32", "ort-fp32"]


def report(rows: list, acc: dict, threads: int) -> tuple[bool, bool]:
    """Prints the speed and accuracy tables of what was measured so far;
    returns (every ratio within 0.90, Tiller within Paddle int8's accuracy
    everywhere)."""
    print(f"{threads} threads, median ms of interleaved rounds "
          f"(ratio = tiller-int8 / ort-int8; issue 12's bound <= 0.90)")
    print(f"{'model':<12}{'batch':>6}" + "".join(f"{x:>13}" for x in LABELS) + f"{'ratio':>8}")
    met = True
    for name, batch, med in rows:
        cells = "".join(f"{med[x]:13.2f}" if x in med else f"{'-':>13}" for x in LABELS)
        ratio = med["tiller-int8"] / med["ort-int8"] if "ort-int8" in med else float("nan")
        met = met and ratio <= 0.90
        print(f"{name:<12}{batch:>6}{cells}{ratio:8.2f}")
    print(f"Tiller int8 within 0.90 of ONNX Runtime int8 everywhere: {'yes' if met else 'NO'}")
    print("accuracy: max abs diff vs Paddle fp32 (oneDNN), top-1 agreement of the last output")
    within = True
    for name, res in acc.items():
        for label, (diff, top1) in res.items():
            print(f"{name:<12}{label:<28}max abs {diff:9.4f}   top-1 {100 * top1:6.2f}%")
        t, p = res["tiller-int8"], res["paddle-int8"]
        ok = t[0] <= p[0] and t[1] >= p[1]
        within = within and ok
        print(f"{name:<12}Tiller int8 within Paddle int8's accuracy: {'yes' if ok else 'NO'}")
    return met, within


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="bert-base,resnet50")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5, help="rounds at batch 1 (batch 8: half)")
    ap.add_argument("--samples", type=int, default=1000, help="generated inputs for accuracy")
    ap.add_argument("--out", default=str(common.REPO / "build" / "bench" / "int8"))
    args = ap.parse_args()
    out = Path(args.out)

    print(f"CPU: {common.cpu_description()}")
    fp32_rate = common.gemm_gflops(args.threads)
    int8_rate = common.int8_gemm_gops(args.threads)
    print(f"machine GEMM rates measured now (4096^3, {args.threads} threads, Tiller on oneDNN): "
          f"fp32 {fp32_rate:.0f} GFLOP/s, int8 {int8_rate:.0f} GOP/s", flush=True)
    if "avx512_vnni" not in common.cpu_model_and_flags()[1]:
        print("no AVX512_VNNI: oneDNN's int8 is not exact here, so Tiller computes quantized "
              "pairs in float32 (the 'int8' rate above and tiller-int8 below are that path)",
              flush=True)

    rows, acc, notes = [], {}, []
    for name in args.models.split(","):
        fp32, int8, ptq = prepare(name, out, args.seq_len)
        engines = [tiller_engine(int8, args.threads), tiller_engine(fp32, args.threads),
                   paddle_engine(int8, args.threads, "paddle-int8", True, True),
                   tiller_engine(ptq, args.threads)]
        engines[0].label, engines[1].label, engines[3].label = ("tiller-int8", "tiller-fp32",
                                                                "tiller-ptq")
        sess, why = ort_int8_session(fp32, args.threads)
        if sess is not None:
            engines.append(ort_engine(sess, "ort-int8"))
        else:
            notes.append(f"{name}: ONNX Runtime int8 skipped: {why}")
        sess32, why = onnx_session(fp32, args.threads)
        if sess32 is not None:
            engines.append(ort_engine(sess32, "ort-fp32"))
        for batch in map(int, args.batches.split(",")):
            print(f"{name} batch {batch} ...", flush=True)
            time_rounds(engines, inputs_for(name, batch, args.seq_len, seed=batch),
                        args.rounds if batch == 1 else max(3, args.rounds // 2))
            rows.append((name, batch, {e.label: statistics.median(e.times) for e in engines}))
            print("  " + ", ".join(f"{e.label} {statistics.median(e.times):.1f} ms"
                                   for e in engines), flush=True)
        print(f"{name}: accuracy on {args.samples} inputs ...", flush=True)
        reference = paddle_engine(fp32, args.threads, "paddle-fp32", True)
        qdq = paddle_engine(int8, args.threads, "paddle-qdq", False)
        int8_engines = [e for e in engines
                        if e.label in ("tiller-int8", "tiller-ptq", "paddle-int8", "ort-int8")]
        acc[name] = accuracy(int8_engines, reference, name, args.samples, args.seq_len)
        acc[name]["tiller-int8 vs paddle-qdq"] = accuracy(
            [engines[0]], qdq, name, min(args.samples, 64), args.seq_len)["tiller-int8"]
        report([r for r in rows if r[0] == name], {name: acc[name]}, args.threads)
        sys.stdout.flush()

    print("\nsummary")
    met, within = report(rows, acc, args.threads)
    for n in notes:
        print(f"note: {n}")
    return 0 if within and met else 1


if __name__ == "__main__":
    sys.exit(main())
