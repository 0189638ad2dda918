"""One measurement for bench/compare_builds.py with the `tiller` module of a
given tree (--tiller-python DIR, put first on sys.path): prints {"ms": ...}
as its last line.

    _time_build.py --tiller-python DIR infer --model-dir D --preset P --batch B ...
    _time_build.py --tiller-python DIR train --layers L --batch B --threads T
    _time_build.py --tiller-python DIR isa     (prints {"isa": the build's ISA line})
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiller-python", required=True)
    sub = ap.add_subparsers(dest="mode", required=True)
    inf = sub.add_parser("infer")
    inf.add_argument("--model-dir", required=True)
    inf.add_argument("--preset", required=True)
    inf.add_argument("--batch", type=int, default=1)
    inf.add_argument("--seq-len", type=int, default=128)
    inf.add_argument("--threads", type=int, default=2)
    inf.add_argument("--iters", type=int, default=10)
    tr = sub.add_parser("train")
    tr.add_argument("--layers", type=int, default=12)
    tr.add_argument("--batch", type=int, default=8)
    tr.add_argument("--threads", type=int, default=2)
    tr.add_argument("--steps", type=int, default=3)
    sub.add_parser("isa")
    args = ap.parse_args()

    sys.path.insert(0, str(REPO / "bench"))
    sys.path.insert(0, str(REPO))
    import common  # noqa: F401  (puts this checkout's python/ on sys.path)

    sys.path.insert(0, args.tiller_python)  # ... after which the measured tree wins
    import tiller

    assert Path(tiller.__file__).resolve().is_relative_to(Path(args.tiller_python).resolve()), \
        f"imported {tiller.__file__}, not the tree under test"
    if args.mode == "isa":
        about = tiller.about() if hasattr(tiller, "about") else "(no ISA report)"
        keep = ("built for", "chosen", "Tiller", "oneDNN")
        print(json.dumps({"isa": "; ".join(line for line in about.splitlines()
                                           if line.startswith(keep))}))
        return 0
    if args.mode == "infer":
        from models import export

        model_file, params_file = export.resolve_model(Path(args.model_dir))
        predictor = common.tiller_predictor(model_file, params_file, args.threads)
        if args.preset not in export.PRESETS:  # paddle.vision.models' builds (bench_zoo.py)
            import numpy as np

            rng = np.random.default_rng(0)
            inputs = {"x": rng.standard_normal((args.batch, 3, 224, 224)).astype(np.float32)}
        else:
            inputs = export.make_inputs(args.preset, batch=args.batch, seq_len=args.seq_len,
                                        seed=0)
        ms, _ = common.time_tiller(predictor, inputs, 2, args.iters)
    else:
        import bench_training as B
        from models import training as T

        cfg = T.pretrain_config("bert-base")
        cfg = dataclasses.replace(cfg, bert=dataclasses.replace(cfg.bert, num_layers=args.layers))
        built = T.build_bert_pretrain(cfg, T.OptSpec("adam", lr=1e-4), seed=0)
        batches = T.make_batches("bert", cfg, 1 + args.steps, args.batch, seed=1)
        times, _ = B.tiller_step_time(built, batches, 1, args.threads)
        ms = statistics.median(times)
    print(json.dumps({"ms": ms}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
