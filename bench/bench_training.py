"""Training benchmark (issues 4 and 12): one BERT pretraining step (MLM +
NSP), BERT-Base, seq 128, micro-batch 8, Adam, fp32 — Paddle's CPU static
executor vs Tiller on the same program, same initial parameters, same
batches, same process and thread count, and PyTorch's eager training of the
same model (bench/torch_bert.py, in .venv-torch and a process of its own;
skipped with a note when .venv-torch is missing) from the same weights,
batches and per-step learning rates, its losses compared with Paddle's.
Prints the median step time after warm-up, achieved GFLOP/s, Tiller's
speedups and its share of the fp32 GEMM rate measured in the run.

    .venv/bin/python bench/bench_training.py [--preset bert-base] [--batch 8]
        [--optimizer adam] [--warmup 2] [--iters 5] [--threads 2] [--rounds 2]
        [--format pir]
    .venv/bin/python bench/bench_training.py --bf16    # Tiller fp32 vs Tiller bf16

--bf16 runs no Paddle step: Tiller in float32 and in bfloat16 (enable_fp16,
half_dtype bfloat16) train the same program from the same state on the same
batches, their steps alternating, and it prints both step times, the
speed-up and both losses per step side by side.

FLOPs (stated, not measured): a training step is counted as 3x the forward
matmul FLOPs (backward = one matmul for the input gradient and one for the
weight gradient per forward matmul), 2 FLOPs per multiply-add:
  encoder   B*L*[2*S*(4h^2 + 2*h*I) + 4*S^2*h]   (QKV/out projections, FFN,
                                                  QK^T and PV)
  heads     2*B*h^2 (pooler) + 4*B*h (NSP) + 2*P*h^2 (MLM transform)
            + 2*P*h*V (decoder tied to the word embeddings), P = B*max_predictions
Embeddings, softmax, LayerNorm, GELU and the optimizer update are not
counted (they are memory-bound, a few % of the FLOPs).

The default run is 2 rounds of 1 warm-up + 3 timed steps of BERT-Base per
engine (the engines in turn; each engine's best round median counts):
Paddle's CPU executor needs 5-6 s per step on the 2-core Intel machine
(about 100 GFLOP/s), Tiller and PyTorch 2-4 s, so about five minutes in all
(more where Paddle's math library is slow: 45-80 s per step on an AMD
machine once). Tiller's side is ``tiller_step_time`` below.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="bert-base", help="models.training PRETRAIN_PRESETS")
    ap.add_argument("--batch", type=int, default=8, help="micro-batch size")
    ap.add_argument("--layers", type=int, default=None,
                    help="override the preset's encoder layers (quick runs)")
    ap.add_argument("--optimizer", default="adam")
    ap.add_argument("--clip-norm", type=float, default=0.0,
                    help="global-norm clipping (0 = none, the plain Adam step)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2,
                    help="rounds of Paddle, Tiller, PyTorch in turn; each engine's best median")
    ap.add_argument("--format", default="pir", choices=["pir", "legacy"],
                    help="program form; Paddle reads FLAGS_enable_pir_api at import")
    ap.add_argument("--profile", action="store_true",
                    help="one more Paddle step under paddle.profiler: time by op type")
    ap.add_argument("--bf16", action="store_true", help="Tiller fp32 vs Tiller bf16 (no Paddle)")
    return ap.parse_args(argv)


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None:
    # Paddle's CPU kernels (MKL / Eigen / oneDNN) size their OpenMP pools
    # when Paddle is imported: the thread count must be in the environment
    # first. FLAGS_paddle_num_threads is Paddle's own math-library setting.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "FLAGS_paddle_num_threads"):
        os.environ[var] = str(ARGS.threads)
    os.environ["FLAGS_enable_pir_api"] = "1" if ARGS.format == "pir" else "0"
    os.environ.setdefault("GLOG_minloglevel", "2")

import common  # noqa: E402  (puts the repository on sys.path)
import numpy as np  # noqa: E402

from models import training as T  # noqa: E402


def train_gflop(cfg: T.PretrainConfig, batch: int) -> float:
    """GFLOP of one training step by the formula in the module docstring."""
    return common.pretrain_train_gflop(cfg, batch)


def paddle_step_times(built: T.BuiltProgram, batches: list, warmup: int):
    """Paddle's executor: ms per step (exe.run + scheduler step) after
    ``warmup`` steps, and every step's losses."""
    import paddle

    scope = paddle.static.Scope()
    exe = T.init_scope(built, scope)
    times, losses = [], []
    for i, feed in enumerate(batches):
        t0 = time.perf_counter()
        outs = T.run_step(built, exe, scope, feed)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
        losses.append([float(np.asarray(o).reshape(())) for o in outs])
    return times, np.asarray(losses)


