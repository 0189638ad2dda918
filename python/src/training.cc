// Binding of tiller::training::TrainingSession over numpy arrays; the
// IpuStrategy / IpuCompiledProgram front door is python/tiller/ipu.py.
#include "tiller/training.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"

namespace py = pybind11;
using tiller::training::SessionOptions;
using tiller::training::TensorInfo;
using tiller::training::TrainingSession;

namespace {

py::array Empty(const TensorInfo& info) {
  return py::array(tiller::python::ToNumpy(info.dtype), info.shape);
}

void BindTraining(py::module_& m) {
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

  py::class_<TrainingSession::Summary>(m, "TrainingSummary")
      .def_readonly("arena_bytes", &TrainingSession::Summary::arena_bytes)
      .def_readonly("state_bytes", &TrainingSession::Summary::state_bytes)
      .def_readonly("in_place_updates", &TrainingSession::Summary::in_place_updates)
      .def_readonly("copied_updates", &TrainingSession::Summary::copied_updates)
      .def_readonly("graph", &TrainingSession::Summary::graph);

  py::class_<TrainingSession>(m, "TrainingSession")
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
      .def(
          "run",
          [](TrainingSession& s, const py::dict& feed, bool eval) {
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
              s.Run(eval);
            }
            py::list out;
            for (size_t i = 0; i < s.FetchNames().size(); ++i) {
              py::array a = Empty(s.FetchInfo(i));
              s.GetFetch(i, a.mutable_data(), static_cast<size_t>(a.nbytes()));
              out.append(a);
            }
            return out;
          },
          py::arg("feed"), py::arg("eval") = false,
          "One step: feeds by name; returns the fetches (numpy) in fetch order.")
      .def("summary", &TrainingSession::GetSummary);
}

}  // namespace

TILLER_PY_BINDINGS(BindTraining);
