"""tiller.patch_paddle() / python -m tiller.patch (issue 11, first part):
Paddle behaves as a build with IPU support whose devices are Tiller's, so
an unmodified Paddle IPU script runs. Each test runs in a child process
(patching changes the paddle module for the whole process).

Tolerance for the script against Paddle's CPU executor: the training tests'
(rtol 1e-5 on losses; 10 Adam steps of float32 on a tiny model, differences
are summation order).

The user scripts run under both Paddle generations: 3.3.1 (.venv, PIR
programs) and 2.6.2 (.venv-paddle2 from scripts/setup.sh, the IPU era's
legacy programs), each against its own CPU executor / predictor.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from interpreters import child_env, paddle2

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "ipu_scripts" / "train_two_stages.py"


# Paddle version -> the interpreter that has it.
PYTHONS = {"3.3.1": lambda: sys.executable, "2.6.2": paddle2}


def _run(*args, check=True, python=sys.executable):
    proc = subprocess.run([python, *map(str, args)], env=child_env(), capture_output=True,
                          text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


@pytest.fixture(scope="module", params=list(PYTHONS))
def python(request):
    """The interpreter of one Paddle generation, checked to hold it."""
    exe = PYTHONS[request.param]()
    version = _run("-c", "import paddle; print(paddle.__version__)", python=exe).stdout.split()
    assert version[-1] == request.param, version
    return exe


def test_unmodified_ipu_script_runs_after_python_m_tiller_patch(tmp_path, python):
    ipu = json.loads(_run("-m", "tiller.patch", SCRIPT, "ipu", tmp_path / "ipu", python=python)
                     .stdout.splitlines()[-1])
    # The reference: the same program on Paddle's CPU executor (the script's
    # cpu mode, patched too: Paddle's own ipu_shard_guard refuses to run).
    cpu = json.loads(_run("-m", "tiller.patch", SCRIPT, "cpu", tmp_path / "cpu", python=python)
                     .stdout.splitlines()[-1])
    np.testing.assert_allclose(ipu["losses"], cpu["losses"], rtol=1e-5)
    assert ipu["losses"][8] < ipu["losses"][4] < ipu["losses"][0]  # the same batch: it trains
    # weights_to_host put the trained weights where paddle.static.save reads them.
    for name, value in cpu["weights"].items():
        np.testing.assert_allclose(ipu["weights"][name], value, rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    assert (tmp_path / "ipu.pdparams").exists()


def test_unmodified_bert_style_pipelined_replicated_script_follows_paddles_cpu_run(tmp_path,
                                                                                  python):
    """2 replicas x 2 pipeline stages (ipu_shard_guard), accumulation 4,
    AdamW with a LinearWarmup scheduler, weights_to_host + paddle.static.save:
    the per-update losses (mean over micro-batches) and the saved weights of
    Paddle's CPU executor on the global batch, to float32 summation order
    (rtol 1e-5 on losses, 1e-4 on weight sums)."""
    script = HERE / "ipu_scripts" / "train_pipelined.py"
    ipu = json.loads(_run("-m", "tiller.patch", script, "ipu", tmp_path / "ipu", python=python)
                     .stdout.splitlines()[-1])
    cpu = json.loads(_run("-m", "tiller.patch", script, "cpu", tmp_path / "cpu", python=python)
                     .stdout.splitlines()[-1])
    np.testing.assert_allclose(ipu["losses"], cpu["losses"], rtol=1e-5)
    assert ipu["losses"][6] < ipu["losses"][0]  # the same batch, six updates later
    assert ipu["weights"].keys() == cpu["weights"].keys()
    for name, value in cpu["weights"].items():
        np.testing.assert_allclose(ipu["weights"][name], value, rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_the_script_needs_the_patch(tmp_path, python):
    """Without Tiller, Paddle's CPU wheel refuses the IPU script (so the test
    above shows the patch doing the work)."""
    proc = _run(SCRIPT, "ipu", tmp_path / "x", check=False, python=python)
    assert proc.returncode != 0
    assert "IPU" in proc.stderr


CHILD = r"""
import json, paddle, paddle.static, tiller
from paddle.base import core
before = {"compiled": paddle.is_compiled_with_ipu()}
tiller.patch_paddle()
tiller.patch_paddle()   # twice: harmless
s = paddle.static.IpuStrategy()
s.set_graph_config(num_ipus=2, is_training=False, micro_batch_size=3)
place = paddle.IPUPlace()
after = {
    "compiled": [paddle.is_compiled_with_ipu(), paddle.device.is_compiled_with_ipu(),
                 core.is_compiled_with_ipu()],
    "count": paddle.device.get_ipu_device_count(),
    "place": repr(place),
    "core_place": repr(core.IPUPlace(1)),
    "set_device": repr(paddle.set_device("ipu:1")),
    "strategy": type(s).__module__,
    "num_ipus": s.get_option("num_ipus"), "micro": s.get_option("micro_batch_size"),
    "guard": paddle.static.ipu_shard_guard.__module__,
    "executor": type(paddle.static.Executor(place)).__name__,
}
try:
    s.set_options({"no_such_option": 1})
    after["unknown"] = ""
