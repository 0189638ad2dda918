"""Manual sharding (issue 9): a program sharded by tiller.ipu_shard_guard as
a Paddle IPU script shards one (models/sharded.py), in both program forms,
trained on 2 devices (enable_manual_shard, num_ipus 2), with accumulation,
2 devices x 2 replicas, and the issue's configurations (b)-(g) (4 pipeline
stages, replicas x stages, batches per step, recomputation, replicated
tensor sharding), 20 updates each, against one device and Paddle's CPU
executor.

Bounds: Tiller's configurations agree with each other within rel 1e-5 per
update loss and 1e-5 max-abs state (the issue's); one device agrees with
Paddle at the training issue's bounds (rel 1e-4, 1e-4 max-abs: Paddle's
backward ops sum in another order than Tiller's autodiff).
"""
import re

import numpy as np
import pytest

import tiller
from models import sharded
from models import training as T

TILLER_RTOL, TILLER_ATOL = 1e-5, 1e-5
PADDLE_RTOL, PADDLE_ATOL = 1e-4, 1e-4

CONFIGS = [
    {"name": "paddle", "paddle": True},
    {"name": "1 device"},
    {"name": "2 devices", "devices": 2},
    {"name": "2 devices, accumulation 4", "devices": 2, "accumulate": 4},
    {"name": "2 devices x 2 replicas, accumulation 2, batches_per_step 2", "devices": 2,
     "replicas": 2, "accumulate": 2, "batches_per_step": 2},
    {"name": "2 stages pipelined, accumulation 4", "devices": 2, "accumulate": 4,
     "pipeline": True},
    {"name": "2 stages pipelined fill-drain, accumulation 4", "devices": 2, "accumulate": 4,
     "pipeline": True, "schedule": "fill_drain"},
    {"name": "2 stages pipelined, 1F1B's least stash, accumulation 4", "devices": 2,
     "accumulate": 4, "pipeline": True, "in_flight": 2},
    {"name": "2 replicas x 2 stages pipelined, accumulation 2, batches_per_step 2",
     "devices": 2, "replicas": 2, "accumulate": 2, "batches_per_step": 2, "pipeline": True},
    # The matrix, (a) being "1 device": (b) 4 stages (the same network
    # under four guards), (c) 2 replicas x 2 stages, (d) (c) + batches per
    # step, (e) 2 replicas, (f) (c) + recomputation, (g) (c) + replicated
    # tensor sharding of every optimizer state.
    {"name": "b: 4 stages pipelined, accumulation 8", "shards": 4, "devices": 4,
     "accumulate": 8, "pipeline": True},
    {"name": "c: 2 replicas x 2 stages pipelined, accumulation 4", "devices": 2, "replicas": 2,
     "accumulate": 4, "pipeline": True, "rts": False},
    {"name": "d: (c) with batches_per_step 4", "devices": 2, "replicas": 2, "accumulate": 4,
     "pipeline": True, "batches_per_step": 4, "rts": False},
    {"name": "e: 2 replicas, accumulation 4", "replicas": 2, "accumulate": 4, "rts": False},
    {"name": "f: (c) with recomputation", "devices": 2, "replicas": 2, "accumulate": 4,
     "pipeline": True, "recompute": True, "rts": False},
    {"name": "g: (c) with replicated tensor sharding", "devices": 2, "replicas": 2,
     "accumulate": 4, "pipeline": True, "rts": True},
    # need_avg_shard: the four-guard program split into 2 stages by cost (its
    # ipu_index 2 and 3 would not exist on 2 devices).
    {"name": "need_avg_shard: 4 guards on 2 pipelined devices", "shards": 4, "devices": 2,
     "accumulate": 4, "pipeline": True, "avg": True},
]


def _same(ref, got, rtol, atol):
    what = f"{got['config']['name']} against {ref['config']['name']}"
    rel = np.abs(got["losses"] - ref["losses"]) / np.abs(ref["losses"])
    assert rel.max() <= rtol, f"{what}: loss rel diff {rel.max():.3g} at update {np.argmax(rel)}"
    for name, value in ref["state"].items():
        if value.size == 0:
            continue
        diff = np.abs(got["state"][name].astype(np.float64) - value).max()
        assert diff <= atol, f"{what}: '{name}' differs by {diff:.3g}"


