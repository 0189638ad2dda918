// paddle.inference's Config settings beyond the model and Tiller's own
// (module.cc), with Paddle's Python names: honoured, accepted without effect
// or refused (include/tiller/predictor.h says why for each C++ setting;
// docs/INFERENCE_API.md lists every name), and paddle.inference's module
// functions.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <tuple>
#include <vector>

#include "bindings.h"
#include "tiller/predictor.h"

namespace py = pybind11;
using tiller::inference::Config;
using tiller::inference::DataType;
using tiller::inference::PlaceType;
using tiller::inference::PrecisionType;

namespace {

// Paddle takes op lists as Python sets; lists and tuples are taken too.
std::vector<std::string> Strings(const py::iterable& items) {
  std::vector<std::string> out;
  for (const py::handle& item : items) out.push_back(py::cast<std::string>(item));
  return out;
}

// How a PrecisionType default reads in signatures (and the type stub).
constexpr const char* kFloat32Repr = "Config.Precision.Float32";

constexpr const char* kTensorRt =
    "TensorRT needs a GPU and NVIDIA's engine, which Tiller does not use; its CUDA backend runs "
    "models on GPUs (Config.enable_use_gpu)";
constexpr const char* kGpu =
    "not in Tiller's CUDA backend; Config.enable_use_gpu (or set_devices(['cuda:0', 'cpu'])) "
    "runs models on a GPU";
constexpr const char* kXpu = "no XPU backend; Tiller runs on CPU devices (Config.set_devices)";

// Paddle Config methods that set up (or read a setting of) a device, engine
// or service Tiller has none of: each raises TillerError naming itself and
// why. The "is it on" getters of the same things answer False instead
// (BindAnswers), so code that only asks keeps running.
struct Refusal {
  const char* name;
  const char* why;
};
constexpr Refusal kRefused[] = {
    {"enable_tensorrt_dla", kTensorRt},
    {"enable_tensorrt_explicit_quantization", kTensorRt},
    {"enable_tensorrt_inspector", kTensorRt},
    {"enable_tensorrt_memory_optim", kTensorRt},
    {"enable_tensorrt_varseqlen", kTensorRt},
    {"enable_tuned_tensorrt_dynamic_shape", kTensorRt},
    {"exp_disable_tensorrt_dynamic_shape_ops", kTensorRt},
    {"exp_disable_tensorrt_ops", kTensorRt},
    {"exp_disable_tensorrt_subgraph", kTensorRt},
    {"exp_specify_tensorrt_subgraph_precision", kTensorRt},
    {"mark_trt_engine_outputs", kTensorRt},
    {"set_tensorrt_optimization_level", kTensorRt},
    {"set_trt_dynamic_shape_info", kTensorRt},
    {"tensorrt_optimization_level", kTensorRt},
    {"tensorrt_precision_mode", kTensorRt},
    {"collect_shape_range_info",
     "shape range files tune TensorRT's dynamic shapes, which Tiller does not use: it "
     "compiles once per set of input shapes"},
    {"exp_enable_use_cutlass", kGpu},
    {"exp_sparse_conv_using_buffer", kGpu},
    {"set_xpu_config", kXpu},
    {"set_xpu_device_id", kXpu},
    {"xpu_config", kXpu},
    {"enable_ort_optimization",
     "Tiller runs the Paddle program with its own compiler and kernels, not ONNX Runtime"},
    {"enable_lite_engine", "Paddle Lite subgraphs: Tiller compiles the whole program itself"},
    {"enable_opencl", "no OpenCL backend; Tiller runs on CPU devices (Config.set_devices)"},
    {"enable_dlnne", "no DLNNE backend; Tiller runs on CPU devices (Config.set_devices)"},
    {"nnadapter", "no NNAdapter devices; Tiller runs on CPU devices (Config.set_devices)"},
    {"dist_config",
     "Paddle's distributed inference is not implemented; tiller.distributed runs replicas and "
     "pipeline stages across the processes of an MPI job"},
    {"set_dist_config",
     "Paddle's distributed inference is not implemented; tiller.distributed runs replicas and "
     "pipeline stages across the processes of an MPI job"},
    {"enable_quantizer",
     "Paddle's oneDNN quantizer is not implemented; `tiller quantize` quantizes a float32 model "
     "from calibration inputs, and a quantized model runs in int8 as it is"},
    {"quantizer_config",
     "Paddle's oneDNN quantizer is not implemented; `tiller quantize` quantizes a float32 model "
     "from calibration inputs, and a quantized model runs in int8 as it is"},
    {"to_native_config", "NativeConfig (Paddle's legacy predictor) is not part of Tiller"},
    {"pass_builder",
     "Paddle's pass builder edits Paddle's passes; Tiller runs its own (`tiller info --passes` "
     "lists them) and switch_ir_optim(False) turns them off"},
};

void BindRefusals(py::class_<Config>& config) {
  for (const Refusal& r : kRefused) {
    const std::string message = std::string("Config.") + r.name + ": " + r.why;
    config.def(
        r.name,
        [message](Config&, const py::args&, const py::kwargs&) {
          throw tiller::Error(tiller::ErrorKind::kUnimplemented, message);
        },
        r.why);
  }
}

// Getters of things Tiller does not have: none is on, and no path is set.
void BindAnswers(py::class_<Config>& config) {
  for (const char* name :
       {"tensorrt_dla_enabled", "tensorrt_dynamic_shape_enabled",
        "tensorrt_explicit_quantization_enabled", "tensorrt_inspector_enabled",
        "tensorrt_varseqlen_enabled", "trt_allow_build_at_runtime", "tuned_tensorrt_dynamic_shape",
        "shape_range_info_collected", "lite_engine_enabled", "use_opencl"})
    config.def(
        name, [](const Config&) { return false; }, "Always False: Tiller has no such engine");
  config.def(
      "shape_range_info_path", [](const Config&) { return std::string(); },
      "Always empty: Tiller collects no shape ranges");
}

void BindCpuSettings(py::class_<Config>& config) {
  config
      .def("enable_memory_optim", &Config::EnableMemoryOptim, py::arg("x") = true,
           "No effect: Tiller always plans memory (a liveness-based plan per input shapes)")
      .def("enable_mkldnn", &Config::EnableMKLDNN, "No effect: Tiller's CPU kernels are oneDNN's")
      .def("enable_onednn", &Config::EnableMKLDNN, "No effect: Tiller's CPU kernels are oneDNN's")
      .def("disable_mkldnn", &Config::DisableMKLDNN,
           "No effect: Tiller has no other CPU kernels to switch to (mkldnn_enabled() stays True)")
      .def("disable_onednn", &Config::DisableMKLDNN,
           "No effect: Tiller has no other CPU kernels to switch to (onednn_enabled() stays True)")
      .def("mkldnn_enabled", &Config::mkldnn_enabled)
      .def("onednn_enabled", &Config::mkldnn_enabled)
      .def("set_mkldnn_cache_capacity", &Config::SetMkldnnCacheCapacity, py::arg("capacity") = 0,
           "No effect: Tiller keeps one compiled step per set of input shapes")
      .def("set_onednn_cache_capacity", &Config::SetMkldnnCacheCapacity, py::arg("capacity") = 0,
           "No effect: Tiller keeps one compiled step per set of input shapes")
      .def(
          "set_mkldnn_op", [](Config& c, const py::iterable& ops) { c.SetMKLDNNOp(Strings(ops)); },
          py::arg("op_types"), "No effect: every op runs Tiller's (oneDNN) kernels")
      .def(
          "set_onednn_op", [](Config& c, const py::iterable& ops) { c.SetMKLDNNOp(Strings(ops)); },
          py::arg("op_types"), "No effect: every op runs Tiller's (oneDNN) kernels")
      .def("disable_mkldnn_fc_passes", &Config::DisableMkldnnFcPasses,
           "No effect: Tiller's linear fusion changes results by float32 rounding at most")
      .def("disable_onednn_fc_passes", &Config::DisableMkldnnFcPasses,
           "No effect: Tiller's linear fusion changes results by float32 rounding at most")
      .def(
          "enable_mkldnn_int8",
          [](Config& c, const py::iterable& ops) { c.EnableMkldnnInt8(Strings(ops)); },
          py::arg("mkldnn_int8_enabled_op_types") = py::set(),
          "No effect without op types: a quantized model runs its int8 ops in int8 as it is")
      .def(
          "enable_onednn_int8",
          [](Config& c, const py::iterable& ops) { c.EnableMkldnnInt8(Strings(ops)); },
          py::arg("onednn_int8_enabled_op_types") = py::set(),
          "No effect without op types: a quantized model runs its int8 ops in int8 as it is")
      .def("mkldnn_int8_enabled", &Config::mkldnn_int8_enabled)
      .def("onednn_int8_enabled", &Config::mkldnn_int8_enabled)
      .def("enable_onednn_bfloat16", &Config::EnableMkldnnBfloat16)
      .def(
          "set_bfloat16_op",
          [](Config& c, const py::iterable& ops) { c.SetBfloat16Op(Strings(ops)); },
          py::arg("op_types"), "Only an empty set: bfloat16 covers matmul, linear and conv2d")
      .def("disable_glog_info", &Config::DisableGlogInfo, "Recorded: Tiller writes no info logs")
      .def("glog_info_disabled", &Config::glog_info_disabled)
      .def("enable_profile", &Config::EnableProfile,
           "Times every op; the predictor prints the per-op table to stderr at its end")
      .def(
          "switch_ir_debug",
          [](Config& c, int x, const std::vector<std::string>& passes) {
            c.SwitchIrDebug(x, passes);
          },
          py::arg("x") = true, py::arg("passes") = std::vector<std::string>{},
          "Recorded, no graph dumps: predictor.summary()['compile_report'] says what the "
          "passes did")
      .def("enable_new_ir", &Config::EnableNewIR, py::arg("x") = true,
           "Recorded, no effect: Tiller reads PIR and legacy programs alike")
      .def("new_ir_enabled", &Config::new_ir_enabled)
      .def("enable_new_executor", &Config::EnableNewExecutor, py::arg("x") = true,
           "Recorded, no effect: Tiller has one executor")
      .def("switch_specify_input_names", &Config::SwitchSpecifyInputNames, py::arg("x") = true,
           "Recorded, no effect: inputs are always set by name")
      .def("specify_input_name", &Config::specify_input_name)
      .def("switch_use_feed_fetch_ops", &Config::SwitchUseFeedFetchOps, py::arg("x") = true,
           "No effect, as in Paddle")
      .def("use_feed_fetch_ops_enabled", &Config::use_feed_fetch_ops_enabled)
      .def("use_optimized_model", &Config::UseOptimizedModel, py::arg("x") = true,
           "No effect: Tiller keeps no optimized model on disk")
      .def("enable_save_optim_model", &Config::EnableSaveOptimModel,
           py::arg("save_optimized_model") = false, "Only False: Tiller writes no optimized model")
      .def("set_optim_cache_dir", &Config::SetOptimCacheDir, py::arg("opt_cache_dir"),
           "Recorded, no effect: nothing is cached on disk")
      .def("set_optimization_level", &Config::SetOptimizationLevel, py::arg("opt_level") = 2,
           "0: basic passes only (switch_ir_optim(False)); 1-4: Tiller's passes")
      .def("delete_pass", &Config::DeletePass, py::arg("pass_name"),
           "Raises: Paddle's pass names are not Tiller's passes")
      .def(
          "enable_custom_passes",
          [](Config& c, const std::vector<std::string>& passes, bool only) {
            c.EnableCustomPasses(passes, only);
          },
          py::arg("passes") = std::vector<std::string>{}, py::arg("custom_pass_only") = false,
          "Only an empty list: Paddle's passes do not run on Tiller's IR")
      .def("enable_low_precision_io", &Config::EnableLowPrecisionIO, py::arg("x") = true,
           "Only False: inputs and outputs keep the model's types")
      .def(
          "exp_disable_mixed_precision_ops",
          [](Config& c, const py::iterable& ops) { c.Exp_DisableMixedPrecisionOps(Strings(ops)); },
          py::arg("black_list"), "Only an empty set: mixed precision covers matmul, linear, conv2d")
      .def(
          "exp_enable_mixed_precision_ops",
          [](Config& c, const py::iterable& ops) { c.Exp_EnableMixedPrecisionOps(Strings(ops)); },
          py::arg("white_list"), "Only an empty set: mixed precision covers matmul, linear, conv2d")
      .def("summary", &Config::Summary, "A table of the settings, as Paddle's");
}

void BindDeviceSettings(py::class_<Config>& config) {
  config
      .def("enable_use_gpu", &Config::EnableUseGpu, py::arg("memory_pool_init_size_mb"),
           py::arg("device_id") = 0,
           py::arg_v("precision_mode", PrecisionType::kFloat32, kFloat32Repr),
           "The GPU device_id first, the CPU for what the CUDA backend lacks (first supported); "
           "precision_mode as set_precision takes it")
      .def("use_gpu", &Config::use_gpu)
      .def("gpu_device_id", &Config::gpu_device_id)
      .def("memory_pool_init_size_mb", &Config::memory_pool_init_size_mb)
      .def("fraction_of_gpu_memory_for_pool", &Config::fraction_of_gpu_memory_for_pool)
      .def("enable_xpu", &Config::EnableXpu, py::arg("l3_size") = 0xfffc00,
           py::arg("l3_locked") = false, py::arg("conv_autotune") = false,
           py::arg("conv_autotune_file") = "", py::arg("transformer_encoder_precision") = "int16",
           py::arg("transformer_encoder_adaptive_seqlen") = false,
           py::arg("enable_multi_stream") = false, "Raises: no XPU backend")
      .def("use_xpu", &Config::use_xpu)
      .def("xpu_device_id", &Config::xpu_device_id)
      .def("enable_tensorrt_engine", &Config::EnableTensorRtEngine,
           py::arg("workspace_size") = int64_t{1} << 30, py::arg("max_batch_size") = 1,
           py::arg("min_subgraph_size") = 3,
           py::arg_v("precision_mode", PrecisionType::kFloat32, kFloat32Repr),
           py::arg("use_static") = false, py::arg("use_calib_mode") = true,
           py::arg("use_cuda_graph") = false, "Raises: TensorRT needs a GPU")
      .def("tensorrt_engine_enabled", &Config::tensorrt_engine_enabled)
      .def("enable_onnxruntime", &Config::EnableONNXRuntime, "Raises: Tiller is not ONNX Runtime")
      .def("disable_onnxruntime", &Config::DisableONNXRuntime, "No effect: it is never on")
      .def("onnxruntime_enabled", &Config::use_onnxruntime)
      .def("enable_openvino_engine", &Config::EnableOpenVINOEngine,
           py::arg_v("inference_precision", PrecisionType::kFloat32, kFloat32Repr),
           "Raises: Tiller is not OpenVINO")
      .def("openvino_engine_enabled", &Config::openvino_engine_enabled)
      .def("enable_custom_device", &Config::EnableCustomDevice, py::arg("device_type"),
           py::arg("device_id") = 0, py::arg_v("precision", PrecisionType::kFloat32, kFloat32Repr),
           "Raises: Tiller's devices are backends chosen with set_devices")
      .def("enable_cinn", &Config::EnableCINN, "Raises: Tiller compiles the program itself");
}

void BindInferenceSettings(py::module_& m) {
  auto config = py::reinterpret_borrow<py::class_<Config>>(m.attr("Config"));
  BindCpuSettings(config);
  BindDeviceSettings(config);
  BindAnswers(config);
  BindRefusals(config);

  m.def("get_version", &tiller::inference::GetVersion,
        "Tiller's version, in the shape of Paddle's ('version: X.Y.Z' first)");
  m.def(
      "get_num_bytes_of_data_type", [](DataType t) { return tiller::inference::SizeOf(t); },
      py::arg("dtype"));
  m.def(
      "get_trt_compile_version", [] { return std::make_tuple(0, 0, 0); },
      "(0, 0, 0): no TensorRT, as Paddle's CPU builds answer");
  m.def(
      "get_trt_runtime_version", [] { return std::make_tuple(0, 0, 0); },
      "(0, 0, 0): no TensorRT, as Paddle's CPU builds answer");
  m.def(
      "convert_to_mixed_precision",
      [](const std::string& model_file, const std::string& params_file,
         const std::string& mixed_model_file, const std::string& mixed_params_file,
         PrecisionType mixed_precision, PlaceType backend, bool keep_io_types,
         const py::object& /*black_list*/, const py::kwargs& /*white_list*/) {
        tiller::inference::ConvertToMixedPrecision(model_file, params_file, mixed_model_file,
                                                   mixed_params_file, mixed_precision, backend,
                                                   keep_io_types);
      },
      py::arg("model_file"), py::arg("params_file"), py::arg("mixed_model_file"),
      py::arg("mixed_params_file"), py::arg("mixed_precision"), py::arg("backend"),
      py::arg("keep_io_types") = true, py::arg("black_list") = py::set(),
      "Raises: Tiller writes no converted models; set the precision on the Config instead "
      "(enable_mkldnn_bfloat16 / set_precision)");
}

TILLER_PY_BINDINGS(BindInferenceSettings);

}  // namespace
