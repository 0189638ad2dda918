"""scripts/pretrain_demo.py (`make demo`'s first part) keeps working: a
few updates of a small BERT on 2 replicas x 2 pipeline stages over the
license texts Debian installs, then the held-out evaluation."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not Path("/usr/share/common-licenses").is_dir(),
                    reason="needs Debian's /usr/share/common-licenses")
def test_pretrain_demo_runs_its_pipeline_and_evaluates():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "pretrain_demo.py"), "--updates",
                        "5", "--layers", "2", "--hidden", "64"],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, GLOG_minloglevel="2"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "2 replicas x 2 pipeline stages, accumulation 4" in out, out
    assert "update    5/5" in out and "mlm accuracy" in out and "seq/s" in out, out
    assert "pipeline: 3 micro-batches in flight" in out, out  # 2 stages + 1
    assert "held-out masked-word accuracy:" in out, out
    assert "[predicted / actual]" in out, out
