// conv2d|conv2d_int8|linear|linear_int8 -> relu|tanh|gelu|hard_swish|hard_sigmoid|relu6
//   ==>  the op{activation}
// The kernel applies the activation while writing the result (an epilogue),
// saving a full read and write of the activations. hard_swish, hard_sigmoid
// and relu6 only with Paddle's default attributes (MobileNetV3's), which the
// kernels' epilogues hard-wire.
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

bool Fusable(const ir::Op& act) {
  auto is = [&](const char* attr, float value) {
    return static_cast<float>(act.GetFloat(attr)) == value;
  };
  switch (act.opcode) {
    case ir::Opcode::relu:
    case ir::Opcode::tanh:
    case ir::Opcode::gelu:
      return true;
    case ir::Opcode::hard_swish:
      return is("offset", 3.0f) && is("threshold", 6.0f) && is("scale", 6.0f);
    case ir::Opcode::hard_sigmoid:
      return is("slope", 0.1666667f) && is("offset", 0.5f);
    case ir::Opcode::relu6:
      return is("threshold", 6.0f);
    default:
      return false;
  }
}

}  // namespace

int FuseActivation(ir::Graph& g) {
  int rewrites = 0;
  std::vector<ir::Op*> producers;
  for (const auto& op : g.ops()) {
    if ((op->is(ir::Opcode::conv2d) || op->is(ir::Opcode::conv2d_int8) ||
         op->is(ir::Opcode::linear) || op->is(ir::Opcode::linear_int8)) &&
        op->GetStr("activation").empty())
      producers.push_back(op.get());
  }
  for (ir::Op* p : producers) {
    if (p->outputs[0]->dtype() != DType::kF32) continue;
    ir::Op* act = SoleUser(g, p->outputs[0]);
    if (!act || !Fusable(*act)) continue;
    // The epilogue's name: the activation's op type (gelu_tanh: tanh-approximated gelu).
    std::string name = act->type;
    if (act->is(ir::Opcode::gelu) && act->GetBool("approximate")) name = "gelu_tanh";
    ir::AttrMap attrs = p->attrs;
    attrs.Set("activation", name);
    ReplaceResult(g, act, p->type, p->inputs, attrs, p->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
