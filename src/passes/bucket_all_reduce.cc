// all_reduce(g1), all_reduce(g2), ...          all_reduce(g1, g2, ...)
//   (one per gradient, same placement,   ==>    one message per bucket of at most
//    reduction, scale and dtype)                max_bytes, outputs in the same order
// A replica's step sums about a hundred gradients (BERT); each collective
// costs every rank a meeting (a barrier in process, a latency across
// processes), so gradients are sent in a few large messages instead. A
// bucket closes before the first op reading one of its results (it is
// inserted there), when the next gradient would overflow it, or at the end.
// The sums are unchanged: each element is still added in rank order, then
// scaled.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "ir/ops/op_helpers.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

struct Bucket {
  std::vector<ir::Op*> members;
  size_t bytes = 0;
};

// What must agree for reductions to share a message.
using Key = std::tuple<int, int, int, DType, std::string, double, std::vector<int64_t>>;

Key KeyOf(const ir::Op& op) {
  return {op.placement.shard,    op.placement.stage,     static_cast<int>(op.placement.phase),
          op.inputs[0]->dtype(), op.GetStr("reduction"), op.GetFloat("scale"),
          op.GetInts("group")};
}

// Each run of consecutive single-input all_reduce ops (the driver adds one
// per gradient, in parameter order) sorted by where their gradient is
// computed: the backward pass makes the last layers' gradients first, so
// the first buckets are ready first (overlap_all_reduce starts them there).
void OrderAllReduceByReadiness(ir::Graph& g) {
  std::map<const ir::Op*, size_t> index;
  std::vector<const ir::Op*> order;
  for (const auto& op : g.ops()) {
    index[op.get()] = order.size();
    order.push_back(op.get());
  }
  auto single = [](const ir::Op* op) {
    return op->is(ir::Opcode::all_reduce) && op->inputs.size() == 1;
  };
  auto ready = [&](const ir::Op* op) {
    const ir::Op* producer = op->inputs[0]->producer;
    return producer ? index.at(producer) : 0;
  };
  bool moved = false;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && single(order[j])) ++j;
    if (j - i > 1) {
      std::vector<const ir::Op*> run(order.begin() + i, order.begin() + j);
      std::stable_sort(run.begin(), run.end(),
                       [&](const ir::Op* a, const ir::Op* b) { return ready(a) < ready(b); });
      moved |= !std::equal(run.begin(), run.end(), order.begin() + i);
      std::copy(run.begin(), run.end(), order.begin() + i);
    }
    i = std::max(j, i + 1);
  }
  if (moved) g.ReorderOps(order);
}

}  // namespace

