#include "compile/half_fallback.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace tiller::compile {
namespace {

bool TouchesHalf(const ir::Op& op) {
  for (const ir::Value* v : op.inputs) {
    if (v && IsHalf(v->dtype())) return true;
  }
  for (const ir::Value* v : op.outputs) {
    if (IsHalf(v->dtype())) return true;
  }
  return false;
}

bool AnySupports(const std::vector<backend::Device*>& devices, const ir::Op& op) {
  for (const backend::Device* d : devices) {
    if (!d->backend().Supports(op)) return true;
  }
  return false;
}

}  // namespace

bool BackendMultipliesIn(const backend::Backend& backend, DType half) {
  return backend.MultipliesIn(half);
}

bool DevicesMultiplyIn(const std::vector<backend::Device*>& devices, DType half) {
  return std::all_of(devices.begin(), devices.end(),
                     [half](const backend::Device* d) { return d->backend().MultipliesIn(half); });
}

bool BackendMultipliesInt8(const backend::Backend& backend) {
  return backend.MultipliesIn(DType::kI8);
}

bool DevicesMultiplyInt8(const std::vector<backend::Device*>& devices) {
  return std::all_of(devices.begin(), devices.end(), [](const backend::Device* d) {
    return d->backend().MultipliesIn(DType::kI8);
  });
}

int RunHalfOpsInFloat32(ir::Graph& g, const std::vector<backend::Device*>& devices,
                        std::string* detail) {
  std::vector<ir::Op*> todo;
  for (const auto& op : g.ops()) {
    // cast moves between the types itself; an op without inputs (random
    // numbers, constants) has nothing to widen.
    if (op->is(ir::Opcode::cast) || op->inputs.empty() || !TouchesHalf(*op)) continue;
    if (!AnySupports(devices, *op)) todo.push_back(op.get());
  }
  std::map<std::string, int> rewritten;
  for (ir::Op* op : todo) {
    g.SetInsertionPoint(op);
    std::vector<ir::Value*> inputs = op->inputs;
    for (ir::Value*& in : inputs) {
      if (in && IsHalf(in->dtype()))
        in = g.Add1("cast", {in}, {{"dtype", std::string("float32")}}, in->name + ".float32");
    }
    ir::Op* wide = g.AddOp(op->type, inputs, op->attrs, op->name);
    if (!AnySupports(devices, *wide)) {
      // Float32 does not help either: leave it for placement to name.
      g.SetInsertionPoint(nullptr);
      continue;
    }
    for (size_t i = 0; i < op->outputs.size(); ++i) {
      ir::Value* old = op->outputs[i];
      ir::Value* now = wide->outputs[i];
      now->name = old->name;
      if (IsHalf(old->dtype()) && now->dtype() == DType::kF32)
        now = g.Add1("cast", {now}, {{"dtype", std::string(DTypeName(old->dtype()))}},
                     old->name + ".half");
      g.ReplaceAllUses(old, now);
    }
    g.SetInsertionPoint(nullptr);
    ++rewritten[op->type];
  }
  int n = 0;
  std::string list;
  for (const auto& [type, count] : rewritten) {
    n += count;
    list += fmt::format("{}{} {}", list.empty() ? "" : ", ", type, count);
  }
  if (n) g.RemoveDeadCode();
  if (detail && n) *detail = "computed in float32 between casts: " + list;
  return n;
}

}  // namespace tiller::compile
