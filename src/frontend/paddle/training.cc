#include "frontend/paddle/training.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "frontend/paddle/translate.h"
#include "ir/row_gradient.h"

namespace tiller::paddle {
namespace {

// Legacy op_role bits (paddle/fluid/framework/op_proto_maker.h).
constexpr int64_t kRoleBackward = 0x1;
constexpr int64_t kRoleLoss = 0x100;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> AllInputs(const OpDesc& op) {
  std::vector<std::string> out;
  for (const auto& [slot, args] : op.inputs) out.insert(out.end(), args.begin(), args.end());
  return out;
}

std::vector<std::string> AllOutputs(const OpDesc& op) {
  std::vector<std::string> out;
  for (const auto& [slot, args] : op.outputs) out.insert(out.end(), args.begin(), args.end());
  return out;
}

// Legacy programs mark every op with op_role; the seed is the fill_constant
// of role Backward|Loss that writes <loss>@GRAD.
void SplitLegacy(const Program& p, TrainingProgramInfo& info) {
  bool found = false;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    int64_t role = p.ops[i].attrs.Int("op_role", 0);
    info.backward[i] = (role & kRoleBackward) != 0;
    if (!found && (role & (kRoleBackward | kRoleLoss)) == (kRoleBackward | kRoleLoss)) {
      const OpDesc& op = p.ops[i];
      const auto& outs = op.Outputs("Out");
      if (outs.size() != 1 || !EndsWith(outs[0], "@GRAD"))
        Fail(ErrorKind::kInvalidArgument,
             "{}: op {} seeds the backward pass but does not write <loss>@GRAD", p.path,
             op.Describe());
      info.seed_op = i;
      info.loss = outs[0].substr(0, outs[0].size() - 5);
      info.loss_grad_seed = op.attrs.Float("value", 1.0);
      found = true;
    }
  }
  if (!found)
    Fail(ErrorKind::kInvalidArgument,
         "{}: not a training program: no op seeds a backward pass (op_role Backward|Loss); "
         "call optimizer.minimize(loss) before compiling",
         p.path);
}

// PIR programs carry no op roles. Paddle appends the whole backward part
// before any clipping, regularization or optimizer op, so the backward part
// runs from the full_like that seeds d(loss) (right before the first *_grad
// op) through the last *_grad op, plus the sums (add_n) right after it that
// accumulate gradients. Inside it are also plain ops that differentiate
// simple ones (scale for scale, reshape, cast, full).
void SplitPir(const Program& p, TrainingProgramInfo& info) {
  size_t first_grad = p.ops.size(), last_grad = 0;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    if (!EndsWith(p.ops[i].type, "_grad")) continue;
    first_grad = std::min(first_grad, i);
    last_grad = i;
  }
  if (first_grad == p.ops.size())
    Fail(ErrorKind::kInvalidArgument,
         "{}: not a training program: it has no gradient ops; call optimizer.minimize(loss) "
         "before compiling",
         p.path);
  size_t seed = first_grad;
  for (size_t i = first_grad; i-- > 0;) {
    if (p.ops[i].type == "fill_any_like") {
      seed = i;
      break;
    }
  }
  if (seed == first_grad)
    Fail(ErrorKind::kInvalidArgument, "{}: no full_like seeds the backward pass before op {}",
         p.path, p.ops[first_grad].Describe());
  const OpDesc& s = p.ops[seed];
  info.seed_op = seed;
  info.loss = s.Inputs("X").at(0);
  info.loss_grad_seed = s.attrs.Float("value", 1.0);
  std::set<std::string> grads;
  for (size_t i = seed; i <= last_grad; ++i) {
    info.backward[i] = true;
    for (const std::string& o : AllOutputs(p.ops[i])) grads.insert(o);
  }
  for (size_t i = last_grad + 1; i < p.ops.size(); ++i) {
    const OpDesc& op = p.ops[i];
    auto ins = AllInputs(op);
    bool accumulates = (op.type == "sum" || op.type == "assign") && !ins.empty() &&
                       std::all_of(ins.begin(), ins.end(),
                                   [&](const std::string& n) { return grads.count(n) != 0; });
    if (!accumulates) break;
    info.backward[i] = true;
    for (const std::string& o : AllOutputs(op)) grads.insert(o);
  }
}

}  // namespace

