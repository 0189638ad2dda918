"""Data-parallel replicas (issue 9): enable_replicated_graphs /
replicated_graph_count with num_ipus = replicas, alone and with gradient
accumulation and batches per step. Each replica is a CPU device with its own
thread, its own copy of the state and its share of every run's
micro-batches; gradients are summed across replicas (all_reduce) before
each update.

Equivalence with one device and the global batch, as in accumulation_test.py
(same data, the same bounds: per-update loss rel 1e-5, state 1e-5 max-abs).
"""
import re

import numpy as np
import pytest

import tiller
from accumulation_test import ACCUMULATE, MICRO, _assert_same, _build, _concat, _micro_batches
from accumulation_test import _train
from models import training as T


@pytest.mark.parametrize("kind", ["bert", "cnn_nobn"])
def test_replicas_equal_one_device(kind):
    opt = T.OptSpec("adam", schedule="constant")
    with T.static_mode():
        one_of_two = _train(kind, opt, 1, 1, global_micro=2)
        replicated = _train(kind, opt, 1, 1, replicas=2, global_micro=2)
        one = _train(kind, opt, 1, 1)
        both = _train(kind, opt, 2, 1, replicas=2)
        stepped = _train(kind, opt, 2, 2, replicas=2)
    n_fetch = len(one[2])
    micro_shape = one[2][0]
    # Paddle's IPU fetch shapes: replicas, then the accumulation factor, then
    # batches per step, before the micro-batch's own shape.
    assert replicated[2] == [(2, *micro_shape)] * n_fetch
    assert both[2] == [(2, 2, *micro_shape)] * n_fetch
    assert stepped[2] == [(2, 2, 2, *micro_shape)] * n_fetch
    _assert_same(one_of_two, replicated, f"{kind}: 2 replicas")
    _assert_same(one, both, f"{kind}: 2 replicas x accumulation 2")
    _assert_same(one, stepped, f"{kind}: 2 replicas x accumulation 2, batches_per_step 2")


def _replicated(built, scope, replicas=2, threads=2, num_ipus=None, **options):
    s = tiller.IpuStrategy()
    s.set_graph_config(num_ipus=replicas if num_ipus is None else num_ipus, is_training=True,
                       micro_batch_size=MICRO)
    s.set_options({"num_threads": threads, "enable_replicated_graphs": True,
                   "replicated_graph_count": replicas, **options})
    return tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=s).compile(
        built.feed_names, built.fetch_list)


@pytest.fixture()
def cnn():
    import paddle

    with T.static_mode():
        built = _build("cnn_nobn", T.OptSpec("adam", schedule="constant"))
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        yield built, scope


# Replicated tensor sharding of every optimizer state (Paddle's default
# threshold, 8192 elements, leaves the small CNN's tensors whole).
RTS_ALL = {"location_optimizer": {"use_replicated_tensor_sharding": True,
                                  "min_elements_for_replicated_tensor_sharding": 0}}
RTS_OFF = {"location_optimizer": {"use_replicated_tensor_sharding": False}}