except Exception as e:
    after["unknown"] = str(e)
try:
    paddle.set_device("ipu:999")
    after["bad_device"] = ""
except ValueError as e:
    after["bad_device"] = str(e)
tiller.unpatch_paddle()
restored = {"compiled": paddle.is_compiled_with_ipu(),
            "strategy": paddle.static.IpuStrategy.__module__}
print(json.dumps({"before": before, "after": after, "restored": restored}))
"""


def test_patch_makes_paddle_an_ipu_build_and_unpatch_restores_it():
    env = child_env(TILLER_IPU_DEVICE_COUNT="16")
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(proc.stdout.splitlines()[-1])
    assert r["before"]["compiled"] is False
    a = r["after"]
    assert a["compiled"] == [True, True, True]
    assert a["count"] == 16
    assert a["place"] == "Place(ipu:0)" and a["core_place"] == "Place(ipu:1)"
    assert a["set_device"] == "Place(ipu:1)"
    assert a["strategy"] == "tiller.ipu" and a["guard"] == "tiller.shard"
    assert a["num_ipus"] == 2 and a["micro"] == 3
    assert a["executor"] == "Executor"
    assert "no_such_option" in a["unknown"]
    assert "16 IPU devices" in a["bad_device"]
    assert r["restored"]["compiled"] is False
    assert r["restored"]["strategy"].startswith("paddle")


@pytest.fixture(scope="module")
def fc_model(tmp_path_factory):
    """A saved fc + relu model (PIR), batch dimension free."""
    return _save_fc_model(tmp_path_factory.mktemp("fc") / "model", sys.executable)


def _save_fc_model(out, python):
    """An fc + relu model saved by `python`'s Paddle (3: PIR, 2: legacy)."""
    code = (
        "import paddle, sys\n"
        "paddle.enable_static()\n"
        "main, start = paddle.static.Program(), paddle.static.Program()\n"
        "main.random_seed = start.random_seed = 3\n"
        "with paddle.static.program_guard(main, start):\n"
        "    x = paddle.static.data('x', [-1, 8], 'float32')\n"
        "    y = paddle.nn.functional.relu(paddle.static.nn.fc(x, 5))\n"
        "exe = paddle.static.Executor(paddle.CPUPlace()); exe.run(start)\n"
        "paddle.static.save_inference_model(sys.argv[1], [x], [y], exe, program=main)\n")
    _run("-c", code, out, python=python)
    return out


INFER = HERE / "ipu_scripts" / "infer_fc.py"


