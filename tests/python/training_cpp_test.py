"""C++ owns training: options, state roles, learning rate and checkpoints
live in tiller::training (include/tiller/training.h, ipu_options.h);
tiller.IpuCompiledProgram only adapts Paddle objects to it.

Acceptance: BERT-tiny trained for 20 steps from C++ alone, with a
checkpoint saved at step 10 and resumed in a new session
(tests/cpp/training_resume_test.cc, a GoogleTest using public headers
only), matches the same 20 steps run uninterrupted through
tiller.IpuCompiledProgram bit for bit: every loss and every final state
(parameters, Lamb moments and beta powers, learning rate). The model has
dropout 0 (models.training's BERT presets), so the session's step counter,
which paddle.static.save's format does not hold, plays no part; Lamb with
weight decay, global-norm clipping and a warm-up + polynomial-decay
schedule, so the learning rate changes every step.

Also: the state roles and files a session reports, the learning rate set
from C++, and checkpoint refusals with their messages, on the small CNN.
"""
from __future__ import annotations

import os
import pickle
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tiller
from models import tiller_train as TT
from models import training as T

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GTEST = Path(os.environ.get("TILLER_BUILD_DIR", REPO / "build")) / "bin" / "tiller_api_tests"
N_STEPS, SAVE_AT, BATCH, THREADS = 20, 10, 4, 1
SPEC = T.OptSpec("lamb", weight_decay=0.01)


def _state(prog) -> dict:
    return {n: prog.session.get_state(n) for n in prog.session.state_names()}


def _python_path(fixture: str) -> dict:
    """In a process of the program form: writes the fixture for the C++ test
    (program and initial checkpoint as paddle.static.save writes them, the
    batches and learning rates) and trains the same 20 steps through
    tiller.IpuCompiledProgram, uninterrupted. Returns the losses, the state
    before step SAVE_AT and after the last step, and the roles."""
    import paddle

    out = Path(fixture)
    with T.static_mode():
        built = T.build("bert", "bert-tiny", SPEC, 0)
        T.save_training_program(built, out)   # train.json|pdmodel, train.pdparams/.pdopt
        info = __import__("json").loads((out / "training_info.json").read_text())
        program = "train.json" if built.fmt == "pir" else "train.pdmodel"
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        prog = TT._compile(built, scope, threads=THREADS, micro_batch_size=BATCH)
        batches = T.make_batches("bert", "bert-tiny", N_STEPS, BATCH, 1)
        losses, lrs, mid = [], [], None
        for i, feed in enumerate(batches):
            if i == SAVE_AT:
                mid = _state(prog)
            lrs.append(float(built.lr_scheduler()))
            losses.append([np.asarray(v).reshape(()) for v in prog.run(feed=feed)])
            built.lr_scheduler.step()
        roles = {i.name: (i.role, i.file) for i in prog.session.state_info()}
    steps = {f"{i}/{k}": v for i, b in enumerate(batches) for k, v in b.items()}
    steps["lr"] = np.asarray(lrs, np.float64)
    with open(out / "steps.pkl", "wb") as f:
        pickle.dump(steps, f, protocol=4)
    (out / "fixture.txt").write_text("\n".join([
        f"program {program}", "init train", "feeds " + " ".join(built.feed_names),
        "fetches " + " ".join(info["fetch_vars"]), f"steps {N_STEPS}", f"save_at {SAVE_AT}",
        f"num_threads {THREADS}", f"micro_batch_size {BATCH}"]) + "\n")
    return dict(losses=np.asarray(losses, np.float32), lrs=lrs, mid=mid, final=_state(prog),
                roles=roles, fmt=built.fmt)


def _load(prefix) -> tuple[dict, dict]:
    with open(f"{prefix}.pdparams", "rb") as f:
        params = pickle.load(f)
    with open(f"{prefix}.pdopt", "rb") as f:
        opts = pickle.load(f)
    return params, opts


def _assert_state_equal(got: dict, want: dict, what: str):
    assert set(got) == set(want), f"{what}: {sorted(set(got) ^ set(want))}"
    for name, value in want.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, \
            f"{what}: {name} {got[name].dtype}{got[name].shape} vs {value.dtype}{value.shape}"
        assert np.array_equal(got[name], value), f"{what}: {name} differs"


