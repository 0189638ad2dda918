// Paddle's quantized GEMMs as int8 GEMMs: three passes.
//
// int8_matmul:
// matmul(dequantize_linear(quantize_linear(x, sx), sx),
//        dequantize_linear(W int8 const [K, N], sw const [N] | [1]))
//   [-> add(., b const [N])]
//   ==>  linear_int8(quantize_linear(x, sx){out_dtype int8}, W, scale, b)
//        scale[n] = (sx / qmax_x) * (sw[n] / qmax_w)
// int8_conv:
// conv2d(dequantize_linear(quantize_linear(x, sx), sx),
//        dequantize_linear(W int8 const [O, C/g, KH, KW], sw const [O] | [1]))
//   ==>  conv2d_int8(quantize_linear(x, sx){out_dtype int8}, W, scale)
//        scale[o] = (sx / qmax_x) * (sw[o] / qmax_w)
//   (the conv passes then fold its bias, batch norm, layout, residual add
//   and activation into it as into conv2d)
// fuse_requantize (after the fusions):
// linear_int8|conv2d_int8 -> quantize_linear(., s){out_dtype int8, qmax 127}
//   ==>  linear_int8|conv2d_int8{out_scale 127 * (1 / s)}: the GEMM writes
//   the next GEMM's int8 operand itself, rounded as the quantize rounds,
//   instead of float32 the quantize reads back.
//
// A model quantized by Paddle (post-training or quantization-aware) says,
// around each matmul and convolution, which integers its operands are: the
// quantized activation and the int8 weight. Computed as written, the pair
// dequantizes both and multiplies float32s; the same integers multiply
// exactly in an int8 GEMM with int32 sums, and one rescale per output
// column (channel) gives the same result up to float32 rounding (the float
// path rounds each product; the int8 path rounds once). The activation's
// scale must be one constant for both halves of its pair (Paddle writes the
// same variable), per tensor.
#include <cmath>
#include <cstring>
#include <vector>

#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

const float* Floats(const ir::Value* v) {
  return reinterpret_cast<const float*>(v->data->data());
}

bool SameConstant(const ir::Value* a, const ir::Value* b) {
  return a == b ||
         (HasData(a) && HasData(b) && a->dtype() == b->dtype() && a->shape() == b->shape() &&
          std::memcmp(a->data->data(), b->data->data(), a->bytes()) == 0);
}

// The per-tensor quantize -> dequantize pair in front of `v`: the quantize
// op, or nullptr.
ir::Op* ActivationPair(const ir::Value* v) {
  const ir::Op* dq = v->producer;
  if (!dq || !dq->is(ir::Opcode::dequantize_linear) || dq->GetInt("quant_axis") != -1)
    return nullptr;
  ir::Op* q = dq->inputs[0]->producer;
  if (!q || !q->is(ir::Opcode::quantize_linear) || q->GetInt("quant_axis") != -1 ||
      q->GetStr("out_dtype") != "float32" || q->GetInt("qmax") != dq->GetInt("qmax") ||
      q->GetInt("qmax") > 127 || !HasData(q->inputs[1]) ||
      !SameConstant(q->inputs[1], dq->inputs[1]))
    return nullptr;
  return q;
}

// The weight `dq` dequantizes: an int8 constant of `rank` dims with a
// constant scale, per tensor or per channel of `axis`; or nullptr.
ir::Value* WeightPair(const ir::Op* dq, int rank, int64_t axis) {
  if (!dq || !dq->is(ir::Opcode::dequantize_linear)) return nullptr;
  ir::Value* w = dq->inputs[0];
  const int64_t a = dq->GetInt("quant_axis");
  if (!HasData(w) || w->dtype() != DType::kI8 || w->rank() != rank || (a != -1 && a != axis) ||
      !HasData(dq->inputs[1]))
    return nullptr;
  return w;
}

// (sx / qmax_x) * (sw[j] / qmax_w) for the n columns (channels) of the
// weight `dq` dequantizes; empty when one is zero (an all-zero column, a
// zero activation range): those stay on the float path, as an int8 kernel
// that takes the bias divided by the scale would need.
std::vector<float> OutputScales(const ir::Op* q, const ir::Op* dq, int64_t n) {
  const float sx = Floats(q->inputs[1])[0] / static_cast<float>(q->GetInt("qmax"));
  const float* sw = Floats(dq->inputs[1]);
  const bool per_channel = dq->GetInt("quant_axis") != -1;
  const auto qmax_w = static_cast<float>(dq->GetInt("qmax"));
  std::vector<float> scale(n);
  for (int64_t j = 0; j < n; ++j) {
    scale[j] = sx * (sw[per_channel ? j : 0] / qmax_w);
    if (scale[j] == 0.0f) return {};
  }
  return scale;
}

ir::Value* ScaleConstant(ir::Graph& g, const std::string& name, const std::vector<float>& scale) {
  auto buf = std::make_shared<AlignedBuffer>(scale.size() * sizeof(float));
  std::memcpy(buf->data(), scale.data(), scale.size() * sizeof(float));
  return g.AddData(name, {DType::kF32, {static_cast<int64_t>(scale.size())}},
                   ir::ValueKind::kConstant, std::move(buf));
}

