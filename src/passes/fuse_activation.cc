// conv2d|linear -> relu|tanh|gelu   ==>  conv2d|linear{activation}
// oneDNN applies the activation while writing the result (a post-op), which
// saves a full read and write of the activations.
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {

int FuseActivation(ir::Graph& g) {
  int rewrites = 0;
  std::vector<ir::Op*> producers;
  for (const auto& op : g.ops()) {
    if ((op->type == "conv2d" || op->type == "linear") && op->GetStr("activation").empty())
      producers.push_back(op.get());
  }
  for (ir::Op* p : producers) {
    if (p->outputs[0]->dtype() != DType::kF32) continue;
    ir::Op* act = SoleUser(g, p->outputs[0]);
    if (!act || (act->type != "relu" && act->type != "tanh" && act->type != "gelu")) continue;
    std::string name = act->type;
    if (name == "gelu" && act->GetBool("approximate")) name = "gelu_tanh";
    ir::AttrMap attrs = p->attrs;
    attrs.Set("activation", name);
    g.SetInsertionPoint(act);
    ir::Value* fused = g.Add1(p->type, p->inputs, attrs, p->name);
    g.SetInsertionPoint(nullptr);
    fused->name = act->outputs[0]->name;
    g.ReplaceAllUses(act->outputs[0], fused);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
