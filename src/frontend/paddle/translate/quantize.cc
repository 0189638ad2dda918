// Paddle's quantize_linear / dequantize_linear (static post-training
// quantization and quantization-aware training with onnx_format): inputs X,
// Scale, ZeroPoint; output Y. Paddle's kernels never read ZeroPoint (the
// quantization is symmetric) and clip by qmax, not by bit_length, so neither
// changes a result. An "observer" pair (only_observer) only records a
// scale: Y is X. qmax 448 / 57344 select float8 (e4m3 / e5m2) rounding,
// and is_test = false updates the scale from the data (training): both are
// refused.
#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"

namespace tiller::paddle {
namespace {

using pir::T;

// The attributes both ops share, checked.
ir::AttrMap QuantAttrs(TranslateContext& ctx, const OpDesc& op) {
  const int64_t qmax = op.attrs.Int("qmax", 127);
  if (qmax == 448 || qmax == 57344)
    ctx.Unsupported(op, "qmax = {} (float8 {} quantization)", qmax, qmax == 448 ? "e4m3" : "e5m2");
  if (qmax < 1) ctx.Invalid(op, "qmax = {} must be >= 1", qmax);
  if (!op.attrs.Bool("is_test", true))
    ctx.Unsupported(op, "is_test = false (the scale is updated from the data while training)");
  const int64_t axis = op.attrs.Int("quant_axis", -1);
  ir::AttrMap a;
  a.Set("quant_axis", axis < 0 ? int64_t{-1} : axis);
  a.Set("qmax", qmax);
  return a;
}

// Paddle's per-channel scale may be saved as [1, C]; the IR op takes any
// shape with the right count, a flat one keeps messages plain. A saved
// scale (a parameter) gets a flat value sharing its bytes rather than a
// reshape op: parameters are not folded, and fold_deferred folds a
// dequantized weight only when its inputs have data.
ir::Value* FlatScale(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* s = ctx.In(op, "Scale");
  const int64_t n = NumElements(s->shape());
  if (s->rank() == 1) return s;
  if (s->data && (s->kind == ir::ValueKind::kParam || s->is_constant()))
    return ctx.graph().AddData(s->name + ".flat", {s->dtype(), {n}}, s->kind, s->data);
  return ctx.Reshape(op, s, {n});
}

void QuantizeLinear(TranslateContext& ctx, const OpDesc& op) {
  ir::AttrMap a = QuantAttrs(ctx, op);
  ir::Value* x = ctx.In(op, "X");
  if (op.attrs.Bool("only_observer", false)) {
    ctx.SetOut(op, "Y", x);
    return;
  }
  const int64_t round_type = op.attrs.Int("round_type", 0);
  if (round_type != 0 && round_type != 1) ctx.Unsupported(op, "round_type = {}", round_type);
  a.Set("round_type", round_type);
  ctx.SetOut(op, "Y", ctx.Add1(op, "quantize_linear", {x, FlatScale(ctx, op)}, a));
}

void DequantizeLinear(TranslateContext& ctx, const OpDesc& op) {
  ir::AttrMap a = QuantAttrs(ctx, op);
  ir::Value* x = ctx.In(op, "X");
  if (op.attrs.Bool("only_observer", false)) {
    ctx.SetOut(op, "Y", x);
    return;
  }
  ctx.SetOut(op, "Y", ctx.Add1(op, "dequantize_linear", {x, FlatScale(ctx, op)}, a));
}

const bool kRegistered = [] {
  // Each translator with the PIR spelling that maps onto it. PIR: x, scale,
  // zero_point, in_accum, in_state -> y, out_state, out_accum, out_scale
  // (the last three only while training).
  auto pir_entry = [](const char* legacy) -> PirOpCompat {
    return {legacy,
            {T("X"), T("Scale"), T("ZeroPoint"), T("InAccum"), T("InState")},
            {"Y", "OutState", "OutAccum", "OutScale"},
            {},
            {}};
  };
  RegisterTranslator("quantize_linear", QuantizeLinear, {"quantize_linear", "reshape"});
  RegisterPirOpCompat("quantize_linear", pir_entry("quantize_linear"));
  RegisterTranslator("dequantize_linear", DequantizeLinear, {"dequantize_linear", "reshape"});
  RegisterPirOpCompat("dequantize_linear", pir_entry("dequantize_linear"));
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
