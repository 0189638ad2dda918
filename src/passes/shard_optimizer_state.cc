// Replicated tensor sharding of the optimizer (Paddle's location_optimizer
// {use_replicated_tensor_sharding}), on replica `rank` of R:
//
//   g = all_reduce(g_local)                 g_part = reduce_scatter(flat(g_local))
//   (w', m', v', b1', b2') =          ==>   w_part = slice(flat(w), part)
//       adam(w, g, lr, m, v, b1, b2)        (w_part', m', v', b1', b2') =
//                                               adam(w_part, g_part, lr, m, v, b1, b2)
//                                           w' = reshape(all_gather(w_part'))
//
// where m and v become states of `part`'s size: each replica keeps and
// updates 1/R of every per-element optimizer state, and the reduce-scatter +
// all-gather move the bytes of one all-reduce. The optimizer ops are
// elementwise and the reduce-scatter adds in the all-reduce's order, so the
// results are the same bytes as without sharding.
//
// Kept whole (replicated as before), with the reason in the report: lamb
// (its trust ratio needs the norms of whole tensors), weights with fewer
// than `min_elements` elements (PopART's minElementsForReplicatedTensor
// Sharding: small tensors are not worth a collective), and ops whose state
// something else also reads. A gradient something else reads too (global-
// norm clipping) stays all-reduced and is sliced instead.
#include <fmt/format.h>

#include <map>

#include "ir/ops/optimizer.h"
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

// Why an optimizer op keeps its state whole; "" when it can be sharded.
// `sharded` gets the per-element state inputs (with their output index).
std::string Refusal(const ir::Graph& g, const ir::Op& op, const ShardOptions& o,
                    const std::map<const ir::Value*, const ir::Value*>& update_of,
                    std::vector<std::pair<size_t, size_t>>* sharded) {
  if (op.is(ir::Opcode::lamb)) return "lamb (trust ratio of whole tensors)";
  const ir::Value* w = op.input(0);
  auto it = update_of.find(w);
  if (w->kind != ir::ValueKind::kState || it == update_of.end() || it->second != op.output(0))
    return "weight not a state the op updates";
  const int64_t n = NumElements(w->shape());
  if (n < o.min_elements || n < o.replicas) return "fewer elements than the threshold";
  for (size_t k = 1; k < op.outputs.size(); ++k) {
    const size_t i = ir::OptimizerUpdatedInput(k);
    const ir::Value* s = op.input(i);
    if (!s || s->shape() != w->shape()) continue;  // one-element (beta powers)
    auto u = update_of.find(s);
    if (s->kind != ir::ValueKind::kState || u == update_of.end() || u->second != op.output(k) ||
        s->users.size() != 1 || !op.output(k)->users.empty() || IsGraphOutput(g, op.output(k)))
      return "state read elsewhere";
    sharded->emplace_back(i, k);
  }
  return "";
}

}  // namespace

int ShardOptimizerState(ir::Graph& g, const ShardOptions& o, std::vector<ShardedState>* out,
                        std::string* detail) {
  std::map<const ir::Value*, const ir::Value*> update_of;
  for (const auto& [state, v] : g.state_updates()) update_of[state] = v;
  std::vector<ir::Op*> optimizers;
  for (const auto& op : g.ops()) {
    if (ir::IsOptimizerOp(op->type)) optimizers.push_back(op.get());
  }
  std::map<std::string, int> kept;
  std::vector<ir::Value*> replaced;
  int rewritten = 0;
  size_t whole_bytes = 0, part_bytes = 0;
  for (ir::Op* op : optimizers) {
    std::vector<std::pair<size_t, size_t>> states;
    std::string why = Refusal(g, *op, o, update_of, &states);
    if (!why.empty()) {
      ++kept[why];
      continue;
    }
    ir::Value* w = op->input(0);
    const int64_t n = NumElements(w->shape());
    const PartRange part = PartOf(n, o.replicas, o.rank);
    const ir::TensorType part_type{w->dtype(), {part.size()}};
    g.SetInsertionPoint(op);
    auto flat = [&](ir::Value* v) { return g.Add1("reshape", {v}, {{"shape", Shape{n}}}); };
    auto slice = [&](ir::Value* v) {
      return g.Add1("slice", {flat(v)},
                    {{"axes", std::vector<int64_t>{0}},
                     {"starts", std::vector<int64_t>{part.begin}},
                     {"ends", std::vector<int64_t>{part.end}}});
    };
    std::vector<ir::Value*> inputs = op->inputs;
    inputs[0] = slice(w);
    ir::Value* grad = op->input(1);
    const ir::Op* reduce = grad->producer;
    if (reduce && reduce->is(ir::Opcode::all_reduce) && grad->users.size() == 1 &&
        !IsGraphOutput(g, grad)) {
      // The sum arrives already split: the all-reduce's bytes for this part.
      inputs[1] = g.Add1("reduce_scatter", {flat(reduce->input(0))},
                         {{"reduction", reduce->GetStr("reduction")},
                          {"scale", reduce->GetFloat("scale")},
                          {"parts", int64_t{o.replicas}},
                          {"rank", int64_t{o.rank}}});
      // The all-reduce goes with the old op; pins (the finite check of the
      // gradient) move to the part.
      g.ReplaceAllUses(grad, inputs[1]);
    } else {
      inputs[1] = slice(grad);
    }
    for (const auto& [i, k] : states) {
      ir::Value* s = op->input(i);
      inputs[i] = g.AddState(s->name, part_type);
      out->push_back({s->name, s->type, part});
      replaced.push_back(s);
      whole_bytes += s->bytes();
      part_bytes += part_type.bytes();
    }
    ir::Op* sharded = g.AddOp(op->type, inputs, op->attrs, op->name + " (sharded)");
    ir::Value* gathered =
        g.Add1("all_gather", {sharded->output(0)},
               {{"parts", int64_t{o.replicas}}, {"rank", int64_t{o.rank}}, {"size", n}});
    g.ReplaceAllUses(op->output(0), g.Add1("reshape", {gathered}, {{"shape", w->shape()}}));
    RebindOptimizerStates(g, *op, *sharded, inputs);
    ++rewritten;
  }
  g.SetInsertionPoint(nullptr);
  for (ir::Value* s : replaced) g.RemoveState(s);
  g.RemoveDeadCode();
  *detail = fmt::format(
      "{} of {} optimizer ops sharded over {} replicas (this is part {}): {} state tensors, "
      "{:.3f} MB -> {:.3f} MB",
      rewritten, optimizers.size(), o.replicas, o.rank, replaced.size(), whole_bytes / 1e6,
      part_bytes / 1e6);
  for (const auto& [why, count] : kept) *detail += fmt::format("; kept whole: {} x{}", why, count);
  return rewritten;
}

}  // namespace tiller::passes
