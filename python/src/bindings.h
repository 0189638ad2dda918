// Shared pieces of the _tiller extension. module.cc defines the module and
// the inference API; other files in python/src add their own bindings by
// registering a binder at static-initialization time:
//   void BindTraining(py::module_& m) { ... }
//   TILLER_PY_BINDINGS(BindTraining);
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <functional>
#include <string>

#include "tiller/data_type.h"
#include "tiller/predictor.h"

namespace tiller::python {

using Binder = void (*)(pybind11::module_&);
bool RegisterBinder(Binder binder);

// numpy dtype <-> API dtype; FromNumpy fails naming `what` (a tensor name).
inference::DataType FromNumpy(const pybind11::dtype& dt, const std::string& what);
pybind11::dtype ToNumpy(inference::DataType t);
// numpy array <-> host tensor (copies); ToHostTensor fails naming `what`.
HostTensor ToHostTensor(const pybind11::array& a, const std::string& what);
pybind11::array ToArray(const HostTensor& t);

// A Python callable (progress, total) as a compile progress logger (Paddle's
// compilation_progress_logger). Compiles run with the GIL released, so the
// call and the last reference's release take it; an exception the callable
// raises fails the compile as a TillerError naming the logger.
std::function<void(int, int)> ProgressLogger(const pybind11::object& logger);

}  // namespace tiller::python

#define TILLER_PY_CONCAT2(a, b) a##b
#define TILLER_PY_CONCAT(a, b) TILLER_PY_CONCAT2(a, b)
#define TILLER_PY_BINDINGS(fn)                                         \
  static const bool TILLER_PY_CONCAT(tiller_py_binder_, __COUNTER__) = \
      ::tiller::python::RegisterBinder(fn)
