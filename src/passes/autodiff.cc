#include "passes/autodiff.h"

#include <set>

#include "core/error.h"
#include "ir/grad.h"

namespace tiller::passes {
namespace {

std::shared_ptr<AlignedBuffer> Filled(const ir::TensorType& t, float value) {
  TILLER_CHECK(t.dtype == DType::kF32, "autodiff supports float32 losses, got {}",
               DTypeName(t.dtype));
  auto buf = std::make_shared<AlignedBuffer>(t.bytes());
  for (int64_t i = 0; i < NumElements(t.shape); ++i) buf->as<float>()[i] = value;
  return buf;
}

}  // namespace

std::map<const ir::Value*, ir::Value*> BuildBackward(ir::Graph& g, ir::Value* loss,
                                                     const std::vector<ir::Value*>& wrt, float seed,
                                                     ir::Value* seed_value) {
  // Values that depend on something in `wrt` (forward reachability) ...
  std::set<const ir::Value*> depends(wrt.begin(), wrt.end());
  std::vector<ir::Op*> forward;
  for (const auto& op : g.ops()) forward.push_back(op.get());
  for (ir::Op* op : forward) {
    for (const ir::Value* in : op->inputs) {
      if (in && depends.count(in)) {
        for (const ir::Value* out : op->outputs) depends.insert(out);
        break;
      }
    }
  }
  // ... and that the loss depends on (backward reachability).
  std::set<const ir::Value*> feeds_loss{loss};
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    ir::Op* op = *it;
    bool reaches = false;
    for (const ir::Value* out : op->outputs) reaches = reaches || feeds_loss.count(out);
    if (!reaches) continue;
    for (const ir::Value* in : op->inputs) {
      if (in) feeds_loss.insert(in);
    }
  }
  auto on_path = [&](const ir::Value* v) { return v && depends.count(v) && feeds_loss.count(v); };

  std::map<const ir::Value*, ir::Value*> grad;
  if (seed_value) {
    TILLER_CHECK(seed_value->type == loss->type, "seed {} for a loss {}",
                 seed_value->type.ToString(), loss->type.ToString());
    grad[loss] = seed_value;
  } else {
    grad[loss] =
        g.AddData("loss.grad_seed", loss->type, ir::ValueKind::kConstant, Filled(loss->type, seed));
  }
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    ir::Op* op = *it;
    std::vector<ir::Value*> out_grads;
    bool any = false;
    for (const ir::Value* out : op->outputs) {
      auto found = grad.find(out);
      out_grads.push_back(found == grad.end() ? nullptr : found->second);
      any = any || found != grad.end();
    }
    std::vector<bool> needs;
    bool wanted = false;
    for (const ir::Value* in : op->inputs) {
      needs.push_back(on_path(in) && IsFloat(in->dtype()));
      wanted = wanted || needs.back();
    }
    if (!any || !wanted) continue;
    const ir::GradFn* rule = ir::FindGrad(op->type);
    if (!rule)
      Fail(ErrorKind::kUnimplemented, "op {} ({}) has no gradient rule, but the loss depends on it",
           op->type, op->name);
    // Gradient ops run where their forward op runs, in the backward phase;
    // the sums of fan-out gradients too (they belong to the consumer's rule).
    ir::Placement where = op->placement;
    where.phase = ir::Phase::kBackward;
    ir::ScopedPlacement scope(g, where);
    ir::GradContext ctx(g, *op, out_grads, needs);
    (*rule)(ctx);
    for (size_t i = 0; i < op->inputs.size(); ++i) {
      ir::Value* gi = ctx.input_grads()[i];
      if (!gi) continue;
      const ir::Value* in = op->inputs[i];
      auto [slot, fresh] = grad.try_emplace(in, gi);
      if (!fresh) slot->second = g.Add1("add", {slot->second, gi}, {}, in->name + ".grad_sum");
    }
  }
  std::map<const ir::Value*, ir::Value*> result;
  for (ir::Value* v : wrt) {
    auto found = grad.find(v);
    result[v] = found != grad.end() ? found->second
                                    : g.AddData(v->name + ".grad", v->type,
                                                ir::ValueKind::kConstant, Filled(v->type, 0.f));
  }
  return result;
}

}  // namespace tiller::passes
