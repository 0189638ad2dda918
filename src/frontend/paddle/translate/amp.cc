// The loss-scaling ops that paddle.static.amp.decorate writes into a
// training program (use_dynamic_loss_scaling, and a static scale too):
//   elementwise_mul(loss, loss_scaling)      forward: the scaled loss
//   check_finite_and_unscale(X..., Scale)    Out_i = X_i * (1 / Scale),
//                                             FoundInfinite: any X NaN/Inf
//   update_loss_scaling(X..., FoundInfinite, PrevLossScaling, In*Steps)
//                                             Out_i = found ? 0 : X_i; the
//                                             scale and step counts follow
//                                             Paddle's rule (unless stop_update)
//   memcpy(FoundInfinite)                     the flag copied to the host
//   <optimizer>(..., SkipUpdate)              no update when the flag holds
// They translate literally, so loss_scaling_0 / num_good_steps_0 /
// num_bad_steps_0 stay ordinary persistable state that the program updates
// and a checkpoint holds, exactly as in Paddle.
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"

namespace tiller::paddle {
namespace {

// Paddle's CPU kernel: inverse = 1 / scale (float32), out = x * inverse.
// Once a non-finite X is found Paddle writes x * 0 for the rest; no program
// reads those values (update_loss_scaling zeroes them, the optimizers skip),
// so Tiller scales every X alike.
void CheckFiniteAndUnscale(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> xs = ctx.Ins(op, "X");
  ir::Value* scale = ctx.In(op, "Scale");
  if (scale->dtype() != DType::kF32 || NumElements(scale->shape()) != 1)
    ctx.Invalid(op, "Scale '{}' is {}, expected one float32", scale->name, scale->type.ToString());
  if (op.Outputs("Out").size() != xs.size())
    ctx.Invalid(op, "{} outputs Out for {} inputs X", op.Outputs("Out").size(), xs.size());
  if (xs.empty()) {
    ctx.SetOut(op, "FoundInfinite", ctx.Reshape(op, ctx.ConstScalar(0, DType::kBool), {1}));
    return;
  }
  ctx.SetOut(op, "FoundInfinite", ctx.Add1(op, "any_non_finite", xs));
  ir::Value* inverse =
      ctx.Reshape(op, ctx.Add1(op, "div", {ctx.ConstScalar(1, DType::kF32), scale}), {});
  for (size_t i = 0; i < xs.size(); ++i)
    ctx.SetOut(op, "Out", ctx.Add1(op, "mul", {xs[i], Cast(ctx, op, inverse, xs[i]->dtype())}), i);
}

// A bool input that must be known when the program is compiled.
bool ConstBool(TranslateContext& ctx, const OpDesc& op, const char* slot, bool fallback) {
  ir::Value* v = ctx.InOpt(op, slot);
  if (!v) return fallback;
  std::vector<double> values = ctx.ConstFloats(op, v);
  if (values.size() != 1) ctx.Invalid(op, "{} '{}' must hold one value", slot, v->name);
  return values[0] != 0;
}

void UpdateLossScaling(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> xs = ctx.Ins(op, "X");
  ir::Value* found = ctx.In(op, "FoundInfinite");
  if (found->dtype() != DType::kBool || NumElements(found->shape()) != 1)
    ctx.Invalid(op, "FoundInfinite '{}' is {}, expected one bool", found->name,
                found->type.ToString());
  if (op.Outputs("Out").size() != xs.size())
    ctx.Invalid(op, "{} outputs Out for {} inputs X", op.Outputs("Out").size(), xs.size());
  ir::Value* flag = ctx.Reshape(op, found, {});
  for (size_t i = 0; i < xs.size(); ++i) {
    ir::Value* zero = Cast(ctx, op, ctx.ConstScalar(0, DType::kF32), xs[i]->dtype());
    ctx.SetOut(op, "Out", ctx.Add1(op, "where", {flag, zero, xs[i]}), i);
  }
  ir::Value* scale = ctx.In(op, "PrevLossScaling");
  ir::Value* good = ctx.In(op, "InGoodSteps");
  ir::Value* bad = ctx.In(op, "InBadSteps");
  // stop_update (an attribute, or a StopUpdate tensor that must fold to a
  // constant) leaves the scale and the counts as they are.
  const bool stop = ConstBool(ctx, op, "StopUpdate", op.attrs.Bool("stop_update", false));
  if (!stop) {
    ir::Op* u = ctx.AddOp(
        op, "update_loss_scaling", {found, scale, good, bad},
        {{"incr_every_n_steps", op.attrs.Int("incr_every_n_steps", 1000)},
         {"decr_every_n_nan_or_inf", op.attrs.Int("decr_every_n_nan_or_inf", 2)},
         {"incr_ratio", static_cast<double>(static_cast<float>(op.attrs.Float("incr_ratio", 2.0)))},
         {"decr_ratio",
          static_cast<double>(static_cast<float>(op.attrs.Float("decr_ratio", 0.8)))}});
    scale = u->outputs[0];
    good = u->outputs[1];
    bad = u->outputs[2];
  }
  ctx.SetOut(op, "LossScaling", scale);
  ctx.SetOut(op, "OutGoodSteps", good);
  ctx.SetOut(op, "OutBadSteps", bad);
}

// Copies between host and device memory: Tiller places values itself.
void Memcpy(TranslateContext& ctx, const OpDesc& op) {
  ctx.SetOut(op, "Out", ctx.In(op, "X"));
}

const bool kRegistered = [] {
  RegisterTranslator("check_finite_and_unscale", CheckFiniteAndUnscale,
                     {"any_non_finite", "div", "reshape", "cast", "mul"});
  RegisterTranslator("update_loss_scaling", UpdateLossScaling,
                     {"reshape", "cast", "where", "update_loss_scaling"});
  RegisterTranslator("memcpy", Memcpy, {});
  RegisterTranslator("memcpy_d2h", Memcpy, {});
  RegisterTranslator("memcpy_h2d", Memcpy, {});
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
