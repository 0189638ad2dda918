// Small queries shared by the rewrite passes.
#pragma once

#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"
#include "ir/ops/optimizer.h"

namespace tiller::passes {

// Elementwise in any layout, with a 4-D result (what the layout passes move
// into their chains). Not random ops (a seeded mask or rounding is drawn
// per position: another layout draws other values) and not collectives
// (which pair elements across replicas by flat position).
inline bool IsLayoutAgnostic(const ir::Op& op) {
  const ir::OpSchema* s = ir::FindOpSchema(op.type);
  // Per-tensor quantization (one scale) is elementwise; per channel names
  // an axis, which would need renumbering.
  const bool per_tensor_quantization =
      (op.is(ir::Opcode::quantize_linear) || op.is(ir::Opcode::dequantize_linear)) &&
      op.GetInt("quant_axis") == -1;
  return s && (s->layout == ir::LayoutRule::kAgnostic || per_tensor_quantization) &&
         !s->side_effects && !s->FindAttr("seed") && !ir::IsCollective(op) &&
         op.outputs.size() == 1 && op.outputs[0]->rank() == 4;
}

// True for a value whose bytes are known at compile time (weights, constants).
inline bool HasData(const ir::Value* v) {
  return v && v->has_bytes();
}

// Whether `v` is one of the graph's outputs (fetched: a pattern must keep it).
inline bool IsGraphOutput(const ir::Graph& g, const ir::Value* v) {
  for (const auto& [name, out] : g.outputs()) {
    if (out == v) return true;
  }
  return false;
}

// After an optimizer op `op` was rewritten as `shard` with `inputs` (some
// of its states replaced by parts): each replaced state is updated by
// shard's output for it, and the others' outputs (beta powers) replace
// op's. Output 0 (the weight) is the caller's.
inline void RebindOptimizerStates(ir::Graph& g, const ir::Op& op, const ir::Op& shard,
                                  const std::vector<ir::Value*>& inputs) {
  for (size_t k = 1; k < op.outputs.size(); ++k) {
    const size_t i = ir::OptimizerUpdatedInput(k);
    if (inputs[i] != op.input(i))
      g.SetStateUpdate(inputs[i], shard.output(k));
    else
      g.ReplaceAllUses(op.output(k), shard.output(k));
  }
}

// Every replica's `v` (of `parts`, this being `rank`), flattened and
// concatenated in rank order: all_gather(reshape(v, [n])) -> [parts x n].
inline ir::Value* AllGatherFlat(ir::Graph& g, ir::Value* v, int64_t parts, int64_t rank) {
  const int64_t n = NumElements(v->shape());
  return g.Add1("all_gather", {g.Add1("reshape", {v}, {{"shape", Shape{n}}})},
                {{"parts", parts}, {"rank", rank}, {"size", n * parts}});
}
// The `v` an AllGatherFlat gathered, when `gathered` is one; else nullptr.
inline ir::Value* AllGatheredFrom(const ir::Value* gathered) {
  const ir::Op* all = gathered->producer;
  if (!all || !all->is(ir::Opcode::all_gather) || !all->input(0)->producer ||
      !all->input(0)->producer->is(ir::Opcode::reshape))
    return nullptr;
  return all->input(0)->producer->input(0);
}

// The graph's ops in their order, except that an op placed before one of
// its inputs' producers (a pass merged later ops into it) waits: each op
// goes after its producers, which move up to just before their first
// reader. For Graph::ReorderOps.
inline std::vector<const ir::Op*> ProducersFirst(const ir::Graph& g) {
  std::vector<const ir::Op*> order;
  std::unordered_set<const ir::Op*> placed;
  std::vector<std::pair<const ir::Op*, size_t>> stack;  // (op, next input to place)
  for (const auto& root : g.ops()) {
    if (placed.count(root.get())) continue;
    stack.push_back({root.get(), 0});
    while (!stack.empty()) {
      auto& [op, next] = stack.back();
      if (next < op->inputs.size()) {
        const ir::Value* in = op->inputs[next++];
        const ir::Op* p = in ? in->producer : nullptr;
        if (p && !placed.count(p)) stack.push_back({p, 0});
        continue;
      }
      if (placed.insert(op).second) order.push_back(op);
      stack.pop_back();
    }
  }
  return order;
}

// The single op using `v`, or nullptr when v has several users or is a graph
// output (then an intermediate the pattern would remove is still needed).
inline ir::Op* SoleUser(const ir::Graph& g, const ir::Value* v) {
  return v->users.size() == 1 && !IsGraphOutput(g, v) ? v->users[0] : nullptr;
}

// A residual add: when the sole user of `y` is add(y, r) with r another
// value of y's type (no broadcast) and the add runs where y's producer does
// (a pipeline stage may end between them), r, with `*add` set to the add;
// otherwise nullptr. fuse_conv_add and fuse_linear_residual fold it into
// the producer.
inline ir::Value* FindResidualAdd(const ir::Graph& g, const ir::Value* y, ir::Op** add) {
  ir::Op* a = SoleUser(g, y);
  if (!a || !a->is(ir::Opcode::add) || a->inputs[0] == a->inputs[1] ||
      a->placement != y->producer->placement)
    return nullptr;
  ir::Value* r = a->inputs[0] == y ? a->inputs[1] : a->inputs[0];
  if (r->type != y->type) return nullptr;
  *add = a;
  return r;
}

// When every user of `v` is a matmul reading it as one operand (not both)
// and v is no graph output: those matmuls (a fold into their operands then
// removes v's producer); otherwise empty.
inline std::vector<ir::Op*> MatmulUsers(const ir::Graph& g, const ir::Value* v) {
  if (IsGraphOutput(g, v)) return {};
  for (const ir::Op* u : v->users) {
    if (!u->is(ir::Opcode::matmul) || (u->inputs[0] == v && u->inputs[1] == v)) return {};
  }
  return v->users;
}

// The ops of type `opcode`, in graph order, collected before a rewrite adds
// or removes any (the graph's op list changes under the rewrite).
inline std::vector<ir::Op*> OpsOfType(const ir::Graph& g, ir::Opcode opcode) {
  std::vector<ir::Op*> out;
  for (const auto& op : g.ops()) {
    if (op->is(opcode)) out.push_back(op.get());
  }
  return out;
}

// Where a convolution's bias input sits: conv2d_int8's output scale comes
// before it (conv2d, conv2d_transpose: 2). The residual follows the bias.
inline size_t ConvBiasIndex(const ir::Op& conv) {
  return conv.is(ir::Opcode::conv2d_int8) ? 3 : 2;
}

// The end of a fusion: adds op `type`(ins){attrs}, named `name`, where
// `last` (the last op of the matched pattern) is and with its placement,
// and gives it every use of last's result, whose name it takes. Returns the
// new value. (Dead-code removal then drops the pattern.)
inline ir::Value* ReplaceResult(ir::Graph& g, ir::Op* last, const std::string& type,
                                std::vector<ir::Value*> ins, ir::AttrMap attrs,
                                const std::string& name) {
  g.SetInsertionPoint(last);
  ir::Value* fused = g.Add1(type, std::move(ins), std::move(attrs), name);
  g.SetInsertionPoint(nullptr);
  fused->name = last->outputs[0]->name;
  g.ReplaceAllUses(last->outputs[0], fused);
  return fused;
}

// A GEMM's bias: when the sole user of `out` ([..., n]) is add(out, b) with
// b of n values along the last dim (a constant, or with `variable` any
// value of out's type: a trained bias), the add keeps out's shape and runs
// where the GEMM does, b as
// a 1-D [n] value (reshaped before `*last` when needed) with `*last` set to
// the add; otherwise nullptr and `*last` unchanged.
inline ir::Value* FindBiasAdd(ir::Graph& g, ir::Value* out, int64_t n, ir::Op** last,
                              bool variable = false) {
  ir::Op* add = SoleUser(g, out);
  // The fused op runs where the add ran: only when the GEMM runs there too
  // (a pipeline stage may end between them).
  if (!add || !add->is(ir::Opcode::add) || add->placement != out->producer->placement)
    return nullptr;
  ir::Value* b = add->inputs[0] == out ? add->inputs[1] : add->inputs[0];
  if (!(HasData(b) || (variable && b->dtype() == out->dtype())) || NumElements(b->shape()) != n ||
      b->shape().back() != n || add->outputs[0]->shape() != out->shape())
    return nullptr;
  *last = add;
  if (b->rank() == 1) return b;
  g.SetInsertionPoint(add);
  b = g.Add1("reshape", {b}, {{"shape", std::vector<int64_t>{n}}}, b->name);
  g.SetInsertionPoint(nullptr);
  return b;
}

}  // namespace tiller::passes
