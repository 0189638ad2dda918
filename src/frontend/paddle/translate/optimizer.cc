// Paddle optimizer ops (sgd, momentum, adam, adamw, adamax, lamb, adagrad,
// adadelta, rmsprop) onto the functional IR optimizer ops
// (ir/ops/optimizer.cc), and the gradient-clipping ops of the optimizer
// section of training programs (squared_l2_norm, clip_by_norm).
//
// Each output slot <X>Out is the new value of input slot <X> (ParamOut of
// Param, Moment1Out of Moment1, ...), in both program forms: the PIR entries
// below keep that naming, and a training compiler relies on it to find the
// state an op updates in place. A state output the op leaves unchanged
// (Beta1PowOut under use_global_beta_pow, MeanGradOut of plain rmsprop) is
// bound to its input's value.
//
// SkipUpdate (Paddle AMP programs feed it check_finite_and_unscale's
// FoundInfinite) keeps every state as it was when it holds: each new value
// becomes where(skip, old, new), which also keeps the update from running in
// place (the old value is read after it).
//
// What Tiller does not do fails here, naming the attribute: master weights
// (MasterParam, for fp16/bf16 parameters), lazy_mode (row-sparse updates),
// and gradients that are not dense tensors.
#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"

namespace tiller::paddle {
namespace {

using pir::Scalar;
using pir::T;

// Inputs and attributes Tiller cannot honour, checked for every optimizer op.
void CheckCommon(TranslateContext& ctx, const OpDesc& op) {
  if (op.HasInput("MasterParam"))
    ctx.Unsupported(op, "MasterParam '{}' (multi_precision master weights) is not supported",
                    op.Inputs("MasterParam")[0]);
  if (op.attrs.Bool("lazy_mode", false))
    ctx.Unsupported(op, "lazy_mode = true (row-sparse updates) is not supported");
  const VarInfo* grad =
      ctx.program().FindVar(op.Inputs("Grad").empty() ? "" : op.Inputs("Grad")[0]);
  if (grad && !grad->is_dense_tensor)
    ctx.Unsupported(op,
                    "Grad '{}' is not a dense tensor (SelectedRows gradients are not supported)",
                    grad->name);
}

// (param, grad, lr): the operands every optimizer op starts with.
std::vector<ir::Value*> Common(TranslateContext& ctx, const OpDesc& op) {
  CheckCommon(ctx, op);
  return {ctx.In(op, "Param"), ctx.In(op, "Grad"), ctx.In(op, "LearningRate")};
}

// A state input of the update, widened to float32 when the session stores
// it in float16 (accl1_type..accl3_type = FLOAT16): the IR optimizer ops
// compute in float32.
ir::Value* StateIn(TranslateContext& ctx, const OpDesc& op, const std::string& slot) {
  ir::Value* v = ctx.In(op, slot);
  return v->dtype() == DType::kF16 ? Cast(ctx, op, v, DType::kF32) : v;
}

// Binds `next`, the new value of input slot <X>, to output slot <X>Out,
// rounded back to <X>'s dtype where StateIn widened it; under SkipUpdate the
// old value when the skip flag holds.
void SetNew(TranslateContext& ctx, const OpDesc& op, const std::string& out_slot, ir::Value* next) {
  const std::string in_slot = out_slot.substr(0, out_slot.size() - 3);  // drop "Out"
  if (ir::Value* old = ctx.InOpt(op, in_slot)) next = Cast(ctx, op, next, old->dtype());
  if (ir::Value* skip = ctx.InOpt(op, "SkipUpdate")) {
    if (skip->dtype() != DType::kBool || NumElements(skip->shape()) != 1)
      ctx.Invalid(op, "SkipUpdate '{}' is {}, expected one bool", skip->name,
                  skip->type.ToString());
    next = ctx.Add1(op, "where", {ctx.Reshape(op, skip, {}), ctx.In(op, in_slot), next});
  }
  ctx.SetOut(op, out_slot, next);
}

// Binds the IR op's outputs to the Paddle output slots, in order.
void BindOuts(TranslateContext& ctx, const OpDesc& op, const ir::Op* ir_op,
              const std::vector<const char*>& slots) {
  for (size_t i = 0; i < slots.size(); ++i) SetNew(ctx, op, slots[i], ir_op->outputs[i]);
}

// A float attribute that an optional tensor slot may override (adam's
// Beta1Tensor...); the tensor must be a compile-time constant.
double FloatOrTensor(TranslateContext& ctx, const OpDesc& op, const char* attr, const char* slot,
                     double fallback) {
  ir::Value* t = ctx.InOpt(op, slot);
  if (!t) return op.attrs.Float(attr, fallback);
  std::vector<double> v = ctx.ConstFloats(op, t);
  if (v.size() != 1)
    ctx.Invalid(op, "{} '{}' must hold one value, has {}", slot, t->name, v.size());
  return v[0];
}

void Sgd(TranslateContext& ctx, const OpDesc& op) {
  ir::Op* o = ctx.AddOp(op, "sgd", Common(ctx, op));
  BindOuts(ctx, op, o, {"ParamOut"});
}

void Momentum(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> in = Common(ctx, op);
  in.push_back(ctx.In(op, "Velocity"));
  std::string method = op.attrs.Str("regularization_method", "");
  double l2 = 0;
  if (method == "l2_decay") {
    l2 = op.attrs.Float("regularization_coeff", 0);
  } else if (!method.empty()) {
    ctx.Unsupported(op, "regularization_method = '{}' (only 'l2_decay' or '')", method);
  }
  // rescale_grad is not read: Paddle's CPU kernel (CPUDenseMomentumFunctor)
  // ignores it, and Tiller matches the CPU results.
  ir::Op* o = ctx.AddOp(op, "momentum", in,
                        {{"mu", op.attrs.Float("mu", 0.9)},
                         {"use_nesterov", op.attrs.Bool("use_nesterov", false)},
                         {"l2_decay", l2}});
  BindOuts(ctx, op, o, {"ParamOut", "VelocityOut"});
}

// adam and adamw share one IR op; adamw adds decoupled weight decay.
void Adam(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> in = Common(ctx, op);
  for (const char* s : {"Moment1", "Moment2", "Beta1Pow", "Beta2Pow"})
    in.push_back(StateIn(ctx, op, s));
  bool amsgrad = op.attrs.Bool("amsgrad", false);
  if (amsgrad) in.push_back(StateIn(ctx, op, "Moment2Max"));
  bool global_pow = op.attrs.Bool("use_global_beta_pow", false);
  ir::AttrMap attrs = {{"beta1", FloatOrTensor(ctx, op, "beta1", "Beta1Tensor", 0.9)},
                       {"beta2", FloatOrTensor(ctx, op, "beta2", "Beta2Tensor", 0.999)},
                       {"epsilon", FloatOrTensor(ctx, op, "epsilon", "EpsilonTensor", 1e-8)},
                       {"update_beta_pow", !global_pow}};
  if (op.type == "adamw" && op.attrs.Bool("with_decay", false)) {
    attrs.Set("weight_decay", op.attrs.Float("coeff", 0.01));
    attrs.Set("lr_ratio", op.attrs.Float("lr_ratio", 1.0));
  }
  if (ctx.no_bias_optimizer()) attrs.Set("bias_correction", false);
  ir::Op* o = ctx.AddOp(op, "adam", in, std::move(attrs));
  BindOuts(ctx, op, o, {"ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"});
  if (amsgrad) SetNew(ctx, op, "Moment2MaxOut", o->outputs[5]);
}

void Adamax(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> in = Common(ctx, op);
  for (const char* s : {"Moment", "InfNorm", "Beta1Pow"}) in.push_back(StateIn(ctx, op, s));
  ir::Op* o = ctx.AddOp(op, "adamax", in,
                        {{"beta1", op.attrs.Float("beta1", 0.9)},
                         {"beta2", op.attrs.Float("beta2", 0.999)},
                         {"epsilon", op.attrs.Float("epsilon", 1e-8)}});
  BindOuts(ctx, op, o, {"ParamOut", "MomentOut", "InfNormOut"});
}

void Lamb(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> in = Common(ctx, op);
  for (const char* s : {"Moment1", "Moment2", "Beta1Pow", "Beta2Pow"})
    in.push_back(StateIn(ctx, op, s));
  // Parameters excluded from weight decay (exclude_from_weight_decay_fn)
  // get their own op with weight_decay = 0.
  ir::Op* o = ctx.AddOp(op, "lamb", in,
                        {{"beta1", op.attrs.Float("beta1", 0.9)},
                         {"beta2", op.attrs.Float("beta2", 0.999)},
                         {"epsilon", op.attrs.Float("epsilon", 1e-6)},
                         {"weight_decay", op.attrs.Float("weight_decay", 0.01)},
                         {"always_adapt", op.attrs.Bool("always_adapt", false)},
                         {"bias_correction", !ctx.no_bias_optimizer()},
                         {"max_weight_norm", ctx.max_weight_norm()}});
  BindOuts(ctx, op, o, {"ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"});
}

void Adagrad(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> in = Common(ctx, op);
  in.push_back(StateIn(ctx, op, "Moment"));
  ir::Op* o = ctx.AddOp(op, "adagrad", in, {{"epsilon", op.attrs.Float("epsilon", 1e-6)}});
  BindOuts(ctx, op, o, {"ParamOut", "MomentOut"});
}

void Adadelta(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> in = Common(ctx, op);
  for (const char* s : {"AvgSquaredGrad", "AvgSquaredUpdate"}) in.push_back(StateIn(ctx, op, s));
  ir::Op* o = ctx.AddOp(
      op, "adadelta", in,
      {{"rho", op.attrs.Float("rho", 0.95)}, {"epsilon", op.attrs.Float("epsilon", 1e-6)}});
  BindOuts(ctx, op, o, {"ParamOut", "AvgSquaredGradOut", "AvgSquaredUpdateOut"});
}

void Rmsprop(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> in = Common(ctx, op);
  for (const char* s : {"MeanSquare", "Moment"}) in.push_back(StateIn(ctx, op, s));
  bool centered = op.attrs.Bool("centered", false);
  ir::Value* mean_grad = ctx.InOpt(op, "MeanGrad");
  if (centered) {
    if (!mean_grad) ctx.Invalid(op, "centered = true needs input MeanGrad");
    in.push_back(StateIn(ctx, op, "MeanGrad"));
  }
  ir::Op* o = ctx.AddOp(op, "rmsprop", in,
                        {{"epsilon", op.attrs.Float("epsilon", 1e-10)},
                         {"decay", op.attrs.Float("decay", 0.9)},
                         {"momentum", op.attrs.Float("momentum", 0.0)}});
  BindOuts(ctx, op, o, {"ParamOut", "MeanSquareOut", "MomentOut"});
  if (centered) {
    SetNew(ctx, op, "MeanGradOut", o->outputs[3]);
  } else if (mean_grad) {
    ctx.SetOut(op, "MeanGradOut", mean_grad);  // plain rmsprop leaves it as is
  }
}

// squared_l2_norm: sum(x^2) as a one-element [1] tensor (Paddle's InferMeta).
void SquaredL2Norm(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  ir::Value* sum = ctx.Add1(op, "reduce_sum", {ctx.Add1(op, "square", {x})},
                            {{"axes", std::vector<int64_t>{}}, {"keepdim", false}});
  ctx.SetOut(op, "Out", ctx.Reshape(op, sum, {1}));
}

// clip_by_norm (ClipByNormFunctor), float32 as in Paddle: with n = |x|,
//   out = x * (n <= max_norm ? 1 : max_norm / (n + (n <= 1e-30 ? 1e-6 : 0))).
// A float32 norm is 0 or at least sqrt(2^-149) ~ 3.7e-23, and max_norm > 0,
// so the 1e-6 never applies: out = x * (n <= max_norm ? 1 : max_norm / n).
void ClipByNorm(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  if (x->dtype() != DType::kF32)
    ctx.Unsupported(op, "X '{}' has dtype {} (Paddle's kernel takes float32)", x->name,
                    DTypeName(x->dtype()));
  double max_norm = static_cast<float>(op.attrs.Float("max_norm", 1.0));
  if (!(max_norm > 0)) ctx.Invalid(op, "max_norm = {} must be greater than 0", max_norm);
  ir::Value* limit = ctx.ConstScalar(max_norm, DType::kF32);
  ir::Value* norm = ctx.Add1(op, "sqrt",
                             {ctx.Add1(op, "reduce_sum", {ctx.Add1(op, "square", {x})},
                                       {{"axes", std::vector<int64_t>{}}, {"keepdim", false}})});
  ir::Value* scale =
      ctx.Add1(op, "where",
               {ctx.Add1(op, "less_equal", {norm, limit}), ctx.ConstScalar(1, DType::kF32),
                ctx.Add1(op, "div", {limit, norm})});
  ctx.SetOut(op, "Out", ctx.Add1(op, "mul", {x, scale}));
}

const bool kRegistered = [] {
  // Each translator with the PIR spelling that maps onto it: operands in
  // pd_op order (paddle 3.3.1's op signatures), the scalar operands of
  // adam/adamw (beta1, beta2, epsilon; pd_op.full) folded into the legacy
  // attributes, outputs named <input slot>Out.
  auto adam_like = [](const char* legacy) {
    return PirOpCompat{legacy,
                       {T("Param"), T("Grad"), T("LearningRate"), T("Moment1"), T("Moment2"),
                        T("Moment2Max"), T("Beta1Pow"), T("Beta2Pow"), T("MasterParam"),
                        T("SkipUpdate"), Scalar("beta1", "Beta1Tensor"),
                        Scalar("beta2", "Beta2Tensor"), Scalar("epsilon", "EpsilonTensor")},
                       {"ParamOut", "Moment1Out", "Moment2Out", "Moment2MaxOut", "Beta1PowOut",
                        "Beta2PowOut", "MasterParamOut"},
                       {},
                       {}};
  };
  RegisterTranslator("sgd", Sgd, {"sgd", "where", "reshape", "cast"});
  RegisterPirOpCompat("sgd_", {"sgd",
                               {T("Param"), T("LearningRate"), T("Grad"), T("MasterParam")},
                               {"ParamOut", "MasterParamOut"},
                               {},
                               {}});
  RegisterTranslator("momentum", Momentum, {"momentum", "where", "reshape", "cast"});
  RegisterPirOpCompat("momentum_",
                      {"momentum",
                       {T("Param"), T("Grad"), T("Velocity"), T("LearningRate"), T("MasterParam")},
                       {"ParamOut", "VelocityOut", "MasterParamOut"},
                       {},
                       {}});
  RegisterTranslator("adam", Adam, {"adam", "where", "reshape", "cast"});
  RegisterPirOpCompat("adam_", adam_like("adam"));
  RegisterTranslator("adamw", Adam, {"adam", "where", "reshape", "cast"});
  RegisterPirOpCompat("adamw_", adam_like("adamw"));
  RegisterTranslator("adamax", Adamax, {"adamax", "where", "reshape", "cast"});
  RegisterPirOpCompat("adamax_", {"adamax",
                                  {T("Param"), T("Grad"), T("LearningRate"), T("Moment"),
                                   T("InfNorm"), T("Beta1Pow"), T("MasterParam")},
                                  {"ParamOut", "MomentOut", "InfNormOut", "MasterParamOut"},
                                  {},
                                  {}});
  RegisterTranslator("lamb", Lamb, {"lamb", "where", "reshape", "cast"});
  RegisterPirOpCompat(
      "lamb_",
      {"lamb",
       {T("Param"), T("Grad"), T("LearningRate"), T("Moment1"), T("Moment2"), T("Beta1Pow"),
        T("Beta2Pow"), T("MasterParam"), T("SkipUpdate")},
       {"ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut", "MasterParamOut"},
       {},
       {}});
  RegisterTranslator("adagrad", Adagrad, {"adagrad", "where", "reshape", "cast"});
  RegisterPirOpCompat("adagrad_",
                      {"adagrad",
                       {T("Param"), T("Grad"), T("Moment"), T("LearningRate"), T("MasterParam")},
                       {"ParamOut", "MomentOut", "MasterParamOut"},
                       {},
                       {}});
  RegisterTranslator("adadelta", Adadelta, {"adadelta", "where", "reshape", "cast"});
  // PIR names adadelta's state results moment_out and inf_norm_out; they are
  // the new AvgSquaredGrad and AvgSquaredUpdate.
  RegisterPirOpCompat("adadelta_",
                      {"adadelta",
                       {T("Param"), T("Grad"), T("AvgSquaredGrad"), T("AvgSquaredUpdate"),
                        T("LearningRate"), T("MasterParam")},
                       {"ParamOut", "AvgSquaredGradOut", "AvgSquaredUpdateOut", "MasterParamOut"},
                       {},
                       {}});
  RegisterTranslator("rmsprop", Rmsprop, {"rmsprop", "where", "reshape", "cast"});
  RegisterPirOpCompat("rmsprop_",
                      {"rmsprop",
                       {T("Param"), T("MeanSquare"), T("Grad"), T("Moment"), T("LearningRate"),
                        T("MeanGrad"), T("MasterParam")},
                       {"ParamOut", "MomentOut", "MeanSquareOut", "MeanGradOut", "MasterParamOut"},
                       {},
                       {}});
  RegisterTranslator("squared_l2_norm", SquaredL2Norm, {"square", "reduce_sum", "reshape"});
  RegisterPirOpCompat("squared_l2_norm", pir::Unary("squared_l2_norm"));
  RegisterTranslator("clip_by_norm", ClipByNorm,
                     {"square", "reduce_sum", "sqrt", "less_equal", "where", "div", "mul"});
  RegisterPirOpCompat("clip_by_norm", pir::Unary("clip_by_norm"));
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
