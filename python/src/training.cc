// Bindings of tiller::training::TrainingSession over numpy arrays and of
// tiller::training::IpuOptions; the IpuStrategy / IpuCompiledProgram front
// door over them is python/tiller/ipu.py.
#include "tiller/training.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "bindings.h"
#include "tiller/ipu_options.h"

namespace py = pybind11;
using tiller::training::IpuOptions;
using tiller::training::OptionList;
using tiller::training::OptionMap;
using tiller::training::OptionSupport;
using tiller::training::OptionValue;
using tiller::training::SessionOptions;
using tiller::training::StateTensorInfo;
using tiller::training::TensorInfo;
using tiller::training::TrainingSession;
namespace ckpt = tiller::checkpoint;

namespace tiller::python {

std::function<void(int, int)> ProgressLogger(const py::object& logger) {
  std::shared_ptr<py::object> held(new py::object(logger), [](py::object* o) {
    if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing to release
    py::gil_scoped_acquire gil;
    delete o;
  });
  return [held](int done, int total) {
    py::gil_scoped_acquire gil;
    try {
      (*held)(done, total);
    } catch (py::error_already_set& e) {
      const std::string type = py::str(e.type().attr("__name__"));
      const std::string what = py::str(e.value());
      throw tiller::Error(tiller::ErrorKind::kInvalidArgument,
                          "compilation_progress_logger raised " + type + ": " + what);
    }
  };
}

}  // namespace tiller::python

namespace {

py::array Empty(const TensorInfo& info) {
  return py::array(tiller::python::ToNumpy(info.dtype), info.shape);
}

// IpuOptions as tiller.IpuStrategy holds them, and the dicts given to the
// groups of dotted options that are not options themselves
// (automatic_loss_scaling_settings, ...), which get() returns as given.
struct PyIpuOptions {
  IpuOptions options;
  std::map<std::string, py::object> objects;
};

std::optional<OptionValue> ToOptionValue(const py::handle& v);

// An item of a container option as Paddle's set_options converts it: a str,
// or an int (bool included) in decimal.
std::optional<std::string> ToOptionWord(const py::handle& v) {
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  std::optional<OptionValue> scalar = ToOptionValue(v);
  if (scalar && std::holds_alternative<bool>(*scalar)) return std::get<bool>(*scalar) ? "1" : "0";
  if (scalar && std::holds_alternative<int64_t>(*scalar))
    return std::to_string(std::get<int64_t>(*scalar));
  return std::nullopt;
}

// bool, int, float or str (numpy scalars included), a list / tuple / set of
// words (an OptionList) or a dict of words by str (an OptionMap) as an
// OptionValue; nullopt for anything else.
std::optional<OptionValue> ToOptionValue(const py::handle& v) {
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v) || py::isinstance<py::set>(v)) {
    OptionList list;
    for (const py::handle item : v) {
      std::optional<std::string> word = ToOptionWord(item);
      if (!word) return std::nullopt;
      list.push_back(*word);
    }
    return list;
  }
  if (py::isinstance<py::dict>(v)) {
    OptionMap map;
    for (const auto& [key, item] : v.cast<py::dict>()) {
      std::optional<std::string> word = ToOptionWord(item);
      if (!py::isinstance<py::str>(key) || !word) return std::nullopt;
      map[key.cast<std::string>()] = *word;
    }
    return map;
  }
  py::module_ np = py::module_::import("numpy");
  if (py::isinstance<py::bool_>(v) || py::isinstance(v, np.attr("bool_")))
    return OptionValue(v.cast<bool>());
  if (py::isinstance<py::int_>(v) || py::isinstance(v, np.attr("integer"))) {
    py::int_ i(py::reinterpret_borrow<py::object>(v));
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return OptionValue(py::repr(v).cast<std::string>());  // refused as not an integer
    }
    return OptionValue(static_cast<int64_t>(x));
  }
  if (py::isinstance<py::float_>(v) || py::isinstance(v, np.attr("floating")))
    return OptionValue(v.cast<double>());
  if (py::isinstance<py::str>(v)) return OptionValue(v.cast<std::string>());
  return std::nullopt;
}

