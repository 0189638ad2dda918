"""Mixed precision (issue 10): bfloat16 / float16 matmul, linear and conv2d
with float32 accumulation, in inference (Config.set_precision,
enable_mkldnn_bfloat16, SetIpuConfig's ipu_enable_fp16) and training
(enable_fp16 + Tiller's half_dtype), against Tiller's own float32 runs of
the same model; static, dynamic (Paddle AMP's rule) and automatic
(Graphcore's rule) loss scaling with gradient statistics, on one device,
replicas with accumulation, and pipelines; the options that stay refused."""
import os

import numpy as np
import pytest

import tiller
import tiller.inference as ti
from cpu_info import cpu_flags
from models import make_inputs
from models import training as T

FORMATS = ("pir", "legacy")


def _predict(exp, inputs, precision=None, bf16_paddle_name=False):
    config = ti.Config(exp.model_file, exp.params_file)
    config.set_cpu_math_library_num_threads(1)
    if bf16_paddle_name:
        config.enable_mkldnn_bfloat16()
    elif precision:
        config.set_precision(precision)
    predictor = ti.create_predictor(config)
    names = predictor.get_input_names()
    outs = predictor.run([np.ascontiguousarray(inputs[n]) for n in names])
    return outs, predictor.summary()["compile_report"]


# oneDNN 2.6 multiplies bfloat16 with its AVX-512 kernels only (natively with
# AVX512_BF16, emulated on the rest of AVX-512); on an AVX2 CPU Tiller rounds
# the operands to bfloat16 and multiplies in float32 (same products).
_ONEDNN_BF16_GEMM = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= cpu_flags()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("preset", ["bert-tiny", "resnet-tiny"])
def test_half_precision_inference_is_close_to_float32(zoo, preset, fmt):
    """bf16 operands carry 8 significant bits (relative rounding 2^-9 =
    0.2%); with float32 accumulation over a tiny model's few layers the
    outputs stay within 2e-2 max-abs of float32 (the issue's bound for
    BERT-Base), float16 (11 bits) within 4e-3. Both must also differ from
    float32 at all: a pass that did nothing would pass the bound."""
    exp = zoo.export(preset, fmt)
    inputs = make_inputs(preset, 2, 16, 0)
    ref, _ = _predict(exp, inputs)
    for precision, bound in (("bfloat16", 2e-2), ("float16", 4e-3)):
        outs, report = _predict(exp, inputs, precision)
        diff = max(float(np.max(np.abs(o - r))) for o, r in zip(outs, ref))
        assert 0 < diff <= bound, (precision, diff)
        assert "mixed_precision" in report, report
        want = ("multiplied in bfloat16" if _ONEDNN_BF16_GEMM else "rounded to bfloat16"
                ) if precision == "bfloat16" else "rounded to float16"
        assert want in report, report
        assert "weights converted at compile time" in report, report


def test_paddle_names_for_half_precision_inference(zoo):
    exp = zoo.export("bert-tiny", "pir")
    inputs = make_inputs("bert-tiny", 2, 16, 0)
    a, _ = _predict(exp, inputs, "bfloat16")
    b, report = _predict(exp, inputs, bf16_paddle_name=True)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    config = ti.Config(exp.model_file, exp.params_file)
    config.set_ipu_config(ipu_enable_fp16=True)
    assert config.precision() == "half"
    # "half" is bfloat16 where the CPU multiplies it natively (CPUID, read by
    # Tiller; /proc/cpuinfo's flags here), else float16.
    native = bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})
    _, report = _predict(exp, inputs, "half")
    assert ("multiplied in bfloat16" if native else "rounded to float16") in report, report
    with pytest.raises(tiller.TillerError, match="precision 'int8' is not one of"):
        config.set_precision("int8")
    with pytest.raises(tiller.TillerError, match="ipu_enable_half_partial"):
        config.set_ipu_config(ipu_enable_half_partial=True)


def _train(precision, steps, batches, accumulate=1, replicas=1, loss_scaling=1.0, state=False,
           options=None, probe=None, kind="bert", stages=1):
    """Per-step losses and the compile report (and, with state, the final
    state by name) of BERT-tiny (kind "cnn": the small CNN). `options`: more
    strategy options; `probe(i, prog)` runs after step i."""
    with T.static_mode():
        return _train_static(precision, steps, batches, accumulate, replicas, loss_scaling, state,
                             options or {}, probe, kind, stages)


