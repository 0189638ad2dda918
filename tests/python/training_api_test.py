"""tiller.IpuStrategy / IpuCompiledProgram beyond plain steps: NaN/Inf
stops, eval mode, exporting the trained model for inference, and every bad
input ending in a clear TillerError (issue 4)."""
import os

import numpy as np
import pytest

import tiller
from models import tiller_train as TT
from models import training as T


@pytest.fixture()
def cnn():
    """A compiled small-CNN training program (PIR, this process) with its
    scope and batches."""
    import paddle

    with T.static_mode():
        built = T.build("cnn", None, "adam", 0)
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        prog = TT._compile(built, scope, threads=1, micro_batch_size=4)
        batches = T.make_batches("cnn", None, 4, 4, 1)
        yield built, scope, prog, batches


def _state(prog):
    return {n: prog.session.get_state(n) for n in prog.session.state_names()}


def test_non_finite_loss_stops_naming_step_and_op_and_updates_nothing(cnn):
    built, scope, prog, batches = cnn
    prog.run(feed=batches[0])
    prog.run(feed=batches[1])
    before = _state(prog)
    bad = dict(batches[2])
    bad["image"] = bad["image"].copy()
    bad["image"][0, 0, 0, 0] = np.inf
    with pytest.raises(tiller.TillerError) as info:
        prog.run(feed=bad)
    msg = str(info.value)
    assert "step 3" in msg and "not finite" in msg, msg
    # The first op that went non-finite is the first conv (inf * weights),
    # named after the Paddle op it came from.
    assert "conv2d" in msg, msg
    after = _state(prog)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)
    # The session goes on with good data.
    loss, = prog.run(feed=batches[3])
    assert np.isfinite(loss).all()


def test_floating_point_checks_option_checks_every_op(cnn):
    import paddle

    built, _, _, batches = cnn
    scope = paddle.static.Scope()
    T.init_scope(built, scope)
    prog = TT._compile(built, scope, threads=1, micro_batch_size=4, check_nan_inf=True)
    bad = dict(batches[0])
    bad["image"] = np.full_like(bad["image"], np.nan)
    with pytest.raises(tiller.TillerError) as info:
        prog.run(feed=bad)
    msg = str(info.value)
    assert "step 1" in msg and "conv2d" in msg and "nan" in msg, msg


def _export_and_predict_with_paddle(built, scope, tmp_path, feed):
    """Saves the program as an inference model (Paddle prunes it to the
    loss and puts BatchNorm in test mode) and runs it with Paddle Inference."""
    import paddle
    import paddle.inference as pi

    exe = paddle.static.Executor(paddle.CPUPlace())
    feed_vars = [op.result(0) for op in built.main.global_block().ops
                 if op.name() == "pd_op.data" and op.attrs()["name"] in built.feed_names]
    with paddle.static.scope_guard(scope):
        paddle.static.save_inference_model(str(tmp_path / "cnn"), feed_vars, built.fetch_list[:1], exe,
                                           program=built.main)
    model, params = str(tmp_path / "cnn.json"), str(tmp_path / "cnn.pdiparams")
    cfg = pi.Config(model, params)
    cfg.disable_mkldnn()
    p = pi.create_predictor(cfg)
    for name in p.get_input_names():
        p.get_input_handle(name).copy_from_cpu(feed[name])
    p.run()
    return model, params, p.get_output_handle(p.get_output_names()[0]).copy_to_cpu()


def test_eval_mode_runs_forward_only_in_test_mode(cnn, tmp_path):
    built, scope, prog, batches = cnn
    for feed in batches[:2]:
        prog.run(feed=feed)
    prog.weights_to_host()
    before = _state(prog)
    strategy = tiller.IpuStrategy()
    strategy.set_options({"runtime_options.enable_eval": True})
    prog._strategy = strategy
    got = prog.run(feed=batches[2])
    assert prog.session.step_count == 2, "eval steps are not training steps"
    after = _state(prog)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=f"eval changed {name}")
    # Paddle Inference on the same weights, BatchNorm on running statistics.
    _, _, want = _export_and_predict_with_paddle(built, scope, tmp_path, batches[2])
    np.testing.assert_allclose(got[0], want, rtol=1e-5)


def test_trained_model_exports_for_paddle_and_tiller_inference(cnn, tmp_path):
    import tiller.inference as ti

    built, scope, prog, batches = cnn
    for feed in batches[:3]:
        prog.run(feed=feed)
    prog.weights_to_host()
    model, params, want = _export_and_predict_with_paddle(built, scope, tmp_path, batches[3])
    t = ti.create_predictor(ti.Config(model, params))
    got = t.run([batches[3][n] for n in t.get_input_names()])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# -- bad input ---------------------------------------------------------------

def test_program_without_optimizer_is_refused():
    import paddle

    with T.static_mode():
        main, start = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, start):
            x = paddle.static.data("x", [2, 3], "float32")
            loss = paddle.mean(paddle.static.nn.fc(x, 2))
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(paddle.CPUPlace())
        with paddle.static.scope_guard(scope):
            exe.run(start)
        with pytest.raises(tiller.TillerError, match="no backward part.*minimize"):
            tiller.IpuCompiledProgram(main, scope=scope).compile(["x"], [loss])


def test_bad_feeds_name_the_tensor(cnn):
    built, _, prog, batches = cnn
    feed = dict(batches[0])
    with pytest.raises(tiller.TillerError, match="image"):
        prog.run(feed={**feed, "image": feed["image"].astype(np.float64)})
    with pytest.raises(tiller.TillerError, match="image"):
        prog.run(feed={**feed, "image": feed["image"][:, :2]})
    with pytest.raises(tiller.TillerError, match="nonexistent"):
        prog.run(feed={**feed, "nonexistent": feed["image"]})
    with pytest.raises(tiller.TillerError, match="feed lacks label"):
        prog.run(feed={"image": feed["image"]})


