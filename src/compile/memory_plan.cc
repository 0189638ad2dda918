#include "compile/memory_plan.h"

#include <algorithm>
#include <climits>
#include <unordered_set>

#include "compile/placement.h"
#include "ir/op_schema.h"

namespace tiller::compile {
namespace {

constexpr size_t kAlign = 64;
size_t AlignUp(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

struct Interval {
  const ir::Value* value;
  size_t bytes;
  int first, last;  // op positions; inputs start at -1, graph outputs end at INT_MAX
};

}  // namespace

MemoryPlan PlanMemory(const ir::Graph& g, const std::vector<size_t>& workspace, int device,
                      int host) {
  MemoryPlan plan;
  auto here = [&](const ir::Value* v) { return device < 0 || HomeDevice(v, host) == device; };
  auto root = [&](const ir::Value* v) {
    auto it = plan.alias_of.find(v);
    return it == plan.alias_of.end() ? v : it->second;
  };
  const auto& ops = g.ops();
  // Views first: every value's root, so reads of a state through a reshape count.
  for (const auto& op : ops) {
    if (ir::FindOpSchema(op->type)->is_view) plan.alias_of[op->outputs[0]] = root(op->inputs[0]);
  }
  std::unordered_map<const ir::Value*, int> position;  // producer position of op outputs
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    for (const ir::Value* out : ops[i]->outputs) position[out] = i;
  }
  // An op whose output may take an input's storage (OpSchema::inplace_input)
  // gets it when that input's root is an intermediate of the same size on
  // the same device, no graph output, and this op is its last reader and
  // reads it once: the output becomes an alias of the root, which lives on
  // until the output's last use. Decided from the graph alone, so every
  // device's plan agrees.
  {
    std::unordered_map<const ir::Value*, std::pair<int, int>> last;  // root -> (pos, reads)
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      for (const ir::Value* in : ops[i]->inputs) {
        if (!in) continue;
        auto& [pos, reads] = last[root(in)];
        reads = pos == i ? reads + 1 : 1;
        pos = i;
      }
    }
    std::unordered_set<const ir::Value*> fetched;
    for (const auto& [name, v] : g.outputs()) fetched.insert(root(v));
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      const ir::Op& op = *ops[i];
      const int k = ir::FindOpSchema(op.type)->inplace_input;
      if (k < 0 || k >= static_cast<int>(op.inputs.size()) || !op.inputs[k]) continue;
      const ir::Value* r = root(op.inputs[k]);
      const ir::Value* out = op.outputs[0];
      auto it = last.find(r);
      if (r->kind != ir::ValueKind::kIntermediate || r->type != out->type || fetched.count(r) ||
          it == last.end() || it->second != std::make_pair(i, 1) ||
          HomeDevice(r, host) != HomeDevice(out, host))
        continue;
      plan.alias_of[out] = r;
      // The output's readers are the root's now (a chain of such ops).
      auto out_reads = last.find(out);
      if (out_reads != last.end()) it->second = out_reads->second;
      if (fetched.count(out)) fetched.insert(r);
      for (const auto& later : ops) {  // views of the output, planned above, follow it
        for (const ir::Value* v : later->outputs) {
          auto a = plan.alias_of.find(v);
          if (a != plan.alias_of.end() && a->second == out) a->second = r;
        }
      }
    }
  }
  // Last position reading each state (graph outputs read at the very end).
  std::unordered_map<const ir::Value*, int> last_read;
  std::unordered_map<const ir::Value*, int> readers_at_last;  // how many inputs at that position
  auto read = [&](const ir::Value* v, int pos) {
    const ir::Value* r = root(v);
    if (r->kind != ir::ValueKind::kState) return;
    auto [it, fresh] = last_read.try_emplace(r, pos);
    if (fresh || pos > it->second) {
      it->second = pos;
      readers_at_last[r] = 1;
    } else if (pos == it->second) {
      ++readers_at_last[r];
    }
  };
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    for (const ir::Value* in : ops[i]->inputs) {
      if (in) read(in, i);
    }
  }
  for (const auto& [name, v] : g.outputs()) read(v, INT_MAX);
  std::unordered_set<const ir::Value*> graph_outputs;
  for (const auto& [name, v] : g.outputs()) graph_outputs.insert(root(v));
  for (const auto& [state, v] : g.state_updates()) {
    // Every device's plan makes the same choices (the host's are the
    // executable's), so a device keeps a copied-back value of its own alive
    // to the end and does not plan one written into the state.
    // The new value, or the value a view of it (a reshape) shows: that one
    // takes the state's storage.
    const ir::Value* src = root(v);
    auto at = position.find(src);
    bool own_value = at != position.end() && src->kind == ir::ValueKind::kIntermediate &&
                     src->bytes() == state->bytes();
    // A value already taking one state's storage cannot take another's.
    if (own_value && !plan.in_state.count(src)) {
      // Whether the state's storage is free to write at position p: nothing
      // reads the state after p, and at p only an op safe in place does.
      const ir::Value* st = state;  // (a lambda may not capture a structured binding)
      auto free_at = [&](int p) {
        auto last = last_read.find(st);
        bool dead = last == last_read.end() || last->second < p;
        bool last_reader = last != last_read.end() && last->second == p &&
                           readers_at_last[st] == 1 && ir::FindOpSchema(ops[p]->type)->inplace_safe;
        return dead || last_reader;
      };
      // A chain of in-place ops updating the state (acc -> embedding_grad_add
      // -> matmul_accumulate: the driver's accumulation of a gradient with
      // several contributions): each link read only by the next, as its
      // input 0, takes the storage too, from where the chain starts.
      std::vector<const ir::Value*> chain = {src};
      int start = at->second;
      for (;;) {
        const ir::Op& op = *ops[start];
        if (!ir::FindOpSchema(op.type)->inplace_safe || op.inputs.empty()) break;
        const ir::Value* link = op.inputs[0];
        auto link_at = link ? position.find(link) : position.end();
        if (link_at == position.end() || root(link) != link ||
            link->kind != ir::ValueKind::kIntermediate || link->bytes() != state->bytes() ||
            link->users.size() != 1 || graph_outputs.count(link) || plan.in_state.count(link))
          break;
        chain.push_back(link);
        start = link_at->second;
      }
      if (chain.size() > 1 && free_at(start)) {
        for (const ir::Value* link : chain) plan.in_state[link] = state;
        continue;
      }
      if (free_at(at->second)) {
        plan.in_state[src] = state;
        continue;
      }
    }
    plan.copy_back.emplace_back(v, state);
  }

  std::unordered_map<const ir::Value*, Interval> live;
  auto touch = [&](const ir::Value* v, int pos) {
    const ir::Value* r = root(v);
    if (r->is_weight() || r->kind == ir::ValueKind::kState || plan.in_state.count(r) || !here(r))
      return;
    auto [it, fresh] = live.try_emplace(r, Interval{r, AlignUp(r->bytes()), pos, pos});
    if (!fresh) it->second.last = std::max(it->second.last, pos);
  };
  for (const ir::Value* in : g.inputs()) touch(in, -1);
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const ir::Op& op = *ops[i];
    for (const ir::Value* in : op.inputs) {
      if (in) touch(in, i);
    }
    for (const ir::Value* out : op.outputs) touch(out, i);
  }
  for (const auto& [name, v] : g.outputs()) touch(v, INT_MAX);
  for (const auto& [v, state] : plan.copy_back) touch(v, INT_MAX);

  // Greedy by size, largest first: each tensor goes to the lowest offset that
  // does not collide with an already placed tensor whose lifetime overlaps.
  std::vector<Interval> order;
  for (auto& [v, iv] : live) order.push_back(iv);
  std::sort(order.begin(), order.end(), [](const Interval& a, const Interval& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.value->id < b.value->id;
  });
  std::vector<std::pair<size_t, const Interval*>> placed;  // (offset, interval)
  for (const Interval& iv : order) {
    plan.naive_bytes += iv.bytes;
    std::vector<std::pair<size_t, size_t>> busy;  // [begin, end) of overlapping tensors
    for (const auto& [off, other] : placed) {
      if (other->first <= iv.last && iv.first <= other->last)
        busy.emplace_back(off, off + other->bytes);
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + iv.bytes <= b) break;
      offset = std::max(offset, e);
    }
    placed.emplace_back(offset, &iv);
    plan.offset[iv.value] = offset;
    plan.tensor_bytes = std::max(plan.tensor_bytes, offset + iv.bytes);
  }
  for (size_t i = 0; i < workspace.size(); ++i) {
    if (device < 0 || ops[i]->device == device)
      plan.workspace_bytes = std::max(plan.workspace_bytes, AlignUp(workspace[i]));
  }
  return plan;
}

}  // namespace tiller::compile
