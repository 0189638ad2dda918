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
// Row-sparse gradients (an embedding looked up with is_sparse / sparse =
// true, ir/row_gradient.h): sgd and adagrad update only the looked-up rows
// (sgd_rows, adagrad_rows), which equals their dense update. Where the
// legacy program's Grad is a SELECTED_ROWS variable, Adam follows Paddle's
// sparse Adam (adam_rows): lazy_mode updates only those rows, and either
// way the kernel advances the beta powers before it reads them. Momentum
// updates every row (Paddle's sparse momentum treats a missing row as a
// zero gradient), so it takes the dense gradient; so do rmsprop and lamb,
// whose sparse kernels equal their dense ones on the zero-filled gradient.
// (Paddle's sparse momentum and rmsprop look rows up by binary search in a
// row list MergeAdd leaves unsorted when no id repeats, and then drop the
// gradients of the rows they miss: Tiller does not reproduce that bug.)
// lazy_mode on a dense Grad (every PIR program: Paddle 3's PIR backward
// gives a dense table gradient even for sparse lookups) changes nothing, as
// in Paddle's dense kernels.
//
// What Tiller does not do fails here, naming the attribute: master weights
// (MasterParam, for fp16/bf16 parameters), SelectedRows gradients for the
// other optimizers and for adamw (Paddle's own kernel fails on one), and
// sparse Adam on a gradient that is no longer rows (accumulated).
#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"
#include "ir/row_gradient.h"

