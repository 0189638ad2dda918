#include "compile/placement.h"

#include <map>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "ir/op_schema.h"

namespace tiller::compile {

int HomeDevice(const ir::Value* v, int host) {
  if (v->producer) return v->producer->device;
  switch (v->kind) {
    case ir::ValueKind::kParam:
    case ir::ValueKind::kConstant:
      return kAnyDevice;
    default:
      return host;  // graph inputs and state
  }
}

int HostDevice(const std::vector<backend::Device*>& devices) {
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i]->host_accessible()) return static_cast<int>(i);
  }
  Fail(ErrorKind::kInvalidArgument,
       "no host-accessible device among the {}: graph inputs, outputs and state need one",
       devices.size());
}

int PlaceOps(ir::Graph& g, const std::vector<backend::Device*>& devices, PlacementPolicy policy) {
  TILLER_CHECK(!devices.empty(), "no devices to place on");
  const int n = static_cast<int>(devices.size());
  const int host = HostDevice(devices);
  int off_host = 0;
  for (const auto& op : g.ops()) {
    if (op->is(ir::Opcode::copy)) {  // placed by whoever inserted it
      TILLER_CHECK(op->device >= 0 && op->device < n, "copy {} is not placed", op->name);
      continue;
    }
    int d = 0;
    if (op->schema->is_view) {
      // A view reinterprets its source's bytes: it lives where they do.
      int home = HomeDevice(op->inputs[0], host);
      d = home >= 0 ? home : host;
    } else if (policy == PlacementPolicy::kByShard) {
      int shard = op->placement.shard;
      d = host;
      if (n > 1) {
        if (shard >= n)
          Fail(ErrorKind::kInvalidArgument,
               "op {} ({}) is on shard {} (ipu_index), but the compilation has {} device(s)",
               op->type, op->name, shard, n);
        d = shard;
      }
      if (auto why = devices[d]->backend().Supports(*op))
        Fail(ErrorKind::kUnimplemented, "op {} ({}) cannot run on {}: {}", op->type, op->name,
             devices[d]->name(), *why);
    } else {
      d = -1;
      std::string reasons;
      for (int i = 0; i < n && d < 0; ++i) {
        auto why = devices[i]->backend().Supports(*op);
        if (!why) {
          d = i;
        } else {
          reasons += fmt::format("\n  {}: {}", devices[i]->name(), *why);
        }
      }
      if (d < 0)
        Fail(ErrorKind::kUnimplemented, "no device can run op {} ({}):{}", op->type, op->name,
             reasons);
    }
    op->device = d;
    off_host += d != host;
  }
  return off_host;
}

std::vector<bool> HostMemoryDevices(const std::vector<backend::Device*>& devices) {
  std::vector<bool> out;
  for (const backend::Device* d : devices) out.push_back(d->host_accessible());
  return out;
}

namespace {

bool InHostMemory(const std::vector<bool>& host_memory, int device) {
  return device >= 0 && static_cast<size_t>(device) < host_memory.size() && host_memory[device];
}

// Read where it is: a graph input or state read by a device in host memory.
bool ReadInPlace(const ir::Value* v, int device, const std::vector<bool>& host_memory) {
  return !v->producer && InHostMemory(host_memory, device);
}

}  // namespace

int InsertCopies(ir::Graph& g, int host, const std::vector<bool>& host_memory) {
  // (value, device) -> its copy there, so later users on that device share it.
  std::map<std::pair<const ir::Value*, int>, ir::Value*> copies;
  auto copy_to = [&](ir::Value* v, int device, const ir::Op* before) {
    auto [it, fresh] = copies.try_emplace({v, device}, nullptr);
    if (!fresh) return it->second;
    g.SetInsertionPoint(before);
    if (!before) {
      // At the end: placed like the value's producer, if any.
      ir::Placement p = v->producer ? v->producer->placement : ir::Placement{};
      g.set_placement_scope(p);
    }
    ir::Op* c = g.AddOp("copy", {v}, {{"to_device", int64_t{device}}},
                        fmt::format("copy of {} to device {}", v->name, device));
    g.SetInsertionPoint(nullptr);
    c->device = device;
    c->outputs[0]->name = v->name;
    it->second = c->outputs[0];
    return it->second;
  };
  // Snapshot: the loop inserts ops.
  std::vector<ir::Op*> ops;
  for (const auto& op : g.ops()) ops.push_back(op.get());
  const ir::Placement saved = g.placement_scope();
  int count = 0;
  for (ir::Op* op : ops) {
    if (op->is(ir::Opcode::copy)) continue;
    for (size_t i = 0; i < op->inputs.size(); ++i) {
      ir::Value* v = op->inputs[i];
      if (!v) continue;
      int home = HomeDevice(v, host);
      if (home == kAnyDevice || home == op->device || ReadInPlace(v, op->device, host_memory))
        continue;
      size_t before = copies.size();
      g.ReplaceInput(op, i, copy_to(v, op->device, op));
      count += copies.size() != before;
    }
  }
  // Results the host reads: graph outputs and new state values.
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    ir::Value* v = g.outputs()[i].second;
    int home = HomeDevice(v, host);
    if (home == kAnyDevice || home == host || InHostMemory(host_memory, home)) continue;
    size_t before = copies.size();
    g.ReplaceOutput(i, copy_to(v, host, nullptr));
    count += copies.size() != before;
  }
  std::vector<std::pair<ir::Value*, ir::Value*>> updates = g.state_updates();
  for (auto& [state, v] : updates) {
    int home = HomeDevice(v, host);
    if (home == kAnyDevice || home == host || InHostMemory(host_memory, home)) continue;
    size_t before = copies.size();
    g.SetStateUpdate(state, copy_to(v, host, nullptr));
    count += copies.size() != before;
  }
  g.set_placement_scope(saved);
  return count;
}