def test_gradients_summed_in_buckets_change_no_bit(cnn):
    """all_reduce_bucket_bytes (Tiller's option, 32 MiB by default): the
    replicas sum their gradients in few large messages (bucket_all_reduce)
    instead of one per gradient; every element is still added in replica
    order, so the states are the same bytes. A bucket too small for the
    largest gradient splits the messages. Without accumulation each bucket's
    reduction starts in the backward pass (all_reduce_start, on the device's
    collective stream) and the update waits for it (all_reduce_wait);
    overlap_all_reduce off keeps one all_reduce in the update: the same
    bytes again."""
    import paddle

    built, _ = cnn
    micro = _micro_batches("cnn_nobn", 12)
    results = {}
    for bucket, overlap in ((0, True), (4096, True), (32 << 20, True), (32 << 20, False)):
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        prog = _replicated(built, scope, all_reduce_bucket_bytes=bucket,
                           overlap_all_reduce=overlap, **RTS_OFF)
        losses = [prog.run(feed=_concat("cnn_nobn", micro[i:i + 2], False))[0]
                  for i in range(0, 12, 2)]
        state = {n: prog.session.get_state(n).copy() for n in prog.session.state_names()}
        graph = prog.session.summary().graph
        started = [line for line in graph.splitlines() if "= all_reduce_start(" in line]
        waits = [line for line in graph.splitlines() if "= all_reduce_wait(" in line]
        whole = [line for line in graph.splitlines() if "= all_reduce(" in line]
        if overlap:
            assert len(waits) == len(started) and not whole, graph
            assert all("[backward" in line for line in started), started
        else:
            assert not started and not waits, graph
        results[bucket, overlap] = (losses, state, started or whole)
    per_gradient, split = results[0, True], results[4096, True]
    one, not_overlapped = results[32 << 20, True], results[32 << 20, False]
    assert len(per_gradient[2]) == 6 and len(one[2]) == 1, (per_gradient[2], one[2])
    assert 1 < len(split[2]) < 6, split[2]
    assert "6 gradients in one message" in one[2][0] and len(not_overlapped[2]) == 1
    for losses, state, _ in (split, one, not_overlapped):
        for a, b in zip(per_gradient[0], losses):
            np.testing.assert_array_equal(a, b)
        for name, value in per_gradient[1].items():
            np.testing.assert_array_equal(state[name], value, err_msg=name)
    with pytest.raises(tiller.TillerError, match="all_reduce_bucket_bytes' must be >= 0"):
        tiller.IpuStrategy().set_options({"all_reduce_bucket_bytes": -1})


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam", "adamw", "adamax", "lamb",
                                       "adagrad", "adadelta", "rmsprop_centered"])
def test_replicated_tensor_sharding_changes_no_bit(optimizer):
    """Each replica updates its half of every weight from a reduce-scattered
    gradient, with its half of the optimizer state, then all-gathers the
    weight: the same bytes as every replica updating all of it. Lamb (trust
    ratio of whole tensors) keeps its state whole, and says so."""
    import paddle

    opt = T.OptSpec(optimizer, schedule="constant", clip_norm=None)
    micro = _micro_batches("cnn_nobn", 12)
    results = {}
    with T.static_mode():
        built = _build("cnn_nobn", opt)
        for name, options in (("off", RTS_OFF), ("on", RTS_ALL)):
            scope = paddle.static.Scope()
            T.init_scope(built, scope)
            prog = _replicated(built, scope, enable_gradient_accumulation=True,
                               accumulation_factor=2, **options)
            losses = [prog.run(feed=_concat("cnn_nobn", micro[i:i + 4], False))[0]
                      for i in range(0, 12, 4)]
            state = {n: prog.session.get_state(n).copy() for n in prog.session.state_names()}
            results[name] = (losses, state, prog.session.summary())
    (off_losses, off_state, off), (on_losses, on_state, on) = results["off"], results["on"]
    for a, b in zip(off_losses, on_losses):
        np.testing.assert_array_equal(a, b)
    assert off_state.keys() == on_state.keys()
    for name, value in off_state.items():
        np.testing.assert_array_equal(on_state[name], value, err_msg=name)
    report = on.compile_report
    if optimizer == "lamb":
        assert "kept whole: lamb" in report and "reduce_scatter" not in report, report
        assert on.replica_optimizer_state_bytes == off.replica_optimizer_state_bytes
    else:
        # The gradients are reduce-scattered: no all_reduce is left.
        assert re.search(r"(\d+) of \1 optimizer ops sharded", report), report
        assert "all_reduce" not in on.graph, report
        assert "reduce_scatter" in report and "all_gather" in report, report
        if optimizer != "sgd":  # SGD has no optimizer state
            assert on.replica_optimizer_state_bytes[0] < off.replica_optimizer_state_bytes[0]


