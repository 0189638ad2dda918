#include "compile/executable.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "core/error.h"
#include "ir/op_schema.h"

namespace tiller::compile {

std::unique_ptr<Executable> Executable::Build(std::unique_ptr<ir::Graph> graph,
                                              const CompileOptions& options,
                                              const StateStorage& states) {
  auto exe = std::unique_ptr<Executable>(new Executable());
  exe->graph_ = std::move(graph);
  exe->num_threads_ = std::max(1, options.num_threads);
  omp_set_num_threads(exe->num_threads_);
  const ir::Graph& g = *exe->graph_;

  std::vector<size_t> workspace;
  for (const auto& op : g.ops()) {
    Step step;
    step.op = op.get();
    if (!ir::FindOpSchema(op->type)->is_view) step.kernel = backend::CreateKernel(*op);
    workspace.push_back(step.kernel ? step.kernel->workspace_bytes() : 0);
    exe->steps_.push_back(std::move(step));
  }
  exe->plan_ = PlanMemory(g, workspace);
  exe->arena_.Resize(exe->plan_.arena_bytes());

  std::byte* base = exe->arena_.data();
  const MemoryPlan& plan = exe->plan_;
  auto address = [&](const ir::Value* v) -> void* {
    auto alias = plan.alias_of.find(v);
    const ir::Value* r = alias == plan.alias_of.end() ? v : alias->second;
    if (r->data) return const_cast<std::byte*>(r->data->data());
    auto in_state = plan.in_state.find(r);
    if (in_state != plan.in_state.end()) r = in_state->second;
    if (r->kind == ir::ValueKind::kState) {
      auto it = states.find(r->name);
      TILLER_CHECK(it != states.end() && it->second, "state '{}' has no storage", r->name);
      return it->second;
    }
    auto it = plan.offset.find(r);
    TILLER_CHECK(it != plan.offset.end(), "value %{} ({}) has no address", r->id, r->name);
    return base + it->second;
  };
  void* workspace_base = base + plan.tensor_bytes;
  for (Step& s : exe->steps_) {
    for (const ir::Value* in : s.op->inputs) s.args.inputs.push_back(in ? address(in) : nullptr);
    for (const ir::Value* out : s.op->outputs) s.args.outputs.push_back(address(out));
    s.args.workspace = workspace_base;
  }
  for (const ir::Value* in : g.inputs()) exe->inputs_.push_back({in->name, in->type, address(in)});
  for (const auto& [name, v] : g.outputs()) exe->outputs_.push_back({name, v->type, address(v)});
  for (const auto& [v, state] : plan.copy_back) {
    exe->copy_back_.push_back({address(v), address(state), state->bytes()});
  }
  return exe;
}

void Executable::Run() {
  omp_set_num_threads(num_threads_);
  if (!profiling_) {
    for (size_t i = 0; i < steps_.size(); ++i) {
      Step& s = steps_[i];
      if (!s.kernel) continue;
      s.kernel->Run(s.args);
      if (check_nan_inf_ || (!guarded_step_.empty() && guarded_step_[i]))
        CheckFinite(s, !check_nan_inf_);
    }
    CopyBack();
    return;
  }
  step_ms_.resize(steps_.size(), 0.0);
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (!steps_[i].kernel) continue;
    auto t0 = std::chrono::steady_clock::now();
    steps_[i].kernel->Run(steps_[i].args);
    if (check_nan_inf_ || (!guarded_step_.empty() && guarded_step_[i]))
      CheckFinite(steps_[i], !check_nan_inf_);
    step_ms_[i] +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  CopyBack();
  ++profiled_runs_;
}

int Executable::GuardFinite(const ir::Value* v, const std::string& label) {
  for (size_t i = 0; i < steps_.size(); ++i) {
    const auto& outs = steps_[i].op->outputs;
    for (size_t o = 0; o < outs.size(); ++o) {
      if (outs[o] != v || !steps_[i].kernel) continue;
      guarded_step_.resize(steps_.size(), false);
      guarded_step_[i] = true;
      guard_labels_[{i, o}] = label;
      return static_cast<int>(i);
    }
  }
  return -1;
}

// Scans the float outputs of a step, or only its guarded ones.
void Executable::CheckFinite(const Step& s, bool guarded_only) const {
  size_t index = static_cast<size_t>(&s - steps_.data());
  for (size_t o = 0; o < s.op->outputs.size(); ++o) {
    const ir::Value* v = s.op->outputs[o];
    if (guarded_only && !guard_labels_.count({index, o})) continue;
    if (v->dtype() != DType::kF32 && v->dtype() != DType::kF64) continue;
    int64_t n = NumElements(v->shape());
    int64_t bad = -1;
    double value = 0;
    if (v->dtype() == DType::kF32) {
      const float* p = static_cast<const float*>(s.args.outputs[o]);
      for (int64_t i = 0; i < n && bad < 0; ++i) {
        if (!std::isfinite(p[i])) bad = i, value = p[i];
      }
    } else {
      const double* p = static_cast<const double*>(s.args.outputs[o]);
      for (int64_t i = 0; i < n && bad < 0; ++i) {
        if (!std::isfinite(p[i])) bad = i, value = p[i];
      }
    }
    if (bad < 0) continue;
    std::string what = fmt::format("op {} ({}) wrote {} into output {} ({}) at element {}",
                                   s.op->type, s.op->name, value, o, v->type.ToString(), bad);
    auto label = guard_labels_.find({index, o});
    if (label != guard_labels_.end()) what = label->second + " is not finite: " + what;
    Fail(ErrorKind::kNonFinite, "{}", what);
  }
}

void Executable::CopyBack() {
  for (const Copy& c : copy_back_) {
    if (c.from != c.to) std::memcpy(c.to, c.from, c.bytes);
  }
}

std::vector<Executable::ProfileEntry> Executable::Profile() const {
  std::map<std::string, ProfileEntry> by_type;
  for (size_t i = 0; i < step_ms_.size(); ++i) {
    const ir::Op* op = steps_[i].op;
    std::string key = op->type;
    if (op->type == "linear" && op->attrs.Has("activation"))
      key += "+" + op->attrs.Str("activation", "");
    ProfileEntry& e = by_type[key];
    e.op_type = key;
    e.total_ms += step_ms_[i];
    e.calls += profiled_runs_;
  }
  std::vector<ProfileEntry> out;
  for (auto& [k, e] : by_type) out.push_back(e);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.total_ms > b.total_ms; });
  return out;
}

void FoldWithCpuKernels(ir::Graph& g, ir::Op& op) {
  const ir::OpSchema* schema = ir::FindOpSchema(op.type);
  if (schema->is_view) {
    ir::Value* out = op.outputs[0];
    out->data = op.inputs[0]->data;
    out->kind = ir::ValueKind::kConstant;
    return;
  }
  if (!backend::HasKernel(op.type)) return;
  auto kernel = backend::CreateKernel(op);
  AlignedBuffer scratch(kernel->workspace_bytes());
  backend::KernelArgs args;
  std::vector<std::shared_ptr<AlignedBuffer>> results;
  for (const ir::Value* in : op.inputs) args.inputs.push_back(in ? in->data->data() : nullptr);
  for (const ir::Value* out : op.outputs) {
    results.push_back(std::make_shared<AlignedBuffer>(out->bytes()));
    args.outputs.push_back(results.back()->data());
  }
  args.workspace = scratch.data();
  kernel->Run(args);
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    op.outputs[i]->data = std::move(results[i]);
    op.outputs[i]->kind = ir::ValueKind::kConstant;
  }
  (void)g;
}

}  // namespace tiller::compile
