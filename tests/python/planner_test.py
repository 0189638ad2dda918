"""The planner (issue 9): `tiller plan` / tiller.plan predicts, without
running the model, what each device holds (weights, optimizer state,
gradient accumulators, a micro-batch's arena per micro-batch in flight) and
how long a step takes on a device profile; a session with a device profile
refuses, before running, a step that does not fit.

The prediction compiles the step for its memory plans only; the measurement
(Summary.device_memory_bytes) adds the arenas the session's devices really
allocated, over every pipeline copy in use, to the state they hold. The
acceptance bound is 10%.
"""
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tiller
from accumulation_test import MICRO, _build, _concat, _micro_batches
from models import training as T

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "build" / "bin" / "tiller"

RTS_OFF = {"location_optimizer": {"use_replicated_tensor_sharding": False}}
RTS_ALL = {"location_optimizer": {"use_replicated_tensor_sharding": True,
                                  "min_elements_for_replicated_tensor_sharding": 0}}

CONFIGS = {
    "1 device, accumulation 2": dict(stages=1, replicas=1, accumulate=2),
    "2 stages pipelined (1F1B), accumulation 4": dict(stages=2, replicas=1, accumulate=4),
    "2 stages fill-drain, accumulation 4": dict(stages=2, replicas=1, accumulate=4,
                                               fill_drain=True),
    "2 replicas x 2 stages, accumulation 2": dict(stages=2, replicas=2, accumulate=2),
    "2 replicas x 2 stages, sharded optimizer state": dict(stages=2, replicas=2, accumulate=2,
                                                           rts=True),
    "2 stages pipelined, recomputation": dict(stages=2, replicas=1, accumulate=2,
                                              recompute=3),
    "2 stages pipelined, standard recomputation": dict(stages=2, replicas=1, accumulate=2,
                                                       recompute=1),
    "2 devices x 2 interleaved stages, accumulation 4": dict(stages=2, replicas=1,
                                                             accumulate=4,
                                                             stages_per_device=2),
}


def _compiled(built, scope, stages, replicas, accumulate, fill_drain=False, rts=False,
              recompute=0, profile=None, precision="float32", stages_per_device=1):
    s = tiller.IpuStrategy()
    s.set_graph_config(num_ipus=stages * replicas, is_training=True, micro_batch_size=MICRO,
                       enable_manual_shard=stages > 1)
    s.set_pipelining_config(enable_pipelining=stages > 1, enable_gradient_accumulation=True,
                            accumulation_factor=accumulate)
    options = {"num_threads": stages * replicas, **(RTS_ALL if rts else RTS_OFF)}
    if replicas > 1:
        options.update(enable_replicated_graphs=True, replicated_graph_count=replicas)
    if fill_drain:
        options["pipeline_schedule"] = "fill_drain"
    if recompute:
        options["auto_recomputation"] = recompute
    if stages_per_device > 1:
        options.update(need_avg_shard=True, stages_per_device=stages_per_device)
    if profile:
        options["device_profile"] = profile
    if precision != "float32":
        s.set_precision_config(enable_fp16=True)
        options["half_dtype"] = precision
    s.set_options(options)
    return tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=s).compile(
        built.feed_names, built.fetch_list)


def _plan(prog, built, micro, stages, replicas, accumulate, fill_drain=False, rts=False,
          recompute=0, profile="ipu-mk2", precision="float32", stages_per_device=1):
    shapes = {name: list(micro[0][name].shape) for name in built.feed_names}
    return tiller.plan(prog.program_path, train=True, devices=stages * replicas,
                       replicas=replicas, micro_batch=MICRO, accumulate=accumulate,
                       profile=profile, feeds=list(built.feed_names), shapes=shapes,
                       fill_drain=fill_drain, stages_per_device=stages_per_device,
                       replicated_tensor_sharding=rts,
                       sharding_min_elements=0, recompute=int(recompute), precision=precision)


@pytest.fixture(scope="module")
def bert():
    import paddle

    with T.static_mode():
        built = _build("bert", T.OptSpec("adam", schedule="constant"), stages=2)
        yield built, paddle


def _session(bert, cfg, **kw):
    built, paddle = bert
    scope = paddle.static.Scope()
    T.init_scope(built, scope)
    prog = _compiled(built, scope, **cfg, **kw)
    micro = _micro_batches("bert", cfg["accumulate"] * cfg["replicas"])
    return prog, micro