def test_unmodified_paddle_inference_ipu_program_runs_on_tiller(tmp_path, python):
    """enable_ipu(1 device, micro-batch 2, no pipelining, 2 batches per
    step) + set_ipu_config, and the same from an IPU config file: Tiller's
    predictor, the outputs of Paddle's CPU predictor (rtol 1e-5: one fc), on
    a model the same Paddle saved."""
    fc_model = _save_fc_model(tmp_path / "model", python)
    cpu = json.loads(_run(INFER, "cpu", fc_model, python=python).stdout.splitlines()[-1])
    ipu = json.loads(_run("-m", "tiller.patch", INFER, "ipu", fc_model, python=python).stdout
                     .splitlines()[-1])
    cfg = tmp_path / "ipu.conf"
    cfg.write_text("ipu_device_num,1\nipu_micro_batch_size, 2\n\nipu_batches_per_step,2\n"
                   "ipu_enable_fp16,false\nipu_enable_model_runtime_executor,true\n")
    from_file = json.loads(_run("-m", "tiller.patch", INFER, "ipu_file", fc_model, cfg,
                                python=python).stdout.splitlines()[-1])
    assert cpu["module"].startswith("paddle")
    assert ipu["module"].startswith("tiller") and from_file["module"].startswith("tiller")
    np.testing.assert_allclose(ipu["out"], cpu["out"], rtol=1e-5)
    np.testing.assert_allclose(from_file["out"], cpu["out"], rtol=1e-5)


@pytest.mark.parametrize("text,needle", [
    ("ipu_device_num,1\nipu_bogus,3\n", ":2: unknown key 'ipu_bogus'"),
    ("ipu_enable_fp16,maybe\n", ":1: expected true or false, got 'maybe'"),
    ("ipu_micro_batch_size,two\n", ":1: expected an integer, got 'two'"),
    ("ipu_custom_ops_info,[[custom_relu,Relu]]\n", ":1: a custom op is [paddle_op, popart_op"),
    ("ipu_device_num,0\n", "ipu_device_num (0)"),
    ("ipu_enable_half_partial,true\n", "ipu_enable_half_partial"),
])
def test_bad_ipu_config_files_are_refused_by_file_and_line(tmp_path, text, needle):
    import tiller.inference as ti

    path = tmp_path / "bad.conf"
    path.write_text(text)
    config = ti.Config()
    with pytest.raises(ti.TillerError) as e:
        config.load_ipu_config(str(path))
    assert str(path) in str(e.value) and needle in str(e.value), str(e.value)
    with pytest.raises(ti.TillerError, match="cannot open"):
        config.load_ipu_config(str(tmp_path / "missing.conf"))


def test_ipu_custom_ops_name_an_op_tiller_runs(fc_model):
    import tiller.inference as ti

    config = ti.Config(str(fc_model) + ".json", str(fc_model) + ".pdiparams")
    with pytest.raises(ti.TillerError, match="paddle_op, popart_op, domain, version"):
        config.set_ipu_custom_info([["custom_relu", "Relu"]])
    config.set_ipu_custom_info([["custom_relu", "Relu", "custom.ops", "1"]],
                               {"AccumulatePriorityPattern": False})
    with pytest.raises(ti.TillerError, match="IPU custom op 'custom_relu'.*LoadCustomOpLibrary"):
        ti.create_predictor(config)
    config.set_ipu_custom_info([["relu", "Relu", "custom.ops", "1"]])   # an op Tiller runs
    ti.create_predictor(config)


def test_python_m_tiller_patch_needs_a_script():
    proc = _run("-m", "tiller.patch", check=False)
    assert proc.returncode == 2 and "usage" in proc.stderr
    proc = _run("-m", "tiller.patch", "/no/such/script.py", check=False)
    assert proc.returncode == 2 and "/no/such/script.py" in proc.stderr