def _train_static(precision, steps, batches, accumulate, replicas, loss_scaling, state, options,
                  probe, kind, stages):
    import paddle

    built = T.build(kind, "bert-tiny" if kind == "bert" else None,
                    T.OptSpec("adam", lr=1e-3, schedule="constant", clip_norm=None), seed=0,
                    stages=stages)
    scope = paddle.static.Scope()
    T.init_scope(built, scope)
    micro = 8 // accumulate // replicas
    s = tiller.IpuStrategy()
    s.set_graph_config(num_ipus=replicas * stages, is_training=True, micro_batch_size=micro,
                       enable_manual_shard=stages > 1)
    s.set_pipelining_config(enable_pipelining=stages > 1,
                            enable_gradient_accumulation=accumulate > 1,
                            accumulation_factor=accumulate)
    if replicas > 1:
        s.set_options({"enable_replicated_graphs": True, "replicated_graph_count": replicas})
        if options.get("dynamic_loss_scaling") and stages == 1:
            # Not yet with replicated tensor sharding (refused; see below).
            s.set_options({"location_optimizer": {"use_replicated_tensor_sharding": False}})
    s.set_options({"num_threads": replicas * stages, "loss_scaling": loss_scaling, **options})
    if precision != "float32":
        s.set_precision_config(enable_fp16=True)
        s.set_options({"half_dtype": precision})
    prog = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=s).compile(
        built.feed_names, built.fetch_list)
    losses = []
    for i in range(steps):
        losses.append(float(np.mean(prog.run(feed=batches[i])[0])))
        if probe:
            probe(i, prog)
    report = prog.session.summary().compile_report
    if state:
        return losses, report, {n: prog.session.get_state(n) for n in prog.session.state_names()}
    return losses, report


@pytest.mark.parametrize("layout", ["1 device", "2 replicas x accumulation 2"])
def test_half_precision_training_tracks_float32(layout):
    """20 Adam steps of BERT-tiny pretraining (lr 1e-3; the loss falls by more
    than 0.1, so the steps train): every step's loss within 1% of float32's, the last five's
    mean within 0.5% (the issue's bound over 300 steps is 2%). The half runs
    must not equal float32 exactly (the pass must have done something)."""
    steps = 20
    batches = T.make_batches("bert", "bert-tiny", steps, 8, seed=1)
    kw = {} if layout == "1 device" else {"accumulate": 2, "replicas": 2}
    ref, _ = _train("float32", steps, batches, **kw)
    assert np.mean(ref[-5:]) < np.mean(ref[:5]) - 0.1, ref
    for precision in ("bfloat16", "float16"):
        losses, report = _train(precision, steps, batches, **kw)
        assert "mixed_precision" in report, report
        np.testing.assert_allclose(losses, ref, rtol=1e-2, err_msg=precision)
        assert abs(np.mean(losses[-5:]) / np.mean(ref[-5:]) - 1) < 5e-3, precision
        assert losses != ref, precision


@pytest.mark.parametrize("option,value", [("enable_half_partial", True)])
def test_half_precision_options_not_implemented_yet_are_refused(option, value):
    s = tiller.IpuStrategy()
    with pytest.raises(tiller.TillerError, match=f"option {option}=.* is not implemented"):
        s.set_options({option: value})


def test_half_dtype_takes_the_half_types_only():
    s = tiller.IpuStrategy()
    with pytest.raises(tiller.TillerError, match="'half_dtype' takes 'auto', 'bfloat16' or"):
        s.set_options({"half_dtype": "float8"})


@pytest.mark.parametrize("layout", ["1 device", "2 replicas x accumulation 2"])
def test_static_loss_scaling_by_a_power_of_two_changes_no_float32_bit(layout):
    """The backward pass starts from the scale and the update divides it out
    (with the mean over micro-batches): scaling by 2^10 is exact in float32,
    so losses and every state after 6 Adam steps equal the unscaled run's
    bit for bit; a scale that is not a power of two rounds, and stays within
    float32 rounding of it."""
    steps = 6
    batches = T.make_batches("bert", "bert-tiny", steps, 8, seed=1)
    kw = {} if layout == "1 device" else {"accumulate": 2, "replicas": 2}
    ref, _, ref_state = _train("float32", steps, batches, state=True, **kw)
    losses, report, st = _train("float32", steps, batches, loss_scaling=1024.0, state=True, **kw)
    assert losses == ref
    for name, value in ref_state.items():
        np.testing.assert_array_equal(st[name], value, err_msg=name)
    odd, _, st = _train("float32", steps, batches, loss_scaling=1000.0, state=True, **kw)
    np.testing.assert_allclose(odd, ref, rtol=1e-5)
    assert any(not np.array_equal(st[n], v) for n, v in ref_state.items()), \
        "a scale of 1000 must round somewhere (else the scale never reached the gradients)"