int OrderByDevice(ir::Graph& g, bool updates_with_backward) {
  const auto& ops = g.ops();
  const size_t n = ops.size();
  std::unordered_map<const ir::Op*, size_t> index;
  for (size_t i = 0; i < n; ++i) index[ops[i].get()] = i;
  std::vector<std::vector<size_t>> users(n);
  std::vector<int> waiting(n, 0);
  size_t last_effect = n;
  for (size_t i = 0; i < n; ++i) {
    std::set<size_t> producers;
    for (const ir::Value* in : ops[i]->inputs) {
      if (in && in->producer) producers.insert(index.at(in->producer));
    }
    // Side effects keep their order: each waits for the one before.
    if (ops[i]->schema->side_effects) {
      if (last_effect < n) producers.insert(last_effect);
      last_effect = i;
    }
    for (size_t p : producers) users[p].push_back(i);
    waiting[i] = static_cast<int>(producers.size());
  }
  std::vector<const ir::Op*> order;
  int device = ops.empty() ? 0 : ops[0]->device;
  int moved = 0;
  // Ready ops by (phase, device), smallest old index first.
  using Bucket = std::set<size_t>;
  std::map<std::pair<int, int>, Bucket> ready;
  auto push = [&](size_t i) {
    ir::Phase phase = ops[i]->placement.phase;
    if (updates_with_backward && phase == ir::Phase::kUpdate) phase = ir::Phase::kBackward;
    ready[{static_cast<int>(phase), ops[i]->device}].insert(i);
  };
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) push(i);
  }
  // Views run nothing (they name their source's bytes): each goes as soon as
  // it is ready, so it never separates two runs of another device's ops.
  std::set<size_t> views;
  auto take = [&](size_t i) {
    moved += i != order.size();
    order.push_back(ops[i].get());
    for (size_t u : users[i]) {
      if (--waiting[u] == 0) push(u);
    }
  };
  while (!ready.empty()) {
    for (auto it = ready.begin(); it != ready.end();) {
      for (auto v = it->second.begin(); v != it->second.end();) {
        if (ops[*v]->schema->is_view) {
          views.insert(*v);
          v = it->second.erase(v);
        } else {
          ++v;
        }
      }
      it = it->second.empty() ? ready.erase(it) : std::next(it);
    }
    if (!views.empty()) {
      const size_t i = *views.begin();
      views.erase(views.begin());
      take(i);
      continue;
    }
    if (ready.empty()) break;
    const int phase = ready.begin()->first.first;
    auto pick = ready.find({phase, device});
    if (pick == ready.end()) {
      // Another device: the one whose next op came first.
      pick = ready.begin();
      for (auto it = ready.begin(); it != ready.end() && it->first.first == phase; ++it) {
        if (*it->second.begin() < *pick->second.begin()) pick = it;
      }
    }
    const size_t i = *pick->second.begin();
    pick->second.erase(pick->second.begin());
    if (pick->second.empty()) ready.erase(pick);
    device = ops[i]->device;
    take(i);
  }
  TILLER_CHECK(order.size() == n, "order_by_device: a cycle ({} of {} ops ordered)", order.size(),
               n);
  if (moved) g.ReorderOps(order);
  return moved;
}

void VerifyPlacement(const ir::Graph& g, int num_devices, int host,
                     const std::vector<bool>& host_memory) {
  for (const auto& op : g.ops()) {
    TILLER_CHECK(op->device >= 0 && op->device < num_devices,
                 "op {} ({}) is placed on device {} of {}", op->type, op->name, op->device,
                 num_devices);
    for (const ir::Value* in : op->inputs) {
      if (!in) continue;
      int home = HomeDevice(in, host);
      if (home == kAnyDevice) continue;
      if (op->is(ir::Opcode::copy)) {
        TILLER_CHECK(op->GetInt("to_device") == op->device,
                     "copy {} runs on device {} but copies to {}", op->name, op->device,
                     op->GetInt("to_device"));
        continue;
      }
      TILLER_CHECK(home == op->device || ReadInPlace(in, op->device, host_memory),
                   "op {} ({}) on device {} reads %{} ({}) from device {} without a copy", op->type,
                   op->name, op->device, in->id, in->name, home);
    }
  }
  for (const auto& [name, v] : g.outputs()) {
    int home = HomeDevice(v, host);
    TILLER_CHECK(home == host || home == kAnyDevice || InHostMemory(host_memory, home),
                 "graph output '{}' lives on device {}", name, home);
  }
}

}  // namespace tiller::compile
