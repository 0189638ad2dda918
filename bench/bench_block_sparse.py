"""Static block sparsity benchmark (issue 44): Tiller's block-sparse linear
kernel against its own dense GEMM (oneDNN) on the same shapes, and a
BERT-Base whose encoder projections are 90% block-pruned against the dense
BERT-Base, both run by Tiller on the same inputs in the same process.

  GEMM     x [M, K] W [K, N] for BERT-Base's projections at batch 8 x seq 128
           (M = 1024): K x N = 768 x 3072 (FFN up), 3072 x 768 (FFN down),
           768 x 2304 (q|k|v); W pruned to `--sparsity` in 16x16 and in 1x8
           blocks, each a one-layer Paddle model; the dense time is the same
           layer with the unpruned W (the pass leaves it dense)
  BERT     bert-base (zoo), batch 8 x seq 128, dense vs models/prune.py at
           `--sparsity` in 16x16 blocks; outputs compared with the dense math
           on the pruned weights (Paddle Inference on the pruned model)

Prints the CPU model and ISA, the machine's dense GEMM rate measured in the
run (bench/common.py gemm_gflops), each time, the speed-ups, and the
sparse kernel's rate in useful GFLOP/s (the nonzero blocks' multiply-adds)
as a share of the dense rate. A GEMM is timed twice: the op alone (Tiller's
op profile) and the predictor's whole run, which adds feeding x and
fetching y (2-4 ms at these sizes, the same for both).

    .venv/bin/python bench/bench_block_sparse.py [--sparsity 0.9] [--threads 2]
        [--iters 40] [--skip-bert]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from common import cpu_description, gemm_gflops, max_abs_diff, tiller_predictor, time_tiller  # noqa: E402,I001

import numpy as np  # noqa: E402


def save_linear(prefix: str, w: np.ndarray, m: int) -> None:
    """y = x W (x [m, K]) as a Paddle inference model (PIR)."""
    import paddle

    paddle.enable_static()
    main, start = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, start):
        x = paddle.static.data("x", [m, w.shape[0]], "float32")
        lin = paddle.nn.Linear(w.shape[0], w.shape[1], bias_attr=False)
        y = lin(x)
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe.run(start)
        scope.find_var(lin.weight.name).get_tensor().set(w, paddle.CPUPlace())
        paddle.static.save_inference_model(prefix, [x], [y], exe, program=main)
    paddle.disable_static()


def gemm_case(d: Path, m: int, k: int, n: int, sparsity: float, block, threads, iters):
    from models.prune import prune_blocks

    rng = np.random.default_rng(1)
    w = rng.standard_normal((k, n)).astype(np.float32)
    x = {"x": rng.standard_normal((m, k)).astype(np.float32)}
    times, ops = {}, {}
    for name, weight in (("dense", w), ("sparse", prune_blocks(w, sparsity, block, rng))):
        prefix = str(d / f"lin_{k}_{n}_{block[0]}x{block[1]}_{name}")
        save_linear(prefix, weight, m)
        pred = tiller_predictor(prefix + ".json", prefix + ".pdiparams", threads)
        times[name], outs = time_tiller(pred, x, 2, iters)
        ops[name] = op_ms(pred, x, iters)
        if name == "sparse":
            want = x["x"] @ weight
            err = max_abs_diff(outs[0], want) / float(np.max(np.abs(want)))
    return times, ops, err


def op_ms(pred, inputs: dict, iters: int) -> float:
    """The GEMM op's own time (ms per run, Tiller's op profile: linear or
    linear_block_sparse), without the run's feed and fetch: the best of 8
    windows of iters / 8 runs, as the VM's noise comes in bursts."""
    arrays = [inputs[n] for n in pred.get_input_names()]
    best = float("inf")
    for _ in range(8):
        pred.enable_profiling(True)
        for _ in range(max(2, iters // 8)):
            pred.run(arrays)
        prof = pred.profile()
        pred.enable_profiling(False)
        best = min(best, sum(t / c for op, t, c in prof if op.startswith("linear")))
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sparsity", type=float, default=0.9)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=40,
                    help="timed runs per GEMM (a few ms each: fewer drift by 2x here)")
    ap.add_argument("--skip-bert", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "python"))
    print(f"CPU: {cpu_description()}; {a.threads} threads")
    rate = gemm_gflops(a.threads)
    print(f"dense float32 GEMM rate (4096^3, this run): {rate:.1f} GFLOP/s")
    m = 1024
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        print(f"GEMM, M = {m}, sparsity {a.sparsity:.0%}:")
        for k, n in ((768, 3072), (3072, 768), (768, 2304)):
            for block in ((16, 16), (1, 8)):
                t, o, err = gemm_case(d, m, k, n, a.sparsity, block, a.threads, a.iters)
                useful = 2 * m * k * n * (1 - a.sparsity) / (o["sparse"] / 1e3) / 1e9
                print(f"  {k:4d}x{n:<4d} {block[0]:2d}x{block[1]:<2d}  GEMM op: dense "
                      f"{o['dense']:6.2f} ms sparse {o['sparse']:6.2f} ms {o['dense'] / o['sparse']:5.2f}x"
                      f"  {useful:6.1f} useful GFLOP/s ({useful / rate:.0%} of the dense rate) | "
                      f"run with feed + fetch: dense {t['dense']:6.2f} ms sparse {t['sparse']:6.2f} ms "
                      f"{t['dense'] / t['sparse']:5.2f}x | rel err {err:.1e}")
        if a.skip_bert:
            return
        from models import export as ex
        from models import make_inputs
        from models.prune import export_pruned

        inputs = make_inputs("bert-base", batch=8, seq_len=128)
        dense = ex.export("bert-base", d / "dense", "pir", batch=8, seq_len=128)
        sparse = export_pruned("bert-base", d / "sparse", a.sparsity, (16, 16), batch=8,
                               seq_len=128)
        t = {}
        for name, prefix in (("dense", str(dense.model_file).rsplit(".", 1)[0]),
                             ("sparse", str(sparse))):
            pred = tiller_predictor(prefix + ".json", prefix + ".pdiparams", a.threads)
            t[name], outs = time_tiller(pred, inputs, 1, max(3, a.iters // 8))
            if name == "sparse":
                want = list(ex.paddle_infer(prefix, inputs, threads=a.threads).values())
                err = max(max_abs_diff(h, w) / float(np.max(np.abs(w))) for h, w in zip(outs, want))
        print(f"BERT-Base batch 8 x seq 128: dense {t['dense']:.1f} ms, {a.sparsity:.0%} "
              f"block-sparse encoder {t['sparse']:.1f} ms: {t['dense'] / t['sparse']:.2f}x; "
              f"outputs vs the dense math on the pruned weights (Paddle Inference): rel {err:.1e}")


if __name__ == "__main__":
    main()
