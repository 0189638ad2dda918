#include "compile/processes.h"

#include <fmt/format.h>

#include <set>
#include <unordered_map>
#include <unordered_set>

#include "compile/placement.h"
#include "core/error.h"
#include "ir/op_schema.h"

namespace tiller::compile {

ProcessSplit SplitAcrossProcesses(ir::Graph& g, const std::vector<int>& device_process, int me,
                                  int host) {
  ProcessSplit out;
  auto process_of = [&](int device) {
    TILLER_CHECK(device >= 0 && static_cast<size_t>(device) < device_process.size(),
                 "device {} has no process ({} devices)", device, device_process.size());
    return device_process[device];
  };
  const std::set<int> processes(device_process.begin(), device_process.end());
  TILLER_CHECK(processes.count(me), "process {} runs none of the {} devices", me,
               device_process.size());

  std::vector<ir::Op*> ops;
  for (const auto& op : g.ops()) ops.push_back(op.get());
  std::unordered_map<const ir::Op*, size_t> index;
  for (size_t i = 0; i < ops.size(); ++i) index[ops[i]] = i;
  // Which processes read each state (ops read states where they are).
  std::map<const ir::Value*, std::set<int>> state_readers;
  for (const ir::Op* op : ops) {
    for (const ir::Value* in : op->inputs) {
      if (in && in->kind == ir::ValueKind::kState) state_readers[in].insert(process_of(op->device));
    }
  }

  const ir::Placement saved = g.placement_scope();
  // Adds `type` before op `before` (nullptr: at the end), on `device`,
  // placed as `placement` (its phase decides the segment it runs in).
  auto add = [&](const std::string& type, std::vector<ir::Value*> inputs, ir::AttrMap attrs,
                 const ir::Op* before, int device, const ir::Placement& placement,
                 const std::string& name) {
    g.SetInsertionPoint(before);
    g.set_placement_scope(placement);
    ir::Op* op = g.AddOp(type, std::move(inputs), std::move(attrs), name);
    g.SetInsertionPoint(nullptr);
    g.set_placement_scope(saved);
    op->device = device;
    return op;
  };
  // A transfer's tag: its number in the walk, which every process makes
  // alike (counted whether or not this process sends or receives it).
  auto next_tag = [&] { return out.transfers++; };
  auto send = [&](ir::Value* v, int device, int peer, int tag, const ir::Op* before,
                  const ir::Placement& placement) {
    add("send", {v}, {{"peer", int64_t{peer}}, {"tag", int64_t{tag}}}, before, device, placement,
        fmt::format("send of {} to rank {}", v->name, peer));
    ++out.sends;
  };
  auto recv = [&](const ir::Value* like, int device, int peer, int tag, const ir::Op* before,
                  const ir::Placement& placement) {
    ir::Op* op =
        add("recv", {},
            {{"peer", int64_t{peer}},
             {"tag", int64_t{tag}},
             {"dtype", std::string(DTypeName(like->dtype()))},
             {"shape", like->shape()}},
            before, device, placement, fmt::format("recv of {} from rank {}", like->name, peer));
    op->outputs[0]->name = like->name;
    ++out.recvs;
    return op->outputs[0];
  };
  // Where "right after the op computing v" is: before the op following it.
  auto after = [&](const ir::Value* v) -> const ir::Op* {
    const size_t i = index.at(v->producer) + 1;
    return i < ops.size() ? ops[i] : nullptr;
  };
  // A process's first device: where what it receives outside copies lives.
  auto first_device = [&](int process) {
    for (size_t d = 0; d < device_process.size(); ++d) {
      if (device_process[d] == process) return static_cast<int>(d);
    }
    return -1;
  };

  // Right after the op computing v, its process sends it to each of
  // `targets` (but itself); returns what this process received of it, if
  // it is one of them.
  auto hand_out = [&](ir::Value* v, const std::set<int>& targets) -> ir::Value* {
    const int owner = process_of(v->producer->device);
    ir::Value* received = nullptr;
    for (int p : targets) {
      if (p == owner) continue;
      const int tag = next_tag();
      if (owner == me) {
        send(v, v->producer->device, p, tag, after(v), v->producer->placement);
      } else if (p == me) {
        received = recv(v, first_device(me), owner, tag, after(v), v->producer->placement);
      }
    }
    return received;
  };

  std::unordered_set<const ir::Op*> drop;
  for (ir::Op* op : ops) {
    if (!op->is(ir::Opcode::copy)) {
      if (process_of(op->device) != me) drop.insert(op);
      continue;
    }
    ir::Value* v = op->inputs[0];
    const int home = HomeDevice(v, host);
    // Weights and constants, and graph inputs and state (every process has
    // them), are where they are read.
    const int from = home == kAnyDevice || !v->producer ? process_of(op->device) : process_of(home);
    const int to = process_of(op->device);
    if (from == to) {
      if (to != me) drop.insert(op);
      continue;
    }
    const int tag = next_tag();
    drop.insert(op);
    if (to == me) {
      g.ReplaceAllUses(op->outputs[0],
                       recv(op->outputs[0], op->device, from, tag, op, op->placement));
    } else if (from == me) {
      send(v, home, to, tag, op, op->placement);
    }
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const auto [name, v] = g.outputs()[i];
    if (!v->producer) {
      if (v->kind == ir::ValueKind::kState) {
        for (const auto& [state, update] : g.state_updates()) {
          if (state == v && update->producer && process_of(update->producer->device) != me)
            Fail(ErrorKind::kUnimplemented,
                 "fetch '{}' is a state that another process's pipeline stage updates; fetch it "
                 "through the session's state reads instead",
                 name);
        }
      }
      continue;
    }
    if (ir::Value* received = hand_out(v, processes)) g.ReplaceOutput(i, received);
  }
  const std::vector<std::pair<ir::Value*, ir::Value*>> updates = g.state_updates();
  for (const auto& [state, v] : updates) {
    if (!v->producer) continue;
    const int owner = process_of(v->producer->device);
    out.state_owner[state->name] = owner;
    const std::set<int>& readers = state_readers[state];
    if (ir::Value* received = hand_out(v, readers)) g.SetStateUpdate(state, received);
    // Not read here and updated elsewhere: nothing of it runs here.
    if (owner != me && !readers.count(me)) g.RemoveState(state);
  }
  TILLER_CHECK(out.transfers < kTransfersPerRound, "{} values cross processes (at most {})",
               out.transfers, kTransfersPerRound - 1);
  out.removed = g.RemoveOps([&](const ir::Op& op) { return drop.count(&op) != 0; });
  g.RemoveDeadCode();
  return out;
}

}  // namespace tiller::compile