@pytest.mark.parametrize("fmt", ["pir", "legacy"])
def test_sharded_program_trains_the_same_on_every_configuration(fmt):
    runs = sharded.train(fmt, CONFIGS, opt_spec=T.OptSpec("adam", schedule="constant"))
    by_name = {r["config"]["name"]: r for r in runs}
    # The guards stamped the ops of both halves (the data ops stay unset).
    shards = {(i, s) for _, i, s in by_name["1 device"]["annotations"]}
    assert {(0, 0), (1, 1)} <= shards, shards
    # Sharded: ops run on both devices, values cross through copies.
    graph = by_name["2 devices"]["graph"]
    assert " @1]" in graph and " @0]" in graph and "copy(" in graph, graph[:2000]
    assert " @1]" not in by_name["1 device"]["graph"]
    one = by_name["1 device"]
    _same(by_name["paddle"], one, PADDLE_RTOL, PADDLE_ATOL)
    for name, run in by_name.items():
        if name not in ("paddle", "1 device"):
            _same(one, run, TILLER_RTOL, TILLER_ATOL)
    assert by_name["2 devices x 2 replicas, accumulation 2, batches_per_step 2"]["shape"] == (
        2, 2, 2)
    # The stash: 1F1B keeps at most `stages` + 1 micro-batches in flight
    # (pipeline_in_flight: `stages`), fill-drain the whole window.
    assert by_name["2 stages pipelined, accumulation 4"]["in_flight"] == 3
    assert by_name["2 stages pipelined, 1F1B's least stash, accumulation 4"]["in_flight"] == 2
    assert by_name["2 stages pipelined fill-drain, accumulation 4"]["in_flight"] == 4
    assert by_name["b: 4 stages pipelined, accumulation 8"]["in_flight"] == 5
    b_graph = by_name["b: 4 stages pipelined, accumulation 8"]["graph"]
    assert all(f" @{d}]" in b_graph for d in range(4)), "4 stages, each on its device"
    avg_graph = by_name["need_avg_shard: 4 guards on 2 pipelined devices"]["graph"]
    assert " @0]" in avg_graph and " @1]" in avg_graph and " @2]" not in avg_graph
    g_graph = by_name["g: (c) with replicated tensor sharding"]["graph"]
    # Each replica keeps half of linear_0's moments (32 x 64 elements); the
    # gradients feed the global-norm clip too, so they stay all-reduced.
    assert "all_gather(" in g_graph
    assert re.search(r"state linear_0\.w_0_moment1_0 <- %\d+:float32\[1024\]", g_graph), g_graph


@pytest.mark.parametrize("fmt", ["pir", "legacy"])
def test_ipu_stage_orders_the_pipeline_not_ipu_index(fmt):
    """ipu_shard_guard(index=1, stage=0) for the first half and (index=0,
    stage=1) for the second: Paddle's stage says what runs first, so device 1
    starts the pipeline and device 0 ends it; it trains like one device."""
    configs = [{"name": "1 device"},
               {"name": "device 1 first, pipelined", "devices": 2, "accumulate": 4,
                "pipeline": True}]
    one, flipped = sharded.train(fmt, configs, updates=6, first_index=1, second_index=0,
                                 second_stage=1,
                                 opt_spec=T.OptSpec("adam", schedule="constant"))
    assert {(1, 0), (0, 1)} <= {(i, s) for _, i, s in one["annotations"]}
    _same(one, flipped, TILLER_RTOL, TILLER_ATOL)
    assert flipped["in_flight"] == 3
    # The loss (second half) runs on device 0.
    loss_ops = [ln for ln in flipped["graph"].splitlines()
                if "softmax_with_cross_entropy" in ln or "cross_entropy" in ln]
    assert loss_ops and all("[forward 0/1 @0]" in ln for ln in loss_ops
                            if "[forward" in ln), loss_ops


def test_a_shard_beyond_the_devices_is_refused_before_any_step():
    with pytest.raises(RuntimeError, match=r"is on shard 2 \(ipu_index\), but the compilation "
                                           r"has 2 device\(s\)"):
        sharded.train("pir", [{"name": "2 devices", "devices": 2}], second_index=2, updates=1)


