// matmul(dequantize_linear(quantize_linear(x, sx), sx),
//        dequantize_linear(W int8 const [K, N], sw const [N] | [1]))
//   [-> add(., b const [N])]
//   ==>  linear_int8(quantize_linear(x, sx){out_dtype int8}, W, scale, b)
//        scale[n] = (sx / qmax_x) * (sw[n] / qmax_w)
// A model quantized by Paddle (post-training or quantization-aware) says,
// around each matmul, which integers its operands are: the quantized
// activation and the int8 weight. Computed as written, the pair dequantizes
// both and multiplies float32s; the same integers multiply exactly in an
// int8 GEMM with int32 sums, and one rescale per output column gives the
// same result up to float32 rounding (the float path rounds each product;
// the int8 path rounds once). The activation's scale must be one constant
// for both halves of its pair (Paddle writes the same variable), per tensor.
#include <cstring>

#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

// `v`, or the weight or constant a chain of reshapes made it from (the
// translator flattens Paddle's [1, C] scales; a parameter is not folded).
const ir::Value* Source(const ir::Value* v) {
  while (v && !HasData(v) && v->producer && v->producer->type == "reshape")
    v = v->producer->inputs[0];
  return HasData(v) ? v : nullptr;
}

const float* Floats(const ir::Value* v) {
  return reinterpret_cast<const float*>(Source(v)->data->data());
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
  if (!dq || dq->type != "dequantize_linear" || dq->GetInt("quant_axis") != -1) return nullptr;
  ir::Op* q = dq->inputs[0]->producer;
  if (!q || q->type != "quantize_linear" || q->GetInt("quant_axis") != -1 ||
      q->GetStr("out_dtype") != "float32" || q->GetInt("qmax") != dq->GetInt("qmax") ||
      q->GetInt("qmax") > 127 || !HasData(q->inputs[1]) ||
      !SameConstant(q->inputs[1], dq->inputs[1]))
    return nullptr;
  return q;
}

}  // namespace

int QuantizeMatmuls(ir::Graph& g) {
  int rewrites = 0;
  // One int8 copy of each quantized activation, however many GEMMs read it.
  std::map<const ir::Op*, ir::Value*> int8_of;
  for (ir::Op* mm : OpsOfType(g, "matmul")) {
    if (mm->GetBool("transpose_a") || mm->GetBool("transpose_b") || mm->GetFloat("alpha") != 1.0 ||
        !mm->GetInts("perm_a").empty() || !mm->GetInts("perm_b").empty() ||
        !mm->GetInts("perm_out").empty())
      continue;
    ir::Op* q = ActivationPair(mm->inputs[0]);
    const ir::Op* dw = mm->inputs[1]->producer;
    if (!q || !dw || dw->type != "dequantize_linear") continue;
    ir::Value* w = dw->inputs[0];
    const int64_t axis = dw->GetInt("quant_axis");
    if (!HasData(w) || w->dtype() != DType::kI8 || w->rank() != 2 || (axis != -1 && axis != 1) ||
        !Source(dw->inputs[1]))
      continue;
    const int64_t n = w->shape()[1];
    const float sx = Floats(q->inputs[1])[0] / static_cast<float>(q->GetInt("qmax"));
    const float* sw = Floats(dw->inputs[1]);
    const auto qmax_w = static_cast<float>(dw->GetInt("qmax"));
    std::vector<float> scale(n);
    bool zero = false;
    for (int64_t j = 0; j < n; ++j) {
      scale[j] = sx * (sw[axis == 1 ? j : 0] / qmax_w);
      zero = zero || scale[j] == 0.0f;
    }
    // A zero scale (an all-zero column, a zero activation range) is left to
    // the float path: oneDNN would need the bias divided by it.
    if (zero) continue;
    ir::Op* last = mm;
    ir::Value* bias = FindBiasAdd(g, mm->outputs[0], n, &last);
    if (bias && bias->dtype() != DType::kF32) continue;
    ir::Value*& xq = int8_of[q];
    if (!xq) {
      g.SetInsertionPoint(q);
      ir::AttrMap a = q->attrs;
      a.Set("out_dtype", std::string("int8"));
      xq = g.Add1("quantize_linear", {q->inputs[0], q->inputs[1]}, a, q->name + ".int8");
    }
    auto buf = std::make_shared<AlignedBuffer>(n * sizeof(float));
    std::memcpy(buf->data(), scale.data(), n * sizeof(float));
    ir::Value* s = g.AddData(mm->name + ".int8_scale", {DType::kF32, {n}}, ir::ValueKind::kConstant,
                             std::move(buf));
    std::vector<ir::Value*> ins{xq, w, s};
    if (bias) ins.push_back(bias);
    ReplaceResult(g, last, "linear_int8", ins, {}, mm->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
