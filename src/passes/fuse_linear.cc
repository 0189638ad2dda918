// matmul(x[..., K], W[K, N] const) -> add(., b[N] const) -> act?
//   ==>  linear(x, W, b){activation}
// oneDNN then runs the bias and activation inside the GEMM's write-back,
// saving two passes over the activations per layer.
#include "passes/pass.h"

namespace tiller::passes {
namespace {

bool IsConstData(const ir::Value* v) {
  return v && (v->kind == ir::ValueKind::kParam || v->kind == ir::ValueKind::kConstant);
}

// The single op using `v`, or nullptr when v has several users or is a graph output.
ir::Op* SoleUser(const ir::Graph& g, const ir::Value* v) {
  if (v->users.size() != 1) return nullptr;
  for (const auto& [name, out] : g.outputs()) {
    if (out == v) return nullptr;
  }
  return v->users[0];
}

}  // namespace

int FuseLinear(ir::Graph& g) {
  int rewrites = 0;
  std::vector<ir::Op*> matmuls;
  for (const auto& op : g.ops()) {
    if (op->type == "matmul") matmuls.push_back(op.get());
  }
  for (ir::Op* mm : matmuls) {
    ir::Value* x = mm->inputs[0];
    ir::Value* w = mm->inputs[1];
    if (mm->attrs.Bool("transpose_a", false) || mm->attrs.Bool("transpose_b", false) ||
        mm->attrs.Float("alpha", 1.0) != 1.0 || !IsConstData(w) || w->rank() != 2 ||
        x->dtype() != DType::kF32)
      continue;
    ir::Value* out = mm->outputs[0];
    ir::Value* bias = nullptr;
    ir::Op* last = mm;
    ir::Op* add = SoleUser(g, out);
    if (add && add->type == "add") {
      ir::Value* other = add->inputs[0] == out ? add->inputs[1] : add->inputs[0];
      if (IsConstData(other) && NumElements(other->shape()) == w->shape()[1] &&
          other->shape().back() == w->shape()[1] && add->outputs[0]->shape() == out->shape()) {
        bias = other;
        last = add;
      }
    }
    std::string activation;
    ir::Op* act = SoleUser(g, last->outputs[0]);
    if (act && (act->type == "relu" || act->type == "tanh" || act->type == "gelu")) {
      activation = act->type;
      if (act->type == "gelu" && act->attrs.Bool("approximate", false)) activation = "gelu_tanh";
      last = act;
    }
    if (last == mm) continue;  // nothing to fuse; plain matmul is as fast
    if (bias && bias->rank() != 1) {
      g.SetInsertionPoint(last);
      bias = g.Add1("reshape", {bias}, {{"shape", std::vector<int64_t>{w->shape()[1]}}}, bias->name);
    }
    g.SetInsertionPoint(last);
    std::vector<ir::Value*> ins{x, w};
    if (bias) ins.push_back(bias);
    ir::AttrMap attrs;
    if (!activation.empty()) attrs.Set("activation", activation);
    ir::Value* fused = g.Add1("linear", ins, attrs, mm->name);
    g.SetInsertionPoint(nullptr);
    fused->name = last->outputs[0]->name;
    g.ReplaceAllUses(last->outputs[0], fused);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