def test_strategy_has_paddles_attributes_and_knows_every_option_name():
    import tiller

    s = tiller.IpuStrategy()
    assert s.need_compile and not s.has_custom_ops
    s.add_custom_op("custom_relu", "Relu")
    assert s.has_custom_ops and s.custom_op_names == ["custom_relu"]
    names = s.get_all_option_names()
    for name in ("transfer_cast_op", "enable_non_stable_softmax", "batch_serialization_settings.factor",
                 "gcl_options", "accl1_type", "enable_stochastic_rounding", "half_dtype"):
        assert name in names, name
    with pytest.warns(UserWarning, match="no effect"):
        s.set_options({"outline_threshold": 2.5})
    assert s.get_option("outline_threshold") == 2.5
    with pytest.raises(tiller.TillerError, match="not implemented"):
        s.set_options({"mean_accumulation_and_replication_reduction_strategy": 0})
    # The dygraph-to-static patch (dygraph_to_static_test.py) goes on and off
    # (a strategy made in dygraph mode, as this one, put it on already).
    from paddle.jit.dy2static.program_translator import ASTStaticFunction
    s.release_patch()
    call = ASTStaticFunction.__dict__["_perform_call"]
    s.register_patch()
    assert ASTStaticFunction.__dict__["_perform_call"] is not call
    s.release_patch()
    assert ASTStaticFunction.__dict__["_perform_call"] is call
    # Several processes of an MPI job (distributed_test.py runs them): the
    # options are taken, and checked against the job when a session starts.
    s.set_options({"enable_distribution": True, "global_replication_factor": 2,
                   "global_replica_offset": 1})
    assert s.get_option("enable_distribution") is True
    assert s.get_option("global_replication_factor") == 2
    assert s.get_option("global_replica_offset") == 1


def test_inference_program_compiles_and_has_no_trained_state():
    """is_training=False with a program without an optimizer: Tiller's
    predictor runs it (Paddle's IPU op tests did this for every op); the
    training-only calls say why they do not apply."""
    import paddle

    import tiller

    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [3, 4], "float32")
            out = paddle.nn.functional.softmax(paddle.static.nn.fc(x, 5))
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(paddle.CPUPlace())
        with paddle.static.scope_guard(scope):
            exe.run(startup)
            xv = np.random.default_rng(0).random((3, 4)).astype(np.float32)
            ref, = exe.run(main, feed={"x": xv}, fetch_list=[out])
        s = tiller.IpuStrategy()
        s.set_graph_config(is_training=False)
        prog = tiller.IpuCompiledProgram(main, scope=scope, ipu_strategy=s).compile(["x"], [out])
        got, = prog.run(feed={"x": xv})
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
        prog.weights_to_host()   # nothing trained: a no-op
        with pytest.raises(tiller.TillerError, match="inference program"):
            prog.save("/tmp/never")
        s.set_graph_config(is_training=True)
        with pytest.raises(tiller.TillerError, match="no backward part"):
            tiller.IpuCompiledProgram(main, scope=scope, ipu_strategy=s).compile(["x"], [out])
    finally:
        paddle.disable_static()


def test_every_option_round_trips_with_its_type():
    """Every name of Paddle's IPU option registry: get_option reads a value
    (Paddle's default) of the type Paddle registers, set_options takes a
    value of that type back and get_option returns it; a value of another
    type is refused naming the option. _ipu_strategy.get_option gives
    core.IpuStrategy's {'name', 'type', 'value'}."""
    import warnings

    import tiller

    s = tiller.IpuStrategy()
    checked = containers = 0
    python_type = {"bool": bool, "uint64": int, "double": float, "string": str,
                   "vector": list, "map": dict}
    with warnings.catch_warnings():  # the no-effect options' notes (tested elsewhere)
        warnings.simplefilter("ignore")
        names = s._ipu_strategy.get_all_option_names()
        assert names == s.get_all_option_names()
        for name in names:
            option = s._ipu_strategy.get_option(name)
            assert option["name"] == name and option["type"] in python_type, option
            default = option["value"]
            kind = python_type[option["type"]]
            assert type(default) is kind and s.get_option(name) == default, (name, option)
            if name in ("num_ipus", "replicated_graph_count", "custom_ops"):
                continue  # cross-checked with other options / read-only (add_custom_op)
            s.set_options({name: default})
            got = s._ipu_strategy.get_option(name)
            assert got == option, (name, option, got)
            if kind is not str:
                wrong = 2.5 if kind in (list, dict) else "not a " + kind.__name__
                with pytest.raises(tiller.TillerError, match=f"option '{name}' takes"):
                    s.set_options({name: wrong})
            checked += 1
            containers += kind in (list, dict)
    # engine_options, convolution_options, lstm_options, report_options, gcl_options,
    # dot_checks, hardware_instrumentations, custom_codelets, location_optimizer,
    # location_weight, location_activation, location_accumulator,
    # replicated_collectives_settings, accumulate_outer_fragment (+ custom_ops, skipped)
    assert checked > 100 and containers == 14, (checked, containers)
    with pytest.raises(tiller.TillerError, match=r"'max_weight_norm' must be a finite number >= 0"):
        s.set_options({"max_weight_norm": -1.0})
    with pytest.raises(tiller.TillerError, match=r"weight_decay_mode='decay' is not implemented"):
        s.set_options({"weight_decay_mode": "decay"})