int OverlapAllReduce(ir::Graph& g) {
  // The ops as they stand, and each one's place among them.
  std::vector<const ir::Op*> order;
  std::map<const ir::Op*, size_t> index;
  std::vector<ir::Op*> reductions;
  for (const auto& op : g.ops()) {
    index[op.get()] = order.size();
    order.push_back(op.get());
    if (op->is(ir::Opcode::all_reduce)) reductions.push_back(op.get());
  }
  // A rank's collectives meet its peers' in program order, one at a time: a
  // reduction in flight on the collective stream must not meet another
  // collective that the device's own stream runs meanwhile (a
  // reduce_scatter of replicated tensor sharding, an all_reduce of a state).
  // Only where every collective can be split (an all_reduce in the update
  // of gradients computed in the backward pass) does any split.
  for (const auto& op : g.ops()) {
    const bool collective =
        ir::IsCollective(*op) || op->is(ir::Opcode::send) || op->is(ir::Opcode::recv);
    if (!collective) continue;
    bool splittable = op->is(ir::Opcode::all_reduce) && op->placement.phase == ir::Phase::kUpdate;
    for (const ir::Value* in : op->inputs)
      splittable =
          splittable && in->producer && in->producer->placement.phase == ir::Phase::kBackward;
    if (!splittable) return 0;
  }
  int split = 0;
  for (ir::Op* reduce : reductions) {
    // The reduction starts right after the last of its gradients (before
    // the op that followed it; an earlier start put there stays before).
    const ir::Op* last = nullptr;
    for (const ir::Value* in : reduce->inputs)
      if (!last || index.at(in->producer) > index.at(last)) last = in->producer;
    const size_t after = index.at(last) + 1;
    g.SetInsertionPoint(after < order.size() ? order[after] : nullptr);
    ir::Op* start;
    {
      ir::ScopedPlacement place(g, last->placement);
      start = g.AddOp("all_reduce_start", reduce->inputs,
                      {{"reduction", reduce->GetStr("reduction")},
                       {"group", reduce->GetInts("group")},
                       {"scale", reduce->GetFloat("scale")}},
                      reduce->name);
    }
    std::vector<int64_t> dims, ranks;
    for (const ir::Value* out : reduce->outputs) {
      dims.insert(dims.end(), out->shape().begin(), out->shape().end());
      ranks.push_back(static_cast<int64_t>(out->shape().size()));
    }
    g.SetInsertionPoint(reduce);
    ir::Op* wait = g.AddOp("all_reduce_wait", {start->outputs[0]},
                           {{"dims", dims}, {"ranks", ranks}}, reduce->name);
    g.SetInsertionPoint(nullptr);
    for (size_t i = 0; i < reduce->outputs.size(); ++i)
      g.ReplaceAllUses(reduce->outputs[i], wait->outputs[i]);
    ++split;
  }
  if (split) g.RemoveDeadCode();
  return split;
}

int BucketAllReduce(ir::Graph& g, size_t max_bytes) {
  OrderAllReduceByReadiness(g);
  std::vector<ir::Op*> order;
  for (const auto& op : g.ops()) order.push_back(op.get());
  std::map<Key, Bucket> open;
  std::map<const ir::Value*, Key> pending;  // a member's result -> its bucket
  int merged = 0;
  // Replaces the bucket's ops by one, inserted before `before` (nullptr: at
  // the end) with the members' placement.
  auto flush = [&](const Key& key, const ir::Op* before) {
    Bucket bucket = std::move(open.at(key));
    open.erase(key);
    for (const ir::Op* m : bucket.members) pending.erase(m->outputs[0]);
    if (bucket.members.size() < 2) return;
    const ir::Op& first = *bucket.members.front();
    std::vector<ir::Value*> inputs;
    for (const ir::Op* m : bucket.members) inputs.push_back(m->inputs[0]);
    g.SetInsertionPoint(before);
    ir::Op* op;
    {
      ir::ScopedPlacement place(g, first.placement);
      op = g.AddOp("all_reduce", inputs, first.attrs,
                   fmt::format("{} gradients in one message", inputs.size()));
    }
    g.SetInsertionPoint(nullptr);
    for (size_t i = 0; i < bucket.members.size(); ++i)
      g.ReplaceAllUses(bucket.members[i]->outputs[0], op->outputs[i]);
    merged += static_cast<int>(bucket.members.size());
  };
  for (ir::Op* op : order) {
    // A reader of a pending result: its bucket goes right before it.
    std::vector<Key> due;
    for (const ir::Value* in : op->inputs) {
      auto it = in ? pending.find(in) : pending.end();
      if (it != pending.end()) due.push_back(it->second);
    }
    for (const Key& key : due)
      if (open.count(key)) flush(key, op);
    if (!op->is(ir::Opcode::all_reduce) || op->inputs.size() != 1) continue;
    const Key key = KeyOf(*op);
    const size_t bytes = op->inputs[0]->bytes();
    auto it = open.find(key);
    if (it != open.end() && it->second.bytes + bytes > max_bytes) flush(key, op);
    Bucket& bucket = open[key];
    bucket.members.push_back(op);
    bucket.bytes += bytes;
    pending.emplace(op->outputs[0], key);
  }
  while (!open.empty()) flush(open.begin()->first, nullptr);
  if (merged) g.RemoveDeadCode();
  return merged;
}

}  // namespace tiller::passes
