"""Gradient accumulation and batches per step (issue 9), through the IPU API
a Paddle script uses (tiller.IpuStrategy.set_pipelining_config,
accumulation_and_replication_reduction_type).

Equivalence: the same program, initial state and data trained for 20
updates (a) on one device with the global batch per step, and (b) with
accumulation_factor micro-batches per update, (c) the same with several
updates per run (batches_per_step). The per-update loss of (b)/(c) is the mean
of its micro-batches' losses. BERT-tiny's MLM loss is normalised by the
masked-token count of its batch, so every sequence gets the same count here
(2): the mean over micro-batches then equals the global batch's loss. The
small CNN's BatchNorm normalises over the micro-batch, which no
accumulation can reproduce, so the CNN of this test is the same network
built without BatchNorm.

Tolerances: per-update losses within rel 1e-5 and final parameters and
optimizer state within 1e-5 max-abs (the issue's bounds). The runs differ
only in float32 summation order (micro-batch sums added up instead of one
reduction over the global batch).
"""
import numpy as np
import pytest

import tiller
from models import training as T

MICRO = 2
ACCUMULATE = 4
UPDATES = 20
LOSS_RTOL = 1e-5
STATE_ATOL = 1e-5
MASKED_PER_SEQUENCE = 2


def _micro_batches(kind, n, seed=1):
    batches = T.make_batches("cnn" if kind == "cnn_nobn" else kind, None, n, MICRO, seed)
    if kind != "bert":
        return batches
    for feed in batches:
        labels, positions = feed["masked_lm_labels"], feed["masked_positions"]
        labels[:, MASKED_PER_SEQUENCE:] = T.MLM_IGNORE_INDEX
        positions[:, MASKED_PER_SEQUENCE:] = 0
        assert (labels != T.MLM_IGNORE_INDEX).sum(axis=1).tolist() == [MASKED_PER_SEQUENCE] * MICRO
    return batches


def _concat(kind, micro, one_batch=False):
    """Micro-batches stacked along the leading dimension (as one global batch
    or as one run's micro-batches: every feed's rows are sequences)."""
    return {name: np.concatenate([m[name] for m in micro], axis=0) for name in micro[0]}


def _build(kind, opt, stages=1):
    if kind == "cnn_nobn":
        assert stages == 1
        return _build_cnn_without_bn(opt)
    return T.build(kind, None, opt, seed=0, stages=stages)


