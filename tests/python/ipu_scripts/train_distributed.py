"""BERT-tiny pre-training with data-parallel replicas, as a Paddle IPU user
runs it: one process with all the replicas, or under `mpirun -np P`, each
process running its share of them (enable_distribution) and feeding its
replicas' micro-batches only (tiller.distributed.local_batch).

    python train_distributed.py OUT.npz GLOBAL_REPLICAS [KEY=VALUE ...]
    mpirun -np P python train_distributed.py OUT.npz GLOBAL_REPLICAS [KEY=VALUE ...]

KEY=VALUE: updates=N (default 20), accumulate=N (gradient accumulation,
default 1), stages=N (devices per replica, manual sharding), pipeline=1,
spread=S (each replica's stages on S processes, Tiller's option processes_per_replica:
the job's P processes run P / S replicas), rts=1 (replicated tensor sharding of the optimizer state; rts_min=N: only
of tensors of N elements or more, Paddle's default 8192), dropout=P (BERT's hidden and attention dropout: masks drawn per
micro-batch), die_at=N:RANK (that rank SIGKILLs itself before update N), hang_at=N:RANK
(that rank stops itself, SIGSTOP, before update N),
fill_drain=1 (the pipeline schedule), clip=C (global-norm clip, default 1; 0: none),
distribute=0 (each process trains alone: the wrong setup), save_at=N:PREFIX
(every process calls save(PREFIX) before update N; rank 0 writes it), resume=PREFIX:N (load(PREFIX) and go on from update N on the
same global data). Rank 0 (or the
single process) writes the losses of its replicas' micro-batches, the
global-order losses' count and the final state to OUT.npz.
"""
import dataclasses
import os
import signal
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT / "python"), str(ROOT), str(ROOT / "tests" / "python")]

import paddle  # noqa: E402

import tiller  # noqa: E402
import tiller.distributed as dist  # noqa: E402
from accumulation_test import MICRO, _concat, _micro_batches  # noqa: E402
from models import training as T  # noqa: E402

out, global_replicas = sys.argv[1], int(sys.argv[2])
args = dict(a.split("=", 1) for a in sys.argv[3:])
updates = int(args.get("updates", 20))
accumulate = int(args.get("accumulate", 1))
stages = int(args.get("stages", 1))
pipeline = args.get("pipeline") == "1"
dropout = float(args.get("dropout", 0))
distribute = args.get("distribute", "1") == "1"
die_update, die_rank = (int(x) for x in args.get("die_at", "-1:-1").split(":"))
hang_update, hang_rank = (int(x) for x in args.get("hang_at", "-1:-1").split(":"))
save_update, save_prefix = args.get("save_at", "-1:").split(":", 1)
save_update = int(save_update)
resume_prefix, first_update = (args["resume"].rsplit(":", 1) if "resume" in args else ("", 0))
first_update = int(first_update)

processes, rank = dist.size(), dist.rank()
# spread=S: a replica's stages on S processes (processes_per_replica).
spread = int(args.get("spread", 1)) if processes > 1 else 1
assert global_replicas * spread % processes == 0, (global_replicas, processes)
local = global_replicas * spread // processes

with T.static_mode():
    cfg = T.pretrain_config("bert-tiny")
    cfg = dataclasses.replace(cfg, bert=dataclasses.replace(
        cfg.bert, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout))
    clip = float(args.get("clip", 1.0)) or None
    built = T.build("bert", cfg, T.OptSpec("adam", schedule="constant", clip_norm=clip), seed=0,
                    stages=stages)
    scope = paddle.static.Scope()
    T.init_scope(built, scope)
    strategy = tiller.IpuStrategy()
    strategy.set_graph_config(num_ipus=local * stages, is_training=True, micro_batch_size=MICRO,
                              enable_manual_shard=stages > 1)
    strategy.set_pipelining_config(enable_pipelining=pipeline,
                                   enable_gradient_accumulation=accumulate > 1,
                                   accumulation_factor=accumulate)
    # rts=1: replicated tensor sharding of every optimizer state (each
    # replica updates its part of each weight, then all-gathers it).
    rts = args.get("rts", "0") == "1"
    options = {"num_threads": local * stages // spread,
               "location_optimizer": {"use_replicated_tensor_sharding": rts,
                                      "min_elements_for_replicated_tensor_sharding":
                                      int(args.get("rts_min", 0))}}
    if args.get("fill_drain") == "1":
        options["pipeline_schedule"] = "fill_drain"
    if local > 1:
        options.update({"enable_replicated_graphs": True, "replicated_graph_count": local})
    if processes > 1 and distribute:
        options.update({"enable_distribution": True, "enable_distributed_replicated_graphs": True,
                        "global_replication_factor": global_replicas,
                        "global_replica_offset": rank // spread * local,
                        "processes_per_replica": spread})
    strategy.set_options(options)
    program = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=strategy).compile(
        built.feed_names, built.fetch_list)
    per_update = accumulate * global_replicas
    micro = _micro_batches("bert", updates * per_update)
    if resume_prefix:
        program.load(resume_prefix)
    losses = []
    for u in range(first_update, updates):
        if u == save_update:
            program.save(save_prefix)
        if u == die_update and rank == die_rank:
            os.kill(os.getpid(), signal.SIGKILL)
        if u == hang_update and rank == hang_rank:
            os.kill(os.getpid(), signal.SIGSTOP)
        feed = _concat("bert", micro[u * per_update:(u + 1) * per_update], False)
        if processes > 1:
            # Each process feeds its own replicas' micro-batches.
            feed = dist.local_batch(feed, per_update, local, processes_per_replica=spread)
        outs = program.run(feed=feed)
        losses.append(np.asarray(outs[0], np.float64).reshape(-1))
    program.weights_to_host()  # parameters + optimizer state -> scope
    if dist.is_main_process():
        state = T.read_state(built, scope)
        np.savez(out, losses=np.stack(losses), first_update=first_update, **{f"state/{k}": v for k, v in state.items()})