TrainingProgramInfo AnalyzeTrainingProgram(const Program& p) {
  TrainingProgramInfo info;
  info.backward.assign(p.ops.size(), false);
  info.state = p.param_names;
  bool legacy = std::any_of(p.ops.begin(), p.ops.end(),
                            [](const OpDesc& op) { return op.attrs.Has("op_role"); });
  if (legacy)
    SplitLegacy(p, info);
  else
    SplitPir(p, info);
  if (!p.FindVar(info.loss))
    Fail(ErrorKind::kInvalidArgument, "{}: loss variable '{}' is not declared", p.path, info.loss);

  // Variables written by Paddle's backward ops: the gradients.
  std::set<std::string> grads;
  for (size_t i = info.seed_op; i < p.ops.size(); ++i) {
    if (!info.backward[i]) continue;
    for (const std::string& o : AllOutputs(p.ops[i])) grads.insert(o);
  }
  // Paddle's data_norm_grad gives data_norm's statistics batch summaries
  // (the row count, sum x, sum (x - mean)^2 + count * epsilon) in place of
  // gradients, for the optimizer to apply; Tiller's autodiff computes
  // gradients, so it would update them differently. Training the layers
  // around a data_norm whose statistics stay fixed is fine.
  std::map<std::string, std::string> statistic_of;  // variable -> its data_norm op
  for (size_t i = 0; i < info.seed_op; ++i) {
    if (p.ops[i].type != "data_norm") continue;
    for (const char* slot : {"BatchSize", "BatchSum", "BatchSquareSum"}) {
      for (const std::string& n : p.ops[i].Inputs(slot))
        statistic_of.emplace(n, p.ops[i].Describe());
    }
  }
  for (size_t i = info.seed_op + 1; i < p.ops.size() && !statistic_of.empty(); ++i) {
    const OpDesc& op = p.ops[i];
    if (info.backward[i] || !op.HasInput("Param")) continue;
    auto it = statistic_of.find(op.Inputs("Param")[0]);
    if (it != statistic_of.end())
      Fail(ErrorKind::kUnimplemented,
           "{}: op {} updates '{}', a statistic of op {}: training data_norm's statistics is not "
           "supported (Paddle's data_norm_grad gives them batch summaries as gradients, which "
           "Tiller does not compute); make them non-trainable or run data_norm for inference",
           p.path, op.Describe(), it->first, it->second);
  }
  // Producer of each variable among the update ops, for tracing in PIR.
  std::map<std::string, size_t> producer;
  for (size_t i = info.seed_op + 1; i < p.ops.size(); ++i) {
    if (info.backward[i]) continue;
    for (const std::string& o : AllOutputs(p.ops[i])) producer.emplace(o, i);
  }
  auto dims_of = [&](const std::string& n) {
    const VarInfo* v = p.FindVar(n);
    return v ? v->dims : Shape{-2};
  };
  if (!legacy) {
    // An optimizer op's Grad is the parameter's gradient after clipping and
    // regularization: follow same-shaped operands back to a backward result.
    for (size_t i = info.seed_op + 1; i < p.ops.size(); ++i) {
      const OpDesc& op = p.ops[i];
      if (info.backward[i] || !op.HasInput("Param") || !op.HasInput("Grad")) continue;
      const std::string& param = op.Inputs("Param")[0];
      Shape shape = dims_of(param);
      // A worklist, not recursion: a program may put any number of ops
      // between a gradient and its update, and each would be a stack frame.
      std::set<std::string> seen;
      std::vector<std::string> pending = {op.Inputs("Grad")[0]};
      while (!pending.empty()) {
        const std::string v = std::move(pending.back());
        pending.pop_back();
        if (!seen.insert(v).second) continue;
        if (grads.count(v)) {
          auto [it, fresh] = info.grad_of.emplace(v, param);
          if (!fresh && it->second != param)
            Fail(ErrorKind::kInvalidArgument,
                 "{}: gradient {} feeds the updates of both '{}' and '{}'", p.path, v, it->second,
                 param);
          continue;
        }
        auto prod = producer.find(v);
        if (prod == producer.end() || prod->second >= i) continue;
        const std::vector<std::string> ins = AllInputs(p.ops[prod->second]);
        // Pushed in reverse so they are visited in operand order, as the
        // recursion did (the first conflicting pair named stays the same).
        for (auto in = ins.rbegin(); in != ins.rend(); ++in) {
          if (dims_of(*in) == shape) pending.push_back(*in);
        }
      }
    }
  }
  for (size_t i = info.seed_op + 1; i < p.ops.size(); ++i) {
    if (info.backward[i]) continue;
    const OpDesc& op = p.ops[i];
    for (const std::string& in : AllInputs(op)) {
      if (!grads.count(in)) continue;
      if (legacy && !info.grad_of.count(in)) {
        std::string base = in.substr(0, in.find("@GRAD"));
        if (!EndsWith(in, "@GRAD") || !p.FindVar(base))
          Fail(ErrorKind::kInvalidArgument,
               "{}: op {} reads '{}', a backward variable that is not the gradient of a forward "
               "variable",
               p.path, op.Describe(), in);
        info.grad_of[in] = base;
      }
      auto it = info.grad_of.find(in);
      if (it == info.grad_of.end())
        Fail(ErrorKind::kInvalidArgument,
             "{}: op {} reads gradient {}, which cannot be traced to the parameter of an optimizer "
             "op",
             p.path, op.Describe(), in);
      if (std::find(info.trained.begin(), info.trained.end(), it->second) == info.trained.end())
        info.trained.push_back(it->second);
    }
  }
  for (size_t i = info.seed_op + 1; i < p.ops.size() && info.checks_finite_op.empty(); ++i) {
    if (!info.backward[i] && p.ops[i].type == "check_finite_and_unscale")
      info.checks_finite_op = p.ops[i].Describe();
  }
  if (info.trained.empty())
    Fail(ErrorKind::kInvalidArgument,
         "{}: no op after the backward part reads a gradient (no optimizer ops?)", p.path);
  return info;
}