py::object ToPython(const OptionValue& v) {
  return std::visit([](const auto& x) -> py::object { return py::cast(x); }, v);
}

// Sets one option; returns the note of a no-effect option, or None. A dict
// for a group of dotted options that is not an option itself
// (automatic_loss_scaling_settings, dynamic_loss_scaling_settings) sets each
// key as the option "<name>.<key>", so unknown keys are refused; other dicts
// (engine_options, location_optimizer, ...) are one value. A value of no
// OptionValue type goes as its repr, which Set refuses naming the type.
bool HasSubOptions(const std::string& name) {
  for (const auto& spec : IpuOptions::Specs()) {
    if (spec.name.size() > name.size() && spec.name.compare(0, name.size() + 1, name + ".") == 0)
      return true;
  }
  return false;
}

py::object SetOption(PyIpuOptions& o, const std::string& name, const py::object& value) {
  if (py::isinstance<py::dict>(value) && !IpuOptions::FindSpec(name) && HasSubOptions(name)) {
    std::string notes;
    for (const auto& [key, item] : value.cast<py::dict>()) {
      py::object note = SetOption(o, name + "." + py::str(key).cast<std::string>(),
                                  py::reinterpret_borrow<py::object>(item));
      if (!note.is_none()) notes += (notes.empty() ? "" : "; ") + note.cast<std::string>();
    }
    o.objects[name] = value;
    if (notes.empty()) return py::none();
    return py::str(notes);
  }
  std::optional<OptionValue> v = ToOptionValue(value);
  std::string note = o.options.Set(name, v ? *v : OptionValue(py::repr(value).cast<std::string>()));
  if (note.empty()) return py::none();
  return py::str(note);
}

const char* SupportName(OptionSupport s) {
  switch (s) {
    case OptionSupport::kHonoured:
      return "honoured";
    case OptionSupport::kNotYet:
      return "not_yet";
    case OptionSupport::kNoEffect:
      return "no_effect";
  }
  return "";
}

