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

#include <map>
#include <tuple>

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

}  // namespace

int BucketAllReduce(ir::Graph& g, size_t max_bytes) {
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
    if (op->type != "all_reduce" || op->inputs.size() != 1) continue;
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
