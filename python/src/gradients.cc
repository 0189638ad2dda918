// _tiller.compute_gradients: Tiller's gradients of a Paddle program's loss,
// for parity tests against paddle.static.gradients. One call loads the model,
// translates it for the given feeds (in training mode if asked), appends the
// backward graph (passes::BuildBackward), compiles and runs it once.
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
//     sum(loss * loss_weight) instead of sum(loss), so every element of a
//     non-scalar output matters
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>

#include "bindings.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/translate.h"
#include "passes/autodiff.h"
#include "runtime/executable.h"

namespace py = pybind11;

namespace tiller::python {
namespace {

DType FeedDType(const py::array& a, const std::string& name) {
  DType dt;
  std::string s = py::str(a.dtype()).cast<std::string>();
  if (!ParseDType(s, &dt))
    Fail(ErrorKind::kInvalidArgument, "feed '{}': numpy dtype {} is not supported", name, s);
  return dt;
}

ir::Value* FindWrt(const ir::Graph& g, const std::string& name) {
  for (const auto& v : g.values()) {
    if (v->name == name && (v->kind == ir::ValueKind::kParam || v->kind == ir::ValueKind::kInput))
      return v.get();
  }
  Fail(ErrorKind::kNotFound, "'{}' is neither a parameter nor a feed the loss can depend on", name);
}

py::array ToArray(const runtime::TensorSlot& s) {
  std::string name{DTypeName(s.type.dtype)};
  std::vector<py::ssize_t> shape(s.type.shape.begin(), s.type.shape.end());
  py::array out(py::dtype(name == "bool" ? "bool" : name), shape);
  std::memcpy(out.mutable_data(), s.data, s.type.bytes());
  return out;
}

py::tuple ComputeGradients(const std::string& model_path, const std::string& params_path,
                           const py::dict& feeds, std::string loss_name,
                           const std::vector<std::string>& wrt, bool training,
                           const std::vector<std::string>& fetch, int64_t step,
                           const std::optional<py::array>& loss_weight) {
  paddle::Model model = paddle::LoadModel(model_path, params_path);
  paddle::Program& program = model.program;
  if (loss_name.empty()) {
    if (program.fetch_names.size() != 1)
      Fail(ErrorKind::kInvalidArgument, "{}: {} fetch targets; name the loss", program.path,
           program.fetch_names.size());
    loss_name = program.fetch_names[0];
  }
  // Extra variables become fetch targets, so translation binds them to outputs.
  program.fetch_names = {loss_name};
  for (const std::string& f : fetch) program.fetch_names.push_back(f);

  std::vector<ir::TensorType> types;
  std::vector<py::array> arrays;
  for (const std::string& name : program.feed_names) {
    if (!feeds.contains(name)) Fail(ErrorKind::kInvalidArgument, "feed '{}' is missing", name);
    py::array a = py::array::ensure(feeds[py::str(name)], py::array::c_style);
    types.push_back({FeedDType(a, name), Shape(a.shape(), a.shape() + a.ndim())});
    arrays.push_back(a);
  }
  paddle::TranslateOptions options;
  options.training = training;
  auto graph = paddle::Translate(model, types, runtime::FoldWithCpuKernels, options);
  ir::Value* loss = graph->outputs()[0].second;
  if (loss_weight) {
    py::array w = py::array::ensure(*loss_weight, py::array::c_style);
    if (FeedDType(w, "loss_weight") != loss->dtype() ||
        w.nbytes() != static_cast<py::ssize_t>(loss->bytes()))
      Fail(ErrorKind::kInvalidArgument, "loss_weight must be {} like the loss",
           loss->type.ToString());
    auto buf = std::make_shared<AlignedBuffer>(loss->bytes());
    std::memcpy(buf->data(), w.data(), loss->bytes());
    ir::Value* r = graph->AddData("loss_weight", loss->type, ir::ValueKind::kConstant, buf);
    loss = graph->Add1("reduce_sum", {graph->Add1("mul", {loss, r})},
                       {{"axes", std::vector<int64_t>{}}, {"keepdim", false}});
  }
  std::vector<ir::Value*> targets;
  for (const std::string& name : wrt) targets.push_back(FindWrt(*graph, name));
  auto grads = passes::BuildBackward(*graph, loss, targets);
  size_t first_grad = graph->outputs().size();
  for (ir::Value* v : targets) graph->AddOutput(v->name + "@GRAD", grads.at(v));
  ir::Verify(*graph);
  auto exe = runtime::Executable::Build(std::move(graph), {});

  for (runtime::TensorSlot& in : exe->inputs()) {
    if (in.name == paddle::TranslateContext::kStepInput) {
      *static_cast<int64_t*>(in.data) = step;
      continue;
    }
    size_t i = 0;
    while (i < program.feed_names.size() && program.feed_names[i] != in.name) ++i;
    TILLER_CHECK(i < program.feed_names.size(), "graph input '{}' is no feed", in.name);
    std::memcpy(in.data, arrays[i].data(), in.type.bytes());
  }
  {
    py::gil_scoped_release release;
    exe->Run();
  }
  py::dict grad_out, fetched;
  const auto& outs = exe->outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    if (i < first_grad)
      fetched[py::str(program.fetch_names[i])] = ToArray(outs[i]);
    else
      grad_out[py::str(wrt[i - first_grad])] = ToArray(outs[i]);
  }
  return py::make_tuple(grad_out, fetched);
}

void BindGradients(py::module_& m) {
  m.def("compute_gradients", &ComputeGradients, py::arg("model_path"), py::arg("params_path"),
        py::arg("feeds"), py::arg("loss_name") = "", py::arg("wrt") = std::vector<std::string>{},
        py::arg("training") = true, py::arg("fetch") = std::vector<std::string>{},
        py::arg("step") = 0, py::arg("loss_weight") = py::none(),
        "Tiller's gradients of a program's loss: returns (grads by wrt name, fetched values)");
}

TILLER_PY_BINDINGS(BindGradients);

}  // namespace
}  // namespace tiller::python
