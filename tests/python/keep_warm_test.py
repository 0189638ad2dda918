"""A predictor's threads stay awake for a bounded time after each run (issue
46): its device keeps its team spinning for 100 ms (cpu_backend.h's
keep-warm), so a request after an idle gap does not wait for them to wake,
then lets them sleep; Config.set_cpu_keep_warm_ms and TILLER_KEEP_WARM_MS
(which overrides it) set the window (0: off). Told by
the process's CPU time while the caller sleeps: spinning threads use it,
sleeping ones do not. Each case runs in a fresh process, so no other test's
threads count."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import sys, time, numpy as np
import tiller.inference as ti
config = ti.Config(sys.argv[1])
config.set_cpu_math_library_num_threads(2)
if len(sys.argv) > 2:
    config.set_cpu_keep_warm_ms(int(sys.argv[2]))
p = ti.create_predictor(config)
feeds = [np.ones([d if d > 0 else 1 for d in p.get_input_shape(n)], np.int64)
         for n in p.get_input_names()]
p.run(feeds)
def cpu_ms_while_sleeping(ms):
    c0 = time.process_time()
    time.sleep(ms / 1e3)
    return (time.process_time() - c0) * 1e3
p.run(feeds)
early = cpu_ms_while_sleeping(50)    # within the window
time.sleep(0.3)                      # past it
late = cpu_ms_while_sleeping(100)
print(early, late)
"""


# A team kept warm spins both its threads through the 50 ms probe (close to
# 100 ms of CPU time when the machine is idle). With the window off the
# process still uses CPU time right after a run that is not Tiller's: on a
# 2-CPU AMD Zen 4 VM 9-35 ms over those 50 ms, most of it numpy's OpenBLAS
# pool threads spinning (perf: blas_thread_server; 8-12 ms with
# OPENBLAS_NUM_THREADS=1, which _probe sets), the rest libgomp's spin
# before its threads sleep; after the window, under 1 ms. "Off" is therefore told as less than
# one thread spinning through the probe, which a kept-warm team exceeds
# twice over.
OFF_MS = 50.0


def _probe(model_dir: Path, keep_warm: str | None,
           config_ms: int | None = None) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if k != "TILLER_KEEP_WARM_MS"}
    # numpy's OpenBLAS pool would spin beside Tiller's threads (above): the
    # probe measures Tiller's alone.
    env["OPENBLAS_NUM_THREADS"] = "1"
    if keep_warm is not None:
        env["TILLER_KEEP_WARM_MS"] = keep_warm
    env["PYTHONPATH"] = str(REPO / "python")
    args = [str(model_dir)] + ([] if config_ms is None else [str(config_ms)])
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    early, late = map(float, r.stdout.split()[-2:])
    return early, late


@pytest.fixture(scope="module")
def bert(zoo):
    return Path(zoo.export("bert-tiny", "pir").model_file).parent


def test_a_predictors_threads_spin_for_a_bounded_time_after_a_run(bert):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: a 2-thread team oversubscribes it and does not spin")
    early, late = _probe(bert, None)
    # Two spinning threads for 50 ms: close to 100 ms of CPU time on an idle
    # machine; 10 ms leaves room for a busy one. Afterwards: asleep.
    assert early > 10.0, f"{early:.1f} ms of CPU time while kept warm"
    assert late < 10.0, f"{late:.1f} ms of CPU time after the window"


def test_tiller_keep_warm_ms_0_lets_them_sleep_at_once(bert):
    early, late = _probe(bert, "0")
    assert early < OFF_MS and late < 10.0, (early, late)


def test_tiller_keep_warm_ms_must_be_milliseconds(bert):
    env = dict(os.environ, TILLER_KEEP_WARM_MS="fast", PYTHONPATH=str(REPO / "python"))
    r = subprocess.run([sys.executable, "-c", PROBE, str(bert)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode != 0
    assert "TILLER_KEEP_WARM_MS=fast: expected milliseconds from 0 (off) to 10000" in r.stderr


def test_config_set_cpu_keep_warm_ms_sets_the_window(bert):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: a 2-thread team oversubscribes it and does not spin")
    early, late = _probe(bert, None, config_ms=0)
    assert early < OFF_MS and late < 10.0, (early, late)
    # 1000 ms: still spinning at 350-450 ms after the run, where the
    # default 100 ms window has long closed (the first test).
    early, late = _probe(bert, None, config_ms=1000)
    assert early > 10.0 and late > 10.0, (early, late)


def test_the_environment_overrides_the_config(bert):
    early, late = _probe(bert, "0", config_ms=1000)
    assert early < OFF_MS and late < 10.0, (early, late)


def test_config_set_cpu_keep_warm_ms_refuses_what_is_not_a_window():
    import tiller.inference as ti

    config = ti.Config()
    for bad in (-2, 10001):
        with pytest.raises(ti.TillerError, match=r"SetCpuKeepWarmMs\(.*\): expected milliseconds "
                                                 r"from 0 \(off\) to 10000"):
            config.set_cpu_keep_warm_ms(bad)
    assert config.cpu_keep_warm_ms() == -1
    config.set_cpu_keep_warm_ms(250)
    assert config.cpu_keep_warm_ms() == 250
    assert "cpu_keep_warm_ms" in config.summary() and "250" in config.summary()