struct TrainingTranslation::Impl {
  const Program& program;
  const TrainingProgramInfo& info;
  std::vector<std::string> fetch_names;
  TrainingGraphOptions options;
  std::unique_ptr<ir::Graph> graph;
  std::unique_ptr<TranslateContext> ctx;
  std::map<std::string, ir::Value*> initial;
  ir::Value* loss = nullptr;
  std::vector<std::pair<std::string, ir::Value*>> gradients;

  Impl(const Program& p, const TrainingProgramInfo& i) : program(p), info(i) {}
};

TrainingTranslation::TrainingTranslation(const Program& program, const TrainingProgramInfo& info,
                                         const std::map<std::string, ir::TensorType>& state_types,
                                         const std::vector<std::string>& feed_names,
                                         const std::vector<ir::TensorType>& feed_types,
                                         const std::vector<std::string>& fetch_names,
                                         ir::Graph::Folder folder,
                                         const TrainingGraphOptions& options)
    : impl_(std::make_unique<Impl>(program, info)) {
  Impl& t = *impl_;
  t.fetch_names = fetch_names;
  t.options = options;
  TILLER_CHECK(feed_names.size() == feed_types.size(), "{} feed types for {} feeds",
               feed_types.size(), feed_names.size());
  auto translated = [&](size_t i) {
    if (options.eval) return i < info.seed_op;
    return !info.backward[i];
  };
  std::map<std::string, int> missing;
  for (size_t i = 0; i < program.ops.size(); ++i) {
    if (translated(i) && !FindTranslator(program.ops[i].type)) ++missing[program.ops[i].type];
  }
  FailUnsupportedOps(program.path, missing);

  t.graph = std::make_unique<ir::Graph>();
  t.graph->set_folder(std::move(folder));
  t.ctx = std::make_unique<TranslateContext>(program, *t.graph);
  TranslateContext& ctx = *t.ctx;
  ctx.set_random_seed(options.random_seed);
  ctx.set_training(!options.eval);
  ctx.set_no_bias_optimizer(options.no_bias_optimizer);
  ctx.set_max_weight_norm(options.max_weight_norm);
  for (size_t i = 0; i < feed_names.size(); ++i) {
    if (std::find(info.state.begin(), info.state.end(), feed_names[i]) != info.state.end())
      Fail(ErrorKind::kInvalidArgument, "{}: '{}' is a persistable variable, not a feed",
           program.path, feed_names[i]);
    ctx.Bind(feed_names[i], t.graph->AddInput(feed_names[i], feed_types[i]));
  }
  for (const std::string& name : info.state) {
    auto it = state_types.find(name);
    TILLER_CHECK(it != state_types.end(), "no type for state '{}'", name);
    ir::Value* v = t.graph->AddState(name, it->second);
    t.initial[name] = v;
    ctx.Bind(name, v);
  }
}

TrainingTranslation::~TrainingTranslation() = default;

ir::Graph& TrainingTranslation::graph() {
  return *impl_->graph;
}