def test_predicted_peak_is_within_ten_percent_of_the_measured(bert):
    built = bert[0]
    plans = {}
    for name, cfg in CONFIGS.items():
        prog, micro = _session(bert, cfg)
        plan = _plan(prog, built, micro, **cfg)
        prog.run(feed=_concat("bert", micro, False))
        measured = prog.session.summary().device_memory_bytes
        predicted = [d["peak"] for d in plan["devices"]]
        assert len(measured) == len(predicted) == cfg["stages"], name
        for d, (p, m) in enumerate(zip(predicted, measured)):
            assert abs(p - m) <= 0.10 * m, f"{name}: device {d} predicted {p}, measured {m}"
        assert plan["fits"] and "does not fit" not in plan["text"]
        plans[name] = plan
    # What the plan says follows the configuration: 1F1B holds a micro-batch
    # per stage in flight and one more, fill-drain the window; sharding
    # halves the optimizer state; recomputation lowers the stash.
    one_f = plans["2 stages pipelined (1F1B), accumulation 4"]["devices"]
    fill = plans["2 stages fill-drain, accumulation 4"]["devices"]
    assert [d["in_flight"] for d in one_f] == [3, 3] and [d["in_flight"] for d in fill] == [4, 4]
    # 4 stages interleaved on 2 devices: a micro-batch in flight per stage
    # (and no more: the window has 4).
    interleaved = plans["2 devices x 2 interleaved stages, accumulation 4"]["devices"]
    assert [d["in_flight"] for d in interleaved] == [4, 4]
    whole = plans["2 replicas x 2 stages, accumulation 2"]["devices"]
    parts = plans["2 replicas x 2 stages, sharded optimizer state"]["devices"]
    for w, p in zip(whole, parts):
        assert p["optimizer"] < 0.55 * w["optimizer"], (w, p)
        assert p["weights"] == w["weights"] and p["gradients"] == w["gradients"]
    plain = plans["2 stages pipelined (1F1B), accumulation 4"]["devices"]
    standard = plans["2 stages pipelined, standard recomputation"]["devices"]
    recomputed = plans["2 stages pipelined, recomputation"]["devices"]
    # (BERT-tiny's arena peaks in the backward, which recomputation does not
    # lower.) What lives from forward to backward: the standard mode keeps
    # matmul outputs (about a fifth less), the pipeline mode only the stage
    # inputs (the hidden states entering each stage, and the ids and labels).
    for s, r, p in zip(standard, recomputed, plain):
        assert s["stash"] < 0.9 * p["stash"], (s, p)
        assert r["stash"] < 0.5 * s["stash"], (r, s)
    # Each stage has work and a bubble is predicted for the pipeline.
    p = plans["2 stages pipelined (1F1B), accumulation 4"]
    assert 0 < p["bubble"] < 1 and p["window_seconds"] > 0
    assert all(d["forward_seconds"] > 0 and d["backward_seconds"] > 0 for d in p["devices"])


def test_half_precision_plans_master_weights_their_half_copies_and_the_measured_peak(bert):
    """bfloat16 training: the plan keeps the float32 (master) weights and
    optimizer state as in float32, shows the per-run bf16 copies of the
    weights the GEMMs read, and its predicted peak is within 10% of the
    measured one."""
    built = bert[0]
    cfg = CONFIGS["2 stages pipelined (1F1B), accumulation 4"]
    prog, micro = _session(bert, cfg, precision="bfloat16")
    plan = _plan(prog, built, micro, **cfg, precision="bfloat16")
    fp32 = _plan(prog, built, micro, **cfg)
    prog.run(feed=_concat("bert", micro, False))
    measured = prog.session.summary().device_memory_bytes
    for d, (half, full, m) in enumerate(zip(plan["devices"], fp32["devices"], measured)):
        assert half["weights"] == full["weights"] and half["optimizer"] == full["optimizer"]
        assert half["half_weight_copies"] > 0, half
        assert abs(half["peak"] - m) <= 0.10 * m, f"device {d}: predicted {half['peak']}, {m}"
    # The GEMMs' weights at 2 bytes, each copied once, on the device of its
    # first GEMM (the tied word embedding: the MLM head's, device 1): not
    # the norms or position / type tables.
    copies = sum(d["half_weight_copies"] for d in plan["devices"])
    assert copies < 0.5 * sum(d["weights"] for d in plan["devices"])
    assert "half copies of the float32 (master) weights" in plan["text"], plan["text"]
    assert "half copies" not in fp32["text"]


