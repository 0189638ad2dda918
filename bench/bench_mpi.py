"""Scale-out benchmark (issue 13), one run on this machine, MPI over shared
memory (Open MPI's vader transport), every process on its own core:

1. All-reduce bus bandwidth vs message size, 2 processes: Tiller's
   collective (libtiller_mpi.so: non-blocking all-to-all of each process's
   range, summed in rank order, all-gather) against a plain MPI_Allreduce.
   Bus bandwidth = 2 (P - 1) / P x bytes / seconds, the bytes a rank sends
   and receives in a ring all-reduce.
2. BERT-small's gradients (every trained tensor, one update's worth):
   one MPI_Allreduce per gradient against Tiller's bucketed path (packed
   into messages of all_reduce_bucket_bytes, as the bucket_all_reduce pass
   and its kernel do).
3. BERT-small training (4 layers, hidden 256, seq 128, Adam), micro-batch
   --micro per process, one thread each: 1 process against `mpirun -np 2`
   (each process its own micro-batch: twice the samples per update).
4. The cost model (tiller.plan, the planner of `tiller plan --ranks`):
   compute from the cpu profile's kernel rates measured now, the
   all-reduce from the link's bandwidth and latency fitted to the sweep of
   part 1 (t = 2 (P - 1) x latency + 2 (P - 1) / P x bytes / bandwidth,
   least squares over the sizes); its prediction for the runs of part 3
   beside the measurement, and the ratio (the issue's bound: within 25%).
5. BERT-small as one replica of 2 pipeline stages (1F1B, 4 micro-batches
   per update, one thread per stage): both stages in one process (copies in
   memory) against a stage per process (processes_per_replica 2: the
   activations and gradients as MPI messages).
6. The same model for BERT-Base on the cluster files in clusters/ (POD16,
   POD64, POD256-like IPU layouts and an InfiniBand CPU cluster): predicted
   step time and scaling efficiency.

    .venv/bin/python bench/bench_mpi.py [--micro 8] [--updates 6] [--skip-clusters]

Needs an idle machine (do not run it beside tests) and mpirun.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "python"), str(ROOT), str(ROOT / "bench")]
BUILD = Path(os.environ.get("TILLER_BUILD_DIR", ROOT / "build"))
MPIRUN = [shutil.which("mpirun") or "mpirun", "--allow-run-as-root", "--oversubscribe",
          "--bind-to", "core"]
SIZES = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def _json_lines(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})},
                       timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n"
                         f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def fit_link(rows, processes):
    """Least squares of t = 2 (P-1) latency + 2 (P-1)/P bytes / bandwidth."""
    steps = 2.0 * (processes - 1)
    x = np.array([[steps, steps / processes * r["bytes"]] for r in rows])
    t = np.array([r["tiller_s"] for r in rows])
    (latency, inv_bw), *_ = np.linalg.lstsq(x, t, rcond=None)
    return max(latency, 0.0), 1.0 / inv_bw


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--micro", type=int, default=8, help="sequences per process per update")
    ap.add_argument("--updates", type=int, default=6, help="timed updates")
    ap.add_argument("--skip-clusters", action="store_true")
    args = ap.parse_args(argv)

    import common  # noqa: E402

    import tiller

    print(f"CPU: {common.cpu_description()}", flush=True)
    bench = BUILD / "bin" / "tiller_mpi_bench"
    if not bench.is_file():
        raise SystemExit(f"{bench} missing: build with Open MPI installed (scripts/setup.sh)")
    env = {"OMP_NUM_THREADS": "1", "TILLER_BUILD_DIR": str(BUILD)}

    print("\n1. all-reduce, 2 processes (bus bandwidth GB/s; median of repetitions)")
    rows = _json_lines([*MPIRUN, "-np", "2", str(bench), "sizes", *map(str, SIZES)], env)
    print(f"{'bytes':>10} {'tiller ms':>10} {'MPI ms':>10} {'tiller GB/s':>12} {'MPI GB/s':>10}"
          f" {'ratio':>6}")
    for r in rows:
        print(f"{r['bytes']:>10} {r['tiller_s'] * 1e3:>10.3f} {r['mpi_s'] * 1e3:>10.3f} "
              f"{r['tiller_busbw'] / 1e9:>12.2f} {r['mpi_busbw'] / 1e9:>10.2f} "
              f"{r['mpi_s'] / r['tiller_s']:>6.2f}")
    latency, bandwidth = fit_link(rows, 2)
    print(f"fitted link (Tiller's path): {bandwidth / 1e9:.2f} GB/s, {latency * 1e6:.1f} us "
          "per ring step")

    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "bert_small_train.json"
        step = [sys.executable, str(ROOT / "bench" / "mpi" / "bert_step.py"), "--micro",
                str(args.micro), "--updates", str(args.updates)]
        print(f"\n3. BERT-small training, micro-batch {args.micro} per process, 1 thread each",
              flush=True)
        one = _json_lines([*step, "--save-program", str(program)], env)[0]
        two = _json_lines([*MPIRUN, "-np", "2", *step], env)[0]

        counts = one["gradient_counts"]
        grads_file = Path(tmp) / "gradients.txt"
        grads_file.write_text("\n".join(map(str, counts)))
        print(f"\n2. BERT-small's {len(counts)} gradients "
              f"({sum(counts) * 4 / 2**20:.1f} MiB), 2 processes")
        g = _json_lines([*MPIRUN, "-np", "2", str(bench), "gradients", str(grads_file),
                         str(32 << 20)], env)[0]
        print(f"   one MPI_Allreduce per gradient:     {g['per_gradient_s'] * 1e3:.2f} ms "
              f"({len(counts)} messages)")
        print(f"   Tiller's collective per gradient:   {g['tiller_per_gradient_s'] * 1e3:.2f} ms "
              f"({len(counts)} messages): "
              f"{g['per_gradient_s'] / g['tiller_per_gradient_s']:.2f}x")
        print(f"   Tiller, packed in buckets of 32 MiB: {g['bucketed_s'] * 1e3:.2f} ms "
              f"({g['messages']} messages, packing included): "
              f"{g['per_gradient_s'] / g['bucketed_s']:.2f}x")
        print("   (buckets save a latency per message: ~3 us here, tens of us per ring step "
              "across hosts; packing costs two copies of the gradients)")

        print(f"   1 process:   {one['median_ms']:.1f} ms per update (best {one['best_ms']:.1f}),"
              f" {args.micro / one['median_ms'] * 1e3:.1f} sequences/s")
        print(f"   2 processes: {two['median_ms']:.1f} ms per update (best {two['best_ms']:.1f}),"
              f" {2 * args.micro / two['median_ms'] * 1e3:.1f} sequences/s: "
              f"{2 * one['median_ms'] / two['median_ms']:.2f}x the throughput, scaling "
              f"efficiency {one['median_ms'] / two['median_ms']:.0%}")

        print("\n4. cost model (tiller.plan, cpu profile measured now, 1 thread per process, "
              "the fitted link)")
        common_args = dict(train=True, micro_batch=args.micro, feeds=one["feeds"],
                           shapes=one["shapes"], threads=1, profile="cpu",
                           replicated_tensor_sharding=False)
        p1 = tiller.plan(str(program), **common_args)
        p2 = tiller.plan(str(program), ranks=2, rank_link=bandwidth, rank_latency=latency,
                         **common_args)
        print(f"{'':14} {'predicted ms':>12} {'measured ms':>12} {'measured/predicted':>19}")
        for name, p, m in (("1 process", p1, one), ("2 processes", p2, two)):
            print(f"{name:14} {p['window_seconds'] * 1e3:>12.1f} {m['median_ms']:>12.1f} "
                  f"{m['median_ms'] / (p['window_seconds'] * 1e3):>19.2f}")
        print(f"   predicted all-reduce: {p2['collective_seconds'] * 1e3:.1f} ms in "
              f"{p2['collective_messages']} message(s); measured added time "
              f"{two['median_ms'] - one['median_ms']:.1f} ms")
        predicted_eff = p1["window_seconds"] / p2["window_seconds"]
        measured_eff = one["median_ms"] / two["median_ms"]
        print(f"   scaling efficiency: predicted {predicted_eff:.0%}, measured {measured_eff:.0%}")

        print("\n5. BERT-small, one replica of 2 pipeline stages (1F1B, accumulation 4, "
              f"micro-batch {args.micro}), one thread per stage", flush=True)
        piped = [*step, "--stages", "2", "--accumulate", "4"]
        in_process = _json_lines(piped, env)[0]
        spread = _json_lines([*MPIRUN, "-np", "2", *piped], env)[0]
        print(f"   both stages in 1 process:  {in_process['median_ms']:.1f} ms per update "
              f"(best {in_process['best_ms']:.1f})")
        print(f"   a stage per process (MPI): {spread['median_ms']:.1f} ms per update "
              f"(best {spread['best_ms']:.1f}): "
              f"{in_process['median_ms'] / spread['median_ms']:.2f}x the in-process speed")

        if not args.skip_clusters:
            print("\n6. BERT-Base on the cluster files (clusters/), per the same model", flush=True)
            base = Path(tmp) / "bert_base_train.json"
            _save_bert_base(base)
            shapes = {"input_ids": [8, 128], "token_type_ids": [8, 128],
                      "masked_positions": [160], "masked_lm_labels": [160, 1],
                      "next_sentence_labels": [8, 1]}
            for cluster in sorted((ROOT / "clusters").glob("*.json")):
                spec = json.loads(cluster.read_text())
                per_replica = spec.get("devices_per_replica", 1)
                p = tiller.plan(str(base), train=True, micro_batch=8, feeds=list(shapes),
                                shapes=shapes, devices=per_replica, replicas=1,
                                accumulate=spec.get("accumulate", 1), cluster=str(cluster))
                lines = [ln for ln in p["text"].splitlines()
                         if ln.startswith(("cluster:", "plan:", "collectives", "scaling",
                                           "predicted step"))]
                print(f"-- {cluster.name}")
                for ln in lines:
                    print("   " + ln)
    return 0


def _save_bert_base(path: Path) -> None:
    """BERT-Base's pre-training program (MLM + NSP, Adam), saved for the
    planner: no weights are needed to plan it."""
    code = (
        "import sys; sys.path[:0] = [%r, %r]\n"
        "import paddle, tiller\n"
        "from models import training as T\n"
        "with T.static_mode():\n"
        "    built = T.build('bert', 'bert-base', T.OptSpec('adam', schedule='constant'), seed=0)\n"
        "    scope = paddle.static.Scope(); T.init_scope(built, scope)\n"
        "    s = tiller.IpuStrategy(); s.set_graph_config(is_training=True, micro_batch_size=8)\n"
        "    prog = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=s)\n"
        "    prog = prog.compile(built.feed_names, built.fetch_list)\n"
        "    import shutil; shutil.copyfile(prog.program_path, %r)\n"
    ) % (str(ROOT / "python"), str(ROOT), str(path))
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=1800)


if __name__ == "__main__":
    sys.exit(main())
