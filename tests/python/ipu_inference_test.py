"""Inference with Paddle Inference's IPU settings (issue 9):
Config.enable_ipu(ipu_device_num, ipu_micro_batch_size, ipu_enable_pipelining,
ipu_batches_per_step) and set_ipu_config(ipu_replica_num=...) on a model
sharded with tiller.ipu_shard_guard and saved by Paddle (legacy .pdmodel,
which keeps the ipu_index attributes). Sharded, pipelined and replicated
runs return, in input order, what one device returns for the whole batch
(rel 1e-6: a micro-batch's GEMMs may block differently from the whole
batch's, nothing else differs)."""
import glob

import numpy as np
import pytest

import tiller
import tiller.inference as ti
from models import sharded
from models import training as T

MICRO, BATCHES, REPLICAS = 3, 4, 2


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("ipu_inference")
    info = T.call_in_format("legacy", "models.sharded:export_inference_here", out_dir=str(d))
    return info["prefix"]


def _predict(prefix, x, ipu=None, replicas=None, threads=1):
    config = ti.Config(prefix + ".pdmodel", prefix + ".pdiparams")
    config.set_cpu_math_library_num_threads(threads)
    if ipu:
        config.enable_ipu(*ipu)
    if replicas:
        config.set_ipu_config(ipu_replica_num=replicas)
    predictor = ti.create_predictor(config)
    return predictor.run([x])[0]


def test_sharded_pipelined_and_replicated_inference_returns_what_one_device_does(model):
    rows = MICRO * BATCHES * REPLICAS
    x = np.random.default_rng(0).standard_normal((rows, sharded.FEATURES)).astype(np.float32)
    one = _predict(model, x)
    assert one.shape == (rows, sharded.CLASSES)
    runs = {
        "2 devices, sequential": _predict(model, x[:MICRO * BATCHES], (2, MICRO, False, BATCHES),
                                          threads=2),
        "2 devices, pipelined": _predict(model, x[:MICRO * BATCHES], (2, MICRO, True, BATCHES),
                                         threads=2),
        "2 replicas x 2 pipelined devices": _predict(model, x, (2, MICRO, True, BATCHES),
                                                     REPLICAS, threads=4),
        "2 replicas x 1 device": _predict(model, x, (1, MICRO, False, BATCHES), REPLICAS,
                                          threads=2),
    }
    for name, out in runs.items():
        want = one[:out.shape[0]]
        assert out.shape == want.shape, name
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-7, err_msg=name)


def test_bad_ipu_inference_configurations_say_what_to_change(model):
    x = np.zeros((MICRO * BATCHES, sharded.FEATURES), np.float32)
    config = ti.Config(model + ".pdmodel", model + ".pdiparams")
    with pytest.raises(tiller.TillerError, match=r"pipelining needs ipu_batches_per_step \(1\) "
                                                 r">= ipu_device_num \(2\)"):
        config.enable_ipu(2, MICRO, True, 1)
    with pytest.raises(tiller.TillerError, match=r"pipelining needs the model sharded over more "
                                                 r"than one device"):
        config.enable_ipu(1, MICRO, True, 4)
    with pytest.raises(tiller.TillerError, match=r"ipu_enable_half_partial \(half precision "
                                                 r"accumulation\) is not implemented"):
        config.set_ipu_config(ipu_enable_half_partial=True)
    with pytest.raises(tiller.TillerError, match=r"input 'x': shape \[12, 32\] holds 384 elements; "
                                                 r"one run takes ipu_batches_per_step 4 x "
                                                 r"ipu_replica_num 2 = 8 micro-batches of \[3, 32\] "
                                                 r"\(its first dim is ipu_micro_batch_size 3\), "
                                                 r"768 elements in all"):
        _predict(model, x, (1, MICRO, False, BATCHES), REPLICAS, threads=2)
    with pytest.raises(tiller.TillerError, match=r"no op of the model is on device 2: its "
                                                 r"ipu_index attributes .* use fewer devices"):
        _predict(model, x, (3, MICRO, False, BATCHES), threads=3)


