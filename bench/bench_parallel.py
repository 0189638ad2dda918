"""Parallel training benchmark (issue 9): BERT-small pretraining (4 layers,
hidden 256, seq 128, MLM + NSP, Adam) on CPU devices of one core each,
against one device of one core and one device of two threads, all in one
run, same program, initial state and data. Every configuration trains the
same global batch per update, so sequences per second compare directly.

    .venv/bin/python bench/bench_parallel.py [--global-batch 64] [--micro 4] [--updates 3]
        [--warmup 1] [--rounds 5]

The global batch: a pipeline of S stages idles for about S - 1 micro-batch
times of each update's window (the fill and the drain), so the window needs
many micro-batches: with N of them the 2-stage pipeline runs at most
2N / (N + 1) times one device (printed as its bound). The default, 64
sequences in micro-batches of 4 (N = 16, bound 1.88x), is still a small
global batch for BERT (Graphcore's IPU BERT accumulated hundreds of
micro-batches per update); at 32 (N = 8) the bound is 1.78x.

Configurations:
  1 device x 1 thread      the global batch in one step
  1 device x 2 threads     the global batch in one step
  2 replicas x 1 thread    half the global batch each, gradients all-reduced
  2-stage pipeline         2 devices x 1 thread, the model split in two stages
                           (tiller.set_ipu_shard), micro-batches of --micro
                           with gradient accumulation, 1F1B
  2-stage pipeline, split  the same with need_avg_shard: Tiller splits the
    by cost                program into two stages of about equal forward +
                           backward cost instead of the layers given
  2-stage pipeline,        the same, the cost measured at compile time
    measured cost          (auto_split_cost measured) instead of estimated
  2 devices, 4             the split by cost into four stages, device 0
    interleaved stages     running stages 0 and 2 (Tiller's option
                           stages_per_device 2): the pipeline fills and
                           drains in half the time

Printed: the CPU and its ISA, ms per update (the best and the median of
the timed updates; the configurations take turns, round by round, so that
other load on a shared machine hits them alike; the ratios use the best),
sequences/s, GFLOP/s by the FLOP formula of bench_training.py, the ratios
the issue sets targets for (2 replicas >= 1.8x one 1-core device; the
2-stage pipeline >= 1.6x, with the stages Tiller chooses by cost; the
layers as the script gives them leave the heads' vocabulary-sized GEMMs on
top of two layers in the second stage, and the figure beside it shows what
that costs), and the machine's fp32 GEMM rate measured in this run (numpy's
sgemm on 2048^3, its own threads) for scale.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--global-batch", type=int, default=64, help="sequences per update")
    ap.add_argument("--micro", type=int, default=4, help="the pipeline's micro-batch")
    ap.add_argument("--updates", type=int, default=3, help="timed updates per configuration")
    ap.add_argument("--warmup", type=int, default=1)
    # Many short rounds: a core of this project's shared machines runs the
    # same GEMM 15% slower or faster from one second to the next, and a run on
    # two cores needs both fast at once.
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds of --updates updates per configuration, interleaved")
    return ap.parse_args(argv)


ARGS = parse_args() if __name__ == "__main__" else None
os.environ.setdefault("GLOG_minloglevel", "2")
# Paddle (which builds the programs and runs their startup) and numpy keep
# one thread each in this process: their idle pools must not compete with
# the configurations' devices. Tiller's devices take num_threads each.
# The machine's GEMM rate is measured in a subprocess with every core.
os.environ["OMP_NUM_THREADS"] = "1"

import common  # noqa: E402  (puts the repository on sys.path)
import numpy as np  # noqa: E402

from models import training as T  # noqa: E402
from models.bert import BertConfig  # noqa: E402

BERT_SMALL = T.PretrainConfig(
    BertConfig(vocab_size=30522, hidden_size=256, num_layers=4, num_heads=4,
               intermediate_size=1024, max_position=512, type_vocab_size=2,
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    seq_len=128, max_predictions=20)


def sgemm_gflops(n: int = 2048, reps: int = 3) -> float:
    """numpy's sgemm rate on every core, measured in a subprocess (this
    process keeps numpy at one thread)."""
    import subprocess

    env = dict(os.environ, OMP_NUM_THREADS=str(os.cpu_count() or 1))
    code = (
        "import time, numpy as np\n"
        f"n, reps = {n}, {reps}\n"
        "a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)\n"
        "b = a.T.copy()\n"
        "a @ b\n"
        "best = float('inf')\n"
        "for _ in range(reps):\n"
        "    t0 = time.perf_counter()\n"
        "    a @ b\n"
        "    best = min(best, time.perf_counter() - t0)\n"
        "print(2 * n ** 3 / best / 1e9)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


class Config:
    """One configuration, compiled and ready: `replicas` replicas of `stages`
    pipeline stages, threads shared out evenly, each update over
    args.global_batch sequences in micro-batches of `micro`."""

    def __init__(self, name, threads, replicas, stages, micro, args, split_by_cost=False,
                 stages_per_device=1, split_cost="estimated"):
        import paddle

        import tiller

        self.name, self.stages = name, stages
        global_batch = args.global_batch
        self.batches = T.make_batches("bert", BERT_SMALL, args.warmup + args.updates,
                                      global_batch, seed=1)
        built = T.build("bert", BERT_SMALL, T.OptSpec("adam", lr=1e-4, schedule="constant",
                                                      clip_norm=None), seed=0, stages=stages)
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        accumulate = global_batch // micro // replicas
        strategy = tiller.IpuStrategy()
        strategy.set_graph_config(num_ipus=replicas * stages, is_training=True,
                                  micro_batch_size=micro, enable_manual_shard=stages > 1)
        strategy.set_pipelining_config(enable_pipelining=stages > 1,
                                       enable_gradient_accumulation=accumulate > 1,
                                       accumulation_factor=accumulate)
        strategy.set_options({"num_threads": threads})
        if split_by_cost:
            strategy.set_options({"need_avg_shard": True, "auto_split_cost": split_cost})
        if stages_per_device > 1:
            strategy.set_options({"stages_per_device": stages_per_device})
        if replicas > 1:
            strategy.set_options({"enable_replicated_graphs": True,
                                  "replicated_graph_count": replicas})
        self.prog = tiller.IpuCompiledProgram(built.main, scope=scope,
                                              ipu_strategy=strategy).compile(
            built.feed_names, built.fetch_list)
        self.times, self.loss, self.bubbles = [], None, []

    def update(self, i, timed=True):
        t0 = time.perf_counter()
        outs = self.prog.run(feed=self.batches[i])
        if timed:
            self.times.append((time.perf_counter() - t0) * 1e3)
        self.loss = float(np.mean(outs[0]))
        if self.stages > 1:
            self.bubbles.append(self.prog.session.summary().pipeline_bubble_fraction)


def main(args) -> int:
    print(f"CPU: {common.cpu_description()}")
    gemm = sgemm_gflops()
    print(f"machine fp32 GEMM rate measured now (numpy sgemm 2048^3): {gemm:.0f} GFLOP/s")
    c = BERT_SMALL.bert
    global_batch = args.global_batch
    gflop = common.pretrain_train_gflop(BERT_SMALL, global_batch)
    print(f"BERT-small ({c.num_layers} layers, hidden {c.hidden_size}, seq {BERT_SMALL.seq_len}), "
          f"global batch {global_batch} per update = {gflop:.1f} GFLOP, Adam, fp32; "
          f"{args.warmup} warm-up + {args.updates} timed updates each; pipeline micro-batch "
          f"{args.micro}, accumulation {global_batch // args.micro}")
    half = global_batch // 2
    configs = [Config(*c, args) for c in (
        ("1 device x 1 thread", 1, 1, 1, global_batch),
        ("1 device x 2 threads", 2, 1, 1, global_batch),
        ("2 replicas x 1 thread", 2, 2, 1, half),
        ("2-stage pipeline x 1 thread", 2, 1, 2, args.micro))]
    configs.append(Config("2-stage pipeline, split by cost", 2, 1, 2, args.micro, args,
                          split_by_cost=True))
    configs.append(Config("2-stage pipeline, measured cost", 2, 1, 2, args.micro, args,
                          split_by_cost=True, split_cost="measured"))
    configs.append(Config("2 devices, 4 interleaved stages", 2, 1, 2, args.micro, args,
                          split_by_cost=True, stages_per_device=2))
    for c in configs:
        for i in range(args.warmup):
            c.update(i, timed=False)
    # Round-robin: every configuration runs its updates in each round, so a
    # busy spell on the (shared) machine hits them alike.
    for _ in range(args.rounds):
        for c in configs:
            for i in range(args.warmup, args.warmup + args.updates):
                c.update(i)
    print(f"best and median of {args.rounds} rounds x {args.updates} updates, rounds "
          f"interleaved across the configurations:")
    rows, medians = {}, {}
    for c in configs:
        best, med = min(c.times), statistics.median(c.times)
        rows[c.name], medians[c.name] = best, med
        extra = f"  bubble {100 * statistics.median(c.bubbles):.0f}%" if c.bubbles else ""
        print(f"  {c.name:<31} {best:8.1f} ms/update (median {med:7.1f})  "
              f"{global_batch / best * 1e3:6.1f} seq/s  {gflop / best * 1e3:6.1f} GFLOP/s  "
              f"({100 * gflop / best * 1e3 / gemm:.0f}% of the measured GEMM rate)  "
              f"loss {c.loss:.4f}{extra}", flush=True)
    one = rows["1 device x 1 thread"]
    two = rows["1 device x 2 threads"]
    rep = rows["2 replicas x 1 thread"]
    pipe = rows["2-stage pipeline x 1 thread"]
    by_cost = rows["2-stage pipeline, split by cost"]
    interleaved = rows["2 devices, 4 interleaved stages"]
    measured = rows["2-stage pipeline, measured cost"]
    print(f"2 replicas vs 1 device x 1 thread:        {one / rep:.2f}x (target >= 1.8x)")
    window = global_batch // args.micro
    print(f"2-stage pipeline vs 1 device x 1 thread:  {one / by_cost:.2f}x (target >= 1.6x; "
          f"Tiller's split by cost; bound at {window} micro-batches per update: "
          f"{2 * window / (window + 1):.2f}x)")
    print(f"  split by measured cost:                 {one / measured:.2f}x "
          f"(auto_split_cost measured)")
    print(f"  with the layers' split as given:        {one / pipe:.2f}x (the second stage "
          f"also holds the heads)")
    print(f"  with 4 stages interleaved on 2 devices: {one / interleaved:.2f}x "
          f"(stages_per_device 2)")
    print(f"2 replicas vs 1 device x 2 threads:       {two / rep:.2f}x")
    print(f"2-stage pipeline vs 1 device x 2 threads: {two / by_cost:.2f}x")
    print(f"1 device x 2 threads vs x 1 thread:       {one / two:.2f}x")
    mo, mp, mr = (medians["1 device x 1 thread"], medians["2-stage pipeline x 1 thread"],
                  medians["2 replicas x 1 thread"])
    mc = medians["2-stage pipeline, split by cost"]
    mi = medians["2 devices, 4 interleaved stages"]
    print(f"by medians: 2 replicas {mo / mr:.2f}x, 2-stage pipeline split by cost {mo / mc:.2f}x, "
          f"layers as given {mo / mp:.2f}x, interleaved {mo / mi:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