@pytest.mark.parametrize("options", [{}, RTS_ALL], ids=["whole", "sharded"])
def test_a_non_finite_gradient_on_one_replica_stops_every_replica(cnn, options):
    built, scope = cnn
    prog = _replicated(built, scope, **options)
    micro = _micro_batches("cnn_nobn", 2 * ACCUMULATE)
    prog.run(feed=_concat("cnn_nobn", micro[:2], False))
    before = {n: prog.session.get_state(n).copy() for n in prog.session.state_names()}
    bad = _concat("cnn_nobn", micro[2:4], False)
    bad["image"] = bad["image"].copy()
    bad["image"][MICRO, 0, 0, 0] = np.inf       # replica 1's first image
    with pytest.raises(tiller.TillerError) as info:
        prog.run(feed=bad)
    msg = str(info.value)
    assert "training step 2" in msg and "on replica 1" in msg and "not finite" in msg, msg
    for name, value in before.items():
        np.testing.assert_array_equal(prog.session.get_state(name), value, err_msg=name)
    assert prog.session.step_count == 1
    # Both replicas go on with good data, and stay equal to one device on it.
    loss, = prog.run(feed=_concat("cnn_nobn", micro[4:6], False))
    assert loss.shape == (2,) and np.isfinite(loss).all()
    assert prog.session.step_count == 2


def test_bad_replication_configurations_say_what_to_change(cnn):
    built, scope = cnn
    with pytest.raises(tiller.TillerError,
                       match=r"num_ipus 3 is not a multiple of replicated_graph_count 2"):
        _replicated(built, scope, num_ipus=3)
    # Fewer threads than devices: each replica's device still gets a thread
    # (they take turns on the cores), with the results of a thread each.
    feed = {"image": np.random.default_rng(2).standard_normal((2 * MICRO, 3, 16, 16))
            .astype(np.float32), "label": np.zeros((2 * MICRO, 1), np.int64)}
    shared = _replicated(built, scope, threads=1).run(feed=feed)
    own = _replicated(built, scope, threads=2).run(feed=feed)
    np.testing.assert_array_equal(shared[0], own[0])
    with pytest.raises(tiller.TillerError,
                       match=r"replicated_graph_count 2 needs replication on "
                             r"\(enable_replicated_graphs=True\)"):
        _replicated(built, scope, enable_replicated_graphs=False, num_ipus=1)
    prog = _replicated(built, scope)
    with pytest.raises(tiller.TillerError,
                       match=r"feed 'image': shape \[5, 3, 16, 16\] holds 3840 elements; one run "
                             r"takes batches_per_step 1 x accumulation_factor 1 x replicas 2 = 2 "
                             r"micro-batches of \[2, 3, 16, 16\] \(its first dim is "
                             r"micro_batch_size 2\), 3072 elements in all"):
        prog.run(feed={"image": np.zeros((5, 3, 16, 16), np.float32),
                       "label": np.zeros((5, 1), np.int64)})


@pytest.mark.parametrize("options", [{}, RTS_ALL], ids=["whole", "sharded"])
def test_state_set_between_runs_reaches_every_replica(cnn, options):
    """A checkpoint loaded (or any state set) after a run is what every
    replica trains from next (with sharded optimizer state: every replica's
    part of it): two replicas after a reload equal one device after the same
    reload."""
    built, scope = cnn
    micro = _micro_batches("cnn_nobn", 8)
    prog = _replicated(built, scope, **options)
    start = {n: prog.session.get_state(n).copy() for n in prog.session.state_names()}
    prog.run(feed=_concat("cnn_nobn", micro[:2], False))
    for name, value in start.items():
        prog.session.set_state(name, value)
    loss, = prog.run(feed=_concat("cnn_nobn", micro[2:4], False))
    import paddle
    scope1 = paddle.static.Scope()
    T.init_scope(built, scope1)
    s = tiller.IpuStrategy()
    s.set_graph_config(is_training=True, micro_batch_size=2 * MICRO)
    s.set_options({"num_threads": 1})
    one = tiller.IpuCompiledProgram(built.main, scope=scope1, ipu_strategy=s).compile(
        built.feed_names, built.fetch_list)
    ref, = one.run(feed=_concat("cnn_nobn", micro[2:4], False))
    np.testing.assert_allclose(np.mean(loss), np.asarray(ref).reshape(()), rtol=1e-5)
    for name in start:
        np.testing.assert_allclose(prog.session.get_state(name), one.session.get_state(name),
                                   atol=1e-5, err_msg=name)