def _build_cnn_without_bn(opt):
    import paddle
    import paddle.nn as nn
    import paddle.nn.functional as F

    paddle.enable_static()
    spec = T.opt_spec_of(opt)
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = 0
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        feeds = {"image": ([-1, *T.CNN_IMAGE], "float32"), "label": ([-1, 1], "int64")}
        v = {n: paddle.static.data(n, shp, dt) for n, (shp, dt) in feeds.items()}
        model = nn.Sequential(nn.Conv2D(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2D(2, 2),
                              nn.Conv2D(8, 16, 3, padding=1), nn.ReLU(), nn.AvgPool2D(2, 2),
                              nn.Flatten(), nn.Linear(16 * 4 * 4, T.CNN_CLASSES))
        loss = F.cross_entropy(model(v["image"]), v["label"])
        optimizer, sched = T.make_optimizer(spec)
        optimizer.minimize(loss)
    init = T._init_arrays(model, 0)
    params = [p.name for p in model.parameters() if not p.stop_gradient]
    return T.BuiltProgram("cnn", T.current_format(), main, startup, list(feeds), feeds, [loss],
                          ["loss"], sched, params, init, spec, None, [])


def _train(kind, opt, accumulate, batches_per_step, reduction=1, enable=None, replicas=1,
           global_micro=ACCUMULATE, stages=1, pipeline=False, with_session=False,
           recompute=False, auto_devices=1, options=None):
    """Trains UPDATES updates of global batch MICRO x global_micro; returns
    (per-update losses [UPDATES, fetches], final state, fetch shapes[,
    session]). accumulate x replicas micro-batches make one update
    (global_micro in all, or 1 for one device with the global batch). stages
    > 1: the model sharded over that many devices per replica (pipelined when
    `pipeline`). `options`: more IpuStrategy options."""
    import paddle

    micro = _micro_batches(kind, UPDATES * global_micro)
    built = _build(kind, opt, stages)
    scope = paddle.static.Scope()
    T.init_scope(built, scope)
    # One global batch is global_micro micro-batches of MICRO rows; one
    # device taking it whole (accumulate x replicas = 1) has micro-batches
    # of all its rows (Paddle's micro_batch_size fixes the feeds' rows).
    micro_rows = MICRO * (global_micro // (accumulate * replicas))
    strategy = tiller.IpuStrategy()
    strategy.set_graph_config(is_training=True, micro_batch_size=micro_rows)
    strategy.set_pipelining_config(
        batches_per_step=batches_per_step,
        enable_gradient_accumulation=accumulate > 1 if enable is None else enable,
        accumulation_factor=accumulate)
    strategy.set_options({"num_threads": replicas * stages,
                          "accumulation_and_replication_reduction_type": reduction})
    if replicas > 1 or stages > 1:
        strategy.set_graph_config(num_ipus=replicas * stages, is_training=True,
                                  micro_batch_size=micro_rows, enable_manual_shard=stages > 1)
    if recompute:
        strategy.set_options({"auto_recomputation": 3 if pipeline else 1})
    if auto_devices > 1:
        # More devices than replicas, no manual sharding: an automatic split.
        strategy.set_graph_config(num_ipus=auto_devices * replicas, is_training=True,
                                  micro_batch_size=micro_rows)
        strategy.set_options({"num_threads": auto_devices * replicas})
    if pipeline:
        strategy.set_pipelining_config(enable_pipelining=True, batches_per_step=batches_per_step,
                                       enable_gradient_accumulation=True,
                                       accumulation_factor=accumulate)
    if replicas > 1:
        strategy.set_options({"enable_replicated_graphs": True,
                              "replicated_graph_count": replicas})
    if options:
        strategy.set_options(options)
    prog = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=strategy).compile(
        built.feed_names, built.fetch_list)
    # One global batch is ACCUMULATE micro-batches, whatever the run's shape.
    per_update = accumulate * replicas
    per_run = per_update * batches_per_step
    group = global_micro // per_update
    assert per_update in (1, global_micro)
    losses, shapes = [], None
    for r in range(0, len(micro), per_run * group):
        chunk = micro[r:r + per_run * group]
        if per_update == 1:
            # One device: each update takes a whole global batch.
            feed = _concat(kind, [_concat(kind, chunk[u * group:(u + 1) * group], True)
                                  for u in range(batches_per_step)], False)
        else:
            feed = _concat(kind, chunk, False)
        outs = prog.run(feed=feed)
        shapes = [tuple(np.shape(o)) for o in outs]
        # [G?, B?] leading dims (Paddle's labels), values in micro-batch order.
        per_micro = np.stack([np.asarray(o).reshape(per_run) for o in outs], axis=1)
        losses.extend(per_micro.reshape(batches_per_step, per_update, -1).mean(axis=1))
    prog.weights_to_host()
    if with_session:
        return np.asarray(losses), T.read_state(built, scope), shapes, prog.session
    return np.asarray(losses), T.read_state(built, scope), shapes


def _assert_same(ref, got, what, skip=()):
    ref_losses, ref_state = ref[0], ref[1]
    losses, state = got[0], got[1]
    assert losses.shape == ref_losses.shape == (UPDATES, ref_losses.shape[1]), what
    rel = np.abs(losses - ref_losses) / np.abs(ref_losses)
    assert rel.max() <= LOSS_RTOL, f"{what}: loss rel diff {rel.max():.3g} at {np.argmax(rel)}"
    for name, value in ref_state.items():
        if name in skip:
            continue
        diff = np.abs(state[name].astype(np.float64) - value).max() if value.size else 0.0
        assert diff <= STATE_ATOL, f"{what}: '{name}' differs by {diff:.3g}"


@pytest.mark.parametrize("kind", ["bert", "cnn_nobn"])
def test_accumulation_and_batches_per_step_equal_one_device(kind):
    opt = T.OptSpec("adam", schedule="constant")
    with T.static_mode():
        one = _train(kind, opt, 1, 1)
        accumulated = _train(kind, opt, ACCUMULATE, 1)
        per_step = _train(kind, opt, ACCUMULATE, 4)
    n_fetch = len(one[2])
    assert one[2] == [()] * n_fetch or one[2] == [(1,)] * n_fetch, one[2]
    micro_shape = one[2][0]
    # Paddle's IPU fetch shapes: accumulation factor, then batches per step,
    # before the micro-batch's own shape.
    assert accumulated[2] == [(ACCUMULATE, *micro_shape)] * n_fetch
    assert per_step[2] == [(ACCUMULATE, 4, *micro_shape)] * n_fetch
    _assert_same(one, accumulated, f"{kind}: accumulation {ACCUMULATE}")
    _assert_same(one, per_step, f"{kind}: accumulation {ACCUMULATE}, batches_per_step 4")


def test_sum_reduction_adds_the_micro_batch_gradients():
    """reduction type 0 (sum): SGD with lr / G then equals the mean with lr
    (scaling by a power of two is exact), and differs from the mean with the
    same lr by the factor G. No clipping: clipping by the global norm would
    hide the scale."""
    def sgd(lr):
        return T.OptSpec("sgd", lr=lr, schedule="constant", clip_norm=None)

    with T.static_mode():
        mean = _train("cnn_nobn", sgd(0.05), ACCUMULATE, 1, reduction=1)
        summed = _train("cnn_nobn", sgd(0.05 / ACCUMULATE), ACCUMULATE, 1, reduction=0)
        summed_same_lr = _train("cnn_nobn", sgd(0.05), ACCUMULATE, 1, reduction=0)
        # NoReduction (2): PopART only asked whether the type was Mean, so it
        # summed (issue 41 point 7): the same bytes as Sum.
        no_reduction = _train("cnn_nobn", sgd(0.05), ACCUMULATE, 1, reduction=2)
    for name, value in summed_same_lr[1].items():
        np.testing.assert_array_equal(no_reduction[1][name], value, err_msg=name)
    lr = [n for n in mean[1] if n.startswith("learning_rate")]
    assert len(lr) == 1, list(mean[1])
    _assert_same(mean, summed, "sum with lr / G against mean with lr", skip=lr)
    moved_mean = max(np.abs(summed_same_lr[1][n] - mean[1][n]).max() for n in mean[1])
    assert moved_mean > 100 * STATE_ATOL, moved_mean


def _strategy(**pipelining):
    s = tiller.IpuStrategy()
    s.set_graph_config(is_training=True, micro_batch_size=MICRO)
    s.set_pipelining_config(**pipelining)
    s.set_options({"num_threads": 1})
    return s


def test_feeds_that_do_not_split_into_micro_batches_are_refused():
    import paddle

    with T.static_mode():
        built = _build("cnn_nobn", T.OptSpec("adam", schedule="constant"))
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        strategy = _strategy(batches_per_step=2, enable_gradient_accumulation=True,
                             accumulation_factor=3)
        prog = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=strategy).compile(
            built.feed_names, built.fetch_list)
        feed = _concat("cnn_nobn", _micro_batches("cnn_nobn", 5), False)   # 10 rows
        before = prog.session.get_state(prog.session.state_names()[0]).copy()
        with pytest.raises(tiller.TillerError,
                           match=r"feed 'image': shape \[10, 3, 16, 16\] holds 7680 elements; one "
                                 r"run takes batches_per_step 2 x accumulation_factor 3 = 6 "
                                 r"micro-batches of \[2, 3, 16, 16\] \(its first dim is "
                                 r"micro_batch_size 2\), 9216 elements in all"):
            prog.run(feed=feed)
        np.testing.assert_array_equal(prog.session.get_state(prog.session.state_names()[0]),
                                      before)
        # 12 rows: two updates of three micro-batches of two.
        feed = _concat("cnn_nobn", _micro_batches("cnn_nobn", 6), False)
        loss, = prog.run(feed=feed)
        assert loss.shape == (3, 2) and np.isfinite(loss).all()
        assert prog.session.step_count == 2