def test_float16_training_with_a_static_loss_scale_tracks_float32():
    steps = 20
    batches = T.make_batches("bert", "bert-tiny", steps, 8, seed=1)
    ref, _ = _train("float32", steps, batches)
    losses, _ = _train("float16", steps, batches, loss_scaling=1024.0)
    np.testing.assert_allclose(losses, ref, rtol=1e-2)
    assert abs(np.mean(losses[-5:]) / np.mean(ref[-5:]) - 1) < 5e-3


@pytest.mark.parametrize("bad", [0.0, -4.0, float("inf"), float("nan")])
def test_loss_scaling_must_be_a_positive_finite_number(bad):
    s = tiller.IpuStrategy()
    with pytest.raises(tiller.TillerError, match="'loss_scaling' must be a finite number > 0"):
        s.set_options({"loss_scaling": bad})


def _states(prog, roles=("parameter", "optimizer_state", "learning_rate", "statistic")):
    return {t.name: prog.session.get_state(t.name) for t in prog.session.state_info()
            if t.role in roles}


DYNAMIC_LAYOUTS = {"1 device": {}, "2 replicas x accumulation 4": {"accumulate": 4, "replicas": 2},
                   "2 replicas x 2 pipelined stages x accumulation 2":
                       {"accumulate": 2, "replicas": 2, "stages": 2}}


@pytest.mark.parametrize("layout", list(DYNAMIC_LAYOUTS))
def test_dynamic_loss_scaling_skips_an_overflowing_update_and_lowers_the_scale(layout):
    """The small CNN, 6 Adam steps; step 3's batch holds an Inf pixel, so its
    gradients are not finite: that update is skipped with every parameter and
    optimizer state untouched (bit for bit), the scale halves
    (decr_every_n_nan_or_inf 1, decr_ratio 0.5), and the next steps train
    again. With replicas the Inf is in one replica's micro-batch only.
    (Batch norm's running statistics are written by the forward pass, so the
    Inf reaches them, as in Paddle AMP, where found_inf skips only the
    optimizer.)"""
    steps, bad_step = 6, 2
    batches = T.make_batches("cnn", None, steps, 8, 1)
    batches[bad_step] = dict(batches[bad_step])
    batches[bad_step]["image"] = batches[bad_step]["image"].copy()
    batches[bad_step]["image"][0, 0, 0, 0] = np.inf
    seen = []

    def probe(i, prog):
        seen.append((prog.session.loss_scale, prog.session.skipped_updates,
                     _states(prog, ("parameter", "optimizer_state"))))

    options = {"dynamic_loss_scaling": True,
               "dynamic_loss_scaling_settings": {"decr_every_n_nan_or_inf": 1, "decr_ratio": 0.5}}
    _train("float32", steps, batches, loss_scaling=1024.0, options=options, probe=probe,
           kind="cnn", **DYNAMIC_LAYOUTS[layout])
    assert [x[0] for x in seen] == [1024] * bad_step + [512] * (steps - bad_step)
    assert [x[1] for x in seen] == [0] * bad_step + [1] * (steps - bad_step)
    before, at, after = seen[bad_step - 1][2], seen[bad_step][2], seen[bad_step + 1][2]
    for name, value in before.items():
        np.testing.assert_array_equal(at[name], value, err_msg=name)
        assert np.all(np.isfinite(at[name])), name
    assert any(not np.array_equal(after[n], v) for n, v in at.items()), "training resumes"


@pytest.mark.parametrize("layout", list(DYNAMIC_LAYOUTS))
def test_dynamic_loss_scale_grows_after_clean_updates_and_powers_of_two_change_nothing(layout):
    """Clean updates raise the scale by incr_ratio every incr_every_n_steps:
    from 1 with (2, 2.0) it is 2^k after 2k updates. Each scale is a power of
    two, so float32 losses and states equal the unscaled run's bit for bit."""
    steps = 7
    batches = T.make_batches("bert", "bert-tiny", steps, 8, seed=1)
    kw = DYNAMIC_LAYOUTS[layout]
    ref, _, ref_state = _train("float32", steps, batches, state=True, **kw)
    scales = []
    options = {"dynamic_loss_scaling": True,
               "dynamic_loss_scaling_settings": {"incr_every_n_steps": 2, "incr_ratio": 2.0}}
    losses, _, st = _train("float32", steps, batches, state=True, options=options,
                           probe=lambda i, prog: scales.append(prog.session.loss_scale), **kw)
    assert scales == [1, 2, 2, 4, 4, 8, 8], scales
    assert losses == ref
    for name, value in ref_state.items():
        np.testing.assert_array_equal(st[name], value, err_msg=name)