# The options Paddle's registry (paddle/fluid/platform/device/ipu/ipu_strategy.cc)
# registers with a container setter / vector or map getter, or as scalars whose
# default depends on the SDK, and the location_* dicts of SetTensorLocation:
# (name, core get_option 'type', a value of that type, what get_option reads then).
# Paddle converts each container item to a string (an int in decimal).
PADDLE_TYPED = [
    ("default_prefetch_buffering_depth", "uint64", 3, 3),          # ADD_POPART_UINT64_OPTION_ALIAS
    ("transfer_cast_op", "bool", False, False),                   # ADD_BOOL_OPTION (Paddle 2.3-2.5)
    ("engine_options", "map", {"debug.allowOutOfMemory": "true", "opt.x": 4},
     {"debug.allowOutOfMemory": "true", "opt.x": "4"}),
    ("convolution_options", "map", {"partialsType": "half"}, {"partialsType": "half"}),
    ("lstm_options", "map", {"availableMemoryProportion": "0.3"},
     {"availableMemoryProportion": "0.3"}),
    ("report_options", "map", {"showExecutionSteps": "true"}, {"showExecutionSteps": "true"}),
    ("gcl_options", "map", {"useSynclessCollectives": "true"}, {"useSynclessCollectives": "true"}),
    ("custom_codelets", "vector", ["b.cpp", "a.cpp"], ["b.cpp", "a.cpp"]),
    # PopART's std::set<std::string> dotChecks; Paddle's valid_dot names.
    ("dot_checks", "vector", ["PreAlias", "Fwd0", "Fwd0"], ["Fwd0", "PreAlias"]),
    # std::set<Instrumentation>, PopART's default {Outer (0)}: 1 (Inner) is added.
    ("hardware_instrumentations", "vector", [1], ["0", "1"]),
]
# TensorLocationSettings keys (values: unsigned integers; Paddle has no getter
# for these, Tiller reads them as a map of strings as Paddle's map options do).
LOCATION_DEFAULT = {"on_chip": "1", "use_replicated_tensor_sharding": "0",
                    "min_elements_for_off_chip": "2",
                    "min_elements_for_replicated_tensor_sharding": "8192",
                    "use_io_tiles_to_load": "0", "use_io_tiles_to_store": "0"}