def paddle_profile(built: T.BuiltProgram, feed: dict) -> None:
    """Paddle's own per-op-type CPU time for one step (after the timed ones)."""
    import paddle
    import paddle.profiler as profiler

    scope = paddle.static.Scope()
    exe = T.init_scope(built, scope)
    T.run_step(built, exe, scope, feed)                # warm-up in this scope
    # on_trace_ready: no chrome trace files (default: ./profiler_log)
    prof = profiler.Profiler(targets=[profiler.ProfilerTarget.CPU], on_trace_ready=lambda p: None)
    prof.start()
    T.run_step(built, exe, scope, feed)
    prof.step()
    prof.stop()
    prof.summary(op_detail=False, sorted_by=profiler.SortedKeys.CPUTotal, time_unit="ms")


def tiller_step_time(built: T.BuiltProgram, batches: list, warmup: int, threads: int):
    """Tiller's side: compile ``built.main`` for training (from a scope
    initialised like Paddle's: T.init_scope(built, scope)), run every batch
    in order, and return (ms per step after ``warmup`` steps, losses
    [n_steps, n_fetch]) like paddle_step_times. The first step includes
    compilation, so keep warmup >= 1."""
    import paddle

    from models.tiller_train import _compile

    scope = paddle.static.Scope()
    T.init_scope(built, scope)
    prog = _compile(built, scope, threads, len(batches[0][built.feed_names[0]]))
    times, losses = [], []
    for i, feed in enumerate(batches):
        t0 = time.perf_counter()
        outs = prog.run(feed=feed)
        if built.lr_scheduler is not None:
            built.lr_scheduler.step()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
        losses.append([float(np.asarray(o).reshape(())) for o in outs])
    summary = prog.session.summary()
    print(f"Tiller step memory: {summary.arena_bytes / 2**20:.0f} MiB activations/gradients/workspace, "
          f"{summary.state_bytes / 2**20:.0f} MiB parameters + optimizer state; "
          f"{summary.in_place_updates} state updates in place, {summary.copied_updates} copied",
          flush=True)
    return times, np.asarray(losses)


TORCH_PYTHON = common.REPO / ".venv-torch" / "bin" / "python"


def lr_per_step(built: T.BuiltProgram, n: int) -> list[float]:
    """The learning rate each of ``n`` steps runs with (the scheduler's value
    before the step), leaving the scheduler where it was."""
    sched = built.lr_scheduler
    if sched is None:
        return [built.opt_spec.peak_lr] * n
    start = sched.state_dict()
    lrs = []
    for _ in range(n):
        lrs.append(float(sched.get_lr()))
        sched.step()
    T.set_lr_state(built, start)
    return lrs


