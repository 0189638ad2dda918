// backward values a half type rounds (a cast's float32 input, or the half
// output of a converted op that writes it)
//   ==>  gradient_histogram(value) -> accumulate into one float64 [3] state
// The statistics loss scaling steers by (Graphcore's automatic loss
// scaling, and the underflow Tiller reports): per update window, how many
// gradient elements the half type flushes to zero, how many lie below the
// bin edge (bin_edge_location x the half type's largest value) and how many
// at or above it. Each histogram runs right where its value is rounded and
// yields three numbers, so no gradient lives longer than before.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "ir/op_schema.h"
#include "passes/pass.h"

namespace tiller::passes {

GradientStatisticsBounds BoundsOf(DType half, double bin_edge_location) {
  // Largest finite value and half the smallest positive (subnormal) one:
  // what rounds to zero, ties to even included.
  if (half == DType::kF16) return {65504.0 * bin_edge_location, std::ldexp(1.0, -25)};
  if (half == DType::kBF16)
    return {3.3895313892515355e38 * bin_edge_location, std::ldexp(1.0, -134)};
  return {std::numeric_limits<float>::max() * bin_edge_location, std::ldexp(1.0, -150)};
}

int AddGradientHistograms(ir::Graph& g, DType half, double bin_edge_location,
                          const std::string& state_name, std::vector<std::string>* states,
                          std::string* detail) {
  const GradientStatisticsBounds bounds = BoundsOf(half, bin_edge_location);
  const std::string half_name = DTypeName(half);
  // (value, the op to insert its histogram before), in program order.
  std::vector<std::pair<ir::Value*, ir::Op*>> tracked;
  std::set<const ir::Value*> seen;
  const auto& ops = g.ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    ir::Op* op = ops[i].get();
    if (op->placement.phase != ir::Phase::kBackward) continue;
    if (op->is(ir::Opcode::cast) && op->outputs[0]->dtype() == half &&
        op->inputs[0]->dtype() == DType::kF32 && !op->inputs[0]->is_constant()) {
      if (seen.insert(op->inputs[0]).second) tracked.push_back({op->inputs[0], op});
    } else if (op->schema && op->schema->FindAttr("out_dtype") &&
               op->GetStr("out_dtype") == half_name && op->outputs[0]->dtype() == half) {
      ir::Op* next = i + 1 < ops.size() ? ops[i + 1].get() : nullptr;
      if (seen.insert(op->outputs[0]).second) tracked.push_back({op->outputs[0], next});
    }
  }
  // One sum per shard: the shards of a pipeline run their backward passes
  // at once, so they must not add into one state.
  struct Sum {
    ir::Value* state;
    ir::Value* value;
  };
  std::map<int, Sum> sums;
  const ir::AttrMap attrs{{"edge", bounds.edge}, {"underflow", bounds.underflow}};
  for (auto& [value, before] : tracked) {
    g.SetInsertionPoint(before);
    const int shard = g.placement_scope().shard;
    auto it = sums.find(shard);
    if (it == sums.end()) {
      const std::string name =
          sums.empty() ? state_name : fmt::format("{}@{}", state_name, sums.size());
      ir::Value* state = g.AddState(name, {DType::kF64, {3}});
      it = sums.emplace(shard, Sum{state, state}).first;
      states->push_back(name);
    }
    ir::Value* h = g.Add1("gradient_histogram", {value}, attrs, value->name + ".histogram");
    it->second.value = g.Add1("accumulate", {it->second.value, h});
    g.SetInsertionPoint(nullptr);
  }
  for (auto& [shard, sum] : sums) g.SetStateUpdate(sum.state, sum.value);
  if (detail && !tracked.empty())
    *detail = fmt::format(
        "{} backward values rounded to {} counted per update: flushed to zero (|g| <= {:.3g}), "
        "below and above the bin edge {:.6g}",
        tracked.size(), half_name, bounds.underflow, bounds.edge);
  return static_cast<int>(tracked.size());
}

}  // namespace tiller::passes
