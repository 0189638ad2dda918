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
        [--seconds 30] [--rounds 4] [--idle 1.0] [--cold-runs 5] [--spread-runs 10]
        [--threads 2]

A load is the fraction of the fastest engine's capacity: arrivals at
load / (its median back-to-back latency) per second, so at load 0.9 the
fastest engine is busy 90% of the time and a slower one may saturate.
Each load's arrivals are --requests requests or as many as arrive in
--seconds, whichever is fewer, but at least --min-requests (the count is
printed: a p99 of fewer than 100 requests is their maximum). They are cut
into --rounds chunks that the engines' serving processes (one per engine,
kept for every load) take in turn, the order rotated each round, each
after --idle seconds of idling: the speed of these shared VMs drifts by
tens of percent over minutes, and an engine served whole before the next
was compared with the machine of another moment. A queue does not carry
over from one chunk to the next. Printed per model and load: p50, p90, p99
and max latency (ms), throughput (requests/s), the median time of the run
call alone (without the wait in the queue: whether an engine runs slower
under load than back to back), and Tiller's p50 and p99 against the best
peer's (issue 46's bounds: p99 <= the best peer's, p50 <= 0.9x). Then the
cold start of each engine, process start to first result (median of
--cold-runs fresh processes, the engines in turn, warm page cache), its
peak RSS, and the spread of the back-to-back median latency across
--spread-runs fresh processes (max / min; issue 46's bound 1.10) of Tiller
and, in turn with it, of the fastest peer: the peer's spread is the
machine's own variation over the same minutes. Prints the CPU, its ISA and
the machine's fp32 GEMM rate measured in the run first; where Tiller
misses the p50 bound on a model whose FLOPs are known, the rate that bound
needs and the rate Tiller's runs reached, both as a share of it. Needs an
idle machine.
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


def serve(run, inputs, arrivals, idle_s: float) -> dict:
    """Open-loop serving of requests arriving `arrivals` seconds after the
    start (after `idle_s` of idling, as a server between bursts), one at a
    time: a request that arrives while the engine is busy waits."""
    time.sleep(idle_s)
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
    return {"latencies": latencies, "services": services, "span": time.perf_counter() - t0}


def child(args) -> int:
    """One engine in this fresh process: the cold start and the back-to-back
    service time (a JSON line); then, with --serve, a JSON line per request
    chunk it reads from stdin ({"arrivals": [...], "idle": s}) until EOF."""
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
    print(json.dumps({"cold_s": cold_s, "service_ms": statistics.median(times),
                      "rss_mb": peak_rss_mb()}), flush=True)
    if args.serve:
        for line in sys.stdin:
            chunk = json.loads(line)
            print(json.dumps(serve(run, inputs, chunk["arrivals"], chunk["idle"])), flush=True)
    return 0


def child_command(engine: str, files: dict, args, serve: bool) -> tuple[list[str], dict]:
    cmd = [sys.executable, __file__, "--child", "--engine", engine,
           *(f"--{k.replace('_', '-')}={v}" for k, v in files.items()),
           "--threads", str(args.threads), "--spawned-at", repr(time.time())]
    if serve:
        cmd.append("--serve")
    return cmd, dict(os.environ, GLOG_minloglevel="2")


def spawn(model: str, engine: str, files: dict, args) -> dict:
    """A fresh process of `engine`: its cold start, service time and RSS."""
    cmd, env = child_command(engine, files, args, False)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{engine} on {model} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


class Server:
    """An engine's serving process, kept for every load: it serves the
    request chunks it is sent, one at a time."""

    def __init__(self, model: str, engine: str, files: dict, args):
        self.model, self.engine = model, engine
        cmd, env = child_command(engine, files, args, True)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.ready = self._reply()

    def _reply(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read()
            raise RuntimeError(f"{self.engine} on {self.model} failed:\n{err[-3000:]}")
        return json.loads(line)

    def serve(self, arrivals: list[float], idle_s: float) -> dict:
        self.proc.stdin.write(json.dumps({"arrivals": arrivals, "idle": idle_s}) + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def serve_interleaved(servers: dict, arrivals, rounds: int, idle_s: float) -> dict:
    """Every engine serves the same arrivals, cut into `rounds` chunks taken
    in turn (the engines' order rotated each round), so that a change in the
    machine's speed during the load hits every engine alike; each engine's
    chunks, joined, give its figures."""
    import numpy as np

    bounds = np.linspace(0, len(arrivals), rounds + 1).astype(int)
    names = list(servers)
    got = {e: {"latencies": [], "services": [], "span": 0.0} for e in names}
    for r in range(rounds):
        lo, hi = bounds[r], bounds[r + 1]
        if hi <= lo:
            continue
        start = arrivals[lo - 1] if lo > 0 else 0.0
        chunk = [float(a - start) for a in arrivals[lo:hi]]
        for e in names[r % len(names):] + names[:r % len(names)]:
            res = servers[e].serve(chunk, idle_s)
            for k in ("latencies", "services"):
                got[e][k] += res[k]
            got[e]["span"] += res["span"]
    out = {}
    for e, g in got.items():
        q = np.percentile(g["latencies"], [50, 90, 99])
        out[e] = {"n": len(g["latencies"]), "p50": q[0], "p90": q[1], "p99": q[2],
                  "max": max(g["latencies"]), "throughput": len(g["latencies"]) / g["span"],
                  "service_p50": float(np.percentile(g["services"], 50))}
    return out


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
                    help="fresh processes of Tiller and of the fastest peer, in turn, whose "
                         "back-to-back medians give each one's spread (the cold-start runs "
                         "count among them)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4,
                    help="chunks each load's requests are cut into, served by the engines in "
                         "turn (a queue does not carry over from one chunk to the next)")
    ap.add_argument("--idle", type=float, default=1.0,
                    help="seconds an engine idles before each chunk, as a server between bursts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    for name in ("model-file", "params-file", "onnx-file", "inputs"):
        ap.add_argument(f"--{name}", default="", help=argparse.SUPPRESS)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
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
        # Fresh processes, the engines in turn: the cold start and the
        # service time of each; Tiller's and the fastest peer's spread.
        cold = {e: [] for e in engines_here}
        for _ in range(max(1, args.cold_runs)):
            for e in engines_here:
                cold[e].append(spawn(model, e, files, args))
        service = {e: statistics.median(r["service_ms"] for r in runs) for e, runs in cold.items()}
        peers = [e for e in engines_here if e != "tiller"]
        spread = {}
        if "tiller" in engines_here:
            control = [min(peers, key=service.get)] if peers else []
            spread = {e: [r["service_ms"] for r in cold[e]] for e in ["tiller", *control]}
            while len(spread["tiller"]) < args.spread_runs:
                for e in spread:
                    spread[e].append(spawn(model, e, files, args)["service_ms"])
        fastest = min(service.values())
        rates = [load / (fastest / 1e3) for load in loads]
        print(f"\n{model}, batch 1, {args.threads} threads: back-to-back median "
              + ", ".join(f"{e} {ms:.2f} ms" for e, ms in service.items())
              + f"; loads as a fraction of {fastest:.2f} ms", flush=True)
        servers = {}
        for e in engines_here:
            print(f"  starting {e}'s server ...", flush=True)
            servers[e] = Server(model, e, files, args)
        rng = np.random.default_rng(args.seed)
        served = []
        for load, rate in zip(loads, rates):
            n = max(args.min_requests, min(args.requests, int(rate * args.seconds)))
            arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
            print(f"  load {load:.2f}: {n} requests, {args.rounds} rounds ...", flush=True)
            served.append(serve_interleaved(servers, arrivals, args.rounds, args.idle))
        for srv in servers.values():
            srv.close()
        print(f"  {'load':>5} {'req/s':>7} {'engine':<8}{'n':>5}{'p50':>9}{'p90':>9}{'p99':>9}"
              f"{'max':>9}{'thr/s':>8}{'run p50':>9}")
        for i, (load, rate) in enumerate(zip(loads, rates)):
            for e in engines_here:
                r = served[i][e]
                print(f"  {load:5.2f} {rate:7.2f} {e:<8}{r['n']:5d}{r['p50']:9.2f}{r['p90']:9.2f}"
                      f"{r['p99']:9.2f}{r['max']:9.2f}{r['throughput']:8.2f}"
                      f"{r['service_p50']:9.2f}")
            if "tiller" in served[i] and peers:
                t = served[i]["tiller"]
                p50 = min(served[i][e]["p50"] for e in peers)
                p99 = min(served[i][e]["p99"] for e in peers)
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
        for e, meds in spread.items():
            print(f"  {e}'s back-to-back median across {len(meds)} fresh processes: "
                  f"{min(meds):.2f} to {max(meds):.2f} ms (max/min {max(meds) / min(meds):.3f}"
                  + (", bound 1.10)" if e == "tiller" else
                     ", the fastest peer's: the machine's own variation, for comparison)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
