// The _tiller extension: Paddle-Inference-shaped Config / Predictor / Tensor
// over numpy arrays. python/tiller/inference.py re-exports it under the names
// paddle.inference uses.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "bindings.h"
#include "tiller/backends.h"
#include "tiller/custom_op.h"
#include "tiller/inspect.h"
#include "tiller/predictor.h"

namespace py = pybind11;
using tiller::inference::Config;
using tiller::inference::DataType;
using tiller::inference::PlaceType;
using tiller::inference::PrecisionType;
using tiller::inference::Predictor;
using tiller::inference::Tensor;

namespace tiller::python {

std::vector<Binder>& Binders() {
  static std::vector<Binder> binders;
  return binders;
}

bool RegisterBinder(Binder binder) {
  Binders().push_back(binder);
  return true;
}

DataType FromNumpy(const py::dtype& dt, const std::string& name) {
  DataType t;
  // numpy's bfloat16 does not exist: uint16 arrays are not taken for it.
  std::string descr = py::str(dt.attr("str"));
  if (dt.kind() != 'u' || dt.itemsize() != 2) {
    if (ParseNumpyDescr(descr, &t)) return t;
  }
  throw tiller::Error(tiller::ErrorKind::kInvalidArgument, "input '" + name + "': numpy dtype " +
                                                               py::repr(dt).cast<std::string>() +
                                                               " is not supported");
}

py::dtype ToNumpy(DataType t) {
  return py::dtype(std::string(NumpyDescr(t)));
}

HostTensor ToHostTensor(const py::array& a, const std::string& what) {
  py::array c = py::array::ensure(a, py::array::c_style);
  if (!c)
    throw tiller::Error(tiller::ErrorKind::kInvalidArgument, "'" + what + "' is not an array");
  HostTensor t;
  t.dtype = FromNumpy(c.dtype(), what);
  t.shape.assign(c.shape(), c.shape() + c.ndim());
  t.data.resize(static_cast<size_t>(c.nbytes()));
  if (!t.data.empty()) std::memcpy(t.data.data(), c.data(), t.data.size());
  return t;
}

py::array ToArray(const HostTensor& t) {
  py::array out(ToNumpy(t.dtype), t.shape);
  if (!t.data.empty()) std::memcpy(out.mutable_data(), t.data.data(), t.data.size());
  return out;
}

}  // namespace tiller::python