def test_dynamic_loss_scaling_refuses_settings_it_cannot_follow():
    batches = T.make_batches("bert", "bert-tiny", 1, 8, seed=1)
    with pytest.raises(tiller.TillerError, match=r"0 < decr_ratio < 1 \(1.5\)"):
        _train("float32", 1, batches, options={
            "dynamic_loss_scaling": True, "dynamic_loss_scaling_settings": {"decr_ratio": 1.5}})


def test_dynamic_loss_scaling_with_sharded_optimizer_state_is_refused():
    batches = T.make_batches("bert", "bert-tiny", 1, 8, seed=1)
    with pytest.raises(tiller.TillerError, match="use_replicated_tensor_sharding False"):
        with T.static_mode():
            import paddle

            built = T.build("bert", "bert-tiny", "adam", seed=0)
            scope = paddle.static.Scope()
            T.init_scope(built, scope)
            s = tiller.IpuStrategy()
            s.set_graph_config(num_ipus=2, is_training=True, micro_batch_size=4)
            s.set_options({"enable_replicated_graphs": True, "replicated_graph_count": 2,
                           "num_threads": 2, "dynamic_loss_scaling": True})
            prog = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=s).compile(
                built.feed_names, built.fetch_list)
            prog.run(feed=batches[0])


ALS_LAYOUTS = DYNAMIC_LAYOUTS


def _als_run(layout, steps, loss_scaling, settings, precision="float16"):
    """(per-update (scale, skipped, statistics), losses) of BERT-tiny."""
    batches = T.make_batches("bert", "bert-tiny", steps, 8, seed=1)
    seen = []
    options = {"automatic_loss_scaling_settings": {"enabled": True, **settings}}
    if ALS_LAYOUTS[layout] and "stages" not in ALS_LAYOUTS[layout]:
        options["location_optimizer"] = {"use_replicated_tensor_sharding": False}
    losses, _ = _train(precision, steps, batches, loss_scaling=loss_scaling, options=options,
                       probe=lambda i, prog: seen.append((prog.session.loss_scale,
                                                          prog.session.skipped_updates,
                                                          prog.session.gradient_statistics)),
                       **ALS_LAYOUTS[layout])
    return seen, losses


@pytest.mark.parametrize("layout", list(ALS_LAYOUTS))
def test_automatic_loss_scaling_raises_a_scale_far_too_low(layout):
    """float16, starting at a scale of 1: BERT-tiny's activation gradients
    then lose tens of thousands of elements per update to float16's
    underflow (counted); none reaches the bin edge (1/16 of 65504), so
    automatic loss scaling doubles the scale every update (update_period 1):
    2^k after k updates, and after 12 the flushed count is under 1% of the
    first update's. Counts are summed over micro-batches and replicas."""
    steps = 12
    seen, losses = _als_run(layout, steps, 1.0, {})
    assert [x[0] for x in seen] == [2.0 ** (k + 1) for k in range(steps)], [x[0] for x in seen]
    assert all(x[1] == 0 for x in seen)
    first, last = seen[0][2], seen[-1][2]
    assert first["flushed_to_zero"] > 10000 and first["above_edge"] == 0, first
    assert last["flushed_to_zero"] < 0.01 * first["flushed_to_zero"], (first, last)
    total = sum(first.values())
    assert all(sum(x[2].values()) == total for x in seen), "every update counts the same values"
    assert np.all(np.isfinite(losses))


