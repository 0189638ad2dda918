"""A training program sharded the way a Paddle IPU script shards one: the
model's first half inside ``tiller.ipu_shard_guard(index=0, stage=0)``, the
second half and the loss inside ``ipu_shard_guard(index=1, stage=1)``
(Paddle's ``paddle.static.ipu_shard_guard``, which a wheel without IPU
support refuses to run). Built in either program form (legacy or PIR: run
through models.training.call_in_format), then trained by Tiller in several
configurations of devices, replicas and accumulation; the records compare
across configurations (tests/python/sharding_test.py).

Network: x [B, 32] -> linear 64, gelu, layer_norm | linear 64, relu,
linear 8 -> softmax cross entropy with labels from a fixed random teacher.
"""
from __future__ import annotations

import numpy as np

from . import training as T

FEATURES, HIDDEN, CLASSES = 32, 64, 8


def build(opt_spec="adam", seed: int = 0, second_index: int = 1, second_stage: int = 1,
          first_index: int = 0, shards: int = 2):
    """The sharded program (this process's program form) as a
    models.training.BuiltProgram (kind "mlp"); the first half's guard takes
    ``first_index``, the second half's ``second_index`` / ``second_stage``.
    shards=4: the same network under four guards (index = stage = 0..3:
    linear + gelu | layer_norm | linear + relu | linear + loss)."""
    import paddle
    import paddle.nn as nn
    import paddle.nn.functional as F

    import tiller

    if T.current_format() == "legacy":
        from . import _legacy_compat

        _legacy_compat.install()    # gelu and friends as legacy ops (see models/training.py)
    paddle.enable_static()
    spec = T.opt_spec_of(opt_spec)
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = seed
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        feeds = {"x": ([-1, FEATURES], "float32"), "label": ([-1, 1], "int64")}
        v = {n: paddle.static.data(n, shp, dt) for n, (shp, dt) in feeds.items()}
        layers = nn.LayerList([nn.Linear(FEATURES, HIDDEN), nn.LayerNorm(HIDDEN),
                               nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, CLASSES)])
        if shards == 4:
            with tiller.ipu_shard_guard(index=0, stage=0):
                h = F.gelu(layers[0](v["x"]))
            with tiller.ipu_shard_guard(index=1, stage=1):
                h = layers[1](h)
            with tiller.ipu_shard_guard(index=2, stage=2):
                h = F.relu(layers[2](h))
            with tiller.ipu_shard_guard(index=3, stage=3):
                loss = F.cross_entropy(layers[3](h), v["label"])
        else:
            with tiller.ipu_shard_guard(index=first_index, stage=0):
                h = layers[1](F.gelu(layers[0](v["x"])))
            with tiller.ipu_shard_guard(index=second_index, stage=second_stage):
                logits = layers[3](F.relu(layers[2](h)))
                loss = F.cross_entropy(logits, v["label"])
        opt, sched = T.make_optimizer(spec)
        opt.minimize(loss)
    init = T._init_arrays(layers, seed)
    params = [p.name for p in layers.parameters() if not p.stop_gradient]
    return T.BuiltProgram("mlp", T.current_format(), main, startup, list(feeds), feeds, [loss],
                          ["loss"], sched, params, init, spec, None, [])


