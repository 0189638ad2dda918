"""Serving benchmark (issue 46): latency as a server sees it. Each engine
(Tiller, ONNX Runtime, Paddle Inference) runs in a process of its own and
serves batch-1 requests that arrive at random (Poisson arrivals, the same
arrival times for every engine) at several loads, from mostly idle to near
saturation, one request at a time as a single-worker server does: a request
that arrives while the engine is busy waits, and its latency counts the
wait. Between requests the engine idles as a lightly loaded server does,
which is what exposes thread wake-up costs that back-to-back timing hides.

    .venv/bin/python bench/bench_serving.py [--models bert-base,resnet50,mobilenet_v3_large]
        [--engines tiller,ort,paddle] [--loads 0.05,0.3,0.6,0.9] [--requests 200]
        [--seconds 30] [--cold-runs 5] [--spread-runs 10] [--threads 2]

A load is the fraction of the fastest engine's capacity: arrivals at
load / (its median back-to-back latency) per second, so at load 0.9 the
fastest engine is busy 90% of the time and a slower one may saturate.
Each (engine, load) serves --requests requests or as many as arrive in
--seconds, whichever is fewer, but at least --min-requests (the count is
printed: a p99 of fewer than 100 requests is their maximum). Printed per
model and load: p50, p90, p99 and max latency (ms), throughput
(requests/s), the median time of the run call alone (without the wait in
the queue: whether an engine runs slower under load than back to back),
and Tiller's p50 and p99 against the best peer's (issue 46's bounds: p99 <= the best peer's, p50 <=
0.9x). Then the cold start of each engine, process start to first result
(median of --cold-runs fresh processes, warm page cache), its peak RSS,
and the spread of Tiller's back-to-back median latency across
--spread-runs fresh processes (max / min; issue 46's bound 1.10). Prints
the CPU, its ISA and the machine's fp32 GEMM rate measured in the run
first; where Tiller misses the p50 bound on a model whose FLOPs are known,
the rate that bound needs and the rate Tiller's runs reached, both as a
share of it. Needs an idle machine.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

ENGINES = ("tiller", "ort", "paddle")
# Forward GFLOP of one batch-1 request (2 per multiply-add): ResNet-50 4.09
# G multiply-adds, MobileNetV3-Large 0.217 G (torchvision's counts for the
# models paddle.vision builds alike); BERT-Base at seq 128 from its shapes.
GFLOP = {"resnet50": 8.18, "mobilenet_v3_large": 0.434}
WARMUP = 5  # runs before timing (the first compiles)
CALIBRATE = 20  # back-to-back runs whose median is the service time


def make_engine(engine: str, model_file: str, params_file: str, onnx_file: str, threads: int):
    """run(feeds) for the engine, importing only what that engine needs (the
    cold start is the engine's own: not this benchmark's Paddle imports)."""
    if engine == "tiller":
        sys.path.insert(0, str(BENCH.parent / "python"))
        import tiller.inference as ti

        config = ti.Config(model_file, params_file)
        config.set_cpu_math_library_num_threads(threads)
        predictor = ti.create_predictor(config)
        names = predictor.get_input_names()
        return lambda feeds: predictor.run([feeds[n] for n in names])
    if engine == "ort":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(onnx_file, opts, providers=["CPUExecutionProvider"])
        return lambda feeds: sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})
    if engine == "paddle":  # Paddle Inference as bench_zoo runs it (oneDNN, IR optimization)
        import paddle.inference as pi

        config = pi.Config(model_file, params_file)
        config.disable_gpu()
        config.set_cpu_math_library_num_threads(threads)
        config.switch_ir_optim(True)
        config.disable_glog_info()
        predictor = pi.create_predictor(config)

        def run(feeds):
            for name in predictor.get_input_names():
                predictor.get_input_handle(name).copy_from_cpu(feeds[name])
            predictor.run()
            return [predictor.get_output_handle(n).copy_to_cpu()
                    for n in predictor.get_output_names()]
        return run
    raise ValueError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")


def peak_rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child(args) -> int:
    """One engine in this fresh process: the cold start, the back-to-back
    service time, then (--rates) each load's open-loop run."""
    import numpy as np

    run = make_engine(args.engine, args.model_file, args.params_file, args.onnx_file,
                      args.threads)
    inputs = dict(np.load(args.inputs))
    run(inputs)
    cold_s = time.time() - args.spawned_at
    for _ in range(WARMUP):
        run(inputs)
    times = []
    for _ in range(CALIBRATE):
        t0 = time.perf_counter()
        run(inputs)
        times.append((time.perf_counter() - t0) * 1e3)
    out = {"cold_s": cold_s, "service_ms": statistics.median(times), "rss_mb": peak_rss_mb(),
           "loads": []}
    rng = np.random.default_rng(args.seed)
    for rate in (float(r) for r in args.rates.split(",") if r):
        n = max(args.min_requests, min(args.requests, int(rate * args.seconds)))
        arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
        time.sleep(1.0)  # idle first, as a server between bursts
        latencies, services = [], []
        t0 = time.perf_counter()
        for at in arrivals:
            wait = t0 + at - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            started = time.perf_counter()
            run(inputs)
            done = time.perf_counter()
            latencies.append((done - (t0 + at)) * 1e3)
            services.append((done - started) * 1e3)
        span = time.perf_counter() - t0
        q = np.percentile(latencies, [50, 90, 99])
        out["loads"].append({"rate": rate, "n": n, "p50": q[0], "p90": q[1], "p99": q[2],
                             "max": max(latencies), "throughput": n / span,
                             "service_p50": float(np.percentile(services, 50))})
    print(json.dumps(out))
    return 0