@pytest.mark.parametrize("layout", list(ALS_LAYOUTS))
def test_automatic_loss_scaling_halves_the_scale_when_gradients_crowd_the_edge(layout):
    """With the bin edge at 1e-6 of float16's largest value (0.066) and a
    threshold of 0, any gradient element above 0.066 halves the scale; from
    2^10 they always are (the scaled gradients are large), so the scale halves
    every update, and with update_period 2 every second update."""
    seen, _ = _als_run(layout, 4, 1024.0, {"bin_edge_location": 1e-6,
                                           "threshold_upper_count_proportion": 0.0})
    assert [x[0] for x in seen] == [512, 256, 128, 64]
    assert all(x[2]["above_edge"] > 0 for x in seen)
    seen, _ = _als_run(layout, 4, 1024.0, {"bin_edge_location": 1e-6,
                                           "threshold_upper_count_proportion": 0.0,
                                           "update_period": 2})
    assert [x[0] for x in seen] == [1024, 512, 512, 256]


def test_float16_with_a_static_scale_of_1_reports_its_underflow():
    batches = T.make_batches("bert", "bert-tiny", 2, 8, seed=1)
    seen = []
    _train("float16", 2, batches, options={"gradient_statistics": True},
           probe=lambda i, prog: seen.append(prog.session.gradient_statistics))
    assert all(x["flushed_to_zero"] > 10000 for x in seen), seen
    _, report = _train("bfloat16", 1, batches, options={"gradient_statistics": True})
    assert "rounded to bfloat16 counted per update" in report, report


def test_automatic_loss_scaling_needs_half_precision_and_one_steering_rule():
    batches = T.make_batches("bert", "bert-tiny", 1, 8, seed=1)
    with pytest.raises(tiller.TillerError, match="need half precision"):
        _train("float32", 1, batches,
               options={"automatic_loss_scaling_settings": {"enabled": True}})
    with pytest.raises(tiller.TillerError, match="choose one"):
        _train("float16", 1, batches,
               options={"automatic_loss_scaling_settings": {"enabled": True},
                        "dynamic_loss_scaling": True})


def _text_run(precision, updates, feeds, vocab_size, options=None):
    """BERT (2 layers, hidden 64) pretraining on the demo's text, one device,
    batch 16: per-update losses and flushed-to-zero counts."""
    import paddle

    from models.bert import BertConfig

    cfg = T.PretrainConfig(
        BertConfig(vocab_size=vocab_size, hidden_size=64, num_layers=2, num_heads=2,
                   intermediate_size=256, max_position=512, type_vocab_size=2,
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
        seq_len=32, max_predictions=4)
    with T.static_mode():
        built = T.build("bert", cfg, T.OptSpec("adam", lr=1e-3, schedule="constant",
                                               clip_norm=1.0), seed=0)
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        s = tiller.IpuStrategy()
        s.set_graph_config(num_ipus=1, is_training=True, micro_batch_size=16)
        s.set_options({"num_threads": 1, **(options or {})})
        if precision != "float32":
            s.set_precision_config(enable_fp16=True)
            s.set_options({"half_dtype": precision, "gradient_statistics": True})
        prog = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=s).compile(
            built.feed_names, built.fetch_list)
        losses, flushed = [], []
        for feed in feeds[:updates]:
            losses.append(float(np.mean(prog.run(feed=feed)[0])))
            if precision != "float32":
                flushed.append(prog.session.gradient_statistics["flushed_to_zero"])
        return np.asarray(losses), np.asarray(flushed), prog.session.loss_scale


def test_300_updates_on_real_text_in_half_precision_end_where_float32_does():
    """The issue's convergence check: 300 updates of BERT pretraining on the
    demo's English text (Debian's license texts). The mean loss of the last
    20 updates in bfloat16, and in float16 with automatic loss scaling, is
    within 2% of float32's. float16 with a static scale of 1 loses gradient
    elements to underflow on every update (counted); automatic loss scaling
    raises the scale until almost none are lost."""
    import scripts.pretrain_demo as demo

    sentences = demo.sentences_of(demo.read_text(None))
    vocab = demo.build_vocab(sentences, 1000)
    rng = np.random.default_rng(0)
    feeds = [demo.feed_of(demo.make_examples(sentences, vocab, 16, 32, 4, rng), 16, 32)
             for _ in range(300)]
    ref, _, _ = _text_run("float32", 300, feeds, len(vocab))
    bf16, _, _ = _text_run("bfloat16", 300, feeds, len(vocab))
    als, als_flushed, als_scale = _text_run(
        "float16", 300, feeds, len(vocab),
        {"automatic_loss_scaling_settings": {"enabled": True}})
    _, static_flushed, _ = _text_run("float16", 20, feeds, len(vocab))
    tail = {name: float(np.mean(v[-20:])) for name, v in
            (("float32", ref), ("bfloat16", bf16), ("float16 + ALS", als))}
    print(f"\nlast-20 mean loss: {tail}; float16 flushed per update: static scale 1 "
          f"{static_flushed.mean():.0f}, automatic loss scaling (final scale {als_scale:g}) "
          f"{als_flushed[-20:].mean():.0f}")
    assert ref[-20:].mean() < ref[:20].mean() - 1.0, "float32 must learn"
    for name in ("bfloat16", "float16 + ALS"):
        assert abs(tail[name] / tail["float32"] - 1) < 0.02, (name, tail)
    assert static_flushed.min() > 1000, static_flushed
    assert als_flushed[-20:].mean() < 0.01 * static_flushed.mean(), (als_flushed[-20:],
                                                                      static_flushed)


