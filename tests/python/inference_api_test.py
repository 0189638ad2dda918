"""tiller.inference is paddle.inference, name for name (issue 41, point 11).

* Paddle's documented CPU inference demo (the Python quick start with the
  x86 CPU settings), written once, runs with ``import paddle.inference as
  paddle_infer`` and with ``import tiller.inference as paddle_infer``, under
  Paddle 3.3.1 and 2.6.2, and the outputs agree.
* Every public name of Paddle 3.3.1's and 2.6.2's paddle.inference module,
  and of its Config, Tensor, Predictor and PredictorPool classes, exists in
  tiller.inference, read from Paddle itself, and each is in exactly one of
  the classes below (honoured / accepted without effect / a getter answering
  for Tiller / refused) and in docs/INFERENCE_API.md. The refused ones raise
  TillerError saying why.
* The accepted ones do what their getters say and change no output; run()
  with a non-array input and an input without elements fail by name, where
  Paddle fails too.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tiller
import tiller.inference as ti
from interpreters import child_env, paddle2
from models import export

REPO = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------
# Paddle's names and what Tiller does with each.

# Not API: Paddle's implementation submodule (paddle/inference/wrapper.py).
EXCLUDED_MODULE_NAMES = {"wrapper"}

# Config settings that work as in Paddle (the model, threads, optimization,
# precision, IPU mode, profile, logging switch, summary).
CONFIG_HONOURED = {
    "set_model", "set_prog_file", "set_params_file", "set_model_buffer", "model_from_memory",
    "prog_file", "params_file", "model_dir", "set_cpu_math_library_num_threads",
    "cpu_math_library_num_threads", "switch_ir_optim", "ir_optim", "set_optimization_level",
    "enable_mkldnn_bfloat16", "enable_onednn_bfloat16", "enable_ipu", "set_ipu_config",
    "set_ipu_custom_info", "load_ipu_config", "enable_profile", "disable_glog_info",
    "glog_info_disabled", "summary", "Precision", "Float32", "Half", "Bfloat16", "Int8",
    "enable_use_gpu", "disable_gpu",
}
# Accepted without effect: Tiller does it anyway, or it cannot change results.
# The getters among them answer what Tiller does. The conditional ones (a
# non-empty op list, True) raise: see CONDITIONAL_REFUSALS.
CONFIG_NO_EFFECT = {
    "enable_memory_optim", "enable_mkldnn", "enable_onednn", "disable_mkldnn", "disable_onednn",
    "mkldnn_enabled", "onednn_enabled", "set_mkldnn_cache_capacity", "set_onednn_cache_capacity",
    "set_mkldnn_op", "set_onednn_op", "disable_mkldnn_fc_passes", "disable_onednn_fc_passes",
    "enable_mkldnn_int8", "enable_onednn_int8", "mkldnn_int8_enabled", "onednn_int8_enabled",
    "switch_ir_debug", "enable_new_ir", "new_ir_enabled", "enable_new_executor",
    "switch_specify_input_names", "specify_input_name", "switch_use_feed_fetch_ops",
    "use_feed_fetch_ops_enabled", "use_optimized_model", "enable_save_optim_model",
    "set_optim_cache_dir", "disable_onnxruntime", "set_bfloat16_op",
    "enable_custom_passes", "enable_low_precision_io", "exp_disable_mixed_precision_ops",
    "exp_enable_mixed_precision_ops",
}
# Getters of devices and engines Tiller has none of: they answer, never raise.
CONFIG_ANSWERS = {
    "use_gpu": False, "gpu_device_id": 0, "memory_pool_init_size_mb": 0,
    "fraction_of_gpu_memory_for_pool": 0.0, "use_xpu": False, "xpu_device_id": 0,
    "tensorrt_engine_enabled": False, "tensorrt_dla_enabled": False,
    "tensorrt_dynamic_shape_enabled": False, "tensorrt_explicit_quantization_enabled": False,
    "tensorrt_inspector_enabled": False, "tensorrt_varseqlen_enabled": False,
    "trt_allow_build_at_runtime": False, "tuned_tensorrt_dynamic_shape": False,
    "shape_range_info_collected": False, "shape_range_info_path": "",
    "onnxruntime_enabled": False, "openvino_engine_enabled": False,
    "lite_engine_enabled": False, "use_opencl": False,
}
# GPU / XPU / TensorRT / ONNX Runtime / OpenVINO / CINN / Paddle Lite / ...
# only, or Paddle internals Tiller has no counterpart of: present, and each
# call raises TillerError with these words. (args to call it with, words.)
GPU = "not in Tiller's CUDA backend"
TRT = "TensorRT needs a GPU"
CONFIG_REFUSED = {
    "enable_xpu": ((), "no XPU backend"),
    "set_xpu_config": ((None,), "no XPU backend"),
    "set_xpu_device_id": ((0,), "no XPU backend"),
    "xpu_config": ((), "no XPU backend"),
    "enable_tensorrt_engine": ((), TRT),
    "enable_tensorrt_dla": ((), TRT),
    "enable_tensorrt_explicit_quantization": ((), TRT),
    "enable_tensorrt_inspector": ((), TRT),
    "enable_tensorrt_memory_optim": ((), TRT),
    "enable_tensorrt_varseqlen": ((), TRT),
    "enable_tuned_tensorrt_dynamic_shape": ((), TRT),
    "exp_disable_tensorrt_dynamic_shape_ops": ((True,), TRT),
    "exp_disable_tensorrt_ops": ((["relu"],), TRT),
    "exp_disable_tensorrt_subgraph": ((["x"],), TRT),
    "exp_specify_tensorrt_subgraph_precision": (([], [], []), TRT),
    "mark_trt_engine_outputs": ((), TRT),
    "set_tensorrt_optimization_level": ((3,), TRT),
    "set_trt_dynamic_shape_info": (({}, {}, {}), TRT),
    "tensorrt_optimization_level": ((), TRT),
    "tensorrt_precision_mode": ((), TRT),
    "collect_shape_range_info": (("shapes.pbtxt",), "TensorRT"),
    "exp_enable_use_cutlass": ((), GPU),
    "exp_sparse_conv_using_buffer": (([[3, 3]], [[1, 1]]), GPU),
    "enable_onnxruntime": ((), "not ONNX Runtime"),
    "enable_ort_optimization": ((), "not ONNX Runtime"),
    "enable_openvino_engine": ((), "not OpenVINO"),
    "enable_custom_device": (("npu",), "custom device 'npu'"),
    "enable_cinn": ((), "CINN"),
    "delete_pass": (("fc_fuse_pass",), "'fc_fuse_pass' names a Paddle pass"),
    "pass_builder": ((), "switch_ir_optim(False)"),
    "to_native_config": ((), "NativeConfig"),
    "enable_lite_engine": ((), "Paddle Lite"),
    "enable_opencl": ((), "no OpenCL backend"),
    "enable_dlnne": ((), "no DLNNE backend"),
    "nnadapter": ((), "NNAdapter"),
    "dist_config": ((), "distributed inference"),
    "set_dist_config": ((None,), "distributed inference"),
    "enable_quantizer": ((), "tiller quantize"),
    "quantizer_config": ((), "tiller quantize"),
}
# Accepted as a no-op in the form that changes nothing, refused in the form
# that would change results: (args, words).
CONDITIONAL_REFUSALS = {
    "set_bfloat16_op": (({"conv2d"},), "per-op bfloat16 list (conv2d)"),
    "enable_mkldnn_int8": (({"conv2d"},), "restricting int8 to op types (conv2d)"),
    "enable_onednn_int8": (({"conv2d"},), "restricting int8 to op types (conv2d)"),
    "enable_custom_passes": ((["my_pass"],), "custom passes (my_pass)"),
    "enable_low_precision_io": ((True,), "inputs and outputs keep the types"),
    "enable_save_optim_model": ((True,), "writes no optimized Paddle model"),
    "exp_disable_mixed_precision_ops": (({"softmax"},), "per-op mixed precision"),
    "exp_enable_mixed_precision_ops": (({"softmax"},), "per-op mixed precision"),
}

TENSOR_HONOURED = {"copy_from_cpu", "copy_to_cpu", "reshape", "shape", "type", "lod", "set_lod",
                   "share_external_data"}
TENSOR_REFUSED = {"share_external_data_by_ptr_name": (("ptr", [1], 0, 0), GPU)}
PREDICTOR_HONOURED = {"run", "clone", "get_input_handle", "get_input_names",
                      "get_output_handle", "get_output_names"}
PREDICTOR_NO_EFFECT = {"clear_intermediate_tensor", "try_shrink_memory"}
PREDICTOR_REFUSED = {"register_input_hook": ((print,), "compiled graph"),
                     "register_output_hook": ((print,), "compiled graph")}
POOL_HONOURED = {"retrieve", "retrive"}  # Paddle 3's and Paddle 2's spelling
MODULE_HONOURED = {"Config", "DataType", "PlaceType", "PrecisionType", "Predictor",
                   "PredictorPool", "Tensor", "create_predictor", "get_version",
                   "get_num_bytes_of_data_type", "get_trt_compile_version",
                   "get_trt_runtime_version"}
MODULE_REFUSED = {"convert_to_mixed_precision", "XpuConfig", "InternalUtils"}

# Lists the public names of paddle.inference and its classes, as JSON.
NAMES_CHILD = """
import json, paddle.inference as p
def public(x):
    return sorted(n for n in dir(x) if not n.startswith("_"))
