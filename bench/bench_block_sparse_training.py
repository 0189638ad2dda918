"""Block-sparse training benchmark (issue 44, static sparsity forward and
backward): a stack of BERT-Base FFN blocks (x [M, 768] -> fc 3072 + gelu ->
fc 768, `--layers` of them, M = batch 8 x seq 128 = 1024 rows) trained with
Adam, its FFN weights pruned to `--sparsity` in 16x16 (`--block 1x8`: 1x8) blocks and kept so by
Paddle's ASP (paddle.incubate.asp.decorate: W' = opt(W) * mask after every
update; models.prune.asp_block_pruner computes the masks). Runs in Paddle
2.6.2 (.venv-paddle2: ASP is the legacy static API):

  paddle          Paddle's executor on the ASP program (dense GEMMs)
  tiller          Tiller on the same program, dense GEMMs
  tiller-sparse   Tiller with block_sparse_weights = "masked": the products
                  and the inputs' gradients on the nonzero blocks (the
                  weights' gradients stay dense: Adam moves every entry)

All three start from the same pruned weights and run the same batches; the
losses are compared (rel 1e-4 after the timed steps). Prints the CPU model
and ISA, the machine's dense GEMM rate measured in the run, ms per step,
each step's GEMM rate as a share of it, the ratios, and the share of a dense
step's GEMM flops the sparse step still does (its weight gradients stay
dense).

    .venv-paddle2/bin/python bench/bench_block_sparse_training.py
        [--sparsity 0.9] [--block 16x16|1x8] [--layers 2] [--threads 2] [--iters 6]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "python"))

import numpy as np  # noqa: E402

from common import cpu_description, gemm_gflops  # noqa: E402

sys.path.insert(0, str(REPO))
from models.prune import asp_block_pruner  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sparsity", type=float, default=0.9)
    ap.add_argument("--block", default="16x16", choices=["16x16", "1x8"],
                    help="the ASP masks' blocks (the option's entry is 'masked:1x8' for 1x8)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=6)
    args = ap.parse_args(argv)

    # Paddle's executor takes its GEMM threads from the environment.
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.threads)
    import paddle
    from paddle.incubate import asp

    import tiller

    paddle.enable_static()
    block = tuple(int(v) for v in args.block.split("x"))
    asp.add_supported_layer("fc", asp_block_pruner(args.sparsity, block))
    m, hidden, inter = args.rows, 768, 3072
    main_p, startup = paddle.static.Program(), paddle.static.Program()
    main_p.random_seed = startup.random_seed = 5
    with paddle.static.program_guard(main_p, startup):
        x = paddle.static.data("x", [m, hidden], "float32")
        y = paddle.static.data("y", [m, hidden], "float32")
        h = x
        for _ in range(args.layers):
            h = h + paddle.static.nn.fc(paddle.static.nn.fc(h, inter, activation="gelu"), hidden)
        loss = paddle.mean((h - y) ** 2)
        asp.decorate(paddle.optimizer.Adam(1e-4)).minimize(loss)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    asp.prune_model(main_p, mask_algo="mask_1d", with_mask=True)
    gscope = paddle.static.global_scope()
    names = [v.name for v in main_p.list_vars() if v.persistable and gscope.find_var(v.name)
             and gscope.find_var(v.name).get_tensor()._is_initialized()]
    initial = {n: np.array(gscope.find_var(n).get_tensor()) for n in names}
    density = float(np.mean([(initial[n] != 0).mean() for n in names
                             if n.endswith(".w_0") and not n.endswith("asp_mask")]))
    rng = np.random.default_rng(2)
    steps = args.warmup + args.iters
    feeds = [{"x": rng.standard_normal((m, hidden)).astype("float32"),
              "y": rng.standard_normal((m, hidden)).astype("float32")} for _ in range(steps)]

    rate = gemm_gflops(args.threads)
    print(cpu_description())
    print(f"dense GEMM rate (oneDNN, float32, 4096^3, this run): {rate:.1f} GFLOP/s")
    print(f"{args.layers} FFN blocks {hidden} -> {inter} -> {hidden}, {m} rows, Adam, ASP masks "
          f"in {args.block} blocks: weight density {density:.3f}; {args.threads} threads")
    results = {}

    def timed(run):
        times, losses = [], []
        for i, f in enumerate(feeds):
            t0 = time.perf_counter()
            losses.append(run(f))
            if i >= args.warmup:
                times.append(time.perf_counter() - t0)
        return statistics.median(times), losses

    results["paddle"] = timed(
        lambda f: float(np.asarray(exe.run(main_p, feed=f, fetch_list=[loss])[0])))
    sparse_option = "masked" if args.block == "16x16" else f"masked:{args.block}"
    for name, option in (("tiller", None), ("tiller-sparse", sparse_option)):
        scope = paddle.static.Scope()
        for n, v in initial.items():
            scope.var(n).get_tensor().set(v, paddle.CPUPlace())
        strategy = tiller.IpuStrategy()
        strategy.set_graph_config(is_training=True, micro_batch_size=m)
        opts = {"num_threads": args.threads}
        if option:
            opts["block_sparse_weights"] = option
        strategy.set_options(opts)
        prog = tiller.IpuCompiledProgram(main_p, scope=scope, ipu_strategy=strategy).compile(
            ["x", "y"], [loss])
        results[name] = timed(lambda f: float(np.mean(np.asarray(prog.run(feed=f)[0]))))
    ref = results["paddle"][1]
    # A step's GEMMs, each 2 x M x hidden x inter flops: per FFN block two
    # products, two input gradients (one fewer in all: the feed x needs
    # none) and two weight gradients; the sparse step does the first two
    # kinds on `density` of the blocks.
    gemm = 2.0 * m * hidden * inter
    dense_flops = gemm * (6 * args.layers - 1)
    sparse_flops = gemm * (2 * args.layers + (4 * args.layers - 1) * density)
    for name, (t, losses) in results.items():
        diff = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, ref))
        flops = sparse_flops if name == "tiller-sparse" else dense_flops
        print(f"{name:14s} {t * 1e3:9.1f} ms/step   {flops / t / 1e9:6.1f} GFLOP/s of GEMMs "
              f"({flops / t / 1e9 / rate:.0%} of the dense rate)   losses {losses[0]:.5f} -> "
              f"{losses[-1]:.5f}   rel diff vs paddle {diff:.1e}")
        assert diff < 1e-4, f"{name}: losses differ from Paddle's by {diff:.1e}"
    t_dense, t_sparse = results["tiller"][0], results["tiller-sparse"][0]
    print(f"tiller-sparse / tiller: {t_dense / t_sparse:.2f}x; tiller-sparse / paddle: "
          f"{results['paddle'][0] / t_sparse:.2f}x; the sparse step does "
          f"{sparse_flops / dense_flops:.0%} of the dense step's GEMM flops (products and input "
          f"gradients on {density:.0%} of the blocks, weight gradients dense): at most "
          f"{dense_flops / sparse_flops:.2f}x from the GEMMs")


if __name__ == "__main__":
    main()
