// conv2d(x, W, b?) -> batch_norm(., scale, bias, mean, var)   (all but x constant)
//   ==>  conv2d(x, W * s, (b - mean) * s + bias)   with s = scale / sqrt(var + eps)
// conv2d_int8(x, W, r, b?) -> batch_norm(...)
//   ==>  conv2d_int8(x, W, r * s, (b - mean) * s + bias)
// Inference batch norm is an affine map per output channel, so it folds
// into the convolution's weights: one pass over the activations instead of
// two. An int8 filter keeps its integers: the map folds into the output
// scale r that rescales the int32 sums of each channel.
#include <cmath>

#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {

int FoldBatchNorm(ir::Graph& g) {
  int rewrites = 0;
  std::vector<ir::Op*> convs = OpsOfType(g, ir::Opcode::conv2d);
  for (ir::Op* c : OpsOfType(g, ir::Opcode::conv2d_int8)) convs.push_back(c);
  for (ir::Op* conv : convs) {
    const bool int8 = conv->is(ir::Opcode::conv2d_int8);
    ir::Value* w = conv->inputs[1];
    // What s multiplies: the filter, or the int8 filter's output scale.
    ir::Value* scaled = int8 ? conv->inputs[2] : w;
    const size_t bias_at = ConvBiasIndex(*conv);
    ir::Value* b = conv->input(bias_at);
    ir::Op* bn = SoleUser(g, conv->outputs[0]);
    if (!bn || !bn->is(ir::Opcode::batch_norm) || bn->inputs[0] != conv->outputs[0] ||
        conv->inputs.size() > bias_at + 1)
      continue;
    if (!HasData(scaled) || (b && !HasData(b)) || scaled->dtype() != DType::kF32) continue;
    bool all_const = true;
    for (size_t i = 1; i < 5; ++i) all_const = all_const && HasData(bn->inputs[i]);
    if (!all_const) continue;

    const int64_t out_ch = w->shape()[0];
    const int64_t per_ch = NumElements(scaled->shape()) / out_ch;
    const float* scale = bn->inputs[1]->const_data<float>();
    const float* shift = bn->inputs[2]->const_data<float>();
    const float* mean = bn->inputs[3]->const_data<float>();
    const float* var = bn->inputs[4]->const_data<float>();
    const double eps = bn->GetFloat("epsilon");
    auto new_s = std::make_shared<AlignedBuffer>(scaled->bytes());
    auto new_b = std::make_shared<AlignedBuffer>(out_ch * sizeof(float));
    bool zero_scale = false;
    for (int64_t o = 0; o < out_ch; ++o) {
      double s = scale[o] / std::sqrt(static_cast<double>(var[o]) + eps);
      const float* src = scaled->const_data<float>() + o * per_ch;
      float* dst = new_s->as<float>() + o * per_ch;
      for (int64_t i = 0; i < per_ch; ++i) dst[i] = static_cast<float>(src[i] * s);
      zero_scale = zero_scale || dst[0] == 0.0f;
      double bias = b ? b->const_data<float>()[o] : 0.0;
      new_b->as<float>()[o] = static_cast<float>((bias - mean[o]) * s + shift[o]);
    }
    // Int8 convolution kernels may apply the bias divided by the output
    // scale (as int8 libraries take it), which a zero scale cannot give: a
    // channel the batch norm zeroes (scale 0) keeps its batch norm.
    if (int8 && zero_scale) continue;
    ir::Value* s2 =
        g.AddData(scaled->name + ".bn_folded", scaled->type, ir::ValueKind::kConstant, new_s);
    ir::Value* b2 =
        g.AddData(bn->name + ".bias", {DType::kF32, {out_ch}}, ir::ValueKind::kConstant, new_b);
    std::vector<ir::Value*> ins(conv->inputs.begin(), conv->inputs.begin() + bias_at);
    ins[int8 ? 2 : 1] = s2;
    ins.push_back(b2);
    ReplaceResult(g, bn, conv->type, std::move(ins), conv->attrs, conv->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