@pytest.mark.parametrize("fmt", T.FORMATS)
def test_cpp_trains_bert_tiny_with_checkpoints_like_the_python_path(fmt, tmp_path):
    if not GTEST.exists():
        pytest.skip(f"{GTEST} not built")
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    path = [str(HERE), str(REPO / "python")] + [os.environ.get("PYTHONPATH", "")]
    with pytest.MonkeyPatch.context() as mp:   # the legacy child imports this file
        mp.setenv("PYTHONPATH", os.pathsep.join(p for p in path if p))
        py = T.call_in_format(fmt, f"{__name__}:_python_path", fixture=str(fixture))
    assert py["fmt"] == fmt

    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, TILLER_TRAIN_FIXTURE=str(fixture), TILLER_TRAIN_OUT=str(out))
    r = subprocess.run([str(GTEST), "--gtest_filter=TrainingResumeTest.*"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "[  PASSED  ] 1 test" in r.stdout, r.stdout[-6000:] + r.stderr
    assert "SKIPPED" not in r.stdout, r.stdout

    # The same losses, bit for bit, and training happened.
    with open(out / "losses.pkl", "rb") as f:
        losses = pickle.load(f)["losses"]
    assert losses.shape == py["losses"].shape == (N_STEPS, 3)
    assert np.array_equal(losses, py["losses"]), np.argwhere(losses != py["losses"])[:5]
    assert losses[-5:, 0].mean() < losses[:5, 0].mean(), losses[:, 0]
    assert len(set(py["lrs"])) == N_STEPS, "the learning rate changes every step"

    # The checkpoint at step 10 is the uninterrupted run's state before step
    # 10; the final one its state after step 20: every variable, bit for bit.
    for prefix, want in (("resume", py["mid"]), ("final", py["final"])):
        params, opts = _load(out / prefix)
        _assert_state_equal({**params, **opts}, want, f"{fmt} {prefix}")
        # Split between the files exactly as paddle.static.save split the
        # fixture's initial checkpoint.
        paddle_params, paddle_opts = _load(fixture / "train")
        assert set(params) == set(paddle_params), f"{fmt} {prefix}.pdparams"
        assert set(opts) == set(paddle_opts), f"{fmt} {prefix}.pdopt"
    roles = py["roles"]
    init = {**_load(fixture / "train")[0], **_load(fixture / "train")[1]}
    for name, (role, _) in roles.items():
        if role in ("parameter", "optimizer_state"):
            assert not np.array_equal(py["final"][name], init[name]), f"{name} did not change"
    assert {r for r, _ in roles.values()} == {"parameter", "optimizer_state", "learning_rate"}
    assert roles["learning_rate_0"] == ("learning_rate", ".pdparams" if fmt == "pir" else ".pdopt")
    assert any("moment1" in n for n, (r, _) in roles.items() if r == "optimizer_state")


# -- the session's roles, learning rate and checkpoints, from Python ----------


@pytest.fixture()
def cnn():
    import paddle

    with T.static_mode():
        built = T.build("cnn", None, "adam", 0)
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        prog = TT._compile(built, scope, threads=1, micro_batch_size=4)
        yield built, scope, prog, T.make_batches("cnn", None, 2, 4, 1)


def test_state_info_reports_roles_and_files_like_paddle_state_roles(cnn, tmp_path):
    built, _, prog, _ = cnn
    infos = prog.session.state_info()
    roles = {i.name: (i.role, i.file) for i in infos}
    assert set(roles) == set(prog.session.state_names())
    assert {n for n, (r, _) in roles.items() if r == "parameter"} == set(built.param_names)
    assert {n for n, (r, _) in roles.items() if r == "statistic"} == {
        f"batch_norm2d_{i}.w_{j}" for i in (0, 1) for j in (1, 2)}
    assert roles["learning_rate_0"] == ("learning_rate", ".pdparams")   # PIR
    for name, (role, file) in roles.items():
        if role == "optimizer_state":
            assert file == ".pdopt", name
    # The classification of the program file Tiller compiled (the public
    # checkpoint API), and the files save() writes.
    import tiller._tiller as tt

    program = os.path.join(prog._tmp.name, "main.json")
    by_file = tt.paddle_state_roles(program)
    assert {n: by_file[n] for n in roles} == roles
    prog.save(str(tmp_path / "ck"))
    params, opts = _load(tmp_path / "ck")
    assert {n for n, (_, f) in roles.items() if f == ".pdparams"} == set(params)
    assert {n for n, (_, f) in roles.items() if f == ".pdopt"} == set(opts)


def test_set_learning_rate_fills_every_learning_rate_variable(cnn):
    _, _, prog, batches = cnn
    prog.session.set_learning_rate(0.1)
    lr = prog.session.get_state("learning_rate_0")
    assert lr.dtype == np.float32 and lr.shape == () and lr == np.float32(0.1)
    # Each run sets it from the program's scheduler, as Paddle's executor does.
    prog.run(feed=batches[0])
    assert prog.session.get_state("learning_rate_0") == np.float32(prog.org_program.lr_scheduler())


def _write(path, obj):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=4)


def test_checkpoint_refusals_name_the_problem_and_change_nothing(cnn, tmp_path):
    _, _, prog, batches = cnn
    prog.run(feed=batches[0])
    prefix = str(tmp_path / "deep" / "dir" / "ck")   # save creates the directory
    prog.save(prefix)
    assert sorted(os.listdir(tmp_path / "deep" / "dir")) == ["ck.pdopt", "ck.pdparams",
                                                             "ck.tiller.json"]
    good = _state(prog)
    params, opts = _load(prefix)
    w = sorted(params)[0]

    def refused(match, p=params, o=opts):
        _write(prefix + ".pdparams", p)
        if o is None:
            os.remove(prefix + ".pdopt")
        else:
            _write(prefix + ".pdopt", o)
        with pytest.raises(tiller.TillerError, match=match):
            prog.load(prefix)
        for name, value in _state(prog).items():
            np.testing.assert_array_equal(value, good[name], err_msg=name)

    refused(rf"'{w}' has shape \[7\], the program declares \[",
            {**params, w: np.zeros(7, np.float32)})
    refused(rf"'{w}' is float64, the program declares float32",
            {**params, w: params[w].astype(np.float64)})
    two = dict(params)
    del two[sorted(params)[0]], two[sorted(params)[1]]
    refused("lacks 2 variable\\(s\\) of the program: " + ", ".join(sorted(params)[:2]), two)
    refused(r"lacks \d+ variable\(s\) of the program: .*\.pdopt' not found", params, None)
    _write(prefix + ".pdparams", ["not", "a", "dict"])
    with pytest.raises(tiller.TillerError, match="does not hold a dict of arrays"):
        prog.load(prefix)
    # A checkpoint with a reshaped but equally large array loads (as Paddle's).
    _write(prefix + ".pdparams", {k: v.reshape(-1) for k, v in params.items()})
    _write(prefix + ".pdopt", opts)
    prog.load(prefix)
    for name, value in _state(prog).items():
        np.testing.assert_array_equal(value, good[name], err_msg=name)


def _paddle_split(program) -> tuple[set, set]:
    """paddle.static.save's .pdparams / .pdopt names for a live PIR program
    (what ipu.py computed in Python before C++ did)."""
    from paddle.static.pir_io import get_pir_parameters

    params, opts = get_pir_parameters(program)
    return {v.name for v in params if v.persistable}, {v.name for v in opts if v.persistable}


@pytest.mark.parametrize("spec", [T.OptSpec("sgd", clip_norm=None),
                                  T.OptSpec("momentum", schedule="constant"),
                                  T.OptSpec("rmsprop_centered", weight_decay=0.01)],
                         ids=["sgd-warmup", "momentum-constant", "rmsprop-decay"])
def test_checkpoint_split_is_paddles_and_pdopt_is_optional_without_its_variables(spec, tmp_path):
    """The files save() writes hold what paddle.static.save puts in each
    (a constant learning rate is a pd_op.data, so .pdopt); a program whose
    state is all in .pdparams (SGD with a scheduler) loads without .pdopt."""
    import paddle

    with T.static_mode():
        built = T.build("cnn", None, spec, 0)
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        prog = TT._compile(built, scope, threads=1, micro_batch_size=4)
        prefix = str(tmp_path / "ck")
        prog.save(prefix)
        params, opts = _load(prefix)
        want_params, want_opts = _paddle_split(built.main)
        assert (set(params), set(opts)) == (want_params, want_opts)
        if spec.name != "sgd":
            return
        assert opts == {}
        os.remove(prefix + ".pdopt")
        before = _state(prog)
        prog.run(feed=T.make_batches("cnn", None, 1, 4, 1)[0])
        prog.load(prefix)
        for name, value in _state(prog).items():
            np.testing.assert_array_equal(value, before[name], err_msg=name)


def test_options_reach_cpp_with_pythons_values():
    s = tiller.IpuStrategy()
    engine = {"debug.instrument": "true"}
    with pytest.warns(UserWarning, match="tiller: option 'engine_options' tunes the IPU toolchain"):
        s.set_options({"engine_options": engine})
    assert s.get_option("engine_options") == engine   # no effect, kept (a map, as Paddle's)
    s.set_options({"micro_batch_size": np.int64(8), "loss_scaling": 1})
    assert s.get_option("micro_batch_size") == 8 and s.get_option("loss_scaling") == 1.0
    with pytest.raises(tiller.TillerError, match="option 'micro_batch_size' takes an integer"):
        s.set_options({"micro_batch_size": "8"})
    with pytest.raises(tiller.TillerError,
                       match=r"option enable_half_partial=True is not implemented by Tiller yet "
                             r"\(supported: False\)"):
        s.set_options({"enable_half_partial": True})
    with pytest.raises(tiller.TillerError, match="enable_manual_shard needs num_ipus > 1"):
        s.set_graph_config(enable_manual_shard=True)
    with pytest.raises(tiller.TillerError, match="unknown option 'nope'"):
        s.get_option("nope")
    assert s.get_option("micro_batch_size") == 8
    specs = {name: (support, default)
             for name, support, default, *_ in tiller._tiller.IpuOptions.specs()}
    assert specs["enable_fp16"] == ("honoured", False)
    assert specs["accl1_type"] == ("honoured", "FLOAT")
    assert specs["enable_stochastic_rounding"] == ("honoured", False)
    assert specs["enable_half_partial"] == ("not_yet", False)
    assert specs["engine_options"] == ("no_effect", {})
    assert specs["is_training"] == ("honoured", True)