def make_rows(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    teacher = np.random.default_rng(seed + 7919).standard_normal((FEATURES, CLASSES))
    x = rng.standard_normal((n, FEATURES)).astype(np.float32)
    return {"x": x, "label": np.argmax(x @ teacher, axis=1).astype(np.int64).reshape(-1, 1)}


def annotations(built) -> list[tuple[str, int, int]]:
    """(op type, ipu_index, ipu_stage) of every op of the program, -1 where
    unset: what the guards stamped."""
    out = []
    for op in built.main.global_block().ops:
        if hasattr(op, "int_attr"):         # PIR
            name = op.name()
            get = (lambda n, o=op: o.int_attr(n) if o.has_attr(n) else -1)
        else:
            name = op.type
            get = (lambda n, o=op: o.attr(n) if o.has_attr(n) else -1)
        out.append((name, get("ipu_index"), get("ipu_stage")))
    return out


def _strategy(cfg: dict):
    import tiller

    s = tiller.IpuStrategy()
    devices = cfg.get("devices", 1)
    replicas = cfg.get("replicas", 1)
    s.set_graph_config(num_ipus=devices * replicas, is_training=True,
                       micro_batch_size=cfg.get("micro", 1), enable_manual_shard=devices > 1)
    accumulate = cfg.get("accumulate", 1)
    s.set_pipelining_config(enable_pipelining=cfg.get("pipeline", False),
                            batches_per_step=cfg.get("batches_per_step", 1),
                            enable_gradient_accumulation=accumulate > 1,
                            accumulation_factor=accumulate)
    s.set_options({"num_threads": cfg.get("threads", devices * replicas)})
    if replicas > 1:
        s.set_options({"enable_replicated_graphs": True, "replicated_graph_count": replicas})
    if "schedule" in cfg:
        s.set_options({"pipeline_schedule": cfg["schedule"]})
    if "in_flight" in cfg:
        s.set_options({"pipeline_in_flight": cfg["in_flight"]})
    if "trace" in cfg:
        s.set_options({"trace_path": cfg["trace"]})
    if cfg.get("avg"):
        s.set_options({"need_avg_shard": True})
    if cfg.get("recompute"):
        s.set_options({"auto_recomputation": 3})
    # Replicated tensor sharding: every tensor's optimizer state split over
    # the replicas ("rts"), or none; the default is Paddle's (on, for
    # tensors of at least 8192 elements: none of this network's).
    if "rts" in cfg:
        s.set_options({"location_optimizer": {
            "use_replicated_tensor_sharding": bool(cfg["rts"]),
            "min_elements_for_replicated_tensor_sharding": 0}})
    return s


def train_here(configs: list[dict], opt_spec="adam", updates: int = 20, global_batch: int = 8,
               second_index: int = 1, second_stage: int = 1, first_index: int = 0,
               shards: int = 2) -> list[dict]:
    """Trains a fresh copy of the program (same seed, same data) for each
    config {devices, replicas, accumulate, batches_per_step, threads,
    pipeline, schedule, recompute, rts, avg (need_avg_shard), trace; shards: a config's own guard
    count, default the call's}; every
    update sees the same ``global_batch`` rows. Returns, per config: losses
    [updates] (the mean over an update's micro-batches), the final state,
    the fetch shape, the compiled step's text (ops with their devices), and
    the program's annotations."""
    import paddle

    import tiller

    rows = make_rows(updates * global_batch)
    out = []
    with T.static_mode():
        for cfg in configs:
            built = build(opt_spec, 0, second_index, second_stage, first_index,
                          cfg.get("shards", shards))
            scope = paddle.static.Scope()
            exe = T.init_scope(built, scope)
            if cfg.get("paddle"):
                # Paddle's CPU executor on the same program (it ignores the
                # shard attributes), one global batch per step.
                losses = []
                for r in range(0, updates * global_batch, global_batch):
                    feed = {k: v[r:r + global_batch] for k, v in rows.items()}
                    loss, = T.run_step(built, exe, scope, feed)
                    losses.append(float(np.asarray(loss).reshape(())))
                out.append({"config": cfg, "losses": np.asarray(losses, np.float64),
                            "state": T.read_state(built, scope), "shape": None, "graph": "",
                            "annotations": annotations(built), "in_flight": 0, "bubble": 0.0})
                continue
            per_update = cfg.get("accumulate", 1) * cfg.get("replicas", 1)
            cfg = dict(cfg, micro=global_batch // per_update)
            prog = tiller.IpuCompiledProgram(built.main, scope=scope,
                                             ipu_strategy=_strategy(cfg)).compile(
                built.feed_names, built.fetch_list)
            bps = cfg.get("batches_per_step", 1)
            step_rows = global_batch * bps
            losses, shape = [], None
            for r in range(0, updates * global_batch, step_rows):
                feed = {k: v[r:r + step_rows] for k, v in rows.items()}
                loss, = prog.run(feed=feed)
                shape = tuple(np.shape(loss))
                # Micro-batch order: batch, accumulation, replica (innermost).
                losses.extend(np.asarray(loss).reshape(bps, per_update).mean(axis=1))
            prog.weights_to_host()
            summary = prog.session.summary()
            out.append({"config": cfg, "losses": np.asarray(losses, np.float64),
                        "state": T.read_state(built, scope), "shape": shape,
                        "graph": summary.graph, "annotations": annotations(built),
                        "in_flight": summary.pipeline_max_in_flight,
                        "bubble": summary.pipeline_bubble_fraction})
    return out


def train(fmt: str, configs: list[dict], **kwargs) -> list[dict]:
    """train_here in a process of program form ``fmt``."""
    return T.call_in_format(fmt, "models.sharded:train_here", configs=configs, **kwargs)


def export_inference_here(out_dir: str, stages: int = 2) -> dict:
    """The network's forward (its logits), sharded over ``stages`` devices
    with tiller.ipu_shard_guard, saved by paddle.static.save_inference_model
    in this process's program form (legacy keeps the ipu_index attributes in
    the .pdmodel). Returns {"prefix", "inputs"}."""
    import os

    import paddle
    import paddle.nn as nn
    import paddle.nn.functional as F

    import tiller

    if T.current_format() == "legacy":
        from . import _legacy_compat

        _legacy_compat.install()
    with T.static_mode():
        paddle.enable_static()
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
            x = paddle.static.data("x", [-1, FEATURES], "float32")
            layers = nn.LayerList([nn.Linear(FEATURES, HIDDEN), nn.LayerNorm(HIDDEN),
                                   nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, CLASSES)])
            with tiller.ipu_shard_guard(index=0, stage=0):
                h = layers[1](F.gelu(layers[0](x)))
            with tiller.ipu_shard_guard(index=stages - 1, stage=stages - 1):
                logits = F.softmax(layers[3](F.relu(layers[2](h))))
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(paddle.CPUPlace())
        with paddle.static.scope_guard(scope):
            exe.run(startup)
            T.write_state(scope, T._init_arrays(layers, 0))
            prefix = os.path.join(out_dir, "model")
            paddle.static.save_inference_model(prefix, [x], [logits], exe, program=main)
    return {"prefix": prefix, "inputs": ["x"]}
