// _tiller.compute_gradients: Tiller's gradients of a Paddle program's loss
// (include/tiller/gradients.h), for parity tests against
// paddle.static.gradients.
//
//   grads, fetched = compute_gradients(model_path, params_path, feeds,
//                                      loss_name, wrt, training, fetch, step)
//   feeds: {feed name: numpy array}, every feed of the program
//   loss_name: a fetch target of the program ("" when it has exactly one)
//   wrt: names of parameters or feeds; grads maps each to d loss / d it
//   fetch: further program variables to return in `fetched` (the loss is
//     always there), e.g. a batch_norm's MeanOut after the step
//   step: the value of the training step input (dropout masks), if any
//   loss_weight: if given (loss-shaped float32), differentiates
//     sum(loss * loss_weight) instead of sum(loss)
#include "tiller/gradients.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "bindings.h"

namespace py = pybind11;

namespace tiller::python {
namespace {

py::tuple ComputeGradientsPy(const std::string& model_path, const std::string& params_path,
                             const py::dict& feeds, const std::string& loss_name,
                             const std::vector<std::string>& wrt, bool training,
                             const std::vector<std::string>& fetch, int64_t step,
                             const std::optional<py::array>& loss_weight) {
  GradientRequest r;
  r.model_path = model_path;
  r.params_path = params_path;
  for (const auto& [key, value] : feeds) {
    std::string name = py::str(key);
    r.feeds[name] = ToHostTensor(py::array::ensure(value), name);
  }
  r.loss_name = loss_name;
  r.wrt = wrt;
  r.training = training;
  r.fetch = fetch;
  r.step = step;
  if (loss_weight) r.loss_weight = ToHostTensor(*loss_weight, "loss_weight");
  GradientResult result;
  {
    py::gil_scoped_release release;
    result = ComputeGradients(r);
  }
  py::dict grad_out, fetched;
  for (const auto& [name, t] : result.gradients) grad_out[py::str(name)] = ToArray(t);
  for (const auto& [name, t] : result.fetched) fetched[py::str(name)] = ToArray(t);
  return py::make_tuple(grad_out, fetched);
}

void BindGradients(py::module_& m) {
  m.def("compute_gradients", &ComputeGradientsPy, py::arg("model_path"), py::arg("params_path"),
        py::arg("feeds"), py::arg("loss_name") = "", py::arg("wrt") = std::vector<std::string>{},
        py::arg("training") = true, py::arg("fetch") = std::vector<std::string>{},
        py::arg("step") = 0, py::arg("loss_weight") = py::none(),
        "Tiller's gradients of a program's loss: returns (grads by wrt name, fetched values)");
}

TILLER_PY_BINDINGS(BindGradients);

}  // namespace
}  // namespace tiller::python
