"""The IPU execution model's configurations train the same model as one
device (issue 9 acceptance): BERT-tiny (MLM + NSP) and the small CNN, 20
updates of the same global batch (8 micro-batches of 2), same initial state
and data:
  (a) one device
  (b) 4 pipeline stages, accumulation 8
  (c) 2 replicas x 2 pipeline stages, accumulation 4
  (d) (c) with batches_per_step 4
  (e) 2 replicas, no pipeline, accumulation 4
  (f) (c) with recomputation (auto_recomputation 3)
  (g) (c) with replicated tensor sharding of every optimizer state
  (h) Tiller's interleaved split: 4 stages on 2 devices, accumulation 8
(b)-(f) turn replicated tensor sharding off (Paddle's IpuStrategy turns it
on, for tensors of at least 8192 elements), (g) on for every tensor.
Per-update losses within rel 1e-5 and final parameters and optimizer state
within 1e-5 max-abs of (a); (a) itself matches Paddle's executor in
training_test.py and sharding_test.py.

BERT-tiny's MLM loss is normalised per micro-batch, so every sequence masks
the same number of tokens (accumulation_test.py): (a) then trains on the
global batch at once. The CNN's BatchNorm normalises over each micro-batch,
so its (a) is one device accumulating the same 8 micro-batches, and the
running statistics, which each replica updates from its own micro-batches,
are compared only without replicas.
"""
import numpy as np
import pytest

from accumulation_test import _assert_same, _train
from models import training as T

GLOBAL = 8

NO_RTS = {"location_optimizer": {"use_replicated_tensor_sharding": False}}
RTS = {"location_optimizer": {"use_replicated_tensor_sharding": True,
                              "min_elements_for_replicated_tensor_sharding": 0}}

CONFIGS = {
    "b: 4 stages pipelined, accumulation 8": dict(accumulate=8, stages=4, pipeline=True),
    "c: 2 replicas x 2 stages pipelined, accumulation 4": dict(accumulate=4, stages=2,
                                                               replicas=2, pipeline=True,
                                                               options=NO_RTS),
    "d: (c) with batches_per_step 4": dict(accumulate=4, stages=2, replicas=2, pipeline=True,
                                           batches_per_step=4, options=NO_RTS),
    "e: 2 replicas, accumulation 4": dict(accumulate=4, replicas=2, options=NO_RTS),
    "f: (c) with recomputation": dict(accumulate=4, stages=2, replicas=2, pipeline=True,
                                      recompute=True, options=NO_RTS),
    "g: (c) with replicated tensor sharding": dict(accumulate=4, stages=2, replicas=2,
                                                   pipeline=True, options=RTS),
    # Tiller's own: the split by cost into 4 stages interleaved over 2 devices.
    "h: 2 devices x 2 interleaved stages, accumulation 8": dict(
        accumulate=8, stages=2, pipeline=True,
        options={"need_avg_shard": True, "stages_per_device": 2}),
}


def _run(kind, opt, cfg, **kw):
    cfg = dict(cfg)
    bps = cfg.pop("batches_per_step", 1)
    return _train(kind, opt, cfg.pop("accumulate"), bps, global_micro=GLOBAL, **cfg, **kw)