def test_anchors_return_all_final_every_n_or_the_sum_of_the_micro_batches():
    """Tiller's anchor_return_type (PopART's anchors; Paddle always returned
    all): from the same training run, 'final' is each replica's last
    micro-batch, 'every_n' every anchor_return_period-th batch, 'sum' each
    replica's sum; shapes as for 'all' with the dims that remain. Values
    come from separate sessions with the same start and data, so they must
    equal the reductions of 'all' exactly."""
    import paddle

    B, G, R, N = 4, 2, 2, 2
    micro = _micro_batches("cnn_nobn", B * G * R)
    feed = _concat("cnn_nobn", micro, False)
    fetched = {}
    with T.static_mode():
        built = _build("cnn_nobn", T.OptSpec("adam", schedule="constant"))
        for anchor in ("all", "final", "every_n", "sum"):
            scope = paddle.static.Scope()
            T.init_scope(built, scope)
            prog = _replicated(built, scope, enable_gradient_accumulation=True,
                               accumulation_factor=G, batches_per_step=B,
                               anchor_return_type=anchor, anchor_return_period=N)
            fetched[anchor] = np.asarray(prog.run(feed=feed)[0])
    every = fetched["all"]
    assert every.shape[:3] == (R, G, B), every.shape
    micro_shape = every.shape[3:]
    # Values in micro-batch order: batch, accumulation, replica (innermost).
    v = every.reshape(B, G, R, *micro_shape)
    assert fetched["final"].shape == (R, *micro_shape)
    np.testing.assert_array_equal(fetched["final"], v[B - 1, G - 1])
    assert fetched["sum"].shape == (R, *micro_shape)
    total = np.zeros_like(v[0, 0])
    for b in range(B):          # Tiller adds in micro-batch order
        for g in range(G):
            total += v[b, g]
    np.testing.assert_array_equal(fetched["sum"], total)
    assert fetched["every_n"].shape == (R, G, B // N, *micro_shape)
    np.testing.assert_array_equal(fetched["every_n"].reshape(-1),
                                  v[N - 1::N].reshape(-1))


def test_bad_anchor_options_are_refused(cnn):
    built, scope = cnn
    with pytest.raises(tiller.TillerError, match=r"option 'anchor_return_type' takes 'all', "
                                                 r"'final', 'every_n' or 'sum', got 'last'"):
        _replicated(built, scope, anchor_return_type="last")
    with pytest.raises(tiller.TillerError, match=r"anchor_return_period 3 does not divide "
                                                 r"batches_per_step 4"):
        _replicated(built, scope, batches_per_step=4, anchor_return_type="every_n",
                    anchor_return_period=3)


def test_every_replica_profiles_its_own_ops(cnn):
    """enable_profiling times every replica's ops; profile(replica=r) reads
    replica r's: the same ops and calls on each (the all_reduce of the
    gradients included), and a replica the session lacks is refused."""
    built, scope = cnn
    prog = _replicated(built, scope)
    prog._session.enable_profiling(True)
    feed = {"image": np.random.default_rng(3).standard_normal((2 * MICRO, 3, 16, 16))
            .astype(np.float32), "label": np.zeros((2 * MICRO, 1), np.int64)}
    for _ in range(2):
        prog.run(feed=feed)
    calls = [{t: c for t, _, c in prog._session.profile(replica=r)} for r in (0, 1)]
    assert calls[0] == calls[1]
    assert calls[0].get("conv2d", 0) >= 2 and any(t.startswith("all_reduce") for t in calls[0])
    assert all(ms > 0 for _, ms, _ in prog._session.profile(replica=1))
    with pytest.raises(tiller.TillerError, match=r"profile of replica 2: the session has "
                                                  r"replicas 0 \.\. 1"):
        prog._session.profile(replica=2)