// The int8 copy of the activation quantize op `q` writes: one per quantize
// op, however many GEMMs read it (an earlier rewrite's, found among the
// users of q's input, or a new one next to q).
ir::Value* Int8Activation(ir::Graph& g, ir::Op* q) {
  for (const auto& op : g.ops()) {
    if (op->is(ir::Opcode::quantize_linear) && op->inputs[0] == q->inputs[0] &&
        op->inputs[1] == q->inputs[1] && op->GetStr("out_dtype") == "int8" &&
        op->GetInt("qmax") == q->GetInt("qmax") &&
        op->GetInt("round_type") == q->GetInt("round_type"))
      return op->outputs[0];
  }
  g.SetInsertionPoint(q);
  ir::AttrMap a = q->attrs;
  a.Set("out_dtype", std::string("int8"));
  ir::Value* xq = g.Add1("quantize_linear", {q->inputs[0], q->inputs[1]}, a, q->name + ".int8");
  g.SetInsertionPoint(nullptr);
  return xq;
}

}  // namespace

int QuantizeMatmuls(ir::Graph& g) {
  int rewrites = 0;
  for (ir::Op* mm : OpsOfType(g, ir::Opcode::matmul)) {
    if (mm->GetBool("transpose_a") || mm->GetBool("transpose_b") || mm->GetFloat("alpha") != 1.0 ||
        !mm->GetInts("perm_a").empty() || !mm->GetInts("perm_b").empty() ||
        !mm->GetInts("perm_out").empty())
      continue;
    ir::Op* q = ActivationPair(mm->inputs[0]);
    const ir::Op* dw = mm->inputs[1]->producer;
    ir::Value* w = WeightPair(dw, 2, 1);
    if (!q || !w) continue;
    const int64_t n = w->shape()[1];
    const std::vector<float> scale = OutputScales(q, dw, n);
    if (scale.empty()) continue;
    ir::Op* last = mm;
    ir::Value* bias = FindBiasAdd(g, mm->outputs[0], n, &last);
    if (bias && bias->dtype() != DType::kF32) continue;
    ir::Value* xq = Int8Activation(g, q);
    std::vector<ir::Value*> ins{xq, w, ScaleConstant(g, mm->name + ".int8_scale", scale)};
    if (bias) ins.push_back(bias);
    ReplaceResult(g, last, "linear_int8", ins, {}, mm->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

int QuantizeConvs(ir::Graph& g) {
  int rewrites = 0;
  for (ir::Op* conv : OpsOfType(g, ir::Opcode::conv2d)) {
    // As the translators emit it: no bias, residual or activation yet, float32.
    if (conv->inputs.size() != 2 || !conv->GetStr("activation").empty() ||
        !conv->GetStr("out_dtype").empty() || conv->outputs[0]->dtype() != DType::kF32)
      continue;
    ir::Op* q = ActivationPair(conv->inputs[0]);
    const ir::Op* dw = conv->inputs[1]->producer;
    ir::Value* w = WeightPair(dw, 4, 0);
    if (!q || !w) continue;
    const std::vector<float> scale = OutputScales(q, dw, w->shape()[0]);
    if (scale.empty()) continue;
    ir::Value* xq = Int8Activation(g, q);
    ir::AttrMap attrs = conv->attrs;
    attrs.Erase("out_dtype");
    ReplaceResult(g, conv, "conv2d_int8",
                  {xq, w, ScaleConstant(g, conv->name + ".int8_scale", scale)}, std::move(attrs),
                  conv->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

int FuseRequantize(ir::Graph& g) {
  int rewrites = 0;
  std::vector<ir::Op*> gemms = OpsOfType(g, ir::Opcode::linear_int8);
  for (ir::Op* c : OpsOfType(g, ir::Opcode::conv2d_int8)) gemms.push_back(c);
  for (ir::Op* p : gemms) {
    // A residual is summed into the destination, which must then be float32.
    if (p->GetFloat("out_scale") != 0.0 ||
        (p->is(ir::Opcode::conv2d_int8) && p->inputs.size() == 5))
      continue;
    ir::Op* q = SoleUser(g, p->outputs[0]);
    // qmax 127: clipping to [-qmax - 1, qmax] is then int8's saturation.
    if (!q || !q->is(ir::Opcode::quantize_linear) || q->GetStr("out_dtype") != "int8" ||
        q->GetInt("quant_axis") != -1 || q->GetInt("qmax") != 127 || q->GetInt("round_type") != 0 ||
        !HasData(q->inputs[1]))
      continue;
    // The quantize kernel's multiplier, in its float32 arithmetic.
    const float s = Floats(q->inputs[1])[0];
    const float inv = s <= 1e-30f ? 1.0f / (s + 1e-6f) : 1.0f / s;
    const float k = 127.0f * inv;
    if (!(k > 0.0f) || !std::isfinite(k)) continue;
    ir::AttrMap attrs = p->attrs;
    attrs.Set("out_scale", static_cast<double>(k));
    ReplaceResult(g, q, p->type, p->inputs, std::move(attrs), p->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
