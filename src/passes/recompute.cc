// Recomputation (Paddle's auto_recomputation):
//   forward: x -> a -> b -> loss        backward reads a, b
//   ==>  forward: x -> a -> b -> loss   backward: x -> a' -> b' (recomputed), reads a', b'
// Backward ops read forward activations again computed from checkpoints
// (graph inputs, weights, state, values that arrive from another pipeline
// stage, and, in the standard mode, the outputs of matmul / linear / conv /
// embedding ops), so the activations after them die when the forward pass
// ends instead of living until their gradient: the peak memory drops by
// them, at the price of running those ops again. The pipeline mode
// (auto_recomputation 3 and 4) keeps only the stage inputs: a micro-batch
// in flight holds nothing else, and the backward runs its stage's forward
// again, matmuls included.
// A recomputed value is made once, right before its first backward reader,
// on its forward op's shard and stage in the backward phase. Ops with side
// effects and random generators (whose draws would differ) are kept, not
// recomputed; dropout draws from (seed, step), so its recomputation repeats
// the mask.
#include <map>
#include <set>

#include "ir/op_schema.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

// Not recomputed: ops with side effects, random generators, and the
// expensive ops whose outputs serve as checkpoints (recomputing a GEMM costs
// what it saves; the cheap ops after it — activations, norms, softmax,
// elementwise — are recomputed from it).
bool Kept(const ir::Op& op, bool only_stage_inputs) {
  if (op.schema->side_effects) return true;
  switch (op.opcode) {
    case ir::Opcode::random_normal:
    case ir::Opcode::random_uniform:
      return true;
    case ir::Opcode::matmul:
    case ir::Opcode::linear:
    case ir::Opcode::conv2d:
    case ir::Opcode::conv2d_transpose:
    case ir::Opcode::embedding:  // the checkpoints
      return !only_stage_inputs;
    default:
      return false;
  }
}

class Recomputer {
 public:
  Recomputer(ir::Graph& g, bool only_stage_inputs) : g_(g), only_stage_inputs_(only_stage_inputs) {
    // Stage inputs: forward values read by a forward op of another stage.
    for (const auto& op : g.ops()) {
      if (op->placement.phase != ir::Phase::kForward) continue;
      for (const ir::Value* in : op->inputs) {
        if (in && in->producer && in->producer->placement.phase == ir::Phase::kForward &&
            ir::PipelineOrder(in->producer->placement) != ir::PipelineOrder(op->placement))
          stage_inputs_.insert(in);
      }
    }
  }

  // The value the backward op `reader` should read for `v`.
  ir::Value* For(ir::Value* v, const ir::Op* reader) {
    if (!Recomputable(v)) return v;
    auto it = done_.find(v);
    if (it != done_.end()) return it->second;
    const ir::Op& op = *v->producer;
    std::vector<ir::Value*> inputs;
    for (ir::Value* in : op.inputs) inputs.push_back(in ? For(in, reader) : nullptr);
    g_.SetInsertionPoint(reader);
    ir::Placement p = op.placement;
    p.phase = ir::Phase::kBackward;
    g_.set_placement_scope(p);
    ir::Op* clone = g_.AddOp(op.type, inputs, op.attrs, op.name + " (recomputed)");
    g_.SetInsertionPoint(nullptr);
    ++clones_;
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      clone->outputs[i]->name = op.outputs[i]->name;
      done_[op.outputs[i]] = clone->outputs[i];
    }
    return done_.at(v);
  }

  int clones() const { return clones_; }

 private:
  bool Recomputable(const ir::Value* v) const {
    return v->producer && v->kind == ir::ValueKind::kIntermediate &&
           v->producer->placement.phase == ir::Phase::kForward &&
           !Kept(*v->producer, only_stage_inputs_) && !stage_inputs_.count(v);
  }

  ir::Graph& g_;
  bool only_stage_inputs_;
  std::set<const ir::Value*> stage_inputs_;
  std::map<const ir::Value*, ir::Value*> done_;
  int clones_ = 0;
};

}  // namespace

int RecomputeActivations(ir::Graph& g, bool only_stage_inputs) {
  Recomputer r(g, only_stage_inputs);
  std::vector<ir::Op*> backward;
  for (const auto& op : g.ops()) {
    if (op->placement.phase == ir::Phase::kBackward) backward.push_back(op.get());
  }
  for (ir::Op* op : backward) {
    for (size_t i = 0; i < op->inputs.size(); ++i) {
      ir::Value* in = op->inputs[i];
      if (!in) continue;
      ir::Value* again = r.For(in, op);
      if (again != in) g.ReplaceInput(op, i, again);
    }
  }
  return r.clones();
}

}  // namespace tiller::passes
