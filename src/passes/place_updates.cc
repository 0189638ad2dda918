// update op reading weight W, or gradient dW      update op
//   (placed where it happened to be built)  ==>    placed like W's first forward consumer
// The optimizer runs where its weight lives (as on the IPU: each shard
// updates its own weights), so an update op takes the shard and stage of
// the forward op that first reads the state it updates, else of the op
// producing its gradient input; ops computed from other update ops (global
// norms, beta-power steps) follow them. The phase stays kUpdate.
#include <map>

#include "passes/pass.h"

namespace tiller::passes {

int PlaceUpdateOps(ir::Graph& g) {
  // The first forward op reading each state.
  std::map<const ir::Value*, const ir::Op*> first_reader;
  for (const auto& op : g.ops()) {
    if (op->placement.phase != ir::Phase::kForward) continue;
    for (const ir::Value* in : op->inputs) {
      if (in && in->kind == ir::ValueKind::kState) first_reader.try_emplace(in, op.get());
    }
  }
  int moved = 0;
  for (const auto& op : g.ops()) {
    if (op->placement.phase != ir::Phase::kUpdate) continue;
    const ir::Op* anchor = nullptr;
    for (const ir::Value* in : op->inputs) {
      if (!in) continue;
      auto it = first_reader.find(in);
      if (it != first_reader.end()) {
        anchor = it->second;
        break;
      }
    }
    for (size_t i = 0; !anchor && i < op->inputs.size(); ++i) {
      const ir::Value* in = op->inputs[i];
      if (in && in->producer && in->producer->placement.phase != ir::Phase::kUpdate)
        anchor = in->producer;
    }
    for (size_t i = 0; !anchor && i < op->inputs.size(); ++i) {
      const ir::Value* in = op->inputs[i];
      if (in && in->producer) anchor = in->producer;  // an update op placed before
    }
    if (!anchor) continue;
    ir::Placement p = anchor->placement;
    p.phase = ir::Phase::kUpdate;
    if (p == op->placement) continue;
    op->placement = p;
    ++moved;
  }
  return moved;
}

}  // namespace tiller::passes