def test_a_step_that_does_not_fit_its_device_profile_fails_before_running(bert):
    cfg = CONFIGS["2 stages pipelined (1F1B), accumulation 4"]
    prog, micro = _session(bert, cfg, profile="ipu-mk2:1MB")
    before = {n: prog.session.get_state(n).copy() for n in prog.session.state_names()}
    with pytest.raises(tiller.TillerError) as info:
        prog.run(feed=_concat("bert", micro, False))
    msg = str(info.value)
    assert "does not fit its device profile" in msg and "a ipu-mk2 device holds 1.0 MB" in msg, msg
    assert "peak" in msg and "optimizer" in msg, msg
    assert prog.session.step_count == 0
    for name, value in before.items():
        np.testing.assert_array_equal(prog.session.get_state(name), value, err_msg=name)
    # The same step on the real profile runs.
    prog2, _ = _session(bert, cfg, profile="ipu-mk2")
    outs = prog2.run(feed=_concat("bert", micro, False))
    assert all(np.isfinite(o).all() for o in outs)


def test_plan_command_prints_the_table_and_fails_when_a_device_does_not_fit(bert, tmp_path):
    built = bert[0]
    cfg = CONFIGS["2 replicas x 2 stages, accumulation 2"]
    prog, micro = _session(bert, cfg)
    shape_args = []
    for name in built.feed_names:
        shape_args += ["--shape", f"{name}=" + "x".join(str(d) for d in micro[0][name].shape)]
    base = [str(CLI), "plan", prog.program_path, "--train", "--devices", "4", "--replicas", "2",
            "--micro-batch", str(MICRO), "--accumulate", "2", *shape_args]
    ok = subprocess.run(base + ["--profile", "h200"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    out = ok.stdout
    assert "2 replicas x 2 devices pipelined (1F1B)" in out, out
    assert "profile: h200" in out and "141.00 GB per device" in out, out
    for column in ("weights", "optimizer", "gradients", "stash/mb", "in flight", "peak"):
        assert column in out, out
    assert "predicted step time" in out and "pipeline bubble" in out, out
    small = subprocess.run(base + ["--profile", "ipu-bow:2MB"], capture_output=True, text=True)
    assert small.returncode == 1, small.stdout + small.stderr
    assert "does not fit" in small.stdout and "does not fit" in small.stderr
    bad = subprocess.run(base + ["--profile", "tpu"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "no device profile 'tpu' (known: cpu, ipu-mk2, ipu-bow, h200" in bad.stderr
    odd = subprocess.run(base[:5] + ["3"] + base[6:] + ["--profile", "h200"],
                         capture_output=True, text=True)
    assert odd.returncode == 2 and "not a positive multiple of replicas 2" in odd.stderr


def test_bad_profile_capacities_are_refused():
    with pytest.raises(tiller.TillerError, match=r"capacity 'lots' is not a size"):
        tiller.plan("unused.json", profile="ipu-mk2:lots")


def test_inference_plan_puts_each_shards_weights_on_its_device(tmp_path):
    """An inference model sharded with ipu_shard_guard (legacy .pdmodel keeps
    ipu_index): each device holds the weights its ops read, together every
    parameter once; a pipelined run holds a micro-batch per stage, and one
    more."""
    from models import sharded

    info = T.call_in_format("legacy", "models.sharded:export_inference_here",
                            out_dir=str(tmp_path))
    plan = tiller.plan(info["prefix"] + ".pdmodel", devices=2, micro_batch=3,
                       batches_per_step=4, profile="ipu-bow")
    assert "plan: inference, 1 replica x 2 devices pipelined (1F1B)" in plan["text"], plan["text"]
    f, h, c = sharded.FEATURES, sharded.HIDDEN, sharded.CLASSES
    params = 4 * (f * h + h + 2 * h + h * h + h + h * c + c)
    weights = [d["weights"] for d in plan["devices"]]
    assert min(weights) > 0 and sum(weights) == params, (weights, params)
    assert [d["in_flight"] for d in plan["devices"]] == [3, 3]
    assert all(d["optimizer"] == d["gradients"] == 0 for d in plan["devices"])


def test_plan_across_processes_prices_each_message_as_a_ring(bert, tmp_path):
    """ranks > 1: the replicas of every process sum their gradients in a ring
    over the processes' link: per message of B bytes over R replicas,
    2 (R - 1) x latency + 2 (R - 1) / R x B / bandwidth. With buckets each
    stage's gradients are one message; without, one per gradient."""
    built = bert[0]
    cfg = CONFIGS["2 stages pipelined (1F1B), accumulation 4"]
    prog, micro = _session(bert, cfg)
    shapes = {name: list(micro[0][name].shape) for name in built.feed_names}
    common = dict(train=True, devices=2, micro_batch=MICRO, accumulate=4, profile="h200",
                  feeds=list(built.feed_names), shapes=shapes, replicated_tensor_sharding=False)
    link, latency, ranks = 1e9, 20e-6, 3
    plan = tiller.plan(prog.program_path, ranks=ranks, rank_link=link, rank_latency=latency,
                       **common)
    assert "3 replicas (3 processes x 1) x 2 devices" in plan["text"], plan["text"]
    # Every trained tensor's gradient is summed once, float32, in one
    # message per stage.
    info = {i.name: i for i in prog.session.state_info()}
    trained = prog.session.trained_names()
    grad_bytes = sum(4 * int(np.prod(info[n].shape)) for n in trained)
    assert plan["collective_messages"] == 2
    want = 2 * 2 * (ranks - 1) * latency + 2 * (ranks - 1) / ranks * grad_bytes / link
    assert plan["collective_seconds"] == pytest.approx(want, rel=1e-9)
    assert "collectives over 3 replicas: 2 messages" in plan["text"]
    assert "scaling: 3 replicas" in plan["text"]
    each = tiller.plan(prog.program_path, ranks=ranks, rank_link=link, rank_latency=latency,
                       all_reduce_bucket_bytes=0, **common)
    n_trained = len(trained)
    assert each["collective_messages"] == n_trained
    assert each["collective_seconds"] == pytest.approx(
        want + (n_trained - 2) * 2 * (ranks - 1) * latency, rel=1e-9)
    # One process: no link between processes, no collectives.
    alone = tiller.plan(prog.program_path, **common)
    assert alone["collective_messages"] == 0 and alone["collective_seconds"] == 0
    # A cluster file sets the processes, devices, profile and link at once.
    cluster = tmp_path / "c.json"
    cluster.write_text('{"name": "two hosts", "profile": "h200", "ranks": 3, '
                       '"devices_per_rank": 2, "link": {"bandwidth_GBps": 1, "latency_us": 20}}')
    from_file = tiller.plan(prog.program_path, cluster=str(cluster), **common)
    assert from_file["collective_seconds"] == pytest.approx(want, rel=1e-9)
    assert "cluster: two hosts" in from_file["text"]
    cluster.write_text('{"ranks": "many"}')
    with pytest.raises(tiller.TillerError, match="cluster file .*c.json"):
        tiller.plan(prog.program_path, cluster=str(cluster), **common)
    with pytest.raises(tiller.TillerError, match="cluster file 'nope.json' not found"):
        tiller.plan(prog.program_path, cluster="nope.json", **common)
    with pytest.raises(tiller.TillerError, match="ranks 0 must be >= 1"):
        tiller.plan(prog.program_path, ranks=0, **common)
    # The command line says the same.
    shape_args = []
    for name, dims in shapes.items():
        shape_args += ["--shape", f"{name}=" + "x".join(map(str, dims))]
    cli = subprocess.run([str(CLI), "plan", prog.program_path, "--train", "--devices", "2",
                          "--micro-batch", str(MICRO), "--accumulate", "4", "--profile", "h200",
                          "--no-replicated-tensor-sharding", "--ranks", "3", "--rank-link-gbs",
                          "1", "--rank-latency-us", "20", *shape_args],
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert "3 replicas (3 processes x 1) x 2 devices" in cli.stdout
    assert "collectives over 3 replicas: 2 messages" in cli.stdout