def test_a_half_type_the_cpu_cannot_multiply_fast_is_reported_once(zoo, tmp_path):
    """float16 (no oneDNN CPU float16 GEMM) is reported on stderr once per
    process however many predictors use it; float32 never; bfloat16 at most
    once, and only with a measured rate below float32's."""
    import subprocess
    import sys

    exp = zoo.export("bert-tiny", "pir")
    code = (
        "import tiller.inference as ti\n"
        f"for precision in ['float32', 'float16', 'float16', 'bfloat16', 'bfloat16']:\n"
        f"    c = ti.Config({exp.model_file!r}, {exp.params_file!r})\n"
        "    c.set_precision(precision)\n"
        "    ti.create_predictor(c)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ))
    lines = [line for line in out.stderr.splitlines() if line.startswith("tiller: float16")]
    assert len(lines) == 1, out.stderr
    assert "computed in float32" in lines[0]
    bf16 = [line for line in out.stderr.splitlines() if line.startswith("tiller: bfloat16")]
    assert len(bf16) <= 1, out.stderr
    if bf16:
        import re
        rates = re.search(r"bfloat16 (\d+) GFLOP/s, float32 (\d+)", bf16[0])
        assert rates and int(rates[1]) <= int(rates[2]), bf16[0]  # (rounded)


def test_a_model_paddle_saved_in_bfloat16_runs_as_saved(tmp_path):
    """A Layer cast to bfloat16 and saved by paddle.jit.save (PIR): its
    weights, input and output are bfloat16. Tiller multiplies in bf16 and
    runs the ops it has no bf16 kernel for (add, layer_norm, gelu, softmax)
    in float32 between casts (the compile report lists them). Reference:
    the same Layer in float32 with the bf16-rounded weights and input; they
    differ by the roundings to bf16 between ops (8 bits: 1e-2, the issue's
    bf16 bound; the outputs are probabilities <= 1)."""
    import paddle

    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = paddle.nn.Linear(16, 32), paddle.nn.Linear(32, 8)
            self.ln = paddle.nn.LayerNorm(32)

        def forward(self, x):
            h = paddle.nn.functional.gelu(self.ln(self.fc1(x)))
            return paddle.nn.functional.softmax(self.fc2(h), -1)

    paddle.seed(0)
    net = Net()
    net.eval()
    reference = Net()
    reference.eval()
    for a, b in zip(net.parameters(), reference.parameters()):
        b.set_value(a.astype("bfloat16").astype("float32"))
    net.to(dtype="bfloat16")
    paddle.jit.save(net, str(tmp_path / "model"),
                    input_spec=[paddle.static.InputSpec([None, 16], "bfloat16", "x")])
    x = np.random.default_rng(0).standard_normal((5, 16)).astype(np.float32)
    x_bf16 = paddle.to_tensor(x).astype("bfloat16")
    config = ti.Config(str(tmp_path / "model.json"), str(tmp_path / "model.pdiparams"))
    predictor = ti.create_predictor(config)
    out = predictor.run([x_bf16.numpy()])[0]  # Paddle's bf16 arrays: uint16 bits
    assert out.dtype == np.uint16 and out.shape == (5, 8)
    got = (out.astype(np.uint32) << 16).view(np.float32)  # bf16 bits -> float32
    want = reference(x_bf16.astype("float32")).numpy()
    np.testing.assert_allclose(got, want, atol=1e-2)
    assert np.abs(got - want).max() > 0, "bf16 rounding must show"
    report = predictor.summary()["compile_report"]
    assert "half_fallback" in report and "softmax 1" in report, report
    # The command line synthesizes bf16 inputs for it too.
    from cli_test import tiller as tiller_cli

    model = tmp_path / "model.json"
    bench = tiller_cli("bench", model, "--iters", "2", check=False)
    assert bench.returncode == 0 and "latency" in bench.stdout, bench.stderr
    info = tiller_cli("info", model, "--passes", check=False)
    assert info.returncode == 0 and "computed in float32 between casts" in info.stdout, info


# ---- Half-precision optimizer state (accl1_type .. accl3_type) -------------

def _accl_run(optimizer, accl, steps=6):
    """A linear regression trained with Tiller for `steps` updates; returns
    (initial state, batches, per-step states, the compiled program)."""
    import paddle

    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = 7
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [8, 16], "float32")
        t = paddle.static.data("t", [8, 4], "float32")
        y = paddle.static.nn.fc(x, 4, weight_attr=paddle.ParamAttr(name="w"),
                                bias_attr=paddle.ParamAttr(name="b"))
        loss = paddle.mean(paddle.square(y - t))
        optimizer().minimize(loss)
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        paddle.static.Executor(paddle.CPUPlace()).run(startup)
    names = [v.name for v in main.list_vars() if v.persistable and scope.find_var(v.name)]
    init = {n: np.array(scope.find_var(n).get_tensor()) for n in names}
    strategy = tiller.IpuStrategy()
    strategy.set_graph_config(is_training=True, micro_batch_size=8)
    strategy.set_options(accl)
    prog = tiller.IpuCompiledProgram(main, scope=scope, ipu_strategy=strategy).compile(
        ["x", "t"], [loss])
    rng = np.random.default_rng(3)
    batches, states = [], []
    for _ in range(steps):
        feed = {"x": rng.standard_normal((8, 16)).astype(np.float32),
                "t": rng.standard_normal((8, 4)).astype(np.float32)}
        prog.run(feed=feed)
        batches.append(feed)
        states.append({n: prog.session.get_state(n) for n in names})
    paddle.disable_static()
    return init, batches, states, prog