def test_more_devices_than_threads_share_the_cores_with_a_note(model, capfd):
    """Issue 41 point 8: 2 pipelined devices x 2 replicas on one thread run
    (each device on a thread of its own, taking turns on the cores), say so
    once, and return what one device returns."""
    x = np.random.default_rng(3).standard_normal((MICRO * BATCHES * REPLICAS, sharded.FEATURES))
    x = x.astype(np.float32)
    one = _predict(model, x)
    shared = _predict(model, x, (2, MICRO, True, BATCHES), REPLICAS, threads=1)
    np.testing.assert_allclose(shared, one, rtol=1e-5, atol=1e-6)
    err = capfd.readouterr().err
    assert "4 devices share 1 thread" in err and "results are the same" in err, err
    _predict(model, x, (2, MICRO, True, BATCHES), REPLICAS, threads=1)
    assert "share" not in capfd.readouterr().err  # once per process


def test_an_unsharded_model_is_split_into_stages_of_equal_cost(tmp_path):
    """A model without ipu_index attributes on ipu_device_num 2: the compiler
    splits it into two stages by cost (compile report), pipelined, and the
    outputs still equal one device's."""
    info = T.call_in_format("legacy", "models.sharded:export_inference_here",
                            out_dir=str(tmp_path), stages=1)
    prefix = info["prefix"]
    x = np.random.default_rng(1).standard_normal((MICRO * BATCHES, sharded.FEATURES)).astype(
        np.float32)
    one = _predict(prefix, x)
    config = ti.Config(prefix + ".pdmodel", prefix + ".pdiparams")
    config.set_cpu_math_library_num_threads(2)
    config.enable_ipu(2, MICRO, True, BATCHES)
    predictor = ti.create_predictor(config)
    out = predictor.run([x])[0]
    np.testing.assert_allclose(out, one, rtol=1e-6, atol=1e-7)
    report = predictor.summary()["compile_report"]
    assert "auto_split" in report and "stage 0:" in report and "stage 1:" in report, report


def _lanes(path):
    import json

    events = json.loads(path.read_text())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    by_lane = {}
    for e in events:
        if e["ph"] == "X":
            by_lane.setdefault(names[e["tid"]], []).append(e)
    return by_lane


def test_inference_trace_has_a_lane_per_device_and_replica(model, tmp_path):
    """Config.enable_trace (Tiller's own; the CLI's --trace): after each run
    the file holds every run so far, a lane per device of each replica with
    each micro-batch's segments, and the copies between the stages."""
    path = tmp_path / "infer.json"
    rows = MICRO * BATCHES * REPLICAS
    x = np.random.default_rng(1).standard_normal((rows, sharded.FEATURES)).astype(np.float32)
    config = ti.Config(model + ".pdmodel", model + ".pdiparams")
    config.set_cpu_math_library_num_threads(4)
    config.enable_ipu(2, MICRO, True, BATCHES)
    config.set_ipu_config(ipu_replica_num=REPLICAS)
    config.enable_trace(str(path))
    predictor = ti.create_predictor(config)
    predictor.run([x])
    predictor.run([x])
    lanes = _lanes(path)
    assert {"replica 0 cpu:0", "replica 0 cpu:1", "replica 1 cpu:0", "replica 1 cpu:1",
            "replica 0 copies"} <= set(lanes), sorted(lanes)
    names = sorted(e["name"] for e in lanes["replica 1 cpu:1"])
    # Replica 1 runs micro-batches 1, 3, 5, 7 of each run, forward only.
    want = sorted(f"forward run {r} micro-batch {k}" for r in (1, 2) for k in (1, 3, 5, 7))
    assert names == want, names


def test_cli_run_writes_a_trace(model, tmp_path):
    import subprocess
    from pathlib import Path

    cli = Path(__file__).resolve().parents[2] / "build" / "bin" / "tiller"
    x = np.zeros((MICRO, sharded.FEATURES), np.float32)
    np.save(tmp_path / "x.npy", x)
    path = tmp_path / "cli.json"
    done = subprocess.run([str(cli), "run", model + ".pdmodel", "--input",
                           f"x={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path / "out"),
                           "--trace", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lanes = _lanes(path)
    assert [e["name"] for e in lanes["cpu:0"]] == ["forward run 1"], lanes