print(json.dumps({
    "module": public(p), "Config": public(p.Config), "Tensor": public(p.Tensor),
    "Predictor": public(p.Predictor), "PredictorPool": public(p.PredictorPool),
    "PrecisionType": sorted(p.PrecisionType.__members__), "PlaceType":
    sorted(p.PlaceType.__members__), "DataType": sorted(p.DataType.__members__),
    "version": p.get_version().split()[1]}))
"""


def paddle_names(python: str) -> dict:
    proc = subprocess.run([python, "-c", NAMES_CHILD], capture_output=True, text=True,
                          timeout=300, env=child_env(GLOG_minloglevel="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def names():
    """{"3.3.1": names, "2.6.2": names}, read from each Paddle."""
    got = {}
    for python in (sys.executable, paddle2()):
        n = paddle_names(python)
        got[n["version"]] = n
    assert set(got) == {"3.3.1", "2.6.2"}, set(got)
    return got


@pytest.fixture(scope="module")
def resnet(zoo):
    return zoo.export("resnet-tiny", "pir")


@pytest.fixture(scope="module")
def bert(zoo):
    return zoo.export("bert-tiny", "pir")


def image(batch=2, seed=0):
    return export.make_inputs("resnet-tiny", batch=batch, seed=seed)["x"]


def predictor_of(model, **settings):
    config = ti.Config(model.model_file, model.params_file)
    for name, args in settings.items():
        getattr(config, name)(*args)
    return ti.create_predictor(config)


def run_handles(predictor, *arrays):
    for name, a in zip(predictor.get_input_names(), arrays):
        h = predictor.get_input_handle(name)
        h.reshape(list(a.shape))
        h.copy_from_cpu(a)
    predictor.run()
    return [predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()]


# ---------------------------------------------------------------------------
# Paddle's demo, written once.

# Paddle Inference's Python quick start (Config / create_predictor / handles)
# with the settings of its x86 CPU guide; only the import line differs.
DEMO = """
import sys
import numpy as np
import {module} as paddle_infer