@pytest.mark.parametrize("kind", ["bert", "cnn"])
def test_every_configuration_trains_like_one_device(kind):
    opt = T.OptSpec("adam", schedule="constant")
    with T.static_mode():
        if kind == "bert":
            one = _train(kind, opt, 1, 1, global_micro=GLOBAL)
        else:
            one = _train(kind, opt, GLOBAL, 1, global_micro=GLOBAL)
        runs = {name: _run(kind, opt, cfg, with_session=True) for name, cfg in CONFIGS.items()}
    any_session = next(iter(runs.values()))[3]
    running_stats = [i.name for i in any_session.state_info() if i.role == "statistic"]
    assert (len(running_stats) == 4) == (kind == "cnn"), running_stats
    for name, run in runs.items():
        skip = running_stats if CONFIGS[name].get("replicas", 1) > 1 else ()
        _assert_same(one, run, f"{kind}: {name}", skip=skip)
    # The pipelines really ran concurrently over their devices and kept 1F1B's
    # bound on micro-batches in flight (a micro-batch per stage, and the one
    # the first stage runs ahead).
    b = runs["b: 4 stages pipelined, accumulation 8"][3].summary()
    assert b.pipeline_max_in_flight == 5
    assert len(b.pipeline_device_busy_ms) == 4 and min(b.pipeline_device_busy_ms) > 0
    c = runs["c: 2 replicas x 2 stages pipelined, accumulation 4"][3].summary()
    assert c.pipeline_max_in_flight == 3
    # Interleaved: device 0 runs stages 0 and 2, device 1 stages 1 and 3, a
    # micro-batch in flight per stage, and one ahead.
    h = runs["h: 2 devices x 2 interleaved stages, accumulation 8"][3].summary()
    assert h.pipeline_max_in_flight == 5
    assert len(h.pipeline_device_busy_ms) == 2 and min(h.pipeline_device_busy_ms) > 0
    for s in range(4):
        assert f"stage {s} (device {s % 2})" in h.compile_report, h.compile_report
    if kind == "bert":
        # The word embedding is tied to the MLM output projection on the
        # other stage: each stage accumulates its own contribution (the
        # embedding's scattered straight into its accumulator), and no
        # table-sized gradient crosses devices in the backward.
        assert "state embedding_0.w_0@GRAD@ACCUMULATED@1 <-" in c.graph
        assert "embedding_grad_add(" in c.graph and "embedding_grad(" not in c.graph
        table = [ln for ln in c.graph.splitlines() if ln.startswith("state embedding_0.w_0 <-")]
        shape = table[0].split(":")[-1]
        assert not [ln for ln in c.graph.splitlines()
                    if "= copy(" in ln and "[backward" in ln and shape in ln], shape
    # Replicated tensor sharding: each replica holds half of the optimizer
    # state (all of it per-element moments but the one-element beta powers,
    # which stay whole), and together they hold all of it.
    g = runs["g: (c) with replicated tensor sharding"][3].summary()
    whole = c.replica_optimizer_state_bytes
    assert whole[0] == whole[1] > 0
    parts = g.replica_optimizer_state_bytes
    scalars = sum(int(np.prod(i.shape)) * 4 for i in any_session.state_info()
                  if i.role == "optimizer_state" and int(np.prod(i.shape)) == 1)
    assert sum(parts) == whole[0] + scalars, (parts, whole, scalars)
    assert max(parts) <= (whole[0] - scalars) / 2 + scalars + 8 * 4, (parts, whole)
    assert "shard_optimizer_state" in g.compile_report and "kept whole" not in g.compile_report


@pytest.mark.parametrize("kind", ["bert", "cnn"])
def test_recomputation_lowers_the_peak_and_changes_nothing(kind):
    """auto_recomputation: backward ops read cheap activations (norms,
    activations, softmax, elementwise) recomputed from the matmul / conv
    outputs before them, so those activations die with the forward pass: the
    step's arena shrinks, and the results are bit-identical."""
    opt = T.OptSpec("adam", schedule="constant")
    with T.static_mode():
        plain = _train(kind, opt, 1, 1, global_micro=GLOBAL, with_session=True)
        again = _train(kind, opt, 1, 1, global_micro=GLOBAL, with_session=True, recompute=True)
    np.testing.assert_array_equal(again[0], plain[0])
    for name, value in plain[1].items():
        np.testing.assert_array_equal(again[1][name], value, err_msg=name)
    before, after = plain[3].summary(), again[3].summary()
    assert after.arena_bytes < before.arena_bytes, (before.arena_bytes, after.arena_bytes)
    assert "recompute" in after.compile_report


