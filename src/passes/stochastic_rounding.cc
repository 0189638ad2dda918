// Stochastic rounding (the IPU option enable_stochastic_rounding), training:
//   cast(x float32){dtype = bfloat16 | float16}
//     -> stochastic_cast(x, step){dtype, seed}
// for every cast to a half type: the operands the mixed-precision pass
// rounds (run without folding casts into producers, so each rounding is a
// cast) and optimizer accumulators stored in float16. `step` is the graph's
// step-number input (ir::kStepInputName), added when missing.
#include <fmt/format.h>

#include "passes/pass.h"

namespace tiller::passes {

int RoundStochastically(ir::Graph& g, uint64_t seed, std::string* detail) {
  std::vector<ir::Op*> casts;
  for (const auto& op : g.ops()) {
    if (!op->is(ir::Opcode::cast) || op->inputs[0]->dtype() != DType::kF32) continue;
    const DType to = op->outputs[0]->dtype();
    if (to == DType::kBF16 || to == DType::kF16) casts.push_back(op.get());
  }
  if (casts.empty()) return 0;
  ir::Value* step = nullptr;
  for (ir::Value* in : g.inputs()) {
    if (in->name == ir::kStepInputName) step = in;
  }
  if (!step) step = g.AddInput(ir::kStepInputName, {DType::kI64, {1}});
  std::map<std::string, int> counts;
  for (ir::Op* cast : casts) {
    g.SetInsertionPoint(cast);
    const std::string dtype = cast->GetStr("dtype");
    ir::Value* rounded =
        g.Add1("stochastic_cast", {cast->inputs[0], step},
               {{"dtype", dtype}, {"seed", static_cast<int64_t>(seed)}}, cast->name);
    g.ReplaceAllUses(cast->outputs[0], rounded);
    ++counts[dtype];
  }
  g.SetInsertionPoint(nullptr);
  g.RemoveDeadCode();
  if (detail) {
    for (const auto& [dtype, n] : counts)
      *detail += fmt::format("{}{} casts to {}", detail->empty() ? "" : ", ", n, dtype);
  }
  return static_cast<int>(casts.size());
}

}  // namespace tiller::passes
