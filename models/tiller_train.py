"""The Tiller side of the training tests and benchmark: trains the programs
of models/training.py with ``tiller.IpuCompiledProgram`` exactly as a Paddle
IPU script would (same program, same scope initialisation, same batches, LR
scheduler stepped by the caller), and returns the same record as
models.training.paddle_reference so the two compare directly.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import training as T


def _compile(built, scope, threads: int, micro_batch_size: int, check_nan_inf: bool = False,
             half_dtype=None):
    """micro_batch_size: the rows of each fed batch (one micro-batch a step);
    half_dtype ("bfloat16", "float16"): enable_fp16 with that half type."""
    import tiller

    strategy = tiller.IpuStrategy()
    strategy.set_graph_config(is_training=True, micro_batch_size=micro_batch_size)
    strategy.set_options({"num_threads": threads, "enable_floating_point_checks": check_nan_inf})
    if half_dtype:
        strategy.set_precision_config(enable_fp16=True)
        strategy.set_options({"half_dtype": half_dtype})
    return tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=strategy).compile(
        built.feed_names, built.fetch_list)


def _tiller_here(kind, opt_spec, cfg=None, n_steps=10, batch_size=4, seed=0, data_seed=None,
                 distinct=None, save_at=None, ckpt_dir=None, threads=1,
                 resume_from=None, start_step=0) -> T.ReferenceRun:
    """Like models.training._reference_here with Tiller training. With
    ``resume_from`` (a checkpoint prefix written by Paddle or by Tiller, with
    its .lr.json), the run starts at ``start_step`` from that checkpoint."""
    import paddle

    data_seed = seed + 1 if data_seed is None else data_seed
    batches = T.make_batches(kind, cfg, n_steps, batch_size, data_seed, distinct)
    built = T.build(kind, cfg, opt_spec, seed)
    scope = paddle.static.Scope()
    T.init_scope(built, scope)
    init_state = T.read_state(built, scope)
    prog = _compile(built, scope, threads, batch_size)
    if resume_from is not None:
        prog.load(str(resume_from))
        _load_lr(built, resume_from)
    losses, lrs = [], []
    for i, feed in enumerate(batches):
        if i < start_step:
            continue
        if save_at is not None and i == save_at:
            # An interruption: Tiller writes the checkpoint, a fresh program
            # and scope (as a restarted script builds them) load it.
            prefix = Path(ckpt_dir) / "tiller_ckpt"
            prefix.parent.mkdir(parents=True, exist_ok=True)
            prog.save(str(prefix))
            if built.lr_scheduler is not None:
                Path(str(prefix) + ".lr.json").write_text(json.dumps(built.lr_scheduler.state_dict()))
            built = T.build(kind, cfg, built.opt_spec, seed)
            scope = paddle.static.Scope()
            T.init_scope(built, scope)
            prog = _compile(built, scope, threads, batch_size)
            prog.load(str(prefix))
            _load_lr(built, prefix)
        lrs.append(float(built.lr_scheduler()) if built.lr_scheduler else built.opt_spec.peak_lr)
        outs = prog.run(feed=feed)
        if built.lr_scheduler is not None:
            built.lr_scheduler.step()
        losses.append([float(np.asarray(o).reshape(())) for o in outs])
    prog.weights_to_host()
    return T.ReferenceRun(kind, built.fmt, built.fetch_names, np.asarray(losses, np.float32), lrs,
                          init_state, T.read_state(built, scope), built.param_names,
                          built.notes, {})


def _load_lr(built, prefix) -> None:
    if built.lr_scheduler is not None:
        built.lr_scheduler.set_state_dict(json.loads(Path(str(prefix) + ".lr.json").read_text()))


def _paddle_continue_here(kind, opt_spec, prefix, start_step, cfg=None, n_steps=10, batch_size=4,
                          seed=0, data_seed=None, distinct=None) -> T.ReferenceRun:
    """Paddle's executor continuing from a checkpoint (e.g. one Tiller
    wrote) at ``start_step``, the way a restarted Paddle script would."""
    import paddle

    with T.static_mode():
        data_seed = seed + 1 if data_seed is None else data_seed
        batches = T.make_batches(kind, cfg, n_steps, batch_size, data_seed, distinct)
        built = T.build(kind, cfg, opt_spec, seed)
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(paddle.CPUPlace())
        T.load_checkpoint(built, scope, prefix, exe)
        init_state = T.read_state(built, scope)
        losses, lrs = [], []
        for feed in batches[start_step:]:
            lrs.append(float(built.lr_scheduler()) if built.lr_scheduler else built.opt_spec.peak_lr)
            outs = T.run_step(built, exe, scope, feed)
            losses.append([float(np.asarray(o).reshape(())) for o in outs])
        return T.ReferenceRun(kind, built.fmt, built.fetch_names, np.asarray(losses, np.float32), lrs,
                              init_state, T.read_state(built, scope), built.param_names,
                              built.notes, {})


def paddle_continue(fmt: str | None, **kwargs) -> T.ReferenceRun:
    kwargs["opt_spec"] = T.opt_spec_of(kwargs.get("opt_spec", "adam"))
    kwargs["prefix"] = str(kwargs["prefix"])
    return T.call_in_format(fmt or T.current_format(), "models.tiller_train:_paddle_continue_here",
                            **kwargs)


def _tillers_here(requests: list[dict]) -> list[T.ReferenceRun]:
    with T.static_mode():
        return [_tiller_here(**r) for r in requests]


def tiller_runs(fmt: str | None, *requests: dict) -> list[T.ReferenceRun]:
    """Tiller counterparts of models.training.paddle_references (same keyword
    dicts, plus ``threads``), in one process of program form ``fmt``."""
    reqs = []
    for r in requests:
        r = dict(r)
        r["opt_spec"] = T.opt_spec_of(r.get("opt_spec", "adam"))
        for key in ("ckpt_dir", "resume_from"):
            if r.get(key) is not None:
                r[key] = str(r[key])
        reqs.append(r)
    return T.call_in_format(fmt or T.current_format(), "models.tiller_train:_tillers_here",
                            requests=reqs)