def spawn(model: str, engine: str, files: dict, args, rates: list[float]) -> dict:
    cmd = [sys.executable, __file__, "--child", "--engine", engine,
           *(f"--{k.replace('_', '-')}={v}" for k, v in files.items()), "--threads", str(args.threads), "--requests",
           str(args.requests), "--min-requests", str(args.min_requests), "--seconds",
           str(args.seconds), "--seed", str(args.seed),
           "--rates", ",".join(f"{r:.6g}" for r in rates), "--spawned-at", repr(time.time())]
    env = dict(os.environ, GLOG_minloglevel="2")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{engine} on {model} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="bert-base,resnet50,mobilenet_v3_large")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--loads", default="0.05,0.3,0.6,0.9")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--min-requests", type=int, default=40,
                    help="requests per load however long they take to arrive (a median of "
                         "a dozen requests at the lowest load was no figure)")
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--spread-runs", type=int, default=10,
                    help="fresh Tiller processes whose back-to-back medians give the spread "
                         "(the cold-start runs count among them)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    for name in ("model-file", "params-file", "onnx-file", "inputs"):
        ap.add_argument(f"--{name}", default="", help=argparse.SUPPRESS)
    ap.add_argument("--rates", default="", help=argparse.SUPPRESS)
    ap.add_argument("--spawned-at", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)

    import bench_zoo as Z
    import common
    import numpy as np
    from models import export

    out = common.REPO / "build" / "bench" / "zoo"
    print(f"CPU: {common.cpu_description()}", flush=True)
    GFLOP["bert-base"] = common.bert_gflop(12, 768, 3072, 128, 1)
    gemm_rate = common.gemm_gflops(args.threads)
    print(f"machine fp32 GEMM rate measured now (4096^3 matmul via oneDNN, {args.threads} "
          f"threads): {gemm_rate:.0f} GFLOP/s", flush=True)
    engines = [e for e in args.engines.split(",") if e]
    loads = [float(x) for x in args.loads.split(",")]
    failed = False
    for model in args.models.split(","):
        d = Z.exported(model, out)
        model_file, params_file = export.resolve_model(d)
        files = {"model_file": model_file, "params_file": params_file, "onnx_file": "",
                 "inputs": str(d / "serving_inputs.npz")}
        np.savez(files["inputs"], **Z.inputs_for(model, 1, 128))
        engines_here = list(engines)
        if "ort" in engines:
            why = Z.convert_to_onnx(d)
            if not why and model in Z.TRANSFORMERS:  # ORT at its best: its transformer fusions
                sess, why = Z.ort_transformer_session(d, model, args.threads)
                files["onnx_file"] = str(d / "model.ort-opt.onnx")
                del sess
            elif not why:
                files["onnx_file"] = str(d / "model.onnx")
            if why:
                print(f"{model}: ONNX Runtime skipped: {why}")
                engines_here.remove("ort")
        # Fresh processes: the cold start and the service time of each.
        cold = {e: [spawn(model, e, files, args, []) for _ in range(max(1, args.cold_runs))]
                for e in engines_here}
        spread = list(cold.get("tiller", []))
        if spread:
            spread += [spawn(model, "tiller", files, args, [])
                       for _ in range(max(0, args.spread_runs - len(spread)))]
        service = {e: statistics.median(r["service_ms"] for r in runs) for e, runs in cold.items()}
        fastest = min(service.values())
        rates = [load / (fastest / 1e3) for load in loads]
        print(f"\n{model}, batch 1, {args.threads} threads: back-to-back median "
              + ", ".join(f"{e} {ms:.2f} ms" for e, ms in service.items())
              + f"; loads as a fraction of {fastest:.2f} ms", flush=True)
        served = {}
        for e in engines_here:
            print(f"  serving with {e} ...", flush=True)
            served[e] = spawn(model, e, files, args, rates)["loads"]
        print(f"  {'load':>5} {'req/s':>7} {'engine':<8}{'n':>5}{'p50':>9}{'p90':>9}{'p99':>9}"
              f"{'max':>9}{'thr/s':>8}{'run p50':>9}")
        for i, (load, rate) in enumerate(zip(loads, rates)):
            for e in engines_here:
                r = served[e][i]
                print(f"  {load:5.2f} {rate:7.2f} {e:<8}{r['n']:5d}{r['p50']:9.2f}{r['p90']:9.2f}"
                      f"{r['p99']:9.2f}{r['max']:9.2f}{r['throughput']:8.2f}"
                      f"{r['service_p50']:9.2f}")
            peers = [e for e in engines_here if e != "tiller"]
            if "tiller" in served and peers:
                t = served["tiller"][i]
                p50 = min(served[e][i]["p50"] for e in peers)
                p99 = min(served[e][i]["p99"] for e in peers)
                ok = t["p99"] <= p99 and t["p50"] <= 0.9 * p50
                failed = failed or not ok
                print(f"  {'':13} tiller/best peer: p50 {t['p50'] / p50:.3f}x (bound 0.9), "
                      f"p99 {t['p99'] / p99:.3f}x (bound 1.0){'' if ok else '  MISSED'}")
                if not ok and model in GFLOP:
                    # The guide's rule for a bound beyond the machine: met at
                    # >= 95% of the rate measured in the run. A p50 of 0.9x
                    # the peer's leaves the run itself at most that, queue
                    # wait included.
                    need = GFLOP[model] / (0.9 * p50 / 1e3)
                    got = GFLOP[model] / (t["service_p50"] / 1e3)
                    print(f"  {'':13} the p50 bound needs runs at {need:.0f} GFLOP/s "
                          f"({100 * need / gemm_rate:.0f}% of the GEMM rate); Tiller's runs: "
                          f"{got:.0f} GFLOP/s ({100 * got / gemm_rate:.0f}%)")
        print(f"  cold start (process start to first result, median of {args.cold_runs}), peak RSS:")
        for e, runs in cold.items():
            print(f"    {e:<8}{statistics.median(r['cold_s'] for r in runs):8.2f} s"
                  f"{statistics.median(r['rss_mb'] for r in runs):9.0f} MB")
        if len(spread) > 1:
            meds = [r["service_ms"] for r in spread]
            print(f"  tiller's back-to-back median across {len(meds)} fresh processes: "
                  f"{min(meds):.2f} to {max(meds):.2f} ms (max/min {max(meds) / min(meds):.3f}, "
                  "bound 1.10)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
