#include "runtime/paddle_steps.h"

#include "core/error.h"

namespace tiller::runtime {

compile::StepSource::Forward PaddleInferenceStep::BuildForward(ir::Graph::Folder folder) {
  graph_ = paddle::Translate(model_, feeds_, std::move(folder), options_);
  // The graph holds the weights now; what its kernels pack is freed as they
  // are built (compile/executable.cc) and read from the file again for the
  // next compile.
  if (model_.source) model_.source->LetGo();
  Forward f;
  f.graph = graph_.get();
  return f;
}

compile::StepSource::Forward PaddleTrainingStep::BuildForward(ir::Graph::Folder folder) {
  t_ = std::make_unique<paddle::TrainingTranslation>(
      *args_.program, *args_.info, *args_.state_types, args_.feed_names, args_.feed_types,
      args_.fetch_names, std::move(folder), args_.options);
  ir::Value* loss = t_->Forward();
  Forward f;
  f.graph = &t_->graph();
  if (args_.options.eval) return f;
  f.loss = loss;
  f.wrt = t_->Trained();
  return f;
}

std::vector<ir::Value*> PaddleTrainingStep::BuildUpdate(const std::vector<ir::Value*>& gradients) {
  t_->Update(gradients);
  return t_->ReadGradients();
}

std::unique_ptr<ir::Graph> PaddleTrainingStep::Finish() {
  return t_->Finish().graph;
}

namespace {

ir::Value* FindWrt(const ir::Graph& g, const std::string& name) {
  for (const auto& v : g.values()) {
    if (v->name == name && (v->kind == ir::ValueKind::kParam || v->kind == ir::ValueKind::kInput))
      return v.get();
  }
  Fail(ErrorKind::kNotFound, "'{}' is neither a parameter nor a feed the loss can depend on", name);
}

}  // namespace

compile::StepSource::Forward PaddleGradientStep::BuildForward(ir::Graph::Folder folder) {
  graph_ = paddle::Translate(model_, feeds_, std::move(folder), options_);
  ir::Graph& g = *graph_;
  ir::Value* loss = g.outputs()[0].second;
  if (loss_weight_) {
    if (loss_weight_->size() != loss->bytes())
      Fail(ErrorKind::kInvalidArgument, "loss_weight must be {} like the loss",
           loss->type.ToString());
    ir::Value* r = g.AddData("loss_weight", loss->type, ir::ValueKind::kConstant, loss_weight_);
    loss = g.Add1("reduce_sum", {g.Add1("mul", {loss, r})},
                  {{"axes", std::vector<int64_t>{}}, {"keepdim", false}});
  }
  for (const std::string& name : wrt_) targets_.push_back(FindWrt(g, name));
  Forward f;
  f.graph = &g;
  f.loss = loss;
  f.wrt = targets_;
  return f;
}

std::vector<ir::Value*> PaddleGradientStep::BuildUpdate(const std::vector<ir::Value*>& gradients) {
  for (size_t k = 0; k < targets_.size(); ++k)
    graph_->AddOutput(targets_[k]->name + "@GRAD", gradients[k]);
  return gradients;
}

std::unique_ptr<ir::Graph> PaddleGradientStep::Finish() {
  ir::Verify(*graph_);
  return std::move(graph_);
}

}  // namespace tiller::runtime