def test_shard_guard_stamps_ops_and_inner_guards_win():
    import paddle

    with T.static_mode():
        main = paddle.static.Program()
        with paddle.static.program_guard(main):
            x = paddle.static.data("x", [2, 3], "float32")
            with tiller.ipu_shard_guard(index=1, stage=2):
                y = paddle.nn.functional.relu(x)
                with tiller.ipu_shard_guard(index=3):
                    z = paddle.exp(y)
                w = paddle.tanh(z)
            relu = tiller.set_ipu_shard(paddle.nn.functional.sigmoid, index=0, stage=0)
            relu(w)
            layer = tiller.set_ipu_shard(paddle.nn.Linear(3, 3), index=2, stage=1)
            layer(w)
        ann = [(op.name(), op.int_attr("ipu_index") if op.has_attr("ipu_index") else -1,
                op.int_attr("ipu_stage") if op.has_attr("ipu_stage") else -1)
               for op in main.global_block().ops]
    assert ("pd_op.data", -1, -1) in ann
    assert ("pd_op.relu", 1, 2) in ann and ("pd_op.exp", 3, 2) in ann
    assert ("pd_op.tanh", 1, 2) in ann and ("pd_op.sigmoid", 0, 0) in ann
    assert ("pd_op.matmul", 2, 1) in ann, ann
    with pytest.raises(ValueError, match="index must be an integer >= -1"):
        with tiller.ipu_shard_guard(index=-2):
            pass
    with pytest.raises(TypeError, match="expects a paddle.nn.Layer or a function"):
        tiller.set_ipu_shard(3)


def test_bad_pipeline_configurations_fail_before_any_step():
    two_stages = {"name": "pipelined", "devices": 2, "pipeline": True, "accumulate": 4}
    # Without accumulation (PopART's continuous pipelining) a run's
    # micro-batches must fill the pipeline.
    with pytest.raises(RuntimeError, match=r"batches_per_step 1 is less than the 2 pipeline "
                                           r"stages"):
        sharded.train("pir", [dict(two_stages, accumulate=1)], updates=1)
    # The first half on device 1, the second on device 0, both stage 0: the
    # pipeline runs by device, and values would flow back.
    with pytest.raises(RuntimeError, match=r"the pipeline's stage order runs backwards: .* on "
                                           r"device 0 \(ipu_stage 0\) reads a value computed "
                                           r"later in the forward pass, by .* on device 1 "
                                           r"\(ipu_stage 0\)"):
        sharded.train("pir", [two_stages], updates=1, first_index=1, second_index=0,
                      second_stage=0)
    with pytest.raises(RuntimeError, match=r"pipelining needs enable_manual_shard"):
        sharded.train("pir", [{"name": "x", "devices": 1, "pipeline": True}], updates=1)
    with pytest.raises(RuntimeError, match=r"option 'pipeline_schedule' takes '1f1b' or "
                                           r"'fill_drain', got 'gpipe'"):
        sharded.train("pir", [dict(two_stages, schedule="gpipe")], updates=1)


def test_trace_shows_each_devices_work_and_the_pipeline_overlap(tmp_path):
    """trace_path writes a Chrome / Perfetto trace: a lane per device of each
    replica with its forward / backward / update segments, lanes of copies and
    all-reduces; in a pipeline the two stages' lanes overlap in time."""
    import json

    path = tmp_path / "trace.json"
    sharded.train("pir", [{"name": "traced", "devices": 2, "replicas": 2, "accumulate": 4,
                           "pipeline": True, "trace": str(path)}], updates=2)
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    lanes = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"replica 0 cpu:0", "replica 0 cpu:1", "replica 1 cpu:0", "replica 1 cpu:1",
            "replica 0 copies", "replica 0 collectives"} <= set(lanes.values()), lanes
    spans = [e for e in events if e["ph"] == "X"]
    by_lane = {}
    for e in spans:
        by_lane.setdefault(lanes[e["tid"]], []).append(e)
    cats = {e["cat"] for e in by_lane["replica 0 cpu:0"]}
    assert {"forward", "backward", "update"} <= cats, cats
    assert all(e["name"].split()[0] in ("all_reduce", "reduce_scatter", "all_gather")
               for e in by_lane["replica 0 collectives"])
    assert len(by_lane["replica 0 collectives"]) > 0
    # 1F1B fills the pipeline: stage 0 runs the second micro-batch's forward
    # before the first one's backward (replica 0 has micro-batches 0, 2, 4, 6),
    # and a third while that backward is not back yet, never a fourth (3 in
    # flight: the stages + 1).
    first_run = sorted((e for e in by_lane["replica 0 cpu:0"] if " run 1 " in e["name"]),
                       key=lambda e: e["ts"])
    names = [e["name"] for e in first_run]
    assert names[:2] == ["forward run 1 micro-batch 0", "forward run 1 micro-batch 2"], names
    assert names[2] in ("backward run 1 micro-batch 0", "forward run 1 micro-batch 4"), names
    assert names.index("backward run 1 micro-batch 0") < names.index(
        "forward run 1 micro-batch 6"), names