def test_paddles_container_and_location_options_round_trip_with_their_types():
    import warnings

    import tiller

    s = tiller.IpuStrategy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, kind, value, read in PADDLE_TYPED:
            s.set_options({name: value})
            assert s._ipu_strategy.get_option(name) == {"name": name, "type": kind,
                                                        "value": read}, name
            assert s.get_option(name) == read, name
            wrong = "text" if kind != "bool" else "yes"
            with pytest.raises(tiller.TillerError, match=f"option '{name}' takes"):
                s.set_options({name: wrong})
            assert s.get_option(name) == read, f"{name}: a refused value changes nothing"
        # Maps merge keys and lists append, as Paddle's container setters do.
        s.set_options({"engine_options": {"opt.y": "1"}, "custom_codelets": ["c.cpp"]})
        assert s.get_option("engine_options") == {"debug.allowOutOfMemory": "true",
                                                  "opt.x": "4", "opt.y": "1"}
        assert s.get_option("custom_codelets") == ["b.cpp", "a.cpp", "c.cpp"]
        for name, value, message in (
                ("dot_checks", ["Fwd2"], "option 'dot_checks' takes 'Fwd0', 'Fwd1', 'Bwd0', "
                                         "'PreAlias' or 'Final', got 'Fwd2'"),
                ("hardware_instrumentations", [2], "option 'hardware_instrumentations' takes 0 "
                                                   r"\(outer\) or 1 \(inner\), got '2'"),
                ("engine_options", {"a": 1.5}, "option 'engine_options' takes a dict of strings"),
                ("custom_codelets", [None], "option 'custom_codelets' takes a list of strings")):
            with pytest.raises(tiller.TillerError, match=message):
                s.set_options({name: value})
        # custom_ops: read-only in Paddle (a getter only), filled by add_custom_op.
        with pytest.raises(tiller.TillerError, match="option 'custom_ops' is read-only"):
            s.set_options({"custom_ops": ["x"]})
        s.add_custom_op("custom_relu", "Relu")
        assert s._ipu_strategy.get_option("custom_ops") == {
            "name": "custom_ops", "type": "vector",
            "value": ["paddle_op: custom_relu, domain: custom.ops, type: Relu, version: 1"]}

        for name in ("location_weight", "location_activation", "location_accumulator"):
            assert s.get_option(name) == LOCATION_DEFAULT, name
            s.set_options({name: {"on_chip": 0, "min_elements_for_off_chip": 64,
                                  "sharding_domain_with_all": 2}})
            assert s._ipu_strategy.get_option(name) == {
                "name": name, "type": "map",
                "value": {**LOCATION_DEFAULT, "on_chip": "0", "min_elements_for_off_chip": "64",
                          "sharding_domain_with_all": "2"}}, name
            with pytest.raises(tiller.TillerError, match=f"option '{name}' has no setting 'x'"):
                s.set_options({name: {"x": 1}})
            with pytest.raises(tiller.TillerError, match=f"option '{name}' takes a dict"):
                s.set_options({name: 1})
        # location_optimizer: Paddle's IpuStrategy puts the state off chip, sharded;
        # its keys are the location_optimizer.<key> options.
        assert s.get_option("location_optimizer") == {
            **LOCATION_DEFAULT, "on_chip": "0", "use_replicated_tensor_sharding": "1"}
        s.set_options({"location_optimizer": {"on_chip": 1, "use_io_tiles_to_store": True,
                                              "min_elements_for_off_chip": 16}})
        for key, kind, value in (("on_chip", bool, True), ("use_io_tiles_to_store", bool, True),
                                 ("use_io_tiles_to_load", bool, False),
                                 ("min_elements_for_off_chip", int, 16)):
            got = s._ipu_strategy.get_option(f"location_optimizer.{key}")
            assert got["type"] == {bool: "bool", int: "uint64"}[kind] and got["value"] == value
            assert type(got["value"]) is kind, key
            wrong = "yes"
            with pytest.raises(tiller.TillerError, match=f"option 'location_optimizer.{key}' takes"):
                s.set_options({f"location_optimizer.{key}": wrong})
        assert s.get_option("location_optimizer")["on_chip"] == "1"
        with pytest.raises(tiller.TillerError, match="option 'location_optimizer' takes integers"):
            s.set_options({"location_optimizer": {"use_replicated_tensor_sharding": 0,
                                                  "on_chip": "off"}})
        assert s.get_option("location_optimizer.use_replicated_tensor_sharding") is True, \
            "a refused dict sets none of its keys"