def torch_step_times(built: T.BuiltProgram, batches: list, warmup: int, threads: int):
    """PyTorch eager (bench/torch_bert.py in .venv-torch, its own process):
    the same model, initial weights, batches and learning rates; returns
    (ms per step after ``warmup``, losses [n_steps, 3], torch version) or
    (None, None, why)."""
    if not TORCH_PYTHON.exists():
        return None, None, "PyTorch: not installed (scripts/setup_torch.sh; make bench-train runs it)"
    import tempfile

    bert = built.config.bert
    arrays = {f"cfg.{f.name}": np.asarray(getattr(bert, f.name))
              for f in dataclasses.fields(bert) if isinstance(getattr(bert, f.name), (int, float))}
    for path, name in built.param_paths.items():
        arrays[f"param.{path}"] = built.init_state[name]
    for i, feed in enumerate(batches):
        for k, v in feed.items():
            arrays[f"batch{i}.{k}"] = v
    arrays["lrs"] = np.asarray(lr_per_step(built, len(batches)), np.float64)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "bert.npz")
        np.savez(data, **arrays)
        r = subprocess.run([str(TORCH_PYTHON), str(common.REPO / "bench" / "torch_bert.py"), data,
                            "--threads", str(threads), "--warmup", str(warmup)],
                           capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return None, None, f"PyTorch: failed: {r.stderr.strip()[-500:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return out["times_ms"], np.asarray(out["losses"]), f"torch {out['torch']}, {out['threads']} threads"


def run_setup(args):
    """The model config (the preset, --layers applied), the optimizer and the
    number of steps a run takes."""
    cfg = T.pretrain_config(args.preset)
    if args.layers:
        cfg = dataclasses.replace(cfg, bert=dataclasses.replace(cfg.bert, num_layers=args.layers))
    spec = T.OptSpec(args.optimizer, lr=1e-4, clip_norm=args.clip_norm or None)
    return cfg, spec, args.warmup + args.iters


def main_bf16(args) -> int:
    """Tiller float32 and bfloat16 steps, alternating, same program, state and batches."""
    import paddle

    from models.tiller_train import _compile

    cfg, spec, n = run_setup(args)
    print(f"CPU: {common.cpu_description()}")
    rates = {p: common.gemm_gflops(args.threads, p) for p in ("float32", "bfloat16")}
    print(f"machine GEMM rates measured now (4096^3 matmul via oneDNN, {args.threads} threads): "
          f"fp32 {rates['float32']:.0f}, bf16 {rates['bfloat16']:.0f} GFLOP/s", flush=True)
    print(f"{args.preset} ({cfg.bert.num_layers} layers) seq {cfg.seq_len} batch {args.batch} "
          f"{args.optimizer}, {args.threads} threads; {args.warmup} warm-up + {args.iters} timed "
          f"steps each, float32 and bfloat16 alternating", flush=True)
    built = T.build_bert_pretrain(cfg, spec, seed=0)
    batches = T.make_batches("bert", cfg, n, args.batch, seed=1)
    progs = {}
    for name, half in (("fp32", None), ("bf16", "bfloat16")):
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        progs[name] = _compile(built, scope, args.threads, args.batch, half_dtype=half)
    times = {k: [] for k in progs}
    losses = {k: [] for k in progs}
    for i, feed in enumerate(batches):
        for name, prog in progs.items():
            t0 = time.perf_counter()
            outs = prog.run(feed=feed)
            if i >= args.warmup:
                times[name].append((time.perf_counter() - t0) * 1e3)
            losses[name].append(float(np.asarray(outs[0]).reshape(())))
    gflop = train_gflop(cfg, args.batch)
    f32, b16 = statistics.median(times["fp32"]), statistics.median(times["bf16"])
    print(f"\ntraining step = {gflop:.1f} GFLOP (3x forward matmuls)")
    print(f"losses fp32: {' '.join(f'{v:.4f}' for v in losses['fp32'])}")
    print(f"losses bf16: {' '.join(f'{v:.4f}' for v in losses['bf16'])}")
    print(f"Tiller fp32 {f32:8.1f} ms/step ({gflop / f32 * 1e3:6.1f} GFLOP/s, "
          f"{100 * gflop / f32 * 1e3 / rates['float32']:.0f}% of the fp32 GEMM rate)  "
          f"bf16 {b16:8.1f} ms/step ({gflop / b16 * 1e3:6.1f} GFLOP/s, "
          f"{100 * gflop / b16 * 1e3 / rates['bfloat16']:.0f}% of the bf16 GEMM rate)  "
          f"speed-up {f32 / b16:.2f}x")
    print("target (issue 10): bf16 >= 1.5x fp32 with AVX512_BF16, >= 2.5x with AMX")
    return 0


def fmt_ms(v):
    return f"{v:9.1f}" if v is not None else "      n/a"


def main(args) -> int:
    if args.bf16:
        return main_bf16(args)
    cfg, spec, n = run_setup(args)
    print(f"CPU: {common.cpu_description()}")
    peak = common.gemm_gflops(args.threads)
    print(f"machine fp32 GEMM rate measured now (4096^3 matmul via oneDNN, {args.threads} "
          f"threads): {peak:.0f} GFLOP/s", flush=True)
    print(f"{args.preset} ({cfg.bert.num_layers} layers) seq {cfg.seq_len} batch {args.batch} "
          f"{args.optimizer} fp32, {args.format} program, {args.threads} threads; "
          f"{args.warmup} warm-up + {args.iters} timed steps, {args.rounds} round(s)", flush=True)
    t0 = time.perf_counter()
    built = T.build_bert_pretrain(cfg, spec, seed=0)
    batches = T.make_batches("bert", cfg, n, args.batch, seed=1)
    print(f"built in {time.perf_counter() - t0:.1f} s; Paddle ...", flush=True)
    lr_start = built.lr_scheduler.state_dict()
    # Rounds of the three engines in turn, each from the same initial state;
    # each engine's best median counts (the machine's speed drifts by 10-20%
    # over minutes: every engine gets the same chances at a fast phase).
    p_meds, t_meds, pt_meds = [], [], []
    t_ms, why, loss_diff, pt_times, pt_losses = None, "", 0.0, None, None
    rates = [peak]
    for r in range(args.rounds):
        if r > 0:  # the rate again, between rounds: the highest one measured counts
            rates.append(common.gemm_gflops(args.threads))
        if args.rounds > 1:
            print(f"round {r + 1} of {args.rounds} (GEMM rate {rates[-1]:.0f} GFLOP/s): Paddle ...",
                  flush=True)
        T.set_lr_state(built, lr_start)
        p_times, p_losses = paddle_step_times(built, batches, args.warmup)
        p_meds.append(statistics.median(p_times))
        if not why:
            try:
                T.set_lr_state(built, lr_start)    # Tiller's run starts at step 0 too
                t_times, t_losses = tiller_step_time(built, batches, args.warmup, args.threads)
                t_meds.append(statistics.median(t_times))
                loss_diff = max(loss_diff,
                                float(np.max(np.abs(t_losses - p_losses) / np.abs(p_losses))))
            except NotImplementedError as e:
                why = f"Tiller: {e}"
        print("PyTorch eager ...", flush=True)
        T.set_lr_state(built, lr_start)        # its learning rates from step 0 too
        pt_times, pt_losses, pt_what = torch_step_times(built, batches, args.warmup, args.threads)
        if pt_times:
            pt_meds.append(statistics.median(pt_times))
    peak = max(rates)
    p_ms = min(p_meds)
    t_ms = min(t_meds) if t_meds else None
    pt_ms = min(pt_meds) if pt_meds else None
    if args.rounds > 1:
        for name, meds in (("Paddle", p_meds), ("Tiller", t_meds), ("PyTorch", pt_meds)):
            if meds:
                print(f"{name} median step per round (ms): {' '.join(f'{m:.0f}' for m in meds)}")
        print(f"GEMM rate per round (GFLOP/s): {' '.join(f'{x:.0f}' for x in rates)}; "
              f"the highest, {peak:.0f}, is the one shares are of")
    gflop = train_gflop(cfg, args.batch)
    print(f"\ntraining step = {gflop:.1f} GFLOP (3x forward matmuls)")
    print(f"Paddle step times (ms): {' '.join(f'{t:.0f}' for t in p_times)}")
    print(f"Paddle losses: {' '.join(f'{v:.4f}' for v in p_losses[:, 0])}")
    if pt_ms:
        print(f"PyTorch losses: {' '.join(f'{v:.4f}' for v in pt_losses[:, 0])}")
    head = (f"{'model':<10} {'batch':>5} {'Paddle ms':>9} {'GFLOP/s':>8} {'Tiller ms':>9} "
            f"{'GFLOP/s':>8} {'speedup':>8}")
    print("\n" + head + "\n" + "-" * len(head))
    t_gf = f"{gflop / (t_ms / 1e3):8.1f}" if t_ms else "     n/a"
    t_pct = f"  (Tiller at {100 * gflop / (t_ms / 1e3) / peak:.0f}% of the GEMM rate)" if t_ms else ""
    ratio = f"{p_ms / t_ms:7.2f}x" if t_ms else "     n/a"
    print(f"{args.preset:<10} {args.batch:>5} {fmt_ms(p_ms)} {gflop / (p_ms / 1e3):8.1f} "
          f"{fmt_ms(t_ms)} {t_gf} {ratio}{t_pct}")
    pt_diff = 0.0
    if pt_ms:
        pt_diff = float(np.max(np.abs(pt_losses - p_losses) / np.abs(p_losses)))
        print(f"{'PyTorch':<10} {args.batch:>5} {fmt_ms(pt_ms)} {gflop / (pt_ms / 1e3):8.1f}   "
              f"({pt_what}; step times {' '.join(f'{t:.0f}' for t in pt_times)} ms)")
        print(f"max relative loss difference PyTorch vs Paddle over {n} steps: {pt_diff:.2e}")
    else:
        print(pt_what)
    if t_ms:
        print(f"max relative loss difference Tiller vs Paddle over {n} steps: {loss_diff:.2e}")
        print(f"target: Tiller >= 2x Paddle -> {'met' if p_ms / t_ms >= 2 else 'NOT met'}")
        if pt_ms:
            r = pt_ms / t_ms
            print(f"target: Tiller >= 1.2x PyTorch eager -> {r:.2f}x, "
                  f"{'met' if r >= 1.2 else 'NOT met'}")
        pct = 100 * gflop / (t_ms / 1e3) / peak
        print(f"target: Tiller >= 75% of the fp32 GEMM rate -> {pct:.0f}%, "
              f"{'met' if pct >= 75 else 'NOT met'}")
    else:
        print(why)
    if args.profile:
        T.set_lr_state(built, lr_start)
        paddle_profile(built, batches[0])
    # A fast wrong answer must not pass: the same steps from the same state
    # agree within float32 reassociation (seen 1e-7 .. 1e-6 relative).
    bad = [name for name, diff in (("Tiller", loss_diff if t_ms else 0.0),
                                   ("PyTorch", pt_diff if pt_ms else 0.0)) if diff > 1e-3]
    if bad:
        print(f"MISMATCH: {', '.join(bad)} losses differ from Paddle's by more than 1e-3 relative")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
