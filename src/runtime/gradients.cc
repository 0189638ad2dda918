// include/tiller/gradients.h: loads the model, translates it for the given
// feeds (in training mode if asked), appends the backward graph, compiles
// and runs it once.
#include "tiller/gradients.h"

#include <cstring>

#include "compile/executable.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/translate.h"
#include "passes/autodiff.h"
#include "runtime/api_types.h"

namespace tiller {
namespace {

ir::Value* FindWrt(const ir::Graph& g, const std::string& name) {
  for (const auto& v : g.values()) {
    if (v->name == name && (v->kind == ir::ValueKind::kParam || v->kind == ir::ValueKind::kInput))
      return v.get();
  }
  Fail(ErrorKind::kNotFound, "'{}' is neither a parameter nor a feed the loss can depend on", name);
}

HostTensor ToHost(const compile::TensorSlot& s) {
  HostTensor t;
  t.dtype = ToApi(s.type.dtype);
  t.shape = s.type.shape;
  t.data.resize(s.type.bytes());
  if (!t.data.empty()) std::memcpy(t.data.data(), s.data, t.data.size());
  return t;
}

}  // namespace

GradientResult ComputeGradients(const GradientRequest& request) {
  paddle::Model model = paddle::LoadModel(request.model_path, request.params_path);
  paddle::Program& program = model.program;
  std::string loss_name = request.loss_name;
  if (loss_name.empty()) {
    if (program.fetch_names.size() != 1)
      Fail(ErrorKind::kInvalidArgument, "{}: {} fetch targets; name the loss", program.path,
           program.fetch_names.size());
    loss_name = program.fetch_names[0];
  }
  // Extra variables become fetch targets, so translation binds them to outputs.
  program.fetch_names = {loss_name};
  for (const std::string& f : request.fetch) program.fetch_names.push_back(f);

  std::vector<ir::TensorType> types;
  std::vector<const HostTensor*> feeds;
  for (const std::string& name : program.feed_names) {
    auto it = request.feeds.find(name);
    if (it == request.feeds.end()) Fail(ErrorKind::kInvalidArgument, "feed '{}' is missing", name);
    const HostTensor& t = it->second;
    ir::TensorType type{FromApi(t.dtype), t.shape};
    if (t.data.size() != type.bytes())
      Fail(ErrorKind::kInvalidArgument, "feed '{}' ({}) has {} bytes, needs {}", name,
           type.ToString(), t.data.size(), type.bytes());
    types.push_back(type);
    feeds.push_back(&t);
  }
  paddle::TranslateOptions options;
  options.training = request.training;
  auto graph = paddle::Translate(model, types, compile::FoldWithCpuKernels, options);
  ir::Value* loss = graph->outputs()[0].second;
  if (request.loss_weight) {
    const HostTensor& w = *request.loss_weight;
    if (FromApi(w.dtype) != loss->dtype() || w.data.size() != loss->bytes())
      Fail(ErrorKind::kInvalidArgument, "loss_weight must be {} like the loss",
           loss->type.ToString());
    auto buf = std::make_shared<AlignedBuffer>(loss->bytes());
    std::memcpy(buf->data(), w.data.data(), loss->bytes());
    ir::Value* r = graph->AddData("loss_weight", loss->type, ir::ValueKind::kConstant, buf);
    loss = graph->Add1("reduce_sum", {graph->Add1("mul", {loss, r})},
                       {{"axes", std::vector<int64_t>{}}, {"keepdim", false}});
  }
  std::vector<ir::Value*> targets;
  for (const std::string& name : request.wrt) targets.push_back(FindWrt(*graph, name));
  auto grads = passes::BuildBackward(*graph, loss, targets);
  size_t first_grad = graph->outputs().size();
  for (ir::Value* v : targets) graph->AddOutput(v->name + "@GRAD", grads.at(v));
  ir::Verify(*graph);
  compile::CompileOptions co;
  co.num_threads = request.num_threads;
  auto exe = compile::Executable::Build(std::move(graph), co);

  for (compile::TensorSlot& in : exe->inputs()) {
    if (in.name == paddle::TranslateContext::kStepInput) {
      *static_cast<int64_t*>(in.data) = request.step;
      continue;
    }
    size_t i = 0;
    while (i < program.feed_names.size() && program.feed_names[i] != in.name) ++i;
    TILLER_CHECK(i < program.feed_names.size(), "graph input '{}' is no feed", in.name);
    if (in.type.bytes()) std::memcpy(in.data, feeds[i]->data.data(), in.type.bytes());
  }
  exe->Run();
  GradientResult result;
  const auto& outs = exe->outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    if (i < first_grad)
      result.fetched.emplace_back(program.fetch_names[i], ToHost(outs[i]));
    else
      result.gradients.emplace_back(request.wrt[i - first_grad], ToHost(outs[i]));
  }
  return result;
}

}  // namespace tiller
