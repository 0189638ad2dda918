"""A DLRM-style model (models/dlrm.py, sparse tables, Adagrad or Adam)
trained with data-parallel replicas whose tables are split by rows over
them (Tiller's option shard_embedding_rows): one process with all the
replicas, or under `mpirun -np P` each process running its share
(enable_distribution) and feeding its replicas' micro-batches.

    python train_sparse_distributed.py OUT.npz GLOBAL_REPLICAS [KEY=VALUE ...]
    mpirun -np P python train_sparse_distributed.py OUT.npz GLOBAL_REPLICAS [KEY=VALUE ...]

KEY=VALUE: updates=N (default 6), opt=adagrad|adam (default adagrad),
rows=0|1 (split the tables by rows, default 1). Rank 0 (or the single
process) writes its replicas' losses and the final state (whole tables:
the parts gathered from every process) to OUT.npz.
"""
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT / "python"), str(ROOT)]

import paddle  # noqa: E402
from paddle.framework import in_pir_mode  # noqa: E402

if not in_pir_mode():
    import models._legacy_compat as lc  # noqa: E402

    lc.install()
import tiller  # noqa: E402
import tiller.distributed as dist  # noqa: E402
from models import dlrm  # noqa: E402

out, global_replicas = sys.argv[1], int(sys.argv[2])
args = dict(a.split("=", 1) for a in sys.argv[3:])
updates = int(args.get("updates", 6))
processes, rank = dist.size(), dist.rank()
local = global_replicas // processes
MICRO = 8

paddle.enable_static()
cfg = dlrm.DlrmConfig(tables=[61, 7, 300, 2, 45], dim=8, batch=MICRO)
opt = {"adagrad": lambda: paddle.optimizer.Adagrad(0.1),
       "adam": lambda: paddle.optimizer.Adam(0.05)}[args.get("opt", "adagrad")]()
main, startup, loss, _, tables = dlrm.build(cfg, opt)
scope = paddle.static.Scope()
with paddle.static.scope_guard(scope):
    paddle.static.Executor(paddle.CPUPlace()).run(startup)
strategy = tiller.IpuStrategy()
strategy.set_graph_config(num_ipus=local, is_training=True, micro_batch_size=MICRO)
options = {"num_threads": local, "shard_embedding_rows": args.get("rows", "1") == "1"}
if local > 1:
    options.update({"enable_replicated_graphs": True, "replicated_graph_count": local})
if processes > 1:
    options.update({"enable_distribution": True, "enable_distributed_replicated_graphs": True,
                    "global_replication_factor": global_replicas,
                    "global_replica_offset": rank * local})
strategy.set_options(options)
program = tiller.IpuCompiledProgram(main, scope=scope, ipu_strategy=strategy).compile(
    dlrm.feed_names(cfg), [loss])
rng = np.random.default_rng(11)
global_cfg = dlrm.DlrmConfig(tables=cfg.tables, dim=cfg.dim, batch=MICRO * global_replicas)
losses = []
for u in range(updates):
    feed = dlrm.make_batch(global_cfg, rng)
    if processes > 1:
        feed = dist.local_batch(feed, global_replicas, local)
    losses.append(np.asarray(program.run(feed=feed)[0], np.float64).reshape(-1))
program.weights_to_host()
if dist.is_main_process():
    state = {}
    for v in main.list_vars():
        if v.persistable and scope.find_var(v.name) is not None:
            try:
                state[v.name] = np.array(scope.find_var(v.name).get_tensor())
            except Exception:  # not a dense tensor (feed / fetch lists)
                continue
    np.savez(out, losses=np.stack(losses), tables=np.array(tables),
             **{f"state/{k}": v for k, v in state.items()})
