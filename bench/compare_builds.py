"""Before/after benchmark of two Tiller builds in the same run: a git
revision (built here in build/compare/<rev>) against this checkout's build,
or two -march targets of one revision (issue 45's dispatched x86-64-v3
build against the -march=native one). For a change that must not be slower
(a restructuring, a portable build), this is the check:
each measurement alternates the two builds, each in a fresh child process
with its own `tiller` module, same models, inputs and threads, and the best
of the rounds' medians is kept per build, so drift of the machine hits both.

    .venv/bin/python bench/compare_builds.py --before 3776d52 [--after .]
        [--models bert-base,resnet50,mobilenet_v3_large] [--batches 1,4]
        [--threads 2] [--iters 10] [--rounds 2] [--train] [--train-layers 12]

A build is `.` (this checkout's build/), REV (a worktree of the revision,
compiled with -march=native as the default build is) or REV@ARCH (compiled
with -DTILLER_ARCH=ARCH, the wheel's portable build: x86-64-v3):

    .venv/bin/python bench/compare_builds.py --before . --after HEAD@x86-64-v3 --train

Model names are the zoo's presets (models/zoo.py; its resnet50 is
paddle.vision's graph) or paddle.vision.models' other ImageNet builds
(mobilenet_v3_large at 224x224, as bench_zoo.py exports it). Prints the CPU model and ISA flags, then per case the median ms of each
build and after/before (below 1.00 is faster). Needs an idle machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import common  # noqa: E402  (the CPU description; puts the repository on sys.path)

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable


def build_revision(spec: str) -> Path:
    """The tree of build `spec` (`.`, REV or REV@ARCH): for a revision, a
    worktree of it with its Release build (library + Python module)."""
    if spec == ".":
        return REPO
    rev, _, arch = spec.partition("@")
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", f"{rev}^{{commit}}"],
                            check=True, capture_output=True, text=True).stdout.strip()
    root = REPO / "build" / "compare" / (commit + (f"-{arch}" if arch else ""))
    src = root / "src"
    if not src.exists():
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(src), commit],
                       check=True)
    build = src / "build"
    env = dict(os.environ, CCACHE_BASEDIR=str(src))
    subprocess.run(["cmake", "-S", str(src), "-B", str(build), "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={PY}",
                    f"-DTILLER_ARCH={arch or 'native'}", "-DTILLER_BUILD_TESTS=OFF"],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["ninja", "-C", str(build)], check=True, env=env, stdout=subprocess.DEVNULL)
    return src


def child(tree: Path, args: list[str]) -> dict:
    """One measurement with `tree`'s tiller module (bench/_time_build.py)."""
    env = dict(os.environ, GLOG_minloglevel="2")
    out = subprocess.run([PY, str(REPO / "bench" / "_time_build.py"), "--tiller-python",
                          str(tree / "python"), *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{tree}: {' '.join(args)} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(trees: dict[str, Path], args: list[str], rounds: int) -> dict[str, float]:
    best = {name: float("inf") for name in trees}
    for _ in range(rounds):
        for name, tree in trees.items():
            best[name] = min(best[name], child(tree, args)["ms"])
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True,
                    help="build to compare against: `.`, REV or REV@ARCH")
    ap.add_argument("--after", default=".", help="build under test (default `.`, this checkout)")
    ap.add_argument("--models", default="bert-base,ernie-3.0-base,resnet50")
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--train", action="store_true", help="also time a BERT training step")
    ap.add_argument("--train-layers", type=int, default=12)
    ap.add_argument("--train-batch", type=int, default=8)
    args = ap.parse_args()

    sys.path.insert(0, str(REPO))
    from models import export

    import bench_zoo

    print(f"CPU: {common.cpu_description()}", flush=True)
    trees = {}
    for name, spec in (("before", args.before), ("after", args.after)):
        print(f"building {name} = {spec} ...", flush=True)
        trees[name] = build_revision(spec)
    for name, tree in trees.items():  # which ISA each build's kernels run (issue 45)
        print(f"{name}: {child(tree, ['isa'])['isa']}", flush=True)
    rows = []
    for preset in args.models.split(","):
        if preset not in export.PRESETS and preset in bench_zoo.VISION:
            model_dir = bench_zoo.export_vision(preset, REPO / "build" / "bench")
        else:
            model_dir = REPO / "build" / "bench" / f"{preset}-pir"
        if not (model_dir / "model.pdiparams").exists():
            print(f"exporting {preset} ...", flush=True)
            export.export(preset, model_dir, "pir")
        for batch in map(int, args.batches.split(",")):
            print(f"{preset} batch {batch} ...", flush=True)
            ms = measure(trees, ["infer", "--model-dir", str(model_dir), "--preset", preset,
                                 "--batch", str(batch), "--seq-len", str(args.seq_len),
                                 "--threads", str(args.threads), "--iters", str(args.iters)],
                         args.rounds)
            rows.append((f"{preset} b{batch}", ms))
    if args.train:
        print(f"bert-base training step ({args.train_layers} layers) ...", flush=True)
        ms = measure(trees, ["train", "--layers", str(args.train_layers), "--batch",
                             str(args.train_batch), "--threads", str(args.threads)], args.rounds)
        rows.append((f"bert-base train b{args.train_batch} L{args.train_layers}", ms))

    print(f"\n{args.threads} threads, best of {args.rounds} rounds of medians "
          f"({args.iters} runs each), fp32; before = {args.before}, after = {args.after}")
    print(f"{'case':<34}{'before ms':>11}{'after ms':>11}{'after/before':>14}")
    for case, ms in rows:
        print(f"{case:<34}{ms['before']:11.2f}{ms['after']:11.2f}{ms['after'] / ms['before']:13.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
