// conv2d(x, W, b?) -> batch_norm(., scale, bias, mean, var)   (all but x constant)
//   ==>  conv2d(x, W * s, (b - mean) * s + bias)   with s = scale / sqrt(var + eps)
// Inference batch norm is an affine map per output channel, so it folds
// into the convolution's weights: one pass over the activations instead of two.
#include <cmath>

#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {

int FoldBatchNorm(ir::Graph& g) {
  int rewrites = 0;
  for (ir::Op* conv : OpsOfType(g, "conv2d")) {
    ir::Value* w = conv->inputs[1];
    ir::Value* b = conv->input(2);
    ir::Op* bn = SoleUser(g, conv->outputs[0]);
    if (!bn || bn->type != "batch_norm" || bn->inputs[0] != conv->outputs[0]) continue;
    if (!HasData(w) || (b && !HasData(b)) || w->dtype() != DType::kF32) continue;
    bool all_const = true;
    for (size_t i = 1; i < 5; ++i) all_const = all_const && HasData(bn->inputs[i]);
    if (!all_const) continue;

    const int64_t out_ch = w->shape()[0];
    const int64_t per_ch = NumElements(w->shape()) / out_ch;
    const float* scale = bn->inputs[1]->const_data<float>();
    const float* shift = bn->inputs[2]->const_data<float>();
    const float* mean = bn->inputs[3]->const_data<float>();
    const float* var = bn->inputs[4]->const_data<float>();
    const double eps = bn->GetFloat("epsilon");
    auto new_w = std::make_shared<AlignedBuffer>(w->bytes());
    auto new_b = std::make_shared<AlignedBuffer>(out_ch * sizeof(float));
    for (int64_t o = 0; o < out_ch; ++o) {
      double s = scale[o] / std::sqrt(static_cast<double>(var[o]) + eps);
      const float* src = w->const_data<float>() + o * per_ch;
      float* dst = new_w->as<float>() + o * per_ch;
      for (int64_t i = 0; i < per_ch; ++i) dst[i] = static_cast<float>(src[i] * s);
      double bias = b ? b->const_data<float>()[o] : 0.0;
      new_b->as<float>()[o] = static_cast<float>((bias - mean[o]) * s + shift[o]);
    }
    ir::Value* w2 = g.AddData(w->name + ".bn_folded", w->type, ir::ValueKind::kConstant, new_w);
    ir::Value* b2 =
        g.AddData(bn->name + ".bias", {DType::kF32, {out_ch}}, ir::ValueKind::kConstant, new_b);
    ReplaceResult(g, bn, "conv2d", {conv->inputs[0], w2, b2}, conv->attrs, conv->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
