// conv2d|conv2d_int8|conv2d_transpose(x, W[, scale]) -> add(., c)
//   (c constant, one value per output channel)
//   ==>  the op(x, W[, scale], c)
// Paddle saves a convolution's bias as a separate add of a [1, O, 1, 1]
// reshape of the [O] parameter (squeeze-excitation blocks, detection
// heads); in the convolution it is the kernel's bias, added while the result
// is written, and the chain stays a chain of convolutions for fold_batch_norm,
// channels_last and the activation fusions.
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

// The constant `v` holds, looking through reshapes (views of its bytes).
ir::Value* ConstantRoot(ir::Value* v) {
  while (v && v->producer && v->producer->is(ir::Opcode::reshape)) v = v->producer->inputs[0];
  return HasData(v) ? v : nullptr;
}

// Whether `shape` is [O] aligned with dim 1 of a rank-4 NCHW result: [1, O,
// 1, 1] or [O, 1, 1].
bool AlongChannels(const Shape& shape, int64_t channels) {
  if (shape.size() == 4)
    return shape[0] == 1 && shape[1] == channels && shape[2] == 1 && shape[3] == 1;
  if (shape.size() == 3) return shape[0] == channels && shape[1] == 1 && shape[2] == 1;
  return false;
}

}  // namespace

int FuseConvBias(ir::Graph& g) {
  int rewrites = 0;
  std::vector<ir::Op*> convs = OpsOfType(g, ir::Opcode::conv2d);
  for (ir::Op* c : OpsOfType(g, ir::Opcode::conv2d_int8)) convs.push_back(c);
  for (ir::Op* deconv : OpsOfType(g, ir::Opcode::conv2d_transpose)) convs.push_back(deconv);
  for (ir::Op* conv : convs) {
    if (conv->inputs.size() != ConvBiasIndex(*conv) || conv->GetStr("data_format") != "NCHW" ||
        (!conv->is(ir::Opcode::conv2d_transpose) && !conv->GetStr("activation").empty()))
      continue;
    ir::Value* y = conv->outputs[0];
    ir::Op* add = SoleUser(g, y);
    if (!add || !add->is(ir::Opcode::add)) continue;
    ir::Value* other = add->inputs[0] == y ? add->inputs[1] : add->inputs[0];
    ir::Value* bias = ConstantRoot(other);
    if (!bias || bias->dtype() != DType::kF32 || add->outputs[0]->type != y->type ||
        !AlongChannels(other->shape(), y->shape()[1]))
      continue;
    std::vector<ir::Value*> ins = conv->inputs;
    ins.push_back(bias);
    ReplaceResult(g, add, conv->type, std::move(ins), conv->attrs, conv->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