def _f16(a):
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)


def test_adam_moments_in_float16_follow_the_float16_reference():
    """accl1_type / accl2_type FLOAT16: Adam's Moment1 / Moment2 are stored in
    float16 (the session's state memory shrinks by their half), every value
    read back is a float16 value, and the run follows a numpy Adam (Paddle's
    formula) whose update reads the stored moments widened and stores its
    new moments rounded to float16 (what Tiller promises). Tolerance: the
    gradients differ from numpy's in float32 summation order (~1e-7 rel.),
    which can move a moment across a float16 rounding boundary: one float16
    ulp (2^-11 relative) of a moment moves a parameter by at most ~lr x 1e-3;
    atol 1e-4 over 6 steps at lr 0.01."""
    import paddle

    make = lambda: paddle.optimizer.Adam(0.01)  # noqa: E731
    init, batches, states, prog = _accl_run(make, {"accl1_type": "FLOAT16",
                                                   "accl2_type": "FLOAT16"})
    _, _, states32, prog32 = _accl_run(make, {})
    session, session32 = prog.session, prog32.session
    names = sorted(init)
    moment = lambda p, k: next(n for n in names if n.startswith(p + "_moment" + k))  # noqa: E731
    w, b = "w", "b"
    # Storage: the 4 moments (16*4 + 4 elements each pair) take half the bytes,
    # and tiller.plan predicts it.
    moment_bytes = 2 * 4 * (16 * 4 + 4)
    assert session32.summary().state_bytes - session.summary().state_bytes == moment_bytes // 2
    plans = [tiller._tiller.plan(prog.program_path, train=True, micro_batch=8,
                                 accl_types=types)["devices"][0]["optimizer"]
             for types in (["FLOAT"] * 3, ["FLOAT16", "FLOAT16", "FLOAT"])]
    assert plans[0] - plans[1] == moment_bytes // 2, plans
    p = {w: init[w].astype(np.float64), b: init[b].astype(np.float64)}
    m = {n: _f16(init[moment(n, "1")]) for n in p}
    v = {n: _f16(init[moment(n, "2")]) for n in p}
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 0.01
    b1p, b2p = b1, b2
    for step, feed in enumerate(batches):
        x, t = feed["x"].astype(np.float64), feed["t"].astype(np.float64)
        dy = 2 * (x @ p[w] + p[b] - t) / t.size
        grads = {w: x.T @ dy, b: dy.sum(axis=0)}
        lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
        for n, g in grads.items():
            m_new = b1 * m[n] + (1 - b1) * g
            v_new = b2 * v[n] + (1 - b2) * g * g
            p[n] = p[n] - lr_t * m_new / (np.sqrt(v_new) + eps * np.sqrt(1 - b2p))
            m[n], v[n] = _f16(m_new), _f16(v_new)
        b1p, b2p = b1p * b1, b2p * b2
        got = states[step]
        for n in p:
            for k, ref in (("1", m[n]), ("2", v[n])):
                stored = got[moment(n, k)]
                np.testing.assert_array_equal(stored, _f16(stored), err_msg="not float16 values")
            np.testing.assert_allclose(got[moment(n, "1")], m[n], rtol=2e-3, atol=1e-6,
                                       err_msg=f"{n} moment1, step {step}")
            np.testing.assert_allclose(got[n], p[n], atol=1e-4, err_msg=f"{n}, step {step}")
    # The float32 run's moments are not float16 values: the option did something.
    assert any(not np.array_equal(s, _f16(s)) for n, s in states32[-1].items() if "moment" in n)