def test_uninitialized_scope_is_refused():
    import paddle

    with T.static_mode():
        built = T.build("cnn", None, "sgd", 0)
        with pytest.raises(tiller.TillerError, match="not in the scope|startup"):
            TT._compile(built, paddle.static.Scope(), threads=1, micro_batch_size=4)


def test_bad_checkpoints_are_refused(cnn, tmp_path):
    _, _, prog, batches = cnn
    prog.run(feed=batches[0])
    prefix = str(tmp_path / "ck")
    prog.save(prefix)
    assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f], "temporary files left behind"
    good = _state(prog)
    # Truncated file.
    data = open(prefix + ".pdparams", "rb").read()
    open(prefix + ".pdparams", "wb").write(data[: len(data) // 2])
    with pytest.raises(tiller.TillerError, match="corrupt"):
        prog.load(prefix)
    # A checkpoint missing variables names them.
    import pickle
    params = pickle.loads(data)
    dropped = sorted(params)[0]
    del params[dropped]
    open(prefix + ".pdparams", "wb").write(pickle.dumps(params))
    with pytest.raises(tiller.TillerError, match=dropped):
        prog.load(prefix)
    # Failed loads changed nothing.
    for name, value in _state(prog).items():
        np.testing.assert_array_equal(value, good[name], err_msg=name)
    with pytest.raises(tiller.TillerError, match="not found"):
        prog.load(str(tmp_path / "missing"))


def test_strategy_options():
    s = tiller.IpuStrategy()
    s.set_graph_config(is_training=True, micro_batch_size=4)
    assert s.get_option("micro_batch_size") == 4 and s.is_training
    with pytest.raises(tiller.TillerError, match="valid options"):
        s.set_options({"no_such_option": 1})
    with pytest.raises(tiller.TillerError, match="not implemented"):
        s.set_options({"enable_half_partial": True})
    with pytest.raises(tiller.TillerError, match="manual_shard"):
        s.set_pipelining_config(enable_pipelining=True)
    with pytest.warns(UserWarning, match="no effect"):
        s.set_options({"available_memory_proportion": 0.5})


@pytest.mark.parametrize("opt", ["adam", "lamb"])
def test_no_bias_optimizer_matches_paddle_with_zero_beta_powers(opt):
    """use_no_bias_optimizer: Adam/Lamb without bias correction. Paddle has
    no such switch, but its kernels with beta1_pow = beta2_pow = 0 (which
    stay 0, being multiplied by beta each step) compute exactly that."""
    import paddle

    with T.static_mode():
        built = T.build("cnn", None, T.OptSpec(opt, schedule="constant", clip_norm=None), 0)
        batches = T.make_batches("cnn", None, 5, 4, 1)
        pows = [n for n in T.persistable_names(built) if "_pow_acc_" in n]
        assert pows, "no beta power accumulators found"

        ref_scope = paddle.static.Scope()
        exe = T.init_scope(built, ref_scope)
        for n in pows:
            t = ref_scope.find_var(n).get_tensor()
            t.set(np.zeros_like(np.array(t)), paddle.CPUPlace())
        want = [T.run_step(built, exe, ref_scope, f)[0] for f in batches]

        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        strategy = tiller.IpuStrategy()
        strategy.set_graph_config(is_training=True, micro_batch_size=4)
        strategy.set_options({"use_no_bias_optimizer": True, "num_threads": 1})
        prog = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=strategy).compile(
            built.feed_names, built.fetch_list)
        got = [prog.run(feed=f)[0] for f in batches]
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5)
        # And it differs from bias-corrected training (the option does something).
        plain_strategy = tiller.IpuStrategy()
        plain_strategy.set_graph_config(is_training=True, micro_batch_size=4)
        plain = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=plain_strategy)
        T.init_scope(built, scope)
        plain.compile(built.feed_names, built.fetch_list)
        corrected = [plain.run(feed=f)[0] for f in batches]
        assert not np.allclose(np.array(corrected)[1:], np.array(want)[1:], rtol=1e-5)


def test_ipu_script_idiom_runs_with_the_import_changed():
    """The shape of a Paddle IPU training script: startup through the
    executor, IpuStrategy + IpuCompiledProgram, exe.run(compiled, feed,
    fetch_list) each step; compared with the same script on Paddle's own
    executor (no IPU)."""
    import paddle

    def script(use_tiller):
        with T.static_mode():
            built = T.build("cnn", None, T.OptSpec("sgd", schedule="constant", clip_norm=None), 0)
            scope = paddle.static.Scope()
            batches = T.make_batches("cnn", None, 3, 4, 1)
            losses = []
            with paddle.static.scope_guard(scope):
                exe = tiller.Executor(paddle.CPUPlace()) if use_tiller else \
                    paddle.static.Executor(paddle.CPUPlace())
                exe.run(built.startup)
                T.write_state(scope, built.init_state)
                program = built.main
                if use_tiller:
                    strategy = tiller.IpuStrategy()
                    strategy.set_graph_config(num_ipus=1, is_training=True, micro_batch_size=4)
                    program = tiller.IpuCompiledProgram(built.main, ipu_strategy=strategy).compile(
                        built.feed_names, built.fetch_list)
                for feed in batches:
                    losses.append(exe.run(program, feed=feed, fetch_list=built.fetch_list)[0])
            return np.array(losses)

    np.testing.assert_allclose(script(True), script(False), rtol=1e-5)