namespace tiller::paddle {
namespace {

using pir::Scalar;
using pir::T;

// Legacy VarType.SELECTED_ROWS (framework.proto).
constexpr int64_t kSelectedRows = 8;

// The program's variable bound to the op's Grad slot (nullptr: none).
const VarInfo* GradVar(TranslateContext& ctx, const OpDesc& op) {
  return ctx.program().FindVar(op.Inputs("Grad").empty() ? "" : op.Inputs("Grad")[0]);
}

// Whether the op's Grad is a legacy SELECTED_ROWS variable.
bool SelectedRowsGrad(TranslateContext& ctx, const OpDesc& op) {
  const VarInfo* grad = GradVar(ctx, op);
  return grad && grad->var_type == kSelectedRows;
}

// Inputs and attributes Tiller cannot honour, checked for every optimizer op.
// `rows_ok`: the op takes a SELECTED_ROWS Grad.
void CheckCommon(TranslateContext& ctx, const OpDesc& op, bool rows_ok) {
  if (op.HasInput("MasterParam"))
    ctx.Unsupported(op, "MasterParam '{}' (multi_precision master weights) is not supported",
                    op.Inputs("MasterParam")[0]);
  const VarInfo* grad = GradVar(ctx, op);
  if (!grad || grad->is_dense_tensor) return;
  if (grad->var_type != kSelectedRows)
    ctx.Unsupported(op, "Grad '{}' is not a dense tensor (var type {})", grad->name,
                    grad->var_type);
  if (!rows_ok)
    ctx.Unsupported(op,
                    "Grad '{}' is a SelectedRows gradient (a sparse embedding's); {} takes "
                    "them only as dense gradients, which Tiller does not do for it: use "
                    "sgd, momentum, adagrad, adam, rmsprop or lamb, or is_sparse = false",
                    grad->name, op.type);
}

// (param, grad, lr): the operands every optimizer op starts with.
std::vector<ir::Value*> Common(TranslateContext& ctx, const OpDesc& op, bool rows_ok = false) {
  CheckCommon(ctx, op, rows_ok);
  return {ctx.In(op, "Param"), ctx.In(op, "Grad"), ctx.In(op, "LearningRate")};
}

// The gradient as the row-sparse ops take it: rows [N, D] and ids [N].
struct Rows {
  ir::Value* rows;
  ir::Value* ids;
  int64_t padding_idx;
};
std::optional<Rows> RowsOf(TranslateContext& ctx, const OpDesc& op, ir::Value* grad) {
  auto r = ir::AsRowGradient(grad);
  if (!r) return std::nullopt;
  const int64_t n = NumElements(r->ids->shape());
  return Rows{ctx.Reshape(op, r->rows, {n, grad->shape()[1]}), ctx.Reshape(op, r->ids, {n}),
              r->padding_idx};
}

// The dense op's operands (param, grad, lr, state...) and attributes made
// the row op's: the rows for the gradient, the ids last, padding_idx.
void UseRows(const Rows& r, std::vector<ir::Value*>* in, ir::AttrMap* attrs) {
  (*in)[1] = r.rows;
  in->push_back(r.ids);
  attrs->Set("padding_idx", r.padding_idx);
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
  std::vector<ir::Value*> in = Common(ctx, op, true);
  ir::AttrMap attrs;
  const auto r = RowsOf(ctx, op, in[1]);
  if (r) UseRows(*r, &in, &attrs);
  ir::Op* o = ctx.AddOp(op, r ? "sgd_rows" : "sgd", in, std::move(attrs));
  BindOuts(ctx, op, o, {"ParamOut"});
}

void Momentum(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> in = Common(ctx, op, true);
  in.push_back(ctx.In(op, "Velocity"));
  std::string method = op.attrs.Str("regularization_method", "");
  double l2 = 0;
  if (method == "l2_decay") {
    l2 = op.attrs.Float("regularization_coeff", 0);
  } else if (!method.empty()) {
    ctx.Unsupported(op, "regularization_method = '{}' (only 'l2_decay' or '')", method);
  }
  // rescale_grad: Paddle's dense CPU kernel (CPUDenseMomentumFunctor)
  // ignores it, its SelectedRows kernel multiplies the gradient by it, and
  // Tiller matches the CPU results of each.
  const double rescale = op.attrs.Float("rescale_grad", 1.0);
  if (SelectedRowsGrad(ctx, op) && rescale != 1.0)
    in[1] = ctx.Add1(op, "scale", {in[1]},
                     {{"scale", static_cast<double>(static_cast<float>(rescale))}, {"bias", 0.0}});
  ir::Op* o = ctx.AddOp(op, "momentum", in,
                        {{"mu", op.attrs.Float("mu", 0.9)},
                         {"use_nesterov", op.attrs.Bool("use_nesterov", false)},
                         {"l2_decay", l2}});
  BindOuts(ctx, op, o, {"ParamOut", "VelocityOut"});
}

// adam and adamw share one IR op; adamw adds decoupled weight decay.
void Adam(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> in = Common(ctx, op, true);
  // Paddle's Adam of a SelectedRows gradient (lazy or not) treats the rows
  // it holds apart from the others: adam_rows, which needs them.
  std::optional<Rows> sparse;
  const bool selected_rows = SelectedRowsGrad(ctx, op);
  if (selected_rows) {
    if (op.type == "adamw")
      ctx.Unsupported(op,
                      "Grad '{}' is a SelectedRows gradient: Paddle's own adamw kernel fails on "
                      "one (2.6 and 3.3), so there is no result to match; use adam, or "
                      "is_sparse = false",
                      op.Inputs("Grad")[0]);
    sparse = RowsOf(ctx, op, in[1]);
    if (!sparse)
      ctx.Unsupported(op,
                      "Grad '{}' is a SelectedRows gradient but no longer the looked-up rows "
                      "(gradient accumulation sums micro-batches into a dense table, which "
                      "loses the rows Paddle's sparse Adam treats apart); use is_sparse = false "
                      "or no accumulation",
                      op.Inputs("Grad")[0]);
    if (op.attrs.Bool("amsgrad", false))
      ctx.Unsupported(op, "amsgrad = true with a SelectedRows gradient is not supported");
  }
  for (const char* s : {"Moment1", "Moment2", "Beta1Pow", "Beta2Pow"})
    in.push_back(StateIn(ctx, op, s));
  bool amsgrad = op.attrs.Bool("amsgrad", false);
  if (amsgrad) in.push_back(StateIn(ctx, op, "Moment2Max"));
  bool global_pow = op.attrs.Bool("use_global_beta_pow", false);
  const double beta1 = FloatOrTensor(ctx, op, "beta1", "Beta1Tensor", 0.9);
  const double beta2 = FloatOrTensor(ctx, op, "beta2", "Beta2Tensor", 0.999);
  ir::AttrMap attrs = {{"beta1", beta1},
                       {"beta2", beta2},
                       {"epsilon", FloatOrTensor(ctx, op, "epsilon", "EpsilonTensor", 1e-8)},
                       {"update_beta_pow", !global_pow}};
  if (selected_rows && !global_pow) {
    // Paddle's Adam of a SelectedRows gradient (both modes) advances the
    // beta powers before the update reads them (Beta1PowOut is Beta1Pow, and
    // the kernel writes it first), so its bias correction runs a step ahead
    // of dense Adam's. The update reads the advanced powers, which are also
    // the new state.
    for (auto [slot, beta] : {std::pair{5, beta1}, std::pair{6, beta2}})
      in[slot] =
          ctx.Add1(op, "scale", {in[slot]},
                   {{"scale", static_cast<double>(static_cast<float>(beta))}, {"bias", 0.0}});
    attrs.Set("update_beta_pow", false);
  }
  if (op.type == "adamw" && op.attrs.Bool("with_decay", false)) {
    attrs.Set("weight_decay", op.attrs.Float("coeff", 0.01));
    attrs.Set("lr_ratio", op.attrs.Float("lr_ratio", 1.0));
  }
  if (ctx.no_bias_optimizer()) attrs.Set("bias_correction", false);
  if (sparse) {
    UseRows(*sparse, &in, &attrs);
    attrs.Set("lazy", op.attrs.Bool("lazy_mode", false));
  }
  ir::Op* o = ctx.AddOp(op, sparse ? "adam_rows" : "adam", in, std::move(attrs));
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
  std::vector<ir::Value*> in = Common(ctx, op, true);
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
  std::vector<ir::Value*> in = Common(ctx, op, true);
  in.push_back(StateIn(ctx, op, "Moment"));
  ir::AttrMap attrs = {{"epsilon", op.attrs.Float("epsilon", 1e-6)}};
  const auto r = RowsOf(ctx, op, in[1]);
  if (r) UseRows(*r, &in, &attrs);
  ir::Op* o = ctx.AddOp(op, r ? "adagrad_rows" : "adagrad", in, std::move(attrs));
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
  std::vector<ir::Value*> in = Common(ctx, op, true);
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
  // A sparse table's gradient (clip_by_norm of a SelectedRows gradient, whose
  // norm is the merged rows', the dense value's): its rows scaled.
  ctx.SetOut(op, "Out", ir::MapGradient(ctx.graph(), x, [&](ir::Value* v) {
               return ctx.Add1(op, "mul", {v, scale});
             }));
}

// merge_selected_rows (legacy gradient clipping of a SelectedRows
// gradient): the repeated rows summed. A row gradient's value is that sum
// already (ir/row_gradient.h), and the row updates merge repeats themselves.
void MergeSelectedRows(TranslateContext& ctx, const OpDesc& op) {
  ctx.SetOut(op, "Out", ctx.In(op, "X"));
}

// get_tensor_from_selected_rows: the merged rows as a dense [rows, D]
// tensor, whose row count depends on the ids. Paddle's clipping only sums
// its squares (squared_l2_norm); Tiller gives the table gradient, whose
// other rows are zero, so the sum is the same. Any other reader would see
// a different shape: the translator refuses a non-row-gradient input.
void TensorFromSelectedRows(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  if (!ir::AsRowGradient(x))
    ctx.Unsupported(op, "X '{}' is not a sparse table's gradient", op.Inputs("X")[0]);
  ctx.SetOut(op, "Out", x);
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
  RegisterTranslator("sgd", Sgd, {"sgd", "sgd_rows", "where", "reshape", "cast"});
  RegisterPirOpCompat("sgd_", {"sgd",
                               {T("Param"), T("LearningRate"), T("Grad"), T("MasterParam")},
                               {"ParamOut", "MasterParamOut"},
                               {},
                               {}});
  RegisterTranslator("momentum", Momentum, {"momentum", "scale", "where", "reshape", "cast"});
  RegisterPirOpCompat("momentum_",
                      {"momentum",
                       {T("Param"), T("Grad"), T("Velocity"), T("LearningRate"), T("MasterParam")},
                       {"ParamOut", "VelocityOut", "MasterParamOut"},
                       {},
                       {}});
  RegisterTranslator("adam", Adam, {"adam", "adam_rows", "scale", "where", "reshape", "cast"});
  RegisterPirOpCompat("adam_", adam_like("adam"));
  RegisterTranslator("adamw", Adam, {"adam", "adam_rows", "scale", "where", "reshape", "cast"});
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
  RegisterTranslator("adagrad", Adagrad, {"adagrad", "adagrad_rows", "where", "reshape", "cast"});
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
  RegisterTranslator("merge_selected_rows", MergeSelectedRows, std::vector<std::string>{});
  RegisterTranslator("get_tensor_from_selected_rows", TensorFromSelectedRows,
                     std::vector<std::string>{});
  RegisterTranslator("squared_l2_norm", SquaredL2Norm, {"square", "reduce_sum", "reshape"});
  RegisterPirOpCompat("squared_l2_norm", pir::Unary("squared_l2_norm"));
  RegisterTranslator(
      "clip_by_norm", ClipByNorm,
      {"square", "reduce_sum", "sqrt", "less_equal", "where", "div", "mul", "embedding_grad"});
  RegisterPirOpCompat("clip_by_norm", pir::Unary("clip_by_norm"));
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