void BindOptions(py::module_& m) {
  py::class_<PyIpuOptions>(m, "IpuOptions",
                           "Paddle's IpuStrategy options, validated by Tiller "
                           "(include/tiller/ipu_options.h).")
      .def(py::init<>())
      .def("set", &SetOption, py::arg("name"), py::arg("value"),
           "Sets one option; returns the note of an option that has no effect on Tiller, else "
           "None. Raises TillerError for unknown names, wrong types and options not "
           "implemented yet set to other than their default.")
      .def(
          "get",
          [](const PyIpuOptions& o, const std::string& name) -> py::object {
            auto it = o.objects.find(name);
            if (it != o.objects.end()) return it->second;
            return ToPython(o.options.Get(name));
          },
          py::arg("name"))
      .def(
          "get_option",
          [](const PyIpuOptions& o, const std::string& name) {
            OptionValue v = o.options.Get(name);
            py::dict out;
            out["name"] = name;
            out["type"] = tiller::training::OptionTypeName(v);
            out["value"] = ToPython(v);
            return out;
          },
          py::arg("name"),
          "Paddle's core.IpuStrategy.get_option: {'name', 'type' (bool, uint64, double, string, "
          "vector or map), 'value'}.")
      .def("get_all_option_names",
           [](const PyIpuOptions&) {
             std::vector<std::string> names;
             for (const auto& spec : IpuOptions::Specs()) names.push_back(spec.name);
             return names;
           })
      .def(
          "add_custom_op",
          [](PyIpuOptions& o, const std::string& paddle_op, const std::string& popart_op,
             const std::string& domain,
             int64_t version) { o.options.AddCustomOp(paddle_op, popart_op, domain, version); },
          py::arg("paddle_op"), py::arg("popart_op"), py::arg("domain"), py::arg("version"))
      .def(
          "set_compilation_progress_logger",
          [](PyIpuOptions& o, const py::object& logger) {
            if (logger.is_none()) {
              o.options.SetCompilationProgressLogger({});
              o.objects.erase("compilation_progress_logger");
              return;
            }
            if (!PyCallable_Check(logger.ptr()))
              throw tiller::Error(tiller::ErrorKind::kInvalidArgument,
                                  "option 'compilation_progress_logger' takes a callable "
                                  "(progress, total), got " +
                                      py::repr(logger).cast<std::string>());
            o.options.SetCompilationProgressLogger(tiller::python::ProgressLogger(logger));
            o.objects["compilation_progress_logger"] = logger;
          },
          py::arg("logger"),
          "Paddle's compilation_progress_logger: called as logger(progress, total) while a "
          "step compiles (total: compilation_progress_total); None: none.")
      .def(
          "is_set",
          [](const PyIpuOptions& o, const std::string& name) { return o.options.IsSet(name); },
          py::arg("name"))
      .def(
          "set_graph_config",
          [](PyIpuOptions& o, int64_t num_ipus, bool is_training, int64_t micro_batch_size,
             bool enable_manual_shard) {
            o.options.SetGraphConfig(num_ipus, is_training, micro_batch_size, enable_manual_shard);
          },
          py::arg("num_ipus") = 1, py::arg("is_training") = true, py::arg("micro_batch_size") = 1,
          py::arg("enable_manual_shard") = false)
      .def(
          "set_pipelining_config",
          [](PyIpuOptions& o, bool enable_pipelining, int64_t batches_per_step,
             bool enable_gradient_accumulation, int64_t accumulation_factor) {
            o.options.SetPipeliningConfig(enable_pipelining, batches_per_step,
                                          enable_gradient_accumulation, accumulation_factor);
          },
          py::arg("enable_pipelining") = false, py::arg("batches_per_step") = 1,
          py::arg("enable_gradient_accumulation") = false, py::arg("accumulation_factor") = 1)
      .def(
          "set_precision_config",
          [](PyIpuOptions& o, bool enable_fp16) { o.options.SetPrecisionConfig(enable_fp16); },
          py::arg("enable_fp16") = false)
      .def_property_readonly("eval_only",
                             [](const PyIpuOptions& o) { return o.options.EvalOnly(); })
      .def_property_readonly("num_threads",
                             [](const PyIpuOptions& o) { return o.options.NumThreads(); })
      .def_static(
          "specs",
          []() {
            py::list out;
            for (const auto& spec : IpuOptions::Specs()) {
              py::object dflt =
                  spec.default_value ? ToPython(*spec.default_value) : py::object(py::none());
              out.append(py::make_tuple(spec.name, SupportName(spec.support), dflt,
                                        spec.description, spec.tiller_own));
            }
            return out;
          },
          "[(name, 'honoured' | 'not_yet' | 'no_effect', default or None, description, "
          "tiller_own)]: tiller_own marks Tiller's options that Paddle's registry lacks.");
}