model_file, params_file, input_file, output_file = sys.argv[1:5]
config = paddle_infer.Config(model_file, params_file)
config.enable_memory_optim()
config.enable_mkldnn()
config.set_cpu_math_library_num_threads(2)
config.disable_glog_info()
predictor = paddle_infer.create_predictor(config)

input_names = predictor.get_input_names()
input_handle = predictor.get_input_handle(input_names[0])
fake_input = np.load(input_file)
input_handle.reshape(list(fake_input.shape))
input_handle.copy_from_cpu(fake_input)
predictor.run()

output_names = predictor.get_output_names()
output_handle = predictor.get_output_handle(output_names[0])
output_data = output_handle.copy_to_cpu()
np.save(output_file, output_data)
print(output_handle.shape(), output_handle.type())
"""


def run_demo(python, module, model, input_file, out_file, source=DEMO):
    proc = subprocess.run(
        [python, "-c", source.format(module=module), model.model_file, model.params_file,
         str(input_file), str(out_file)],
        capture_output=True, text=True, timeout=300, env=child_env(GLOG_minloglevel="2"))
    return proc, (np.load(out_file) if proc.returncode == 0 else None)


@pytest.mark.parametrize("version, fmt", [("3.3.1", "legacy"), ("3.3.1", "pir"),
                                          ("2.6.2", "legacy")])
def test_paddles_cpu_demo_runs_with_only_the_import_changed(zoo, tmp_path, version, fmt):
    """Tolerance: both sides compute resnet-tiny in float32 with oneDNN, but
    Tiller's compiled graph fuses and orders the convolutions' sums
    differently (its own GEMMs, Winograd for 3 x 3 layers), which moves each
    layer's result by float32 rounding (~1e-6 relative); through the network
    that stays below 1e-4 of the logits' scale (seen: 3e-7).

    Paddle 2.6 reads legacy programs only. Paddle 3.3.1 itself fails the
    demo on a PIR program (enable_memory_optim: "Not find predictor_id 0 and
    pass_name memory_optimize_pass"), so there its reference is the same demo
    without that line; Tiller runs the demo as written."""
    python = sys.executable if version == "3.3.1" else paddle2()
    model = zoo.export("resnet-tiny", fmt)
    np.save(tmp_path / "x.npy", image())
    proc, ref = run_demo(python, "paddle.inference", model, tmp_path / "x.npy",
                         tmp_path / "ref.npy")
    if fmt == "pir":
        assert proc.returncode != 0 and "memory_optimize_pass" in proc.stderr, proc.stderr
        proc, ref = run_demo(python, "paddle.inference", model, tmp_path / "x.npy",
                             tmp_path / "ref.npy",
                             DEMO.replace("config.enable_memory_optim()\n", ""))
    assert proc.returncode == 0, f"paddle.inference: {proc.stderr[-4000:]}"
    proc, got = run_demo(python, "tiller.inference", model, tmp_path / "x.npy",
                         tmp_path / "got.npy")
    assert proc.returncode == 0, f"tiller.inference: {proc.stderr[-4000:]}"
    assert got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


# ---------------------------------------------------------------------------
# Every name.


def test_every_paddle_inference_name_exists(names):
    missing = []
    for version, n in names.items():
        for name in set(n["module"]) - EXCLUDED_MODULE_NAMES:
            if not hasattr(ti, name):
                missing.append(f"{version} paddle.inference.{name}")
        for cls in ("Config", "Tensor", "Predictor", "PredictorPool"):
            for name in n[cls]:
                if not hasattr(getattr(ti, cls), name):
                    missing.append(f"{version} {cls}.{name}")
        for enum in ("PrecisionType", "PlaceType", "DataType"):
            for member in n[enum]:
                if not hasattr(getattr(ti, enum), member):
                    missing.append(f"{version} {enum}.{member}")
    assert not missing, "missing in tiller.inference: " + ", ".join(sorted(missing))


def test_every_name_is_classified_once_and_documented(names):
    """The classes above cover Paddle's names exactly, and the docs table
    names each one."""
    config = [CONFIG_HONOURED, CONFIG_NO_EFFECT, set(CONFIG_ANSWERS), set(CONFIG_REFUSED)]
    assert sum(len(c) for c in config) == len(set().union(*config)), "a name in two classes"
    paddle_config = set().union(*(set(n["Config"]) for n in names.values()))
    assert set().union(*config) == paddle_config, (
        f"unclassified: {sorted(paddle_config - set().union(*config))}, "
        f"not Paddle's: {sorted(set().union(*config) - paddle_config)}")
    assert set(CONDITIONAL_REFUSALS) <= CONFIG_NO_EFFECT
    for cls, classes in (("Tensor", [TENSOR_HONOURED, set(TENSOR_REFUSED)]),
                         ("Predictor", [PREDICTOR_HONOURED, PREDICTOR_NO_EFFECT,
                                        set(PREDICTOR_REFUSED)]),
                         ("PredictorPool", [POOL_HONOURED]),
                         ("module", [MODULE_HONOURED, MODULE_REFUSED, EXCLUDED_MODULE_NAMES])):
        paddle = set().union(*(set(n[cls]) for n in names.values()))
        assert set().union(*classes) == paddle, cls
    doc = (REPO / "docs" / "INFERENCE_API.md").read_text()
    every = (paddle_config | TENSOR_HONOURED | set(TENSOR_REFUSED) | PREDICTOR_HONOURED
             | PREDICTOR_NO_EFFECT | set(PREDICTOR_REFUSED) | POOL_HONOURED | MODULE_HONOURED
             | MODULE_REFUSED)
    undocumented = sorted(n for n in every if f"`{n}`" not in doc)
    assert not undocumented, f"not in docs/INFERENCE_API.md: {undocumented}"


@pytest.mark.parametrize("name", sorted(CONFIG_REFUSED))
def test_refused_config_setting_raises_saying_why(name):
    args, words = CONFIG_REFUSED[name]
    with pytest.raises(ti.TillerError, match=re.escape(words)) as e:
        getattr(ti.Config(), name)(*args)
    assert name in str(e.value) or name.replace("_", "") in str(e.value).lower()


@pytest.mark.parametrize("name", sorted(CONDITIONAL_REFUSALS))
def test_setting_that_would_change_results_raises(name):
    args, words = CONDITIONAL_REFUSALS[name]
    with pytest.raises(ti.TillerError, match=re.escape(words)):
        getattr(ti.Config(), name)(*args)


def test_enable_use_gpu_selects_the_gpu_then_the_cpu():
    """Paddle's GPU switch: cuda:<id> first, the CPU for the ops the CUDA
    backend lacks; the GPU itself is checked when the predictor is made
    (cuda_backend_test.py)."""
    config = ti.Config()
    config.enable_use_gpu(256, 1, ti.PrecisionType.Half)
    assert config.use_gpu() is True
    assert config.gpu_device_id() == 1
    assert config.memory_pool_init_size_mb() == 256
    assert config.precision() == "float16"
    assert "cuda:1, cpu" in config.summary()
    config.disable_gpu()
    assert config.use_gpu() is False
    assert "cuda" not in config.summary()
    # Refused, nothing changed: int8, a negative device.
    for args, words in (((256, 0, ti.PrecisionType.Int8), "no int8 GEMM"),
                        ((256, -1), "device_id must be >= 0")):
        with pytest.raises(ti.TillerError, match=words):
            config.enable_use_gpu(*args)
        assert config.use_gpu() is False


def test_answers_of_absent_devices():
    config = ti.Config()
    for name, value in CONFIG_ANSWERS.items():
        got = getattr(config, name)()
        assert got == value and type(got) is type(value), name


def test_refused_module_names():
    with pytest.raises(ti.TillerError, match="Tiller writes no converted models.*set_precision"):
        ti.convert_to_mixed_precision("m.json", "m.pdiparams", "o.json", "o.pdiparams",
                                      ti.PrecisionType.Bfloat16, ti.PlaceType.CPU,
                                      black_list={"softmax"}, white_list={"conv2d"})
    with pytest.raises(ti.TillerError, match="no GPU, XPU or custom-device backend"):
        ti.convert_to_mixed_precision("m.json", "m.pdiparams", "o.json", "o.pdiparams",
                                      ti.PrecisionType.Half, ti.PlaceType.GPU)
    with pytest.raises(ti.TillerError, match="no XPU backend"):
        ti.XpuConfig()
    with pytest.raises(ti.TillerError, match="TensorRT needs a GPU"):
        ti.InternalUtils.set_transformer_posid(ti.Config(), "pos")


def test_refused_tensor_and_predictor_calls(resnet):
    predictor = predictor_of(resnet)
    for name, (args, words) in PREDICTOR_REFUSED.items():
        with pytest.raises(ti.TillerError, match=words):
            getattr(predictor, name)(*args)
    handle = predictor.get_input_handle("x")
    for name, (args, words) in TENSOR_REFUSED.items():
        with pytest.raises(ti.TillerError, match=words):
            getattr(handle, name)(*args)


# ---------------------------------------------------------------------------
# Enums and module functions.


def test_enums_have_paddles_members_and_values():
    import paddle.inference as pi

    for enum in ("PrecisionType", "PlaceType"):
        for member, value in getattr(pi, enum).__members__.items():
            assert int(getattr(getattr(ti, enum), member)) == int(value), (enum, member)
    assert ti.PrecisionType is ti.Config.Precision
    assert ti.Config.Bfloat16 == ti.PrecisionType.Bfloat16
    for member in pi.DataType.__members__:
        assert hasattr(ti.DataType, member)


def test_module_functions():
    assert ti.get_version().startswith(f"version: {tiller.__version__}\n")
    cmake = re.search(r"project\(tiller .*VERSION ([0-9.]+)\)",
                      (REPO / "CMakeLists.txt").read_text()).group(1)
    assert cmake == tiller.__version__
    sizes = {"FLOAT32": 4, "FLOAT16": 2, "BFLOAT16": 2, "FLOAT64": 8, "INT64": 8, "INT32": 4,
             "UINT8": 1, "INT8": 1, "BOOL": 1}
    for member, size in sizes.items():
        assert ti.get_num_bytes_of_data_type(getattr(ti.DataType, member)) == size
    assert ti.get_trt_compile_version() == (0, 0, 0)
    assert ti.get_trt_runtime_version() == (0, 0, 0)


# ---------------------------------------------------------------------------
# Settings accepted without effect: the getters say what Tiller does, and the
# outputs do not move.


def test_no_effect_settings_change_no_output_and_getters_tell_the_truth(resnet):
    x = image()
    plain = run_handles(predictor_of(resnet), x)
    config = ti.Config(resnet.model_file, resnet.params_file)
    assert config.enable_memory_optim() is None
    config.enable_mkldnn()
    config.disable_mkldnn()               # no other kernels to switch to
    assert config.mkldnn_enabled() and config.onednn_enabled()
    config.disable_onednn()
    assert config.onednn_enabled()
    config.set_mkldnn_cache_capacity(5)
    config.set_onednn_cache_capacity(5)
    config.set_mkldnn_op({"conv2d", "pool2d"})
    config.set_onednn_op(["conv2d"])
    config.disable_mkldnn_fc_passes()
    config.disable_onednn_fc_passes()
    config.enable_mkldnn_int8()
    config.enable_onednn_int8(set())
    assert config.mkldnn_int8_enabled() and config.onednn_int8_enabled()
    assert not config.glog_info_disabled()
    config.disable_glog_info()
    assert config.glog_info_disabled()
    config.switch_ir_debug(True)
    config.enable_new_ir(True)
    assert config.new_ir_enabled()
    config.enable_new_executor(True)
    config.switch_specify_input_names(True)
    assert config.specify_input_name()
    config.switch_use_feed_fetch_ops(True)
    assert config.use_feed_fetch_ops_enabled() is False   # as in Paddle
    config.use_optimized_model(True)
    config.enable_save_optim_model(False)
    config.set_optim_cache_dir("/nonexistent/cache")
    config.disable_gpu()
    config.disable_onnxruntime()
    config.set_bfloat16_op(set())
    config.enable_custom_passes([])
    config.enable_low_precision_io(False)
    config.exp_disable_mixed_precision_ops(set())
    config.exp_enable_mixed_precision_ops(set())
    out = run_handles(ti.create_predictor(config), x)
    for a, b in zip(plain, out):
        np.testing.assert_array_equal(a, b)
    summary = config.summary()
    for row in ("cpu_math_thread", "enable_mkldnn", "memory_optim", "use_gpu", "ir_optim",
                "enable_log"):
        assert row in summary, summary


def test_optimization_level_and_precision_settings():
    config = ti.Config()
    config.set_optimization_level(0)
    assert config.ir_optim() is False
    config.set_optimization_level(3)
    assert config.ir_optim() is True
    with pytest.raises(ti.TillerError, match="0 .* to 4"):
        config.set_optimization_level(-1)
    config.set_precision(ti.PrecisionType.Bfloat16)
    assert config.precision() == "bfloat16"
    config.set_precision(ti.PrecisionType.Half)
    assert config.precision() == "float16"
    config.set_precision(ti.PrecisionType.Float32)
    assert config.precision() == "float32"
    with pytest.raises(ti.TillerError, match="Int8.*tiller quantize"):
        config.set_precision(ti.PrecisionType.Int8)
    config.enable_onednn_bfloat16()
    assert config.precision() == "bfloat16"


def test_enable_profile_prints_the_op_table_when_the_predictor_ends(resnet, capfd):
    config = ti.Config(resnet.model_file, resnet.params_file)
    config.enable_profile()
    predictor = ti.create_predictor(config)
    run_handles(predictor, image())
    assert predictor.profile(), "enable_profile times the ops"
    del predictor
    err = capfd.readouterr().err
    assert "Tiller profile" in err and "conv2d" in err, err


# ---------------------------------------------------------------------------
# The model, however Paddle lets a Config name it.


def test_model_by_prog_and_params_file_by_prefix_and_from_memory(resnet, tmp_path):
    x = image()
    ref = run_handles(predictor_of(resnet), x)

    config = ti.Config()
    config.set_prog_file(resnet.model_file)
    config.set_params_file(resnet.params_file)
    assert (config.prog_file(), config.params_file()) == (resnet.model_file, resnet.params_file)
    np.testing.assert_array_equal(run_handles(ti.create_predictor(config), x)[0], ref[0])

    # Paddle 3's Config(model_dir, model_prefix)
    config = ti.Config(resnet.dir, "model")
    assert config.prog_file() == str(Path(resnet.dir) / "model.json")
    assert config.params_file() == str(Path(resnet.dir) / "model.pdiparams")
    np.testing.assert_array_equal(run_handles(ti.create_predictor(config), x)[0], ref[0])

    config = ti.Config()
    config.set_model(resnet.dir)          # Paddle's set_model(model_dir)
    assert config.model_dir() == resnet.dir

    program = Path(resnet.model_file).read_bytes()
    params = Path(resnet.params_file).read_bytes()
    config = ti.Config()
    config.set_model_buffer(program, len(program), params, len(params))
    assert config.model_from_memory()
    predictor = ti.create_predictor(config)
    np.testing.assert_array_equal(run_handles(predictor, x)[0], ref[0])
    # a second input shape compiles again from the parameters kept in memory
    np.testing.assert_array_equal(run_handles(predictor, image(batch=3))[0],
                                  run_handles(predictor_of(resnet), image(batch=3))[0])

    copy = ti.Config(config)
    assert copy.model_from_memory()
    with pytest.raises(ti.TillerError, match="SetModelBuffer"):
        bad = ti.Config()
        bad.set_model_buffer(b"{ not json", 10, b"", 0)
        ti.create_predictor(bad)


# ---------------------------------------------------------------------------
# Tensor and Predictor.


def test_tensor_and_predictor_calls(resnet):
    import paddle

    x = image()
    predictor = ti.Predictor(ti.Config(resnet.model_file, resnet.params_file))
    handle = predictor.get_input_handle("x")
    assert handle.type() == ti.DataType.FLOAT32
    assert handle.lod() == []
    handle.set_lod([])
    with pytest.raises(ti.TillerError, match="LoD"):
        handle.set_lod([[0, 1, 2]])
    with pytest.raises(TypeError, match=r"pass the shape as a list, e\.g\. \[5\]"):
        handle.reshape(5)
    handle.reshape(list(x.shape))
    handle.share_external_data(paddle.to_tensor(x))      # copied: Tiller owns its inputs
    with pytest.raises(TypeError, match="takes a paddle.Tensor"):
        handle.share_external_data(x)
    predictor.run()
    out = predictor.get_output_handle(predictor.get_output_names()[0])
    np.testing.assert_array_equal(out.copy_to_cpu(), run_handles(predictor_of(resnet), x)[0])
    assert out.type() == ti.DataType.FLOAT32
    assert predictor.clear_intermediate_tensor() is None
    assert predictor.try_shrink_memory() == 0
    np.testing.assert_array_equal(out.copy_to_cpu(), run_handles(predictor, x)[0])


def test_run_with_paddle_tensors_returns_paddle_tensors(resnet):
    """Paddle 3's run(list[paddle.Tensor]) -> list[paddle.Tensor]."""
    import paddle

    x = image()
    predictor = predictor_of(resnet)
    got = predictor.run([paddle.to_tensor(x)])
    assert isinstance(got[0], paddle.Tensor)
    np.testing.assert_array_equal(got[0].numpy(), predictor.run([x])[0])


@pytest.mark.parametrize("make, words", [
    (lambda x: x.tolist(), "is a list: expected a numpy.ndarray (or a paddle.Tensor); convert it "
                           "with numpy.asarray(x, dtype='float32')"),
    (lambda x: 1.0, "is a float: expected a numpy.ndarray"),
    (lambda x: None, "is a NoneType: expected a numpy.ndarray"),
    (lambda x: ["a", "b"], "is a list: expected a numpy.ndarray (or a paddle.Tensor): string "
                           "tensors (Paddle's list[str]) are not supported"),
], ids=["x.tolist()", "scalar", "None", "list of str"])
def test_run_with_a_non_array_input_names_it(resnet, make, words):
    """Paddle 3.3.1 raises TypeError for these too (its run takes paddle
    Tensors); Tiller's message says which input and what to pass."""
    predictor = predictor_of(resnet)
    x = image()
    with pytest.raises(TypeError, match=re.escape(f"run(): input 0, input 'x' {words}")):
        predictor.run([make(x)])
    with pytest.raises(TypeError, match=re.escape(f"copy_from_cpu(): input 'x' {words}")):
        predictor.get_input_handle("x").copy_from_cpu(make(x))
    with pytest.raises(TypeError, match="run\\(\\) takes a list of inputs"):
        predictor.run(x)
    with pytest.raises(ti.TillerError, match=r"run\(\) got 2 inputs, the model has 1 \(x\)"):
        predictor.run([x, x])


@pytest.mark.parametrize("which", ["bert (2, 0)", "resnet (0, 3, 64, 64)"])
def test_an_input_without_elements_is_refused_by_name_as_paddle_refuses_it(resnet, bert, which):
    import paddle.inference as pi

    if which.startswith("bert"):
        model, arrays = bert, [np.zeros((2, 0), np.int64)] * 2
        words = "input 'input_ids' has shape [2, 0]: it holds no elements"
    else:
        model, arrays = resnet, [np.zeros((0, 3, 64, 64), np.float32)]
        words = "input 'x' has shape [0, 3, 64, 64]: it holds no elements"
    # Paddle Inference 3.3.1 raises at run() (its message: 'std::exception').
    config = pi.Config(model.model_file, model.params_file)
    config.disable_glog_info()
    with pytest.raises(Exception):
        run_handles(pi.create_predictor(config), *arrays)
    predictor = predictor_of(model)
    with pytest.raises(ti.TillerError, match=re.escape(words)):
        run_handles(predictor, *arrays)
    with pytest.raises(ti.TillerError, match=re.escape(words)):
        predictor.run(arrays)
    # the predictor still runs a real input afterwards
    real = [export.make_inputs("bert-tiny", batch=2, seq_len=4)[n]
            for n in predictor.get_input_names()] if model is bert else [image()]
    assert run_handles(predictor, *real)[0].size > 0


def test_demo_source_is_paddles_shape():
    """The demo above uses exactly the calls the issue names."""
    for call in ("Config(", "enable_memory_optim", "enable_mkldnn",
                 "set_cpu_math_library_num_threads", "disable_glog_info", "create_predictor",
                 "get_input_names", "get_input_handle", "reshape", "copy_from_cpu", "run()",
                 "get_output_names", "get_output_handle", "copy_to_cpu"):
        assert call in DEMO, call
    assert textwrap.dedent(DEMO).count("import {module} as paddle_infer") == 1