namespace {

using tiller::python::FromNumpy;
using tiller::python::ToNumpy;

std::string TypeName(const py::handle& obj) {
  return py::str(py::type::handle_of(obj).attr("__name__"));
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// A paddle.Tensor (dygraph), recognised without importing paddle.
bool IsPaddleTensor(const py::handle& obj) {
  const py::handle type = py::type::handle_of(obj);
  return py::hasattr(obj, "numpy") &&
         py::str(type.attr("__module__")).cast<std::string>().rfind("paddle", 0) == 0;
}

// What copy_from_cpu and run() take: a numpy array, or a paddle.Tensor
// (copied through its numpy()). Anything else is a TypeError naming the
// input and what to do, where pybind would print its overload list.
py::array InputArray(const py::handle& obj, const Tensor& t, const std::string& where) {
  if (py::isinstance<py::array>(obj)) return py::reinterpret_borrow<py::array>(obj);
  if (IsPaddleTensor(obj)) return obj.attr("numpy")().cast<py::array>();
  const std::string type = TypeName(obj);
  std::string hint;
  if (py::isinstance<py::list>(obj) && py::len(obj) > 0 &&
      py::isinstance<py::str>(py::reinterpret_borrow<py::list>(obj)[0])) {
    hint = ": string tensors (Paddle's list[str]) are not supported";
  } else if (!obj.is_none()) {
    hint = std::string("; convert it with numpy.asarray(x, dtype='") +
           tiller::inference::DataTypeName(t.type()) + "')";
  }
  throw py::type_error(where + " input '" + t.name() + "' is a " + type +
                       ": expected a numpy.ndarray (or a paddle.Tensor)" + hint);
}

void CopyFrom(Tensor& t, const py::array& arr) {
  py::array c = py::array::ensure(arr, py::array::c_style);
  std::vector<int64_t> shape(c.shape(), c.shape() + c.ndim());
  t.Reshape(shape);
  // Paddle hands bfloat16 tensors to numpy as uint16 bits (numpy has no
  // bfloat16): for an input the model declares bfloat16 they are taken as
  // such.
  const bool bf16_bits =
      c.dtype().kind() == 'u' && c.dtype().itemsize() == 2 && t.type() == DataType::BFLOAT16;
  DataType dt = bf16_bits ? DataType::BFLOAT16 : FromNumpy(c.dtype(), t.name());
  t.CopyFromCpuBytes(c.data(), dt, static_cast<size_t>(c.nbytes()));
}

py::array CopyTo(const Tensor& t) {
  py::array out(ToNumpy(t.type()), t.shape());
  t.CopyToCpuBytes(out.mutable_data(), static_cast<size_t>(out.nbytes()));
  return out;
}

// Paddle's per-op hooks see each Paddle op's tensors; Tiller's compiled graph
// has fused them away.
[[noreturn]] void RefuseHook(const std::string& name) {
  throw tiller::Error(tiller::ErrorKind::kUnimplemented,
                      "Predictor." + name +
                          ": Tiller runs a compiled graph whose ops are not Paddle's (fused, "
                          "reordered), so there is no per-op tensor to hand a hook; "
                          "enable_profiling() times the compiled ops");
}

// Predictor.run(inputs): numpy arrays (or paddle.Tensors) in input order;
// returns numpy arrays, or paddle.Tensors when the inputs were (Paddle 3's
// run(list[paddle.Tensor])).
py::object RunWithInputs(Predictor& p, const py::handle& inputs) {
  if (!py::isinstance<py::list>(inputs) && !py::isinstance<py::tuple>(inputs))
    throw py::type_error(
        "run() takes a list of inputs, one numpy.ndarray per input in get_input_names() "
        "order; got a " +
        TypeName(inputs));
  const auto list = py::reinterpret_borrow<py::sequence>(inputs);
  const auto names = p.GetInputNames();
  if (list.size() != names.size())
    throw tiller::Error(tiller::ErrorKind::kInvalidArgument,
                        "run() got " + std::to_string(list.size()) + " inputs, the model has " +
                            std::to_string(names.size()) + " (" + Joined(names) + ")");
  bool paddle_tensors = false;
  for (size_t i = 0; i < names.size(); ++i) {
    auto handle = p.GetInputHandle(names[i]);
    paddle_tensors |= IsPaddleTensor(list[i]);
    CopyFrom(*handle, InputArray(list[i], *handle, "run(): input " + std::to_string(i) + ","));
  }
  {
    py::gil_scoped_release release;
    p.Run();
  }
  py::list outs;
  py::object to_tensor =
      paddle_tensors ? py::module_::import("paddle").attr("to_tensor") : py::object();
  for (const auto& n : p.GetOutputNames()) {
    py::array out = CopyTo(*p.GetOutputHandle(n));
    outs.append(paddle_tensors ? to_tensor(out) : py::object(std::move(out)));
  }
  return outs;
}

}  // namespace

PYBIND11_MODULE(_tiller, m) {
  m.doc() = "Tiller: compiled inference and training for PaddlePaddle programs";
  static py::exception<tiller::Error> error_type(m, "TillerError", PyExc_RuntimeError);
  // Messages may quote bytes from a corrupt file: decode with replacement so
  // the message always reaches Python.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const tiller::Error& e) {
      std::string what = e.what();
      PyObject* msg =
          PyUnicode_DecodeUTF8(what.data(), static_cast<Py_ssize_t>(what.size()), "replace");
      PyErr_SetObject(error_type.ptr(), msg);
      Py_XDECREF(msg);
    }
  });

  // Paddle Inference's enums, with its member names (docs/INFERENCE_API.md).
  py::enum_<DataType>(m, "DataType", "Element types, with Paddle Inference's names")
      .value("FLOAT32", DataType::FLOAT32)
      .value("FLOAT16", DataType::FLOAT16)
      .value("BFLOAT16", DataType::BFLOAT16)
      .value("FLOAT64", DataType::FLOAT64)
      .value("INT8", DataType::INT8)
      .value("UINT8", DataType::UINT8)
      .value("INT16", DataType::INT16)
      .value("INT32", DataType::INT32)
      .value("INT64", DataType::INT64)
      .value("BOOL", DataType::BOOL);
  py::enum_<PlaceType>(m, "PlaceType", "Paddle Inference's places; Tiller's tensors are on CPU")
      .value("UNK", PlaceType::kUNK)
      .value("CPU", PlaceType::kCPU)
      .value("GPU", PlaceType::kGPU)
      .value("XPU", PlaceType::kXPU)
      .value("CUSTOM", PlaceType::kCUSTOM);
  py::class_<Config> config(m, "Config");
  // Paddle's Config.Precision (paddle.inference.PrecisionType), its members
  // also Config attributes (Config.Float32, ...).
  py::enum_<PrecisionType>(config, "Precision")
      .value("Float32", PrecisionType::kFloat32)
      .value("Int8", PrecisionType::kInt8)
      .value("Half", PrecisionType::kHalf)
      .value("Bfloat16", PrecisionType::kBf16)
      .export_values();
  config.def(py::init<>())
      .def(py::init<const Config&>(), py::arg("config"))
      .def(py::init<const std::string&>(), py::arg("model_dir"))
      .def(py::init<const std::string&, const std::string&>(), py::arg("prog_file"),
           py::arg("params_file"),
           "A program file and its parameter file, or (Paddle 3) a directory and a model prefix")
      .def("set_model",
           py::overload_cast<const std::string&, const std::string&>(&Config::SetModel),
           py::arg("prog_file"), py::arg("params_file"))
      .def("set_model", py::overload_cast<const std::string&>(&Config::SetModel),
           py::arg("model_dir"))
      .def("set_model_dir", &Config::SetModelDir, py::arg("model_dir"))
      .def("set_prog_file", &Config::SetProgFile, py::arg("x"))
      .def("set_params_file", &Config::SetParamsFile, py::arg("x"))
      .def(
          "set_model_buffer",
          [](Config& c, const py::bytes& prog, size_t prog_size, const py::bytes& params,
             size_t params_size) {
            const std::string_view p = prog, q = params;
            if (prog_size > p.size() || params_size > q.size())
              throw tiller::Error(tiller::ErrorKind::kInvalidArgument,
                                  "set_model_buffer: sizes " + std::to_string(prog_size) + " and " +
                                      std::to_string(params_size) + " exceed the buffers' " +
                                      std::to_string(p.size()) + " and " +
                                      std::to_string(q.size()) + " bytes");
            c.SetModelBuffer(p.data(), prog_size, q.data(), params_size);
          },
          py::arg("prog_buffer"), py::arg("prog_size"), py::arg("params_buffer"),
          py::arg("params_size"),
          "The model from memory: the bytes of the program file and of its parameter file")
      .def("model_from_memory", &Config::model_from_memory)
      .def("set_cpu_math_library_num_threads", &Config::SetCpuMathLibraryNumThreads,
           py::arg("cpu_math_library_num_threads"))
      .def("cpu_math_library_num_threads", &Config::cpu_math_library_num_threads)
      .def("enable_warmup", &Config::EnableWarmup,
           py::arg("shapes") = std::map<std::string, std::vector<int64_t>>{}, py::arg("runs") = 1,
           "Tiller's own, for serving: at creation compile for these input shapes ({name: "
           "[dims]}; an input not named takes its declared dims, a dynamic first dim as 1) and "
           "run `runs` times on zeros, so the first request pays no compile. Inputs set later "
           "are untouched.")
      .def("warmup_runs", &Config::warmup_runs)
      .def("warmup_shapes", &Config::warmup_shapes)
      .def("set_cpu_keep_warm_ms", &Config::SetCpuKeepWarmMs, py::arg("ms"),
           "Tiller's own, for serving: how long the CPU threads spin (yielding) after a run "
           "before they sleep, so a request after an idle gap does not wait for them to wake. "
           "-1 (default): 100 ms with one device, else 0; 0: sleep at once; at most 10000. "
           "TILLER_KEEP_WARM_MS overrides it.")
      .def("cpu_keep_warm_ms", &Config::cpu_keep_warm_ms)
      .def("load_custom_op_library", &Config::LoadCustomOpLibrary, py::arg("path"))
      .def("disable_gpu", &Config::DisableGpu)
      .def("switch_ir_optim", &Config::SwitchIrOptim, py::arg("x") = true)
      .def("switch_winograd", &Config::SwitchWinograd, py::arg("x") = true)
      .def("winograd", &Config::winograd)
      .def("set_precision", py::overload_cast<const std::string&>(&Config::SetPrecision),
           py::arg("precision"),
           "'float32', 'bfloat16', 'float16' or 'half': matmul / linear / conv2d multiply in "
           "that type with float32 accumulation")
      .def("set_precision", py::overload_cast<PrecisionType>(&Config::SetPrecision),
           py::arg("precision"),
           "Paddle's PrecisionType: Float32, Half (float16) or Bfloat16; Int8 raises")
      .def("precision", &Config::precision)
      .def("enable_mkldnn_bfloat16", &Config::EnableMkldnnBfloat16)
      .def(
          "set_compile_progress_logger",
          [](Config& c, const py::object& logger, int total) {
            if (logger.is_none()) return c.SetCompileProgressLogger({}, total);
            if (!PyCallable_Check(logger.ptr()))
              throw tiller::Error(tiller::ErrorKind::kInvalidArgument,
                                  "set_compile_progress_logger takes a callable (progress, "
                                  "total), got " +
                                      py::repr(logger).cast<std::string>());
            c.SetCompileProgressLogger(tiller::python::ProgressLogger(logger), total);
          },
          py::arg("logger"), py::arg("total") = 100,
          "Tiller's own (Paddle's IPU compilation_progress_logger): logger(progress, total) is "
          "called while the predictor compiles, from 0 to total; None: none.")
      .def("enable_trace", &Config::EnableTrace, py::arg("path"),
           "Tiller's own: after every run, write a Chrome / Perfetto trace of the runs so far "
           "to path (a lane per device, lanes of copies and collectives).")
      .def("set_random_seed", &Config::SetRandomSeed, py::arg("seed"))
      .def("set_devices", &Config::SetDevices, py::arg("backends"),
           "Backends to compile for, in preference order (default ['cpu'])")
      .def("devices", &Config::devices)
      .def("set_placement", &Config::SetPlacement, py::arg("policy"),
           "'by_shard' (default) or 'first_supported'")
      .def("placement", &Config::placement)
      .def("random_seed", &Config::random_seed)
      .def("ir_optim", &Config::ir_optim)
      .def("prog_file", &Config::prog_file)
      .def("params_file", &Config::params_file)
      .def("model_dir", &Config::model_dir)
      .def("enable_ipu", &Config::EnableIpu, py::arg("ipu_device_num") = 1,
           py::arg("ipu_micro_batch_size") = 1, py::arg("ipu_enable_pipelining") = false,
           py::arg("ipu_batches_per_step") = 1,
           "Paddle Inference's IPU settings on CPU devices: sharded, pipelined, replicated runs")
      .def("set_ipu_custom_info", &Config::SetIpuCustomInfo,
           py::arg("ipu_custom_ops_info") = std::vector<std::vector<std::string>>{},
           py::arg("ipu_custom_patterns") = std::map<std::string, bool>{})
      .def("load_ipu_config", &Config::LoadIpuConfig, py::arg("config_path"))
      .def("set_ipu_config", &Config::SetIpuConfig, py::arg("ipu_enable_fp16") = false,
           py::arg("ipu_replica_num") = 1, py::arg("ipu_available_memory_proportion") = 1.0f,
           py::arg("ipu_enable_half_partial") = false,
           py::arg("ipu_enable_model_runtime_executor") = false);

  py::class_<Tensor>(m, "Tensor")
      .def("reshape", &Tensor::Reshape, py::arg("shape"))
      .def(
          "reshape",
          [](Tensor& t, int64_t size) {
            const std::string n = std::to_string(size);
            throw py::type_error("reshape(" + n + ") on '" + t.name() +
                                 "': a bare size is Paddle's length of a string tensor, which "
                                 "Tiller does not have; pass the shape as a list, e.g. [" +
                                 n + "]");
          },
          py::arg("size"))
      .def(
          "copy_from_cpu",
          [](Tensor& t, const py::object& data) {
            CopyFrom(t, InputArray(data, t, "copy_from_cpu():"));
          },
          py::arg("data"), "A numpy array (or a paddle.Tensor) of the input's dtype")
      .def(
          "share_external_data",
          [](Tensor& t, const py::object& data) {
            if (!IsPaddleTensor(data))
              throw py::type_error("share_external_data(): input '" + t.name() +
                                   "' takes a paddle.Tensor, got a " + TypeName(data) +
                                   "; use copy_from_cpu for numpy arrays");
            CopyFrom(t, InputArray(data, t, "share_external_data():"));
          },
          py::arg("data"),
          "A paddle.Tensor's values, copied (Tiller's inputs live in its own arenas)")
      .def(
          "share_external_data_by_ptr_name",
          [](Tensor& t, const py::args&, const py::kwargs&) {
            throw tiller::Error(tiller::ErrorKind::kUnimplemented,
                                "Tensor.share_external_data_by_ptr_name ('" + t.name() +
                                    "'): raw device pointers are not in Tiller's CUDA "
                                    "backend; use copy_from_cpu");
          },
          "Raises: raw device pointers (not in Tiller's CUDA backend)")
      .def("copy_to_cpu", &CopyTo)
      .def("shape", &Tensor::shape)
      .def("name", &Tensor::name)
      .def("type", &Tensor::type, "The element type (paddle.inference.DataType)")
      .def("lod", &Tensor::lod, "Always empty: Tiller's tensors are dense")
      .def("set_lod", &Tensor::SetLoD, py::arg("lod"), "Only an empty LoD is accepted");

  py::class_<Predictor, std::shared_ptr<Predictor>>(m, "Predictor")
      .def(py::init(&tiller::inference::CreatePredictor), py::arg("config"))
      .def("get_input_names", &Predictor::GetInputNames)
      .def("get_output_names", &Predictor::GetOutputNames)
      .def("get_input_handle", &Predictor::GetInputHandle, py::arg("name"))
      .def("get_output_handle", &Predictor::GetOutputHandle, py::arg("name"))
      .def(
          "run",
          [](Predictor& p, const py::object& inputs) -> py::object {
            if (!inputs.is_none()) return RunWithInputs(p, inputs);
            py::gil_scoped_release release;
            p.Run();
            return py::none();
          },
          py::arg("inputs") = py::none(),
          "run(): on the inputs set through the handles. run(inputs): one numpy array per "
          "input, in get_input_names() order; returns the outputs as numpy arrays (as "
          "paddle.Tensors when the inputs were paddle.Tensors).")
      .def("clear_intermediate_tensor", &Predictor::ClearIntermediateTensor,
           "No effect: intermediate tensors live in the compiled arenas, reused by every run")
      .def("try_shrink_memory", &Predictor::TryShrinkMemory,
           "No effect; returns 0 bytes released (the arenas are planned, not pooled)")
      .def(
          "register_input_hook",
          [](Predictor&, const py::object&) { RefuseHook("register_input_hook"); },
          py::arg("hookfunc"), "Raises: Tiller runs a compiled graph, not Paddle's ops")
      .def(
          "register_output_hook",
          [](Predictor&, const py::object&) { RefuseHook("register_output_hook"); },
          py::arg("hookfunc"), "Raises: Tiller runs a compiled graph, not Paddle's ops")
      .def(
          "clone",
          [](const Predictor& p) {
            std::unique_ptr<Predictor> c;
            {
              py::gil_scoped_release release;
              c = p.Clone();
            }
            return std::shared_ptr<Predictor>(std::move(c));
          },
          "A predictor of the same model for another thread: shares the program and the "
          "parameters, has its own devices, inputs and compiled steps (Paddle's clone()).")
      .def("get_input_shape", &Predictor::GetInputShape, py::arg("name"))
      .def(
          "get_input_type",
          [](const Predictor& p, const std::string& name) {
            return std::string(tiller::inference::DataTypeName(p.GetInputType(name)));
          },
          py::arg("name"), "numpy's name of the input's declared type ('float32', 'int64', ...)")
      .def("op_histogram", &Predictor::OpHistogram)
      .def("enable_profiling", &Predictor::EnableProfiling, py::arg("on") = true,
           "Times every op of later runs (what profile() returns).")
      .def("profile", &Predictor::GetProfile, py::arg("by_shape") = false,
           "[(op type, total ms, calls)] of the runs made while profiling, largest first; "
           "by_shape: one entry per op type and input shapes.")
      .def("summary", [](const Predictor& p) {
        auto s = p.GetSummary();
        py::dict d;
        d["num_kernels"] = s.num_kernels;
        d["arena_bytes"] = s.arena_bytes;
        d["naive_bytes"] = s.naive_bytes;
        d["weight_bytes"] = s.weight_bytes;
        d["graph"] = s.graph;
        d["compile_report"] = s.compile_report;
        d["compile_pipeline"] = s.compile_pipeline;
        return d;
      });

  m.def("create_predictor", &tiller::inference::CreatePredictor, py::arg("config"));
  py::class_<tiller::inference::services::PredictorPool>(
      m, "PredictorPool",
      "`size` predictors of one config (the first and its clones), one per serving thread "
      "(Paddle's paddle.inference.PredictorPool).")
      .def(py::init<const Config&, size_t>(), py::arg("config"), py::arg("size") = 1)
      .def("retrive", &tiller::inference::services::PredictorPool::Retrive,
           py::return_value_policy::reference_internal, py::arg("idx"),
           "The predictor of index idx (Paddle 2's spelling).")
      .def("retrieve", &tiller::inference::services::PredictorPool::Retrieve,
           py::return_value_policy::reference_internal, py::arg("idx"),
           "The predictor of index idx (Paddle 3's spelling).")
      .def("__len__", &tiller::inference::services::PredictorPool::size);
  m.def("load_custom_op_library", &tiller::LoadCustomOpLibrary, py::arg("path"),
        "Load a shared library of custom ops (see include/tiller/custom_op.h).");
  m.def("supported_paddle_ops", &tiller::SupportedPaddleOps);
  m.def("load_backend_library", &tiller::LoadBackendLibrary, py::arg("path"),
        "Load a shared library that registers backends (see include/tiller/backends.h).");
  m.def("backend_names", &tiller::BackendNames);
  m.def(
      "cpu_isa_info",
      [] {
        const tiller::CpuIsaInfo i = tiller::GetCpuIsaInfo();
        py::dict d;
        d["cpu"] = i.cpu;
        d["detected"] = i.detected;
        d["features"] = i.features;
        d["compiled"] = i.compiled;
        d["cap"] = i.cap;
        d["chosen"] = i.chosen;
        d["why"] = i.why;
        d["error"] = i.error;
        py::dict libraries;
        for (const auto& [name, isa] : i.libraries) libraries[py::str(name)] = isa;
        d["libraries"] = libraries;
        return d;
      },
      "This CPU's and this build's instruction-set levels and the one chosen under "
      "TILLER_MAX_ISA (tiller/backends.h, GetCpuIsaInfo).");
  m.def(
      "describe_cpu_isa", [] { return tiller::DescribeCpuIsa(tiller::GetCpuIsaInfo()); },
      "cpu_isa_info() as lines of text, its error left out (what `tiller info` prints).");
  for (tiller::python::Binder bind : tiller::python::Binders()) bind(m);
}