void BindTraining(py::module_& m) {
  BindOptions(m);

  py::class_<TensorInfo>(m, "TensorInfo")
      .def_readonly("name", &TensorInfo::name)
      .def_property_readonly("dtype",
                             [](const TensorInfo& t) { return tiller::python::ToNumpy(t.dtype); })
      .def_readonly("shape", &TensorInfo::shape)
      .def("__repr__", [](const TensorInfo& t) {
        return "TensorInfo(" + t.name + ", " +
               py::str(tiller::python::ToNumpy(t.dtype)).cast<std::string>() + ", " +
               py::str(py::cast(t.shape)).cast<std::string>() + ")";
      });

  py::class_<StateTensorInfo, TensorInfo>(m, "StateTensorInfo")
      .def_property_readonly(
          "role", [](const StateTensorInfo& t) { return ckpt::StateRoleName(t.role); },
          "parameter, statistic, optimizer_state, learning_rate or other")
      .def_property_readonly(
          "file",
          [](const StateTensorInfo& t) -> py::object {
            if (t.file == ckpt::SaveFile::kNone) return py::none();
            return py::str(ckpt::SaveFileSuffix(t.file));
          },
          "the checkpoint file paddle.static.save puts it in: '.pdparams', '.pdopt' or None")
      .def("__repr__", [](const StateTensorInfo& t) {
        return "StateTensorInfo(" + t.name + ", " +
               py::str(tiller::python::ToNumpy(t.dtype)).cast<std::string>() + ", " +
               py::str(py::cast(t.shape)).cast<std::string>() + ", " + ckpt::StateRoleName(t.role) +
               ", " + (t.file == ckpt::SaveFile::kNone ? "None" : ckpt::SaveFileSuffix(t.file)) +
               ")";
      });

  py::class_<TrainingSession::Summary>(m, "TrainingSummary")
      .def_readonly("arena_bytes", &TrainingSession::Summary::arena_bytes)
      .def_readonly("state_bytes", &TrainingSession::Summary::state_bytes)
      .def_readonly("in_place_updates", &TrainingSession::Summary::in_place_updates)
      .def_readonly("copied_updates", &TrainingSession::Summary::copied_updates)
      .def_readonly("graph", &TrainingSession::Summary::graph)
      .def_readonly("compile_report", &TrainingSession::Summary::compile_report)
      .def_readonly("compile_pipeline", &TrainingSession::Summary::compile_pipeline)
      .def_readonly("pipeline_max_in_flight", &TrainingSession::Summary::pipeline_max_in_flight)
      .def_readonly("pipeline_bubble_fraction", &TrainingSession::Summary::pipeline_bubble_fraction)
      .def_readonly("pipeline_device_busy_ms", &TrainingSession::Summary::pipeline_device_busy_ms)
      .def_readonly("replica_optimizer_state_bytes",
                    &TrainingSession::Summary::replica_optimizer_state_bytes)
      .def_readonly("device_memory_bytes", &TrainingSession::Summary::device_memory_bytes);

  py::class_<TrainingSession>(m, "TrainingSession")
      .def(py::init([](const std::string& path, std::vector<std::string> feeds,
                       std::vector<std::string> fetches, const PyIpuOptions& options) {
             py::gil_scoped_release release;
             return std::make_unique<TrainingSession>(path, std::move(feeds), std::move(fetches),
                                                      options.options);
           }),
           py::arg("program_path"), py::arg("feed_names"), py::arg("fetch_names"),
           py::arg("options"))
      .def(py::init([](const std::string& path, std::vector<std::string> feeds,
                       std::vector<std::string> fetches, int num_threads, uint64_t random_seed,
                       bool check_nan_inf, bool no_bias_optimizer) {
             SessionOptions o;
             o.num_threads = num_threads;
             o.random_seed = random_seed;
             o.check_nan_inf = check_nan_inf;
             o.no_bias_optimizer = no_bias_optimizer;
             return std::make_unique<TrainingSession>(path, std::move(feeds), std::move(fetches),
                                                      o);
           }),
           py::arg("program_path"), py::arg("feed_names"), py::arg("fetch_names"),
           py::arg("num_threads") = 1, py::arg("random_seed") = 0, py::arg("check_nan_inf") = false,
           py::arg("no_bias_optimizer") = false)
      .def("state_info", &TrainingSession::StateInfo)
      .def("state_names", &TrainingSession::StateNames)
      .def_property_readonly("loss_name", &TrainingSession::LossName)
      .def("trained_names", &TrainingSession::TrainedNames)
      .def_property_readonly("step_count", &TrainingSession::StepCount)
      .def_property_readonly("loss_scale", &TrainingSession::LossScale,
                             "the loss scale the next update uses")
      .def_property_readonly(
          "gradient_statistics",
          [](const TrainingSession& t) {
            const auto g = t.LastGradientStatistics();
            py::dict d;
            d["flushed_to_zero"] = g.flushed_to_zero;
            d["below_edge"] = g.below_edge;
            d["above_edge"] = g.above_edge;
            return d;
          },
          "the last update's counts of gradient elements (gradient_statistics)")
      .def_property_readonly("skipped_updates", &TrainingSession::SkippedUpdates,
                             "updates dynamic loss scaling skipped (gradients not finite)")
      .def_property_readonly("feed_names", &TrainingSession::FeedNames)
      .def_property_readonly("fetch_names", &TrainingSession::FetchNames)
      .def(
          "set_state",
          [](TrainingSession& s, const std::string& name, const py::array& value) {
            py::array c = py::array::ensure(value, py::array::c_style);
            auto dt = tiller::python::FromNumpy(c.dtype(), name);
            s.SetState(name, c.data(), dt, static_cast<size_t>(c.nbytes()));
          },
          py::arg("name"), py::arg("value"))
      .def(
          "get_state",
          [](const TrainingSession& s, const std::string& name) {
            for (const TensorInfo& info : s.StateInfo()) {
              if (info.name != name) continue;
              py::array out = Empty(info);
              s.GetState(name, out.mutable_data(), static_cast<size_t>(out.nbytes()));
              return out;
            }
            throw tiller::Error(tiller::ErrorKind::kNotFound,
                                "'" + name + "' is not a persistable variable");
          },
          py::arg("name"))
      .def("set_learning_rate", &TrainingSession::SetLearningRate, py::arg("lr"),
           "Sets every learning-rate variable of the program to lr (as float32 for float32 "
           "variables).")
      .def("save_checkpoint", &TrainingSession::SaveCheckpoint, py::arg("path_prefix"),
           py::call_guard<py::gil_scoped_release>(),
           "Writes <prefix>.pdparams and <prefix>.pdopt as paddle.static.save does (atomically).")
      .def("load_checkpoint", &TrainingSession::LoadCheckpoint, py::arg("path_prefix"),
           py::call_guard<py::gil_scoped_release>(),
           "Sets the state from <prefix>.pdparams / .pdopt, checking every variable first.")
      .def(
          "run",
          [](TrainingSession& s, const py::dict& feed, std::optional<bool> eval) {
            // Every step is fed whole, as Executor.run is.
            std::string missing;
            for (const std::string& name : s.FeedNames()) {
              if (!feed.contains(name)) missing += (missing.empty() ? "" : ", ") + name;
            }
            if (!missing.empty())
              throw tiller::Error(tiller::ErrorKind::kInvalidArgument, "feed lacks " + missing);
            for (const auto& [key, value] : feed) {
              std::string name = py::str(key);
              py::array c = py::array::ensure(value, py::array::c_style);
              if (!c)
                throw tiller::Error(tiller::ErrorKind::kInvalidArgument,
                                    "feed '" + name + "' is not an array");
              std::vector<int64_t> shape(c.shape(), c.shape() + c.ndim());
              s.SetFeed(name, c.data(), tiller::python::FromNumpy(c.dtype(), name), shape);
            }
            {
              py::gil_scoped_release release;
              if (eval)
                s.Run(*eval);
              else
                s.Run();
            }
            py::list out;
            for (size_t i = 0; i < s.FetchNames().size(); ++i) {
              py::array a = Empty(s.FetchInfo(i));
              s.GetFetch(i, a.mutable_data(), static_cast<size_t>(a.nbytes()));
              out.append(a);
            }
            return out;
          },
          py::arg("feed"), py::arg("eval") = py::none(),
          "One step: feeds by name; returns the fetches (numpy) in fetch order. eval None: as "
          "the session's options say.")
      .def("summary", &TrainingSession::GetSummary)
      .def("enable_profiling", &TrainingSession::EnableProfiling, py::arg("on") = true,
           "Times every op of later steps (every replica's).")
      .def("profile", &TrainingSession::GetProfile, py::arg("by_shape") = false,
           py::arg("replica") = 0,
           "[(op type, total ms, calls)] of the steps run while profiling, largest first; "
           "by_shape: one entry per op type and input shapes; replica: whose (a "
           "collective's time includes its wait for the others).");
}

}  // namespace

TILLER_PY_BINDINGS(BindTraining);
