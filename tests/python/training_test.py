"""Training with Tiller against Paddle's CPU executor (issue 4 acceptance).

The programs, initial state, batches and Paddle's runs come from
models/training.py (BERT-tiny pretraining with MLM + NSP heads and dropout 0,
a small CNN with conv / batch_norm / pool / fc); Tiller trains the same
program through tiller.IpuCompiledProgram (models/tiller_train.py).

Tolerances (the issue's): per-step loss within rel 1e-4 and final parameters
and optimizer state within max-abs 1e-4 of Paddle's after 50 steps. Tiller
differentiates the forward graph itself, so its gradients differ from
Paddle's backward ops by float32 summation order (~1e-7 relative); over 50
steps the worst optimizer seen drifts to ~2e-5 (centered RMSProp divides by
a small running variance).
"""
import os
import pickle

import numpy as np
import pytest

from models import tiller_train as TT
from models import training as T

OPTIMIZERS = T.OPTIMIZERS
KINDS = ("bert", "cnn")
N_STEPS = 50
SAVE_AT = 20
LOSS_RTOL = 1e-4
STATE_ATOL = 1e-4
# Resumed runs are compared on the optimizers with the most state.
RESUMED = ("momentum", "adam", "lamb", "rmsprop_centered")


def _compare(ref, got, what):
    assert got.losses.shape == ref.losses.shape, what
    rel = np.abs(got.losses - ref.losses) / np.abs(ref.losses)
    assert np.all(np.isfinite(got.losses)), what
    step, col = np.unravel_index(np.argmax(rel), rel.shape)
    assert rel.max() <= LOSS_RTOL, (
        f"{what}: step {step} {ref.fetch_names[col]} Tiller {got.losses[step, col]} "
        f"Paddle {ref.losses[step, col]} (rel {rel.max():.2e})")
    assert set(got.final_state) == set(ref.final_state), what
    worst = max((float(np.max(np.abs(got.final_state[k] - v))), k) for k, v in ref.final_state.items())
    assert worst[0] <= STATE_ATOL, f"{what}: {worst[1]} differs by {worst[0]:.2e}"


@pytest.fixture(scope="module", params=T.FORMATS)
def runs(request, tmp_path_factory):
    """Paddle and Tiller, every optimizer and model, 50 steps; plus runs
    interrupted at step 20 (checkpoint, fresh program and scope, load)."""
    fmt = request.param
    ckpt = tmp_path_factory.mktemp(f"ckpt-{fmt}")
    plain = [dict(kind=k, opt_spec=o, n_steps=N_STEPS) for k in KINDS for o in OPTIMIZERS]
    resumed = [dict(kind=k, opt_spec=o, n_steps=N_STEPS, save_at=SAVE_AT,
                    ckpt_dir=ckpt / f"{k}-{o}") for k in KINDS for o in RESUMED]
    paddle = T.paddle_references(fmt, *plain)
    tiller = TT.tiller_runs(fmt, *plain, *resumed)
    return fmt, plain, resumed, paddle, tiller[:len(plain)], tiller[len(plain):]


def test_every_optimizer_matches_paddle_for_50_steps(runs):
    fmt, plain, _, paddle, tiller, _ = runs
    for req, ref, got in zip(plain, paddle, tiller):
        _compare(ref, got, f"{fmt} {req['kind']} {req['opt_spec']}")
        # Training happened: the loss moved and every parameter changed.
        assert not np.array_equal(got.final_state[got.param_names[0]], got.init_state[got.param_names[0]])


def test_resumed_training_repeats_the_uninterrupted_run(runs):
    # Same state, same compiled kernels, same thread count: bit-identical.
    fmt, plain, resumed, _, tiller, tiller_resumed = runs
    by_key = {(r["kind"], r["opt_spec"]): got for r, got in zip(plain, tiller)}
    for req, got in zip(resumed, tiller_resumed):
        full = by_key[(req["kind"], req["opt_spec"])]
        what = f"{fmt} {req['kind']} {req['opt_spec']}"
        np.testing.assert_array_equal(got.losses, full.losses, err_msg=what)
        for k, v in full.final_state.items():
            np.testing.assert_array_equal(got.final_state[k], v, err_msg=f"{what}: {k}")
        # Tiller's checkpoint has the files and layout paddle.static.save writes.
        prefix = os.path.join(str(req["ckpt_dir"]), "tiller_ckpt")
        with open(prefix + ".pdparams", "rb") as f:
            params = pickle.load(f)
        assert set(full.param_names) <= set(params), what


