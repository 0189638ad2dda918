"""Sparse-embedding training benchmark (issue 44): a DLRM-style model
(models/dlrm.py: 26 sparse slots in Criteo's proportions, >= 1 GB of
float32 tables, a 13-feature bottom MLP and a top MLP, sigmoid
cross-entropy) trained with Adagrad, batch 2048, one id per slot:

  paddle        Paddle's CPU executor on the legacy program (is_sparse: its
                table gradients are SelectedRows, updated by its sparse
                Adagrad kernel)
  tiller        Tiller on the same program (row gradients, adagrad_rows)
  tiller-dense  Tiller on the same model with dense tables (sparse=False:
                a table-sized gradient and a dense Adagrad every step), the
                path sparse gradients replace
  torch         PyTorch eager, nn.EmbeddingBag(sparse=True) per slot and
                torch.optim.Adagrad (which takes sparse gradients), in
                .venv-torch (skipped with a note when it is missing;
                scripts/setup_torch.sh makes it)
  tiller-cap1g  Tiller on a device of 1 GB (device_profile cpu:1GB): the
                tables that do not fit stay in host memory and the rows a
                step touches move (compile/plan.h)
  tiller-RxT    Tiller with R data-parallel replicas of T threads each
                (the program is one replica's: batch / R examples), the
                tables replicated (each replica updates all of every table
                from the gathered row gradients)
  tiller-RxT-rows  the same with the tables split by rows over the replicas
                (shard_embedding_rows: each replica holds, looks up and
                updates 1 / R of every table's rows)
  tiller-1x1x2  two tiller-1x1 processes at once, each the whole step on one
                thread, their timed steps started together: what two CPUs
                give with nothing exchanged (the ceiling a two-device
                engine's scaling is measured against; peak RSS: both)
  tiller-mpiP[-rows]  P processes of one replica and one thread each under
                `mpirun -np P` (enable_distribution; the issue's "two MPI
                ranks"), each feeding its 1 / P of the batch; rank 0's
                times, RSS and losses (its replica's) are reported; the
                row exchanges read each other's bytes in shared memory
  tiller-mpiP-rows-messages  the same with the row exchanges sent as MPI
                messages (TILLER_MPI_SHARED_MEMORY=0, as between nodes)

Each engine runs in a process of its own (its peak RSS is its own) with the
same thread count, on the same seeded batches, once per round (--rounds),
the engines in turn. Prints examples/s (the median step after warm-up; the
median over the rounds), Tiller's ratios to each peer (the median of the
rounds' ratios, with their range), peak RSS, and the
share of the machine's memory bandwidth measured in the run (a 256 MiB
numpy copy) that the step's minimum traffic needs: the looked-up rows read
once, and each touched row's parameter and Adagrad moment read and written
(the MLPs' bytes are noise beside them).

    .venv/bin/python bench/bench_sparse.py [--table-gb 1.0] [--dim 16]
        [--batch 2048] [--warmup 2] [--iters 10] [--threads 2]
        [--engines paddle,tiller,tiller-dense,torch] [--rounds 3] [--trace-dir DIR] [--profile]

Scaling over devices (the issue's "two devices >= 1.6x one device"):
    --engines tiller-1x1,tiller-1x1x2,tiller-2x1,tiller-2x1-rows,tiller-mpi2-rows

Tables of >= 1 GB take a few seconds to initialize per engine; the dense
path moves 2x the tables' bytes per step, so it runs fewer steps.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table-gb", type=float, default=1.0, help="float32 table bytes in all")
    ap.add_argument("--dim", type=int, default=16, help="embedding width")
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--rounds", type=int, default=3,
                    help="run every engine this many times, in turn, in fresh processes; "
                         "figures are medians over the rounds")
    ap.add_argument("--engines", default="paddle,tiller,tiller-dense,torch")
    ap.add_argument("--profile", action="store_true",
                    help="print each Tiller engine's per-op profile of the timed steps "
                         "(us and calls per step; replica 0, rank 0 over MPI), last round's")
    ap.add_argument("--trace-dir", default="",
                    help="write each Tiller engine's steps as a Chrome / Perfetto trace, "
                         "DIR/ENGINE.json (the trace_path option: a lane per device and per "
                         "collective; tracing slows the steps)")
    ap.add_argument("--engine", help=argparse.SUPPRESS)  # a child's engine
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--start-together", default="", help=argparse.SUPPRESS)
    ap.add_argument("--together", type=int, default=1, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def load_dlrm():
    """models/dlrm.py by path: the models package imports paddle, which the
    PyTorch process does not have (dlrm.py imports it only to build)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("dlrm", REPO / "models" / "dlrm.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["dlrm"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def config(args):
    dlrm = load_dlrm()
    return dlrm.DlrmConfig(tables=dlrm.criteo_like(args.table_gb * 2**30, args.dim),
                           dim=args.dim, bottom=(64, args.dim), top=(64,), batch=args.batch,
                           sparse=args.engine != "tiller-dense")


def batches(cfg, n):
    import numpy as np

    dlrm = load_dlrm()
    rng = np.random.default_rng(5)
    return [dlrm.make_batch(cfg, rng) for _ in range(n)]


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB


# --start-together PREFIX: the child touches PREFIX.<pid> after its warm-up
# and waits until --together such files exist, so that processes started
# at once time their steps over the same seconds (tiller-1x1x2).
SYNC = {"prefix": "", "count": 1}


def time_steps(step, feeds, warmup, on_timed=None):
    """Step times after the warm-up; on_timed() runs once before the first
    timed step."""
    times = []
    for i, f in enumerate(feeds):
        if i == warmup and on_timed:
            on_timed()
        if i == warmup and SYNC["prefix"]:
            Path(f"{SYNC['prefix']}.{os.getpid()}").touch()
            prefix = Path(SYNC["prefix"])
            while len(list(prefix.parent.glob(prefix.name + ".*"))) < SYNC["count"]:
                time.sleep(0.001)
        t0 = time.perf_counter()
        step(f)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def run_paddle_or_tiller(args, cfg) -> dict:
    import numpy as np
    import paddle

    sys.path.insert(0, str(REPO / "python"))
    dlrm = load_dlrm()

    # tiller-RxT[-rows]: R replicas of T threads each, tables replicated or
    # split by rows over the replicas (the program is one replica's, its
    # batch 1 / R of the step's); else one device of --threads.
    replicas, threads, rows = 1, args.threads, "-rows" in args.engine
    processes = 1
    if args.engine.startswith("tiller-mpi"):
        import tiller.distributed as dist

        processes, threads = int(args.engine.split("-")[1][3:]), 1
        assert dist.size() == processes, f"{args.engine} runs under mpirun -np {processes}"
    elif args.engine.startswith("tiller-") and "x" in args.engine.split("-")[1]:
        r, t = args.engine.split("-")[1].split("x")
        replicas, threads = int(r), int(t)
    paddle.enable_static()
    main, startup, loss, _, _ = dlrm.build(
        dataclasses.replace(cfg, batch=cfg.batch // (replicas * processes)),
        paddle.optimizer.Adagrad(args.lr))
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    t0 = time.perf_counter()
    with paddle.static.scope_guard(scope):
        exe.run(startup)
    init_s = time.perf_counter() - t0
    n = args.warmup + (args.iters if cfg.sparse else max(3, args.iters // 3))
    feeds = batches(cfg, n)
    losses = []
    profile = None  # Tiller's per-op profile, with --profile
    if args.engine == "paddle":
        def step(f):
            with paddle.static.scope_guard(scope):
                losses.append(float(np.asarray(exe.run(main, feed=f, fetch_list=[loss])[0])))
        times = time_steps(step, feeds, args.warmup)
    else:
        import tiller

        strategy = tiller.IpuStrategy()
        strategy.set_graph_config(is_training=True,
                                  micro_batch_size=cfg.batch // (replicas * processes),
                                  num_ipus=replicas)
        options = {"num_threads": threads * replicas}
        if replicas > 1:
            options.update({"enable_replicated_graphs": True,
                            "replicated_graph_count": replicas})
        if processes > 1:
            options.update({"enable_distribution": True,
                            "enable_distributed_replicated_graphs": True,
                            "global_replication_factor": processes,
                            "global_replica_offset": dist.rank()})
            # Each process feeds its replica's part of the global batch.
            feeds = [dist.local_batch(f, processes) for f in feeds]
        if rows:
            options["shard_embedding_rows"] = True
        # tiller-cap1g: the device's capacity 1 GB (device_profile): tables
        # that do not fit stay in host memory, their touched rows streamed.
        if args.trace_dir:
            options["trace_path"] = str(Path(args.trace_dir) / f"{args.engine}.json")
        if args.engine == "tiller-cap1g":
            options["device_profile"] = "cpu:1GB"
        strategy.set_options(options)
        t0 = time.perf_counter()
        prog = tiller.IpuCompiledProgram(main, scope=scope, ipu_strategy=strategy).compile(
            dlrm.feed_names(cfg), [loss])
        init_s += time.perf_counter() - t0

        def step(f):
            losses.append(float(np.mean(np.asarray(prog.run(feed=f)[0]))))
        times = time_steps(step, feeds, args.warmup,
                           prog._session.enable_profiling if args.profile else None)
        if args.profile:
            # Replica 0's ops over the timed steps (rank 0's, over MPI; a
            # collective's time includes its wait for the others).
            steps = len(times)
            profile = [(op, ms * 1e3 / steps, calls / steps)
                       for op, ms, calls in prog._session.profile(False, 0)]
    return {"times": times, "losses": losses, "init_s": init_s, "profile": profile}


def run_torch(args, cfg) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    class Dlrm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tables = torch.nn.ModuleList(
                torch.nn.EmbeddingBag(rows, cfg.dim, mode="sum", sparse=True)
                for rows in cfg.tables)

            def mlp(widths, n_in, last_relu):
                layers = []
                for i, w in enumerate(widths):
                    layers.append(torch.nn.Linear(n_in, w))
                    if last_relu or i + 1 < len(widths):
                        layers.append(torch.nn.ReLU())
                    n_in = w
                return torch.nn.Sequential(*layers)
            self.bottom = mlp(cfg.bottom, cfg.dense, True)
            self.top = mlp(list(cfg.top) + [1], cfg.dim * (cfg.slots + 1), False)

        def forward(self, dense, ids, offsets):
            feats = [self.bottom(dense)] + [t(i, offsets) for t, i in zip(self.tables, ids)]
            return self.top(torch.cat(feats, dim=1))

    t0 = time.perf_counter()
    model = Dlrm()
    opt = torch.optim.Adagrad(model.parameters(), lr=args.lr)
    init_s = time.perf_counter() - t0
    n = args.warmup + args.iters
    offsets = torch.arange(cfg.batch)
    feeds = []
    for f in batches(cfg, n):
        feeds.append((torch.from_numpy(f["dense"]),
                      [torch.from_numpy(f[f"slot_{i}"].reshape(-1)) for i in range(cfg.slots)],
                      torch.from_numpy(f["label"])))
    losses = []
    bce = torch.nn.BCEWithLogitsLoss()

    def step(f):
        dense, ids, label = f
        opt.zero_grad()
        loss = bce(model(dense, ids, offsets), label)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    times = time_steps(step, feeds, args.warmup)
    del np
    return {"times": times, "losses": losses, "init_s": init_s}


def child(args):
    os.environ.setdefault("GLOG_minloglevel", "2")
    SYNC.update(prefix=args.start_together, count=args.together)
    cfg = config(args)
    r = run_torch(args, cfg) if args.engine == "torch" else run_paddle_or_tiller(args, cfg)
    r["peak_rss_gb"] = peak_rss_gb()
    if args.engine.startswith("tiller-mpi"):
        import tiller.distributed as dist

        if dist.rank() != 0:
            return
    Path(args.out).write_text(json.dumps(r))


def memory_bandwidth_gbs() -> float:
    """GB/s of a 256 MiB numpy copy (read + write), best of 5."""
    import numpy as np

    a = np.ones(2**26, np.float32)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return 2 * a.nbytes / best / 1e9


def main():
    args = parse_args()
    if args.engine:
        return child(args)
    sys.path.insert(0, str(REPO / "bench"))
    from common import cpu_description

    cfg = config(args)
    print(f"CPU: {cpu_description()}; {args.threads} threads")
    print(f"DLRM-style: {cfg.slots} sparse slots, {sum(cfg.tables):,} rows x {cfg.dim} "
          f"({cfg.table_bytes() / 2**30:.2f} GiB of tables, Adagrad state as much again), "
          f"batch {cfg.batch}, Adagrad lr {args.lr}")
    bw = memory_bandwidth_gbs()
    # Minimum bytes a step moves: each lookup's row read, each touched row's
    # parameter and moment read and written (an upper bound on touched rows:
    # every lookup).
    row = cfg.dim * 4
    step_bytes = cfg.batch * cfg.slots * row * (1 + 4)
    print(f"memory bandwidth (numpy copy, this run): {bw:.1f} GB/s; a step's minimum "
          f"traffic {step_bytes / 1e6:.1f} MB")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
               FLAGS_paddle_num_threads=str(args.threads), FLAGS_enable_pir_api="0",
               GLOG_minloglevel="2")
    engines = args.engines.split(",")
    if "torch" in engines and not (REPO / ".venv-torch" / "bin" / "python").exists():
        print("torch: skipped (.venv-torch is missing; scripts/setup_torch.sh makes it)")
        engines.remove("torch")

    def command(engine: str, out: Path, threads: int, extra=()):
        python = str(REPO / ".venv-torch" / "bin" / "python") if engine == "torch" \
            else sys.executable
        cmd = [python, __file__, "--engine", engine, "--out", str(out),
               "--table-gb", str(args.table_gb), "--dim", str(args.dim),
               "--batch", str(args.batch), "--warmup", str(args.warmup),
               "--iters", str(args.iters), "--threads", str(threads), "--lr", str(args.lr),
               "--trace-dir", args.trace_dir, *(["--profile"] if args.profile else []), *extra]
        if engine.startswith("tiller-mpi"):
            cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
                   engine.split("-")[1][3:]] + cmd
        return cmd

    def take(out: Path) -> dict:
        """A child's results, its file removed."""
        res = json.loads(out.read_text())
        out.unlink()
        return res

    def run(engine: str):
        if engine == "tiller-1x1x2":
            return run_pair()
        out = Path(f"/tmp/bench_sparse_{os.getpid()}_{engine}.json")
        r = subprocess.run(command(engine, out, args.threads),
                           env=dict(env, TILLER_MPI_SHARED_MEMORY="0")
                           if engine.endswith("-messages") else env, capture_output=True, text=True)
        if r.returncode != 0 or not out.exists():
            print(f"{engine}: failed ({r.returncode})\n{r.stderr[-3000:]}")
            return None
        res = take(out)
        res["median_s"] = statistics.median(res["times"])
        return res

    def run_pair():
        """Two tiller-1x1 processes at once, each on one thread with the
        whole step, their timed steps started together: the throughput two
        CPUs give with no exchange at all (the ceiling of a two-device
        step on this machine). median_s: the step time of that combined
        throughput."""
        outs = [Path(f"/tmp/bench_sparse_{os.getpid()}_pair{k}.json") for k in range(2)]
        prefix = f"/tmp/bench_sparse_{os.getpid()}_start"
        procs = [subprocess.Popen(command("tiller-1x1", out, 1,
                                          ("--start-together", prefix, "--together", "2")),
                                  env=dict(env, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1"),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for out in outs]
        errs = [p.communicate()[1] for p in procs]
        for f in Path("/tmp").glob(Path(prefix).name + ".*"):
            f.unlink()
        if any(p.returncode != 0 for p in procs) or not all(o.exists() for o in outs):
            print(f"tiller-1x1x2: failed\n{''.join(errs)[-3000:]}")
            return None
        runs = [take(o) for o in outs]
        res = runs[0]
        res["median_s"] = 1 / sum(1 / statistics.median(r["times"]) for r in runs)
        res["peak_rss_gb"] = sum(r["peak_rss_gb"] for r in runs)
        return res

    # Rounds: every engine once per round, the order rotated, so each
    # engine's figure and each ratio come from minutes that the others saw
    # too (on a VM the machine's speed drifts by tens of percent between
    # minutes, for every engine alike).
    rounds = {e: [] for e in engines}
    for k in range(args.rounds):
        order = engines[k % len(engines):] + engines[:k % len(engines)]
        for engine in order:
            res = run(engine)
            if res is None:
                continue
            res["round"] = k
            rounds[engine].append(res)
            if args.rounds > 1:
                print(f"  round {k + 1}: {engine:16s} {res['median_s'] * 1e3:7.2f} ms/step",
                      flush=True)
    results = {}
    for engine, runs in rounds.items():
        if not runs:
            continue
        res = dict(runs[0])
        med = statistics.median(r["median_s"] for r in runs)
        res.update(median_s=med, examples_s=cfg.batch / med,
                   rounds={r["round"]: r["median_s"] for r in runs},
                   peak_rss_gb=max(r["peak_rss_gb"] for r in runs))
        results[engine] = res
        print(f"{engine:13s} {med * 1e3:9.1f} ms/step {res['examples_s']:10.0f} examples/s  "
              f"peak RSS {res['peak_rss_gb']:.2f} GiB  init {res['init_s']:.1f} s  "
              f"{step_bytes / med / 1e9 / bw * 100:5.1f}% of bandwidth  "
              f"losses {res['losses'][0]:.4f} -> {res['losses'][-1]:.4f}")

    def ratio(a: str, b: str) -> str:
        """a's throughput over b's: the median of the rounds' ratios, and
        their range where there are several."""
        ra, rb = results[a]["rounds"], results[b]["rounds"]
        per = [rb[k] / ra[k] for k in ra if k in rb]
        text = f"{statistics.median(per):.2f}x"
        if len(per) > 1:
            text += f" (rounds {min(per):.2f}-{max(per):.2f})"
        return text

    if "tiller" in results:
        for peer in ("paddle", "torch", "tiller-dense"):
            if peer in results:
                print(f"tiller / {peer}: {ratio('tiller', peer)} throughput")
    if "tiller" in results and "tiller-cap1g" in results:
        print(f"tiller-cap1g / tiller: {ratio('tiller-cap1g', 'tiller')} "
              "throughput (tables in host memory / in device memory)")
    one = results.get("tiller-1x1")
    ceiling = "tiller-1x1x2" in results
    if one and ceiling:
        print(f"tiller-1x1x2 / tiller-1x1: {ratio('tiller-1x1x2', 'tiller-1x1')} throughput: "
              "the two-CPU ceiling (two whole steps at once, nothing exchanged)")
    for engine in results:
        if one and engine.startswith("tiller-") and engine not in ("tiller-1x1", "tiller-1x1x2") \
                and ("x" in engine or "mpi" in engine):
            line = (f"{engine} / tiller-1x1: {ratio(engine, 'tiller-1x1')} "
                    f"throughput (the same global batch per step)")
            if ceiling:
                line += f"; {ratio(engine, 'tiller-1x1x2')} of the ceiling's"
            print(line)
    if args.profile:
        # Side by side: each engine's last round, us and calls per step.
        profiles = {e: {op: (us, calls) for op, us, calls in rounds[e][-1]["profile"]}
                    for e in results if rounds[e][-1].get("profile")}
        ops = sorted({op for p in profiles.values() for op in p},
                     key=lambda op: -max(p.get(op, (0, 0))[0] for p in profiles.values()))
        print("per-op profile, us per step (calls per step), replica 0:")
        print(f"  {'op':24s}" + "".join(f"{e[:22]:>24s}" for e in profiles))
        for op in ops:
            cells = "".join(f"{p[op][0]:14.0f} ({p[op][1]:5.1f})  " if op in p else f"{'-':>24s}"
                            for p in profiles.values())
            print(f"  {op:24s}{cells}")
        print(f"  {'(all ops)':24s}" + "".join(
            f"{sum(us for us, _ in p.values()):14.0f}          " for p in profiles.values()))
    if "tiller" in results and "paddle" in results:
        a, b = results["tiller"]["losses"], results["paddle"]["losses"]
        rel = max(abs(x - y) / abs(y) for x, y in zip(a, b))
        print(f"tiller vs paddle losses, max rel diff over {len(a)} steps: {rel:.2e}")


if __name__ == "__main__":
    main()
