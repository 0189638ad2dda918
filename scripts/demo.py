"""`make demo`: export BERT-Base with Paddle, run it with Tiller and with
Paddle Inference on the same inputs, print outputs, agreement and latency.

Options: --preset (default bert-base), --batch, --seq-len, --threads, --iters.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import common  # noqa: E402
from models import export  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="bert-base")
    ap.add_argument("--format", default="pir", choices=["pir", "legacy"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=common.threads_default())
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--out", default=str(common.REPO / "build" / "demo"))
    args = ap.parse_args()

    model_dir = Path(args.out) / f"{args.preset}-{args.format}"
    if not (model_dir / "model.pdiparams").exists():
        print(f"[1/3] exporting {args.preset} ({args.format}) with Paddle to {model_dir} ...", flush=True)
        t0 = time.perf_counter()
        export.export(args.preset, model_dir, args.format)
        print(f"      done in {time.perf_counter() - t0:.1f} s", flush=True)
    else:
        print(f"[1/3] using the export in {model_dir}", flush=True)
    model_file, params_file = export.resolve_model(model_dir)
    inputs = export.make_inputs(args.preset, batch=args.batch, seq_len=args.seq_len, seed=0)
    print("      inputs: " + ", ".join(f"{k} {v.dtype}{list(v.shape)}" for k, v in inputs.items()))

    print(f"[2/3] Tiller: compile and run ({args.threads} threads) ...", flush=True)
    t0 = time.perf_counter()
    predictor = common.tiller_predictor(model_file, params_file, args.threads)
    names = predictor.get_input_names()
    predictor.run([inputs[n] for n in names])
    print(f"      load + compile + first run: {(time.perf_counter() - t0) * 1e3:.0f} ms", flush=True)
    tiller_ms, tiller_outs = common.time_tiller(predictor, inputs, warmup=2, iters=args.iters)

    print(f"[3/3] Paddle Inference ({args.threads} threads) ...", flush=True)
    paddle_ms, paddle_outs = common.time_paddle(model_file, inputs, args.threads, 2, args.iters)

    print("\noutputs (Tiller vs Paddle Inference):")
    worst = 0.0
    for name, t, p in zip(predictor.get_output_names(), tiller_outs, paddle_outs):
        d = common.max_abs_diff(t, p)
        worst = max(worst, d)
        print(f"  {name:<16} {str(list(t.shape)):<16} max|diff| {d:.2e}   first values {t.ravel()[:4]}")
    print(f"\nlatency, batch {args.batch}, seq {args.seq_len}, median of {args.iters}:")
    print(f"  Tiller            {tiller_ms:9.2f} ms")
    print(f"  Paddle Inference  {paddle_ms:9.2f} ms")
    print(f"  speed-up          {paddle_ms / tiller_ms:9.2f}x")
    if args.preset == "bert-base":
        gflop = common.bert_gflop(12, 768, 3072, args.seq_len, args.batch)
        rate = gflop / (tiller_ms / 1e3)
        gemm = common.gemm_gflops(args.threads)
        print(f"  Tiller: {rate:.0f} GFLOP/s = {100 * rate / gemm:.0f}% of the machine's fp32 "
              f"GEMM rate measured now ({gemm:.0f} GFLOP/s: a 4096^3 matmul via oneDNN, "
              f"{args.threads} threads)")
    ok = worst <= 1e-4 * max(1.0, max(float(abs(p).max()) for p in paddle_outs))
    print("\nagreement with Paddle: " + ("OK" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
