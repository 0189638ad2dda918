"""Crash safety of checkpoints (issue 14): a training process SIGKILLed at
any point of a save never leaves a checkpoint that loads wrongly; the
previous checkpoint stays loadable, and the run resumed from whatever loads
ends with the uninterrupted run's parameters, bit for bit (BERT-tiny with
dropout: the masks follow the step the checkpoint records).

ipu_scripts/train_checkpointed.py saves after every update; the C++ save
kills its own process at a named point when TILLER_CHECKPOINT_CRASH_AT says
so (scripts/kill_test.py does the same at random points and updates, many
times). The points, in the order a save passes them: its new files written
under temporary names; the main set kept as the previous set; the mark of a
save under way; .pdparams, .pdopt and the manifest renamed into place; the
mark removed.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parent / "ipu_scripts" / "train_checkpointed.py"
UPDATES = 6


def _run(out, prefix, *args):
    return subprocess.run([sys.executable, str(SCRIPT), str(out), str(prefix), str(UPDATES),
                           *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whole")
    p = _run(tmp / "whole.npz", tmp / "ckpt" / "c")
    assert p.returncode == 0, p.stderr[-3000:]
    return np.load(tmp / "whole.npz")


# (point, the save it kills, the update the resumed run starts from): a kill
# before the manifest is in place leaves the save before it to load.
@pytest.mark.parametrize("point, update, resumes_at", [
    ("written", 3, 3), ("kept", 3, 3), ("marked", 3, 3), ("params", 3, 3), ("opt", 3, 3),
    ("manifest", 3, 4), ("done", 3, 4),
    # The first save: nothing complete yet, the run starts over (after "opt" both
    # pickles are in place, but without the manifest they are not a checkpoint).
    ("params", 0, 0), ("opt", 0, 0), ("manifest", 0, 1),
])
def test_a_save_killed_at_any_point_leaves_a_checkpoint_that_resumes_the_run(
        tmp_path, uninterrupted, point, update, resumes_at):
    prefix = tmp_path / "ckpt" / "c"
    killed = _run(tmp_path / "killed.npz", prefix, f"crash={point}:{update}")
    assert killed.returncode == -9, (killed.returncode, killed.stderr[-3000:])
    assert not (tmp_path / "killed.npz").exists()
    resumed = _run(tmp_path / "resumed.npz", prefix)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    got = np.load(tmp_path / "resumed.npz")
    assert int(got["first"]) == resumes_at
    states = [k for k in uninterrupted.files if k.startswith("state/")]
    assert states
    for k in states:
        assert np.array_equal(uninterrupted[k], got[k]), k
    if point in ("params", "opt") and update > 0:
        assert "the last save to it was interrupted" in resumed.stderr, resumed.stderr[-2000:]
    # The completed saves after it cleared the killed save's leftovers.
    left = sorted(p.name for p in prefix.parent.iterdir() if ".tmp-" in p.name)
    assert not left, left
    assert not (prefix.parent / "c.tiller.saving").exists()