def test_stages_per_device_needs_tillers_split_of_a_pipeline():
    """stages_per_device interleaves the stages Tiller's split makes: asked
    without pipelining, or of a program sharded by hand, it is refused before
    any step, saying why; a value below 1 is refused when set."""
    import tiller

    opt = T.OptSpec("adam", schedule="constant")
    with T.static_mode():
        with pytest.raises(RuntimeError, match=r"stages_per_device 2 interleaves the stages of "
                                               r"Tiller's split by cost .* it needs "
                                               r"enable_pipelining and need_avg_shard"):
            _train("bert", opt, 4, 1, global_micro=GLOBAL, stages=2,
                   options={"need_avg_shard": True, "stages_per_device": 2})
        with pytest.raises(RuntimeError, match=r"stages_per_device 2 .* a program sharded by "
                                               r"ipu_shard_guard alone interleaves through its own "
                                               r"ipu_stage"):
            _train("bert", opt, 4, 1, global_micro=GLOBAL, stages=2, pipeline=True,
                   options={"stages_per_device": 2})
    with pytest.raises(RuntimeError, match=r"option 'stages_per_device' must be >= 1, got 0"):
        tiller.IpuStrategy().set_options({"stages_per_device": 0})


def test_pipeline_in_flight_is_refused_where_it_cannot_hold():
    """pipeline_in_flight sets how many micro-batches a 1F1B pipeline keeps
    in flight: fewer than its stages, or asked of a run that is not a 1F1B
    pipeline, is refused before any step, saying what to change; a negative
    value when set."""
    import tiller

    opt = T.OptSpec("adam", schedule="constant")
    with T.static_mode():
        with pytest.raises(RuntimeError, match=r"pipeline_in_flight 1 is fewer than the "
                                               r"pipeline's 2 stages over 2 devices: .* set it "
                                               r"to 2 or more \(0: 3\)"):
            _train("bert", opt, GLOBAL, 1, global_micro=GLOBAL, stages=2, pipeline=True,
                   options={"pipeline_in_flight": 1})
        with pytest.raises(RuntimeError, match=r"pipeline_in_flight 2 sets the micro-batches in "
                                               r"flight of a 1F1B pipeline: it needs "
                                               r"enable_pipelining and pipeline_schedule '1f1b'"):
            _train("bert", opt, GLOBAL, 1, global_micro=GLOBAL, stages=2, pipeline=True,
                   options={"pipeline_in_flight": 2, "pipeline_schedule": "fill_drain"})
        with pytest.raises(RuntimeError, match=r"pipeline_in_flight 2 sets the micro-batches"):
            _train("bert", opt, GLOBAL, 1, global_micro=GLOBAL, stages=2,
                   options={"pipeline_in_flight": 2})
    with pytest.raises(RuntimeError, match=r"option 'pipeline_in_flight' must be >= 0 \(0: the "
                                           r"stages \+ 1\), got -1"):
        tiller.IpuStrategy().set_options({"pipeline_in_flight": -1})


@pytest.mark.parametrize("cost", ["estimated", "measured"])
def test_unsharded_program_on_more_devices_is_split_by_cost(cost):
    """num_ipus 2 without enable_manual_shard: BERT-tiny (nobody sharded it)
    is split into 2 stages of about equal cost; it trains like one device.
    With auto_split_cost 'measured' the split balances each op's time on one
    device, measured at compile time with its gradients, accumulators and
    fusions (compile/measured_cost.h), instead of the flops-and-bytes
    estimate, and the report says so (the split moves work between devices,
    never changes the math)."""
    opt = T.OptSpec("adam", schedule="constant")
    with T.static_mode():
        one = _train("bert", opt, 1, 1, global_micro=GLOBAL)
        split = _train("bert", opt, GLOBAL, 1, global_micro=GLOBAL, auto_devices=2,
                       with_session=True, options={"auto_split_cost": cost})
    _assert_same(one, split, f"bert: auto split over 2 devices, {cost} costs")
    report = split[3].summary().compile_report
    assert "auto_split" in report, report
    measured = "ms per micro-batch forward + backward on one device" in report
    assert measured == (cost == "measured"), report
    shares = [float(p.split("% of")[0].split()[-1]) for p in report.split("stage ")[1:]
              if "% of the cost" in p]
    assert len(shares) == 2 and all(25 <= x <= 75 for x in shares), report


def test_auto_split_cost_is_estimated_or_measured():
    import tiller

    with pytest.raises(RuntimeError, match=r"auto_split_cost.*'estimated'.*'measured'"):
        tiller.IpuStrategy().set_options({"auto_split_cost": "timed"})
