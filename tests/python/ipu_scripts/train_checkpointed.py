"""BERT-tiny pre-training with dropout that saves a checkpoint after every
update and resumes from it when one exists: the kill test of issue 14.

    python train_checkpointed.py OUT.npz PREFIX UPDATES [crash=POINT:U]

Starts from PREFIX's checkpoint when it (or the one before it) exists, at
the update its manifest records, and trains to UPDATES updates, each on the
same data whatever the start (update u's batch). crash=POINT:U sets
TILLER_CHECKPOINT_CRASH_AT=POINT before the save after update U: the process
SIGKILLs itself at that point of the save. Writes the first update it ran
and the final state to OUT.npz.
"""
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT / "python"), str(ROOT), str(ROOT / "tests" / "python")]

import tiller  # noqa: E402
from accumulation_test import _concat, _micro_batches  # noqa: E402
from checkpoint_manifest_test import _program, _state  # noqa: E402
from models import training as T  # noqa: E402

out, prefix, updates = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = dict(a.split("=", 1) for a in sys.argv[4:])
crash_point, crash_update = (args["crash"].split(":") if "crash" in args else ("", -1))
crash_update = int(crash_update)

with T.static_mode():
    program = _program(dropout=0.1)
    micro = _micro_batches("bert", updates)
    first = 0
    if any(Path(prefix + s).exists() for s in (".pdparams", ".prev.pdparams")):
        try:
            program.load(prefix)
            first = program.session.step_count
        except tiller.TillerError:
            # Only the first save may leave nothing complete (killed before
            # its manifest): start over.
            if not Path(prefix + ".tiller.saving").exists() or Path(
                    prefix + ".prev.pdparams").exists():
                raise
            print("no complete checkpoint yet: starting over", flush=True)
    for u in range(first, updates):
        program.run(feed=_concat("bert", micro[u:u + 1], False))
        if u == crash_update:
            os.environ["TILLER_CHECKPOINT_CRASH_AT"] = crash_point
        program.save(prefix)
    np.savez(out, first=first, **{f"state/{k}": v for k, v in _state(program).items()})