def test_float16_optimizer_state_checkpoints_as_float32(tmp_path):
    """A checkpoint of float16-stored moments is what paddle.static.save
    writes for the program (float32 arrays, the values as stored), and
    loads back into a float32 session and into a float16 one unchanged."""
    import paddle

    make = lambda: paddle.optimizer.Adam(0.01)  # noqa: E731
    _, _, states, half_prog = _accl_run(make, {"accl1_type": "FLOAT16", "accl2_type": "FLOAT16"},
                                        2)
    _, _, _, full_prog = _accl_run(make, {}, 1)
    half, full = half_prog.session, full_prog.session
    half.save_checkpoint(str(tmp_path / "ckpt"))
    full.load_checkpoint(str(tmp_path / "ckpt"))
    half.load_checkpoint(str(tmp_path / "ckpt"))
    for name, value in states[-1].items():
        assert full.get_state(name).dtype == value.dtype
        np.testing.assert_array_equal(full.get_state(name), value, err_msg=name)
        np.testing.assert_array_equal(half.get_state(name), value, err_msg=name)


def test_accumulator_types_take_float_or_float16_only():
    strategy = tiller.IpuStrategy()
    with pytest.raises(Exception, match="accl2_type"):
        strategy.set_options({"accl2_type": "BFLOAT16"})


# ---- Stochastic rounding ----------------------------------------------------

@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_stochastic_rounding_trains_reproducibly_and_tracks_float32(precision):
    """enable_stochastic_rounding with half precision: the compile report
    shows every cast to half replaced; two runs with the same random_seed
    are bit-identical, another seed and round-to-nearest runs differ; 12
    Adam steps of BERT-tiny stay within 1% of float32's loss per step (the
    tolerance of the round-to-nearest test above)."""
    steps = 12
    batches = T.make_batches("bert", "bert-tiny", steps, 8, seed=1)
    ref, _ = _train("float32", steps, batches)
    sr = {"enable_stochastic_rounding": True, "random_seed": 5}
    a, report = _train(precision, steps, batches, options=sr)
    b, _ = _train(precision, steps, batches, options=sr)
    c, _ = _train(precision, steps, batches, options={**sr, "random_seed": 6})
    nearest, _ = _train(precision, steps, batches)
    line = next(x for x in report.splitlines() if "stochastic_rounding" in x)
    assert " 0 rewrites" not in line and "stochastic_cast" in report, report
    assert a == b
    assert a != c and a != nearest
    np.testing.assert_allclose(a, ref, rtol=1e-2)


def test_stochastic_rounding_of_float16_optimizer_state():
    """accl FLOAT16 with stochastic rounding (no half arithmetic): the stored
    moments are float16 values, and they are not the round-to-nearest ones."""
    import paddle

    make = lambda: paddle.optimizer.Adam(0.01)  # noqa: E731
    half = {"accl1_type": "FLOAT16", "accl2_type": "FLOAT16"}
    _, _, nearest, _ = _accl_run(make, half, 3)
    _, _, sr, _ = _accl_run(make, {**half, "enable_stochastic_rounding": True}, 3)
    _, _, sr2, _ = _accl_run(make, {**half, "enable_stochastic_rounding": True}, 3)
    moments = [n for n in sr[-1] if "moment" in n]
    for n in moments:
        np.testing.assert_array_equal(sr[-1][n], _f16(sr[-1][n]))
        np.testing.assert_array_equal(sr[-1][n], sr2[-1][n])
    assert any(not np.array_equal(sr[-1][n], nearest[-1][n]) for n in moments)