@pytest.mark.parametrize("fmt", T.FORMATS)
def test_checkpoints_cross_between_tiller_and_paddle(fmt, tmp_path):
    """Paddle's checkpoint at step 20 continued by Tiller, and Tiller's
    continued by Paddle, both follow Paddle's uninterrupted trajectory."""
    kind, opt = "bert", "adam"
    ref = T.paddle_reference(kind, opt, fmt=fmt, n_steps=N_STEPS, save_at=SAVE_AT,
                             ckpt_dir=tmp_path / "paddle")
    tiller_from_paddle = TT.tiller_runs(fmt, dict(kind=kind, opt_spec=opt, n_steps=N_STEPS,
                                                  resume_from=tmp_path / "paddle" / "ckpt",
                                                  start_step=SAVE_AT))[0]
    tail = T.ReferenceRun(ref.kind, ref.fmt, ref.fetch_names, ref.losses[SAVE_AT:], ref.lrs[SAVE_AT:],
                          {}, ref.final_state, ref.param_names, [], {})
    _compare(tail, tiller_from_paddle, f"{fmt}: Tiller resuming Paddle's checkpoint")

    TT.tiller_runs(fmt, dict(kind=kind, opt_spec=opt, n_steps=N_STEPS, save_at=SAVE_AT,
                             ckpt_dir=tmp_path / "tiller"))
    paddle_from_tiller = TT.paddle_continue(fmt, kind=kind, opt_spec=opt, n_steps=N_STEPS,
                                            prefix=tmp_path / "tiller" / "tiller_ckpt",
                                            start_step=SAVE_AT)
    _compare(tail, paddle_from_tiller, f"{fmt}: Paddle resuming Tiller's checkpoint")


@pytest.mark.parametrize("fmt", T.FORMATS)
def test_session_trains_from_saved_program_files(fmt, tmp_path):
    """No live program: the training program and state as paddle.static.save
    wrote them (.json/.pdmodel + .pdparams + .pdopt) into a TrainingSession,
    with the learning rate set from Paddle's schedule each step."""
    import json

    import tiller._tiller as tt

    out = T.write_training_case(tmp_path, "cnn", "momentum", fmt=fmt, n_steps=6)
    info = json.loads(open(os.path.join(out, "training_info.json")).read())
    program = os.path.join(out, "train.json" if fmt == "pir" else "train.pdmodel")
    feeds = list(info["feeds"])
    session = tt.TrainingSession(program, feeds, info["fetch_vars"][:1])
    state = {}
    for suffix in (".pdparams", ".pdopt"):
        path = os.path.join(out, "train" + suffix)
        if os.path.exists(path):
            with open(path, "rb") as f:
                state.update(pickle.load(f))
    for si in session.state_info():
        session.set_state(si.name, np.asarray(state[si.name], dtype=si.dtype).reshape(si.shape))
    batches = np.load(os.path.join(out, "batches.npz"))
    ref = np.load(os.path.join(out, "reference.npz"))
    for step in range(6):
        lr = session.get_state("learning_rate_0")
        session.set_state("learning_rate_0", np.full_like(lr, ref["lrs"][step]))
        loss, = session.run({n: batches[f"{step}/{n}"] for n in feeds})
        np.testing.assert_allclose(loss, ref["losses"][step, 0], rtol=LOSS_RTOL, err_msg=f"step {step}")
    for name in info["param_names"]:
        np.testing.assert_allclose(session.get_state(name), ref[f"final/{name}"], atol=STATE_ATOL,
                                   err_msg=name)


@pytest.mark.parametrize("fmt", T.FORMATS)
def test_weight_decay_forms_match_paddle(fmt):
    """L2 regularization (sgd/adam: scale + sum ops after clipping; momentum:
    folded into its op), AdamW's decoupled decay and Lamb's, with biases and
    norm parameters excluded through apply_decay_param_fun /
    exclude_from_weight_decay_fn."""
    reqs = [dict(kind="bert", opt_spec=T.OptSpec(o, weight_decay=0.01), n_steps=20)
            for o in ("sgd", "momentum", "adam", "adamw", "lamb")]
    for req, ref, got in zip(reqs, T.paddle_references(fmt, *reqs), TT.tiller_runs(fmt, *reqs)):
        _compare(ref, got, f"{fmt} bert {req['opt_spec'].name} weight_decay=0.01")
