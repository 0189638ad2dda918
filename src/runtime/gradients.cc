// include/tiller/gradients.h: the model is compiled by the compile driver
// with its loss differentiated (runtime/paddle_steps.h) and run once.
#include "tiller/gradients.h"

#include <cstring>

#include "compile/driver.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/translate.h"
#include "runtime/api_types.h"
#include "runtime/feeds.h"
#include "runtime/paddle_steps.h"

namespace tiller {
namespace {

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

  // Feeds are checked against their own values (any shape the program takes).
  std::vector<runtime::FeedDecl> decls;
  for (const std::string& name : program.feed_names) {
    auto it = request.feeds.find(name);
    if (it == request.feeds.end()) Fail(ErrorKind::kInvalidArgument, "feed '{}' is missing", name);
    const paddle::VarInfo* v = program.FindVar(name);
    decls.push_back({name, FromApi(it->second.dtype), v ? v->dims : Shape{}});
  }
  runtime::FeedSet feeds(std::move(decls), {"feed", "program"});
  std::vector<ir::TensorType> types;
  for (size_t i = 0; i < feeds.size(); ++i) {
    const HostTensor& t = request.feeds.at(feeds.decl(i).name);
    feeds.SetShape(i, t.shape);
    feeds.SetData(i, FromApi(t.dtype), t.data.data(), t.data.size());
    types.push_back({FromApi(t.dtype), t.shape});
  }
  std::shared_ptr<AlignedBuffer> weight;
  if (request.loss_weight) {
    const HostTensor& w = *request.loss_weight;
    if (w.dtype != DataType::FLOAT32)
      Fail(ErrorKind::kInvalidArgument, "loss_weight must be float32, got {}",
           DataTypeName(w.dtype));
    weight = std::make_shared<AlignedBuffer>(w.data.size());
    if (!w.data.empty()) std::memcpy(weight->data(), w.data.data(), w.data.size());
  }
  paddle::TranslateOptions options;
  options.training = request.training;
  compile::Compiler compiler(compile::CompileOptions::Cpu(request.num_threads));
  runtime::PaddleGradientStep source(model, types, options, request.wrt, weight);
  compile::CompiledStep step = compiler.Compile(source);
  compile::Executable& exe = *step.exe;

  for (compile::TensorSlot& in : exe.inputs()) {
    if (in.name == paddle::TranslateContext::kStepInput) {
      *static_cast<int64_t*>(in.data) = request.step;
      continue;
    }
    size_t i = feeds.Index(in.name);
    if (in.type.bytes()) std::memcpy(in.data, feeds.data(i).data(), in.type.bytes());
  }
  exe.Run();
  GradientResult result;
  const auto& outs = exe.outputs();
  const size_t first_grad = program.fetch_names.size();
  for (size_t i = 0; i < outs.size(); ++i) {
    if (i < first_grad)
      result.fetched.emplace_back(program.fetch_names[i], ToHost(outs[i]));
    else
      result.gradients.emplace_back(request.wrt[i - first_grad], ToHost(outs[i]));
  }
  return result;
}

}  // namespace tiller
