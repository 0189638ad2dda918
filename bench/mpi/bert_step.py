"""One BERT-small training configuration for bench/bench_mpi.py: run alone
(one process) or under `mpirun -np P` (enable_distribution), each process
one replica on one thread with micro-batches of --micro sequences; rank 0
prints one JSON line: the median and best ms per update, the training
program's path (for tiller.plan), its feed shapes and the trained tensors'
element counts (the gradients the replicas sum).

With --stages S: one replica of S pipeline stages (1F1B, --accumulate
micro-batches per update), one thread per stage: alone, every stage in the
process; under `mpirun -np S`, a stage per process (processes_per_replica),
every process fed the same batch."""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "python"), str(ROOT), str(ROOT / "bench")]

import paddle  # noqa: E402

import tiller  # noqa: E402
import tiller.distributed as dist  # noqa: E402
from bench_parallel import BERT_SMALL  # noqa: E402
from models import training as T  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--micro", type=int, default=8)
ap.add_argument("--updates", type=int, default=6)
ap.add_argument("--warmup", type=int, default=2)
ap.add_argument("--bucket-bytes", type=int, default=32 << 20)
ap.add_argument("--save-program", default="", help="copy the training program here")
ap.add_argument("--no-overlap", action="store_true", help="overlap_all_reduce off")
ap.add_argument("--stages", type=int, default=1, help="pipeline stages of the one replica")
ap.add_argument("--accumulate", type=int, default=4, help="micro-batches per update (--stages)")
args = ap.parse_args()

processes, rank = dist.size(), dist.rank()
with T.static_mode():
    stages = args.stages
    built = T.build("bert", BERT_SMALL, T.OptSpec("adam", lr=1e-4, schedule="constant",
                                                  clip_norm=None), seed=0, stages=stages)
    scope = paddle.static.Scope()
    T.init_scope(built, scope)
    strategy = tiller.IpuStrategy()
    strategy.set_graph_config(num_ipus=stages, is_training=True, micro_batch_size=args.micro,
                              enable_manual_shard=stages > 1)
    accumulate = args.accumulate if stages > 1 else 1
    strategy.set_pipelining_config(enable_pipelining=stages > 1,
                                   enable_gradient_accumulation=accumulate > 1,
                                   accumulation_factor=accumulate)
    options = {"num_threads": stages // processes if stages > 1 else 1,
               "all_reduce_bucket_bytes": args.bucket_bytes,
               "overlap_all_reduce": not args.no_overlap,
               "location_optimizer": {"use_replicated_tensor_sharding": False}}
    if processes > 1 and stages > 1:
        options.update({"enable_distribution": True, "processes_per_replica": processes,
                        "global_replication_factor": 1, "global_replica_offset": 0})
    elif processes > 1:
        options.update({"enable_distribution": True, "global_replication_factor": processes,
                        "global_replica_offset": rank})
    strategy.set_options(options)
    prog = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=strategy).compile(
        built.feed_names, built.fetch_list)
    # Every process its own micro-batch of each update (a different seed per
    # rank: the data, not the time, differs); a replica's stages, its batch.
    rows = args.micro * accumulate
    batches = T.make_batches("bert", BERT_SMALL, args.warmup + args.updates, rows,
                             seed=1 + (rank if stages == 1 else 0))
    times = []
    for i, feed in enumerate(batches):
        t0 = time.perf_counter()
        prog.run(feed=feed)
        if i >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    if rank == 0:
        program = os.fspath(prog.program_path)
        if args.save_program:
            import shutil

            shutil.copyfile(program, args.save_program)
            program = args.save_program
        info = {i.name: i for i in prog.session.state_info()}
        counts = [int(np.prod(info[n].shape)) for n in prog.session.trained_names()]
        print(json.dumps({"processes": processes, "median_ms": statistics.median(times),
                          "best_ms": min(times), "program": program,
                          "feeds": list(built.feed_names),
                          "shapes": {n: list(np.shape(batches[0][n])) for n in built.feed_names},
                          "gradient_counts": counts}), flush=True)