ir::Value* TrainingTranslation::Forward() {
  Impl& t = *impl_;
  for (size_t i = 0; i < t.info.seed_op; ++i) TranslateOp(*t.ctx, t.program.ops[i]);
  t.loss = t.ctx->Lookup(t.info.loss);
  if (!t.loss)
    Fail(ErrorKind::kInvalidArgument, "{}: loss '{}' is never computed", t.program.path,
         t.info.loss);
  return t.loss;
}

std::vector<ir::Value*> TrainingTranslation::Trained() {
  Impl& t = *impl_;
  std::vector<ir::Value*> wrt;
  for (const std::string& name : t.info.trained) {
    ir::Value* v = t.ctx->Lookup(name);
    if (!v)
      Fail(ErrorKind::kInvalidArgument, "{}: trained variable '{}' is never defined",
           t.program.path, name);
    if (!IsFloat(v->dtype()))
      Fail(ErrorKind::kInvalidArgument, "{}: trained variable '{}' has dtype {}", t.program.path,
           name, DTypeName(v->dtype()));
    wrt.push_back(v);
  }
  return wrt;
}

void TrainingTranslation::Update(const std::vector<ir::Value*>& gradients) {
  Impl& t = *impl_;
  TILLER_CHECK(!t.options.eval, "Update() of an eval step");
  TILLER_CHECK(gradients.size() == t.info.trained.size(), "{} gradients for {} trained variables",
               gradients.size(), t.info.trained.size());
  std::map<std::string, ir::Value*> grad_by_name;
  ir::Placement where = t.graph->placement_scope();
  where.phase = ir::Phase::kBackward;
  ir::ScopedPlacement backward(*t.graph, where);
  for (size_t k = 0; k < gradients.size(); ++k) {
    ir::Value* g = gradients[k];
    // Paddle seeds d(loss) with its fill value (a loss scale under AMP).
    if (t.info.loss_grad_seed != 1.0) {
      g = ir::MapGradient(*t.graph, g, [&](ir::Value* x) {
        return t.graph->Add1("scale", {x}, {{"scale", t.info.loss_grad_seed}, {"bias", 0.0}},
                             t.info.trained[k] + "@GRAD (loss seed)");
      });
    }
    grad_by_name[t.info.trained[k]] = g;
    // A table's row gradient is checked as its rows: the dense table is
    // computed only where a dense update reads it.
    t.gradients.emplace_back(t.info.trained[k], ir::GradientToCheck(g));
  }
  for (const auto& [grad_var, fwd] : t.info.grad_of) t.ctx->Bind(grad_var, grad_by_name.at(fwd));
  where.phase = ir::Phase::kUpdate;
  ir::ScopedPlacement update(*t.graph, where);
  for (size_t i = t.info.seed_op + 1; i < t.program.ops.size(); ++i) {
    if (!t.info.backward[i]) TranslateOp(*t.ctx, t.program.ops[i]);
  }
}

std::vector<ir::Value*> TrainingTranslation::ReadGradients() const {
  std::vector<ir::Value*> out;
  for (const auto& [name, g] : impl_->gradients) out.push_back(g);
  return out;
}

TrainingGraph TrainingTranslation::Finish() {
  Impl& t = *impl_;
  ir::Graph& graph = *t.graph;
  for (const std::string& name : t.fetch_names) {
    ir::Value* v = t.ctx->Lookup(name);
    if (!v)
      Fail(ErrorKind::kInvalidArgument, "{}: fetch target '{}' is not computed by the {} step",
           t.program.path, name, t.options.eval ? "eval" : "training");
    graph.AddOutput(name, v);
  }
  graph.AddOutput(t.info.loss, t.loss);
  if (!t.options.eval) {
    for (const std::string& name : t.info.state) {
      ir::Value* now = t.ctx->Lookup(name);
      ir::Value* was = t.initial.at(name);
      if (now == was) continue;
      if (now->dtype() != was->dtype() || now->shape() != was->shape())
        Fail(ErrorKind::kInvalidArgument,
             "{}: persistable '{}' is {} but the step writes {} into it", t.program.path, name,
             was->type.ToString(), now->type.ToString());
      graph.SetStateUpdate(was, now);
    }
  }
  graph.RemoveDeadCode();
  ir::Verify(graph);
  TrainingGraph result;
  result.loss = t.loss;
  result.gradients = std::move(t.gradients);
  result.graph = std::move(t.graph);
  return result;
}

}  // namespace tiller::paddle
