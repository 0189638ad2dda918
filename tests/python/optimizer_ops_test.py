"""Paddle's optimizer ops against Paddle's own CPU kernels, 3 chained steps.

Each case is a legacy program written directly (legacy_writer.py) holding one
optimizer op whose param, gradient, learning rate and state are feeds and
whose outputs update them in place, as Paddle's training programs do
(ParamOut = Param, Moment1Out = Moment1, ...). A child process
(FLAGS_enable_pir_api=0) runs the program with Paddle's executor for 3 steps,
feeding each step's outputs back with a new gradient and learning rate; the
test runs the same file through tiller.inference, chaining Tiller's own
outputs, and compares every step.

A second part builds small training programs with every optimizer (plus
gradient clipping and weight decay), in PIR and legacy form, and checks that
every op after Paddle's backward ops reads into a translatable op and that
each optimizer op's outputs are <X>Out of its state inputs X. A third trains
a small net 5 steps with each of them through tiller.IpuCompiledProgram and
compares losses and every persistable (parameters and optimizer state) with
Paddle's executor.

Run as a script (python optimizer_ops_test.py OUT_DIR) it is the generator.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import traceback
import zlib
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
STEPS = 3
LRS = [0.1, 0.05, 0.02]  # a different rate each step: the lr tensor is read every run

# Tolerance: Tiller evaluates each update in the order of Paddle's CPU kernel
# (with the FMAs of Paddle's AVX-512 jit kernel for float Adam/AdamW), so on
# an AVX-512 machine sgd, momentum, adam(w), adamax and lamb on small tensors
# match bit for bit. The rest differ by about an ulp per step: Paddle's
# Eigen sqrt is not correctly rounded (its adagrad gives -1/sqrt(49) as
# -0.14285713, not -0.14285715) and lamb's norms are summed in another order.
# rtol 1e-5 covers that over 3 chained steps with a 10x margin (worst seen:
# a tenth of the bound); atol 1e-6 covers entries that cancel to near zero.
RTOL, ATOL = 1e-5, 1e-6


@dataclasses.dataclass
class Case:
    op: str
    name: str
    state: dict          # updated input slots (Param first) -> initial value
    attrs: dict
    fixed: dict = dataclasses.field(default_factory=dict)  # read-only extra inputs
    separate: bool = False  # outputs to new variables instead of in place
    unchanged: tuple = ()   # state slots the op passes through unchanged
    moves: bool = True      # False: SkipUpdate holds, every state must stay as it was

    @property
    def id(self):
        return f"{self.op}/{self.name}"

    @property
    def dtype(self):
        return self.state["Param"].dtype


def _rng(seed):
    return np.random.default_rng(seed)


def _arrays(seed, shape, dtype="float32", **kinds):
    """Initial state: 'n' normal, 'p' positive (squares), 'z' zeros."""
    r = _rng(seed)
    out = {}
    for slot, kind in kinds.items():
        if kind == "n":
            a = r.standard_normal(shape)
        elif kind == "p":
            a = r.uniform(0.01, 1.0, shape)
        else:
            a = np.zeros(shape)
        out[slot] = a.astype(dtype)
    return out


def _one(v, dtype="float32"):
    return np.array([v], dtype)


SMALL, LARGE = (3, 5), (64, 97)  # LARGE: above one 512-element chunk of Paddle's adam


def _adam_state(seed, shape, dtype="float32", b1=0.9, b2=0.999, amsgrad=False):
    s = _arrays(seed, shape, dtype, Param="n", Moment1="n", Moment2="p")
    # Powers as after two steps, as Paddle's optimizer holds them.
    s["Beta1Pow"], s["Beta2Pow"] = _one(b1 ** 2, dtype), _one(b2 ** 2, dtype)
    if amsgrad:
        s["Moment2Max"] = (s["Moment2"] * _rng(seed + 1).uniform(0.5, 2.0, shape)).astype(dtype)
    return s


def _adam_attrs(**kw):
    a = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "lazy_mode": False,
         "min_row_size_to_use_multithread": 1000, "multi_precision": False,
         "use_global_beta_pow": False, "amsgrad": False}
    a.update(kw)
    return a


def _rms_state(seed, shape, centered):
    s = _arrays(seed, shape, Param="n", MeanSquare="p", Moment="n", MeanGrad="n")
    s["MeanGrad"] *= 0.3
    if centered:  # keep mean_square - mean_grad^2 positive, as real statistics are
        s["MeanSquare"] += s["MeanGrad"] ** 2
    return s


def cases() -> list[Case]:
    c = []
    c += [Case("sgd", "small", _arrays(1, SMALL, Param="n"), {"multi_precision": False}),
          Case("sgd", "separate_outputs", _arrays(2, SMALL, Param="n"), {}, separate=True),
          Case("sgd", "float64", _arrays(3, SMALL, "float64", Param="n"), {})]
    mom = lambda seed, shape=SMALL: _arrays(seed, shape, Param="n", Velocity="n")  # noqa: E731
    c += [Case("momentum", "plain", mom(10), {"mu": 0.9, "use_nesterov": False}),
          Case("momentum", "nesterov", mom(11), {"mu": 0.8, "use_nesterov": True}),
          Case("momentum", "l2_decay", mom(12), {"mu": 0.9, "regularization_method": "l2_decay",
                                                 "regularization_coeff": 0.1}),
          Case("momentum", "nesterov_l2_large", mom(13, LARGE),
               {"mu": 0.9, "use_nesterov": True, "regularization_method": "l2_decay",
                "regularization_coeff": 0.01}),
          # Paddle's CPU kernel does not read rescale_grad; the reference says what it does.
          Case("momentum", "rescale_grad", mom(14), {"mu": 0.9, "rescale_grad": 0.5})]
    c += [Case("adam", "default", _adam_state(20, SMALL), _adam_attrs()),
          Case("adam", "betas_eps", _adam_state(21, SMALL, b1=0.8, b2=0.99),
               _adam_attrs(beta1=0.8, beta2=0.99, epsilon=1e-4)),
          Case("adam", "first_step", {**_arrays(22, SMALL, Param="n", Moment1="z", Moment2="z"),
                                      "Beta1Pow": _one(0.9), "Beta2Pow": _one(0.999)},
               _adam_attrs()),
          Case("adam", "amsgrad", _adam_state(23, SMALL, amsgrad=True), _adam_attrs(amsgrad=True)),
          Case("adam", "global_beta_pow", _adam_state(24, SMALL),
               _adam_attrs(use_global_beta_pow=True)),
          Case("adam", "large", _adam_state(25, LARGE), _adam_attrs()),
          Case("adam", "separate_outputs", _adam_state(26, SMALL), _adam_attrs(), separate=True),
          Case("adam", "float64", _adam_state(27, SMALL, "float64"), _adam_attrs()),
          # SkipUpdate (Paddle AMP feeds check_finite_and_unscale's flag).
          Case("adam", "skip_update_false", _adam_state(28, SMALL), _adam_attrs(),
               fixed={"SkipUpdate": np.array([False])}),
          Case("adam", "skip_update_true", _adam_state(29, SMALL), _adam_attrs(),
               fixed={"SkipUpdate": np.array([True])}, moves=False),
          # lazy_mode only changes the update of a SelectedRows gradient
          # (sparse_embedding_test.py); Paddle's dense kernel ignores it.
          Case("adam", "lazy_mode_dense_grad", _adam_state(35, SMALL),
               _adam_attrs(lazy_mode=True))]
    aw = lambda **kw: _adam_attrs(lr_ratio=1.0, coeff=0.01, with_decay=True, **kw)  # noqa: E731
    c += [Case("adamw", "decay", _adam_state(30, SMALL), aw()),
          Case("adamw", "coeff_lr_ratio", _adam_state(31, SMALL),
               {**aw(), "coeff": 0.1, "lr_ratio": 0.5}),
          Case("adamw", "without_decay", _adam_state(32, SMALL), {**aw(), "with_decay": False}),
          Case("adamw", "amsgrad_large", _adam_state(33, LARGE, amsgrad=True), aw(amsgrad=True)),
          Case("adamw", "skip_update_true", _adam_state(34, SMALL, amsgrad=True), aw(amsgrad=True),
               fixed={"SkipUpdate": np.array([True])}, moves=False)]
    amax = lambda seed, shape=SMALL: _arrays(seed, shape, Param="n", Moment="n", InfNorm="p")  # noqa
    c += [Case("adamax", "default", amax(40), {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
               fixed={"Beta1Pow": _one(0.9 ** 3)}),
          Case("adamax", "large", amax(41, LARGE), {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6},
               fixed={"Beta1Pow": _one(0.8)})]
    lamb = lambda seed, shape=SMALL: _adam_state(seed, shape)  # noqa: E731
    la = lambda **kw: {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6, "weight_decay": 0.01,  # noqa
                       "always_adapt": False, "multi_precision": False, **kw}
    c += [Case("lamb", "weight_decay", lamb(50), la()),
          Case("lamb", "excluded", lamb(51), la(weight_decay=0.0)),
          Case("lamb", "always_adapt", lamb(52), la(weight_decay=0.0, always_adapt=True)),
          Case("lamb", "large", lamb(53, LARGE), la(weight_decay=0.1))]
    c += [Case("adagrad", "default", _arrays(60, SMALL, Param="n", Moment="p"), {"epsilon": 1e-6}),
          Case("adagrad", "large", _arrays(61, LARGE, Param="n", Moment="z"), {"epsilon": 1e-3})]
    ad = lambda seed, shape=SMALL: _arrays(seed, shape, Param="n", AvgSquaredGrad="p",  # noqa
                                           AvgSquaredUpdate="p")
    c += [Case("adadelta", "default", ad(70), {"rho": 0.95, "epsilon": 1e-6}),
          Case("adadelta", "rho_eps_large", ad(71, LARGE), {"rho": 0.5, "epsilon": 1e-2})]
    c += [Case("rmsprop", "plain", _rms_state(80, SMALL, False),
               {"epsilon": 1e-6, "decay": 0.9, "momentum": 0.0, "centered": False},
               unchanged=("MeanGrad",)),
          Case("rmsprop", "momentum", _rms_state(81, SMALL, False),
               {"epsilon": 1e-6, "decay": 0.95, "momentum": 0.9, "centered": False},
               unchanged=("MeanGrad",)),
          Case("rmsprop", "centered", _rms_state(82, SMALL, True),
               {"epsilon": 1e-6, "decay": 0.9, "momentum": 0.0, "centered": True}),
          Case("rmsprop", "centered_momentum_large", _rms_state(83, LARGE, True),
               {"epsilon": 1e-4, "decay": 0.9, "momentum": 0.5, "centered": True})]
    return c


CASES = cases()


def grads(case: Case) -> list[np.ndarray]:
    r = _rng(zlib.crc32(case.id.encode()))  # stable across processes, unlike hash()
    return [r.standard_normal(case.state["Param"].shape).astype(case.dtype) for _ in range(STEPS)]


def var(slot: str) -> str:
    return slot.lower()


def out_var(case: Case, slot: str) -> str:
    return var(slot) + "_out" if case.separate else var(slot)


def write_case(case: Case, out: Path) -> Path:
    import legacy_writer

    shape = case.state["Param"].shape
    feeds = {var(s): a for s, a in case.state.items()}
    feeds.update({var(s): a for s, a in case.fixed.items()})
    feeds["grad"] = np.zeros(shape, case.dtype)
    feeds["learning_rate"] = _one(0, case.dtype)
    inputs = {s: [var(s)] for s in list(case.state) + list(case.fixed)}
    inputs.update({"Grad": ["grad"], "LearningRate": ["learning_rate"]})
    outputs = {s + "Out": ([out_var(case, s)], case.dtype, a.shape) for s, a in case.state.items()}
    model, _ = legacy_writer.write_program(out, case.op, feeds, {}, inputs, outputs, case.attrs)
    return model


def step_feeds(case: Case, state: dict, step: int) -> dict:
    f = {var(s): a for s, a in state.items()}
    f.update({var(s): a for s, a in case.fixed.items()})
    f["grad"] = grads(case)[step]
    f["learning_rate"] = _one(LRS[step], case.dtype)
    return f


def generate(root: Path) -> None:
    """Writes every case and Paddle's outputs for each step (child process)."""
    import paddle

    paddle.enable_static()
    status = {}
    for case in CASES:
        d = root / case.id.replace("/", "__")
        try:
            d.mkdir(parents=True, exist_ok=True)
            model = write_case(case, d)
            exe = paddle.static.Executor(paddle.CPUPlace())
            prog, feed_names, fetches = paddle.static.load_inference_model(
                str(model.with_suffix("")), exe)
            state, refs = dict(case.state), {}
            for step in range(STEPS):
                outs = exe.run(prog, feed=step_feeds(case, state, step), fetch_list=fetches)
                state = dict(zip(case.state, [np.array(o) for o in outs]))
                refs.update({f"{step}/{s}": a for s, a in state.items()})
            np.savez(d / "paddle.npz", **refs)
            status[case.id] = ""
        except Exception:
            status[case.id] = traceback.format_exc(limit=4)
    (root / "status.json").write_text(json.dumps(status))


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("optimizer_ops")
    env = dict(os.environ, FLAGS_enable_pir_api="0")
    res = subprocess.run([sys.executable, __file__, str(root)], env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return root, json.loads((root / "status.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_optimizer_matches_paddle(generated, case):
    import tiller.inference as ti

    root, status = generated
    assert status.get(case.id) == "", f"Paddle could not run {case.id}:\n{status.get(case.id)}"
    d = root / case.id.replace("/", "__")
    refs = np.load(d / "paddle.npz")
    predictor = ti.create_predictor(ti.Config(str(d / "model.pdmodel"), ""))
    assert predictor.get_output_names() == [out_var(case, s) for s in case.state]
    state = dict(case.state)
    for step in range(STEPS):
        feeds = step_feeds(case, state, step)
        outs = predictor.run([feeds[n] for n in predictor.get_input_names()])
        state = dict(zip(case.state, outs))
        for slot, got in state.items():
            want = refs[f"{step}/{slot}"]
            assert got.dtype == want.dtype and got.shape == want.shape, slot
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL,
                                       err_msg=f"{case.id} step {step} {slot}Out")
    for slot in case.unchanged if case.moves else case.state:
        np.testing.assert_array_equal(state[slot], case.state[slot], err_msg=slot)
    # The update moved the parameter: a test that cannot fail checks nothing.
    if case.moves:
        assert not np.allclose(state["Param"], case.state["Param"], rtol=0, atol=1e-4)


# ---- Inputs and attributes Tiller does not handle -------------------------

def _adam_program(tmp_path, extra_inputs=(), **attrs):
    import legacy_writer

    s = _adam_state(90, SMALL)
    feeds = {var(k): v for k, v in s.items()}
    feeds.update({"grad": s["Param"], "learning_rate": _one(0.1)})
    inputs = {k: [var(k)] for k in s}
    inputs.update({"Grad": ["grad"], "LearningRate": ["learning_rate"]})
    for slot, name, arr in extra_inputs:
        feeds[name] = arr
        inputs[slot] = [name]
    outputs = {k + "Out": ([var(k)], "float32", v.shape) for k, v in s.items()}
    model, _ = legacy_writer.write_program(tmp_path, "adam", feeds, {}, inputs, outputs,
                                           _adam_attrs(**attrs))
    return model, feeds


UNSUPPORTED = [
    ("master_param", {"multi_precision": True}, (("MasterParam", "master", np.zeros(SMALL, "float32")),),
     "MasterParam"),
    # Beta1Tensor fed at run time cannot become the compile-time beta1.
    ("beta1_tensor", {}, (("Beta1Tensor", "beta1_t", _one(0.9)),), "compile time"),
    ("amsgrad_without_moment2max", {"amsgrad": True}, (), "Moment2Max"),
]


@pytest.mark.parametrize("name,attrs,extra,needle", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unhandled_adam_input_fails_at_load(tmp_path, name, attrs, extra, needle):
    import tiller.inference as ti

    model, feeds = _adam_program(tmp_path, extra, **attrs)
    # Unhandled attributes fail when the predictor is created (issue 3).
    with pytest.raises(ti.TillerError) as info:
        ti.create_predictor(ti.Config(str(model), ""))
    msg = str(info.value)
    assert "adam" in msg and needle in msg and str(model) in msg, msg


def test_momentum_l1_regularization_fails_at_load(tmp_path):
    import legacy_writer
    import tiller.inference as ti

    s = _arrays(91, SMALL, Param="n", Velocity="n")
    feeds = {"param": s["Param"], "velocity": s["Velocity"], "grad": s["Param"],
             "learning_rate": _one(0.1)}
    inputs = {"Param": ["param"], "Velocity": ["velocity"], "Grad": ["grad"],
              "LearningRate": ["learning_rate"]}
    outputs = {"ParamOut": (["param"], "float32", SMALL), "VelocityOut": (["velocity"], "float32", SMALL)}
    model, _ = legacy_writer.write_program(tmp_path, "momentum", feeds, {}, inputs, outputs,
                                           {"mu": 0.9, "regularization_method": "l1_decay"})
    # Unhandled attributes fail when the predictor is created (issue 3).
    with pytest.raises(ti.TillerError) as info:
        ti.create_predictor(ti.Config(str(model), ""))
    assert "momentum" in str(info.value) and "l1_decay" in str(info.value), str(info.value)


# ---- Training programs: the optimizer section reads and translates --------

TRAIN_OPTIMIZERS = {
    "sgd": "O.SGD(0.1, grad_clip=clip, weight_decay=l2)",
    "momentum": "O.Momentum(0.1, 0.9, grad_clip=clip, weight_decay=l2, use_nesterov=True)",
    "adam": "O.Adam(0.1, grad_clip=clip, weight_decay=l2)",
    "adam_amsgrad": "O.Adam(0.1, grad_clip=clip, amsgrad=True)",
    "adamw": "O.AdamW(0.1, grad_clip=clip, weight_decay=0.01)",
    "adamax": "O.Adamax(0.1, grad_clip=clip, weight_decay=l2)",
    "lamb": "O.Lamb(0.1, grad_clip=clip, lamb_weight_decay=0.01, "
            "exclude_from_weight_decay_fn=lambda p: p.name.endswith('b_0'))",
    "adagrad": "O.Adagrad(0.1, grad_clip=clip, weight_decay=l2)",
    "adadelta": "O.Adadelta(0.1, grad_clip=clip, weight_decay=l2)",
    "rmsprop": "O.RMSProp(0.1, grad_clip=clip, weight_decay=l2)",
    "rmsprop_centered": "O.RMSProp(0.1, grad_clip=clip, weight_decay=l2, centered=True, momentum=0.9)",
    "sgd_clip_by_norm_l1": "O.SGD(0.1, grad_clip=paddle.nn.ClipGradByNorm(1.0), "
                           "weight_decay=paddle.regularizer.L1Decay(0.01))",
    "sgd_clip_by_value": "O.SGD(0.1, grad_clip=paddle.nn.ClipGradByValue(0.5))",
}
# Paddle 3.3.1 itself cannot build these programs: in legacy mode
# ClipGradByGlobalNorm calls paddle.sqrt on a legacy Variable, which raises
# "sqrt(): argument (position 1) must be Value, but got Variable"; in PIR
# mode ClipGradByValue raises NotImplementedError (nn/clip.py, _pir_clip).
# Legacy programs therefore clip by norm instead of by global norm.
TRAIN_FORMATS = [(n, f) for n in TRAIN_OPTIMIZERS for f in ("pir", "legacy")
                 if not (n == "sgd_clip_by_value" and f == "pir")]

TRAIN_SCRIPT = """
import sys, paddle
from paddle.framework import in_pir_mode
paddle.enable_static()
O = paddle.optimizer
clip = paddle.nn.ClipGradByGlobalNorm(1.0) if in_pir_mode() else paddle.nn.ClipGradByNorm(1.0)
l2 = paddle.regularizer.L2Decay(0.01)
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    x = paddle.static.data("x", [4, 3], "float32")
    loss = paddle.mean(paddle.nn.Linear(3, 2)(x))
    opt = eval(sys.argv[2])
    opt.minimize(loss)
if in_pir_mode():
    paddle.base.core.serialize_pir_program(main, sys.argv[1], True, False, True)
else:
    open(sys.argv[1], "wb").write(main.desc.serialize_to_string())
"""

# Input slots of Paddle's legacy optimizer ops (OpProto, paddle 3.3.1) that
# hold state the op updates. Each must come back as output slot <X>Out, and
# no other output may appear: a training compiler reads <X>Out as the new
# value of X.
_ADAM_STATE = {"Param", "Moment1", "Moment2", "Moment2Max", "Beta1Pow", "Beta2Pow", "MasterParam"}
STATE_SLOTS = {
    "sgd": {"Param", "MasterParam"},
    "momentum": {"Param", "Velocity", "MasterParam"},
    "adam": _ADAM_STATE,
    "adamw": _ADAM_STATE,
    "adamax": {"Param", "Moment", "InfNorm", "MasterParam"},
    "lamb": _ADAM_STATE - {"Moment2Max"},
    "adagrad": {"Param", "Moment", "MasterParam"},
    "adadelta": {"Param", "AvgSquaredGrad", "AvgSquaredUpdate", "MasterParam"},
    "rmsprop": {"Param", "MeanSquare", "Moment", "MeanGrad", "MasterParam"},
}


@pytest.mark.parametrize("name,fmt", TRAIN_FORMATS, ids=[f"{n}[{f}]" for n, f in TRAIN_FORMATS])
def test_training_optimizer_section_translatable(tmp_path, name, fmt):
    import tiller._tiller as tt

    path = tmp_path / ("train.json" if fmt == "pir" else "train.pdmodel")
    env = dict(os.environ, FLAGS_enable_pir_api="1" if fmt == "pir" else "0")
    res = subprocess.run([sys.executable, "-c", TRAIN_SCRIPT, str(path), TRAIN_OPTIMIZERS[name]],
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    ops = tt.read_paddle_program_ops(str(path))
    last_grad = max(i for i, op in enumerate(ops) if op["type"].endswith("_grad"))
    tail = ops[last_grad + 1:]
    untranslatable = [op["type"] for op in tail if not op["translatable"]]
    assert not untranslatable, f"ops after backward without a translator: {untranslatable}"
    updates = [op for op in tail if op["type"] in STATE_SLOTS]
    assert len(updates) == 2, [op["type"] for op in tail]  # one per parameter (weight, bias)
    for op in updates:
        state = STATE_SLOTS[op["type"]]
        outs = {k for k, v in op["outputs"].items() if v}  # legacy ops list empty slots
        assert outs <= {s + "Out" for s in state}, (op["type"], sorted(outs))
        for slot in state & {k for k, v in op["inputs"].items() if v}:
            assert slot + "Out" in outs, (op["type"], slot, sorted(outs))


# ---- Training steps: Tiller's compiled step against Paddle's executor --------

STEP_SCRIPT = """
import json, sys, numpy as np, paddle
sys.path.insert(0, sys.argv[1])
import tiller
from paddle.framework import in_pir_mode
paddle.enable_static()
O = paddle.optimizer
clip = paddle.nn.ClipGradByGlobalNorm(1.0) if in_pir_mode() else paddle.nn.ClipGradByNorm(1.0)
l2 = paddle.regularizer.L2Decay(0.01)
rng = np.random.default_rng(0)
batches = [rng.standard_normal((8, 6)).astype("float32") for _ in range(5)]

def build(expr):
    paddle.seed(1)
    main, startup = paddle.static.Program(), paddle.static.Program()
    # Fresh names per build, so both programs name their variables alike.
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [8, 6], "float32")
        h = paddle.nn.functional.relu(paddle.nn.Linear(6, 5)(x))
        o = paddle.nn.Linear(5, 3)(h)
        loss = paddle.mean(o * o)
        eval(expr).minimize(loss)
    return main, startup, loss

exe = paddle.static.Executor(paddle.CPUPlace())
results = {}
for name, expr in json.loads(sys.argv[2]).items():
    try:
        main, startup, loss = build(expr)
        ref_scope = paddle.static.Scope()
        with paddle.static.scope_guard(ref_scope):
            exe.run(startup)
            ref = [float(np.asarray(exe.run(main, feed={"x": b}, fetch_list=[loss])[0]))
                   for b in batches]
        main, startup, loss = build(expr)
        scope = paddle.static.Scope()
        with paddle.static.scope_guard(scope):
            exe.run(startup)
        strategy = tiller.IpuStrategy()
        strategy.set_graph_config(is_training=True, micro_batch_size=8)
        prog = tiller.IpuCompiledProgram(main, scope=scope, ipu_strategy=strategy).compile(
            ["x"], [loss])
        got = [float(np.asarray(prog.run(feed={"x": b})[0])) for b in batches]
        state = {}
        for n in prog._session.state_names():
            want = np.array(ref_scope.find_var(n).get_tensor())
            have = prog._session.get_state(n).reshape(want.shape)
            state[n] = float(np.max(np.abs(have - want)))
        results[name] = {"paddle": ref, "tiller": got, "state": state, "error": ""}
    except Exception as e:
        results[name] = {"error": repr(e)[-2000:]}
print("RESULTS" + json.dumps(results))
"""

# 5 steps: losses within rel 1e-5, and every persistable (parameters,
# moments, beta powers, learning rate) within 1e-5 absolute of Paddle's
# (values are O(1)). Paddle's matmuls, reductions and Eigen sqrt round
# differently from Tiller's; after 5 steps on this net the worst seen is
# 1.6e-6 relative on a loss and 1.8e-6 absolute on a state (rmsprop). The
# issue's acceptance bound over 50 steps is 1e-4.
STEP_RTOL, STATE_ATOL = 1e-5, 1e-5

# Paddle 3.3.1's PIR Adamax advances beta1_pow with pd_op.scale_(beta1_pow):
# the PIR reader binds an in-place result Out back to operand X, so it counts.
STEP_PARAMS = [pytest.param(n, f, id=f"{n}[{f}]") for n, f in TRAIN_FORMATS]


@pytest.fixture(scope="module")
def trained():
    out = {}
    for fmt in ("pir", "legacy"):
        names = {n: e for n, e in TRAIN_OPTIMIZERS.items() if (n, fmt) in TRAIN_FORMATS}
        env = dict(os.environ, FLAGS_enable_pir_api="1" if fmt == "pir" else "0")
        res = subprocess.run([sys.executable, "-c", STEP_SCRIPT, str(HERE.parents[1] / "python"),
                              json.dumps(names)], env=env, capture_output=True, text=True,
                             timeout=900)
        line = [l for l in res.stdout.splitlines() if l.startswith("RESULTS")]
        assert res.returncode == 0 and line, res.stderr[-3000:]
        out[fmt] = json.loads(line[0][len("RESULTS"):])
    return out


@pytest.mark.parametrize("name,fmt", STEP_PARAMS)
def test_training_steps_match_paddle(trained, name, fmt):
    r = trained[fmt][name]
    assert r["error"] == "", r["error"]
    np.testing.assert_allclose(r["tiller"], r["paddle"], rtol=STEP_RTOL, err_msg="losses")
    assert len(r["state"]) > 4, r["state"]  # parameters and optimizer state
    bad = {n: d for n, d in r["state"].items() if d > STATE_ATOL}
    assert not bad, f"state differs from Paddle's after {len(r['paddle'])} steps: {bad}"


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    generate(Path(sys.argv[1]))
