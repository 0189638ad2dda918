"""The kill test of issue 14, at scale: N times, a BERT-tiny training run
(tests/python/ipu_scripts/train_checkpointed.py: a save after every update)
is SIGKILLed at a random point of a random update's save, then run again; it
must resume from whatever checkpoint loads and end with the uninterrupted
run's parameters, bit for bit. Prints the kills per point and per resumed
update, and fails on the first mismatch.

    .venv/bin/python scripts/kill_test.py [--kills 200] [--updates 6] [--seed 0]

(Several seconds per kill: each is two process starts with Paddle imported.)
"""
import argparse
import collections
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "python" / "ipu_scripts" / "train_checkpointed.py"
POINTS = ["written", "kept", "marked", "params", "opt", "manifest", "done"]


def run(out, prefix, updates, *extra):
    return subprocess.run([sys.executable, str(SCRIPT), str(out), str(prefix), str(updates),
                           *extra], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        p = run(tmp / "whole.npz", tmp / "whole" / "c", args.updates)
        if p.returncode:
            raise SystemExit(p.stderr[-3000:])
        whole = np.load(tmp / "whole.npz")
        states = [k for k in whole.files if k.startswith("state/")]
        per_point, resumed_at = collections.Counter(), collections.Counter()
        for i in range(args.kills):
            point, update = rng.choice(POINTS), rng.randrange(args.updates)
            prefix = tmp / f"run{i}" / "c"
            # Earlier saves complete, the chosen one killed; then resumed.
            killed = run(tmp / "killed.npz", prefix, args.updates, f"crash={point}:{update}")
            if killed.returncode != -9:
                raise SystemExit(f"kill {i} ({point}, update {update}): rc {killed.returncode}\n"
                                 f"{killed.stderr[-3000:]}")
            resumed = run(tmp / "resumed.npz", prefix, args.updates)
            if resumed.returncode:
                raise SystemExit(f"kill {i} ({point}, update {update}): the resumed run failed\n"
                                 f"{resumed.stderr[-3000:]}")
            got = np.load(tmp / "resumed.npz")
            bad = [k for k in states if not np.array_equal(whole[k], got[k])]
            if bad:
                raise SystemExit(f"kill {i} ({point}, update {update}): {len(bad)} tensors differ "
                                 f"from the uninterrupted run, e.g. {bad[0]}")
            per_point[point] += 1
            resumed_at[int(got["first"])] += 1
            if (i + 1) % 10 == 0:
                print(f"{i + 1} kills, all resumed to the uninterrupted parameters "
                      f"({time.monotonic() - start:.0f} s)", flush=True)
    print(f"{args.kills} SIGKILLs during saves, every run resumed and ended bit-identical to the "
          f"uninterrupted one")
    print("kills per point: " + ", ".join(f"{p} {per_point[p]}" for p in POINTS))
    print("resumed from update: " + ", ".join(f"{u}: {n}" for u, n in sorted(resumed_at.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