def test_bad_accumulation_options_are_refused_by_name():
    with pytest.raises(tiller.TillerError, match="option 'accumulation_factor' must be >= 1"):
        _strategy(accumulation_factor=0)
    with pytest.raises(tiller.TillerError,
                       match="accumulation_and_replication_reduction_type takes 0 \\(sum\\), 1 "
                             "\\(mean\\) or 2"):
        tiller.IpuStrategy().set_options({"accumulation_and_replication_reduction_type": 3})
    import paddle

    with T.static_mode():
        built = _build("cnn_nobn", T.OptSpec("adam", schedule="constant"))
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        strategy = _strategy(accumulation_factor=4)   # accumulation left off
        with pytest.raises(tiller.TillerError,
                           match=r"accumulation_factor 4 needs gradient accumulation on "
                                 r"\(enable_gradient_accumulation=True\)"):
            tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=strategy).compile(
                built.feed_names, built.fetch_list)


def test_eval_runs_every_micro_batch_forward_in_feed_order():
    """runtime_options.enable_eval on an accumulating program: each
    micro-batch's loss, in feed order, equals a one-micro-batch eval run's;
    nothing is updated."""
    import paddle

    with T.static_mode():
        built = _build("cnn_nobn", T.OptSpec("adam", schedule="constant"))
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        strategy = _strategy(batches_per_step=2, enable_gradient_accumulation=True,
                             accumulation_factor=2)
        strategy.set_options({"runtime_options.enable_eval": True})
        prog = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=strategy).compile(
            built.feed_names, built.fetch_list)
        micro = _micro_batches("cnn_nobn", 4)
        loss, = prog.run(feed=_concat("cnn_nobn", micro, False))
        assert loss.shape == (2, 2)
        assert prog.session.step_count == 0
        single = _strategy()
        single.set_options({"runtime_options.enable_eval": True})
        one = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=single).compile(
            built.feed_names, built.fetch_list)
        expected = [float(one.run(feed=m)[0].reshape(())) for m in micro]
        np.testing.assert_array_equal(loss.reshape(-1), np.float32(expected))
