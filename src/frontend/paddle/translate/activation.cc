// Paddle activations and unary math ops (X -> Out), prelu, pow and clip,
// each with the PIR spelling that maps onto it.
#include <cmath>

#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"

namespace tiller::paddle {
namespace {

using Renames = std::vector<std::pair<std::string, std::string>>;

// Unary op: X -> Out, with the listed attributes copied (Paddle name -> IR name).
void RegisterUnary(const char* paddle, const char* ir_type, Renames attrs = {}) {
  std::string t = ir_type;
  RegisterTranslator(paddle,
                     [t, attrs](TranslateContext& c, const OpDesc& op) {
                       ir::AttrMap a;
                       for (const auto& [from, to] : attrs) {
                         if (const ir::Attribute* v = op.attrs.Find(from)) a.Set(to, *v);
                       }
                       c.SetOut(op, "Out", c.Add1(op, t, {c.In(op, "X")}, a));
                     },
                     {t});
}

// mish's softplus threshold: `threshold` in legacy programs; PIR programs
// spell it `lambda` and its PIR entry passes that name through.
void Mish(TranslateContext& ctx, const OpDesc& op) {
  double th = op.attrs.Float("threshold", op.attrs.Float("lambda", 20.0));
  ctx.SetOut(op, "Out", ctx.Add1(op, "mish", {ctx.In(op, "X")}, {{"threshold", th}}));
}

// celu divides by alpha: Paddle refuses alpha = 0 (CELU's InferMeta), so do we.
void Celu(TranslateContext& ctx, const OpDesc& op) {
  double alpha = op.attrs.Float("alpha", 1.0);
  if (alpha == 0.0) ctx.Unsupported(op, "alpha = {} is not supported (celu divides by it)", alpha);
  ctx.SetOut(op, "Out", ctx.Add1(op, "celu", {ctx.In(op, "X")}, {{"alpha", alpha}}));
}

// prelu: alpha is reshaped so that numpy broadcasting puts each value where
// Paddle's mode reads it: one value (all), one per channel (dim 1 for
// channel-first layouts, the last dim for channel-last ones), or one per
// element of x's non-batch dims (element).
void Prelu(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  ir::Value* alpha = ctx.In(op, "Alpha");
  const Shape& xs = x->shape();
  const int rank = static_cast<int>(xs.size());
  const int64_t n = NumElements(alpha->shape());
  std::string mode = op.attrs.Str("mode", "all");
  std::string layout = op.attrs.Str("data_format", "NCHW");
  Shape target;
  if (mode == "all") {
    if (n != 1) ctx.Invalid(op, "mode = all needs one alpha value, got {}", n);
  } else if (mode == "channel") {
    bool first = layout.size() >= 2 && layout[1] == 'C';
    bool last = layout.size() >= 2 && layout.back() == 'C';
    if (!first && !last) ctx.Unsupported(op, "data_format = {} is not supported", layout);
    if (rank < 2) ctx.Invalid(op, "mode = channel needs x of rank >= 2, got {}", rank);
    int c = first ? 1 : rank - 1;
    if (n != xs[c])
      ctx.Invalid(op, "mode = channel: alpha has {} values for {} channels", n, xs[c]);
    target.assign(rank, 1);
    target[c] = n;
  } else if (mode == "element") {
    if (rank < 1) ctx.Invalid(op, "mode = element needs x of rank >= 1");
    target.assign(xs.begin(), xs.end());
    target[0] = 1;
    if (n != NumElements(target))
      ctx.Invalid(op, "mode = element: alpha has {} values for {} elements", n,
                  NumElements(target));
  } else {
    ctx.Unsupported(op, "mode = {} is not supported (all, channel, element)", mode);
  }
  alpha = ctx.Reshape(op, alpha, target);
  ctx.SetOut(op, "Out", ctx.Add1(op, "prelu", {x, alpha}));
}

// A scalar operand given as a tensor, cast to x's dtype and made 0-D so it
// broadcasts to any x without changing x's shape.
ir::Value* ScalarOperand(TranslateContext& ctx, const OpDesc& op, ir::Value* v, DType dtype) {
  if (NumElements(v->shape()) != 1)
    ctx.Invalid(op, "tensor '{}' must hold one value, has shape {}", v->name,
                ShapeToString(v->shape()));
  return Cast(ctx, op, ctx.Reshape(op, v, {}), dtype);
}

// pow: a FactorTensor, when present, replaces the `factor` attribute.
void Pow(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  double factor = op.attrs.Float("factor", 1.0);
  if (ir::Value* t = ctx.InOpt(op, "FactorTensor")) {
    if (!t->data) {
      ctx.SetOut(op, "Out", ctx.Add1(op, "pow", {x, ScalarOperand(ctx, op, t, x->dtype())}));
      return;
    }
    factor = ctx.ConstFloat(op, t);
  }
  ctx.SetOut(op, "Out", ctx.Add1(op, "pow_scalar", {x}, {{"factor", factor}}));
}

// clip: Min/Max tensors replace the attributes. Compile-time tensors fold
// into the attributes; run-time ones become max(min, x) / min(max, x),
// which match Paddle's x < min ? min : (x > max ? max : x) whenever
// min <= max, NaN included (the bound is the first operand).
void Clip(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  double lo = op.attrs.Float("min", -INFINITY), hi = op.attrs.Float("max", INFINITY);
  ir::Value* min_t = ctx.InOpt(op, "Min");
  ir::Value* max_t = ctx.InOpt(op, "Max");
  if (min_t && min_t->data) {
    lo = ctx.ConstFloat(op, min_t);
    min_t = nullptr;
  }
  if (max_t && max_t->data) {
    hi = ctx.ConstFloat(op, max_t);
    max_t = nullptr;
  }
  if (min_t) {
    x = ctx.Add1(op, "max", {ScalarOperand(ctx, op, min_t, x->dtype()), x});
    lo = -INFINITY;
  }
  if (max_t) {
    x = ctx.Add1(op, "min", {ScalarOperand(ctx, op, max_t, x->dtype()), x});
    hi = INFINITY;
  }
  if ((!min_t && !max_t) || !std::isinf(lo) || !std::isinf(hi))
    x = ctx.Add1(op, "clip", {x}, {{"min", lo}, {"max", hi}});
  ctx.SetOut(op, "Out", x);
}

const bool kRegistered = [] {
  using pir::Unary;
  // Each translator with the PIR spelling that maps onto it.
  for (const char* name :
       {"relu",        "tanh",  "sigmoid",    "exp",    "log",   "sqrt",     "rsqrt",
        "abs",         "erf",   "reciprocal", "square", "silu",  "sin",      "cos",
        "floor",       "ceil",  "sign",       "log1p",  "acos",  "asin",     "atan",
        "cosh",        "sinh",  "tan",        "log2",   "log10", "softsign", "logsigmoid",
        "tanh_shrink", "asinh", "acosh",      "atanh",  "expm1"}) {
    RegisterUnary(name, name);
    RegisterPirOpCompat(name, Unary(name));
  }
  RegisterUnary("round", "round", {{"decimals", "decimals"}});
  RegisterPirOpCompat("round", Unary("round"));
  RegisterUnary("gelu", "gelu", {{"approximate", "approximate"}});
  RegisterPirOpCompat("gelu", Unary("gelu"));
  RegisterUnary("leaky_relu", "leaky_relu", {{"alpha", "alpha"}});
  RegisterPirOpCompat("leaky_relu", Unary("leaky_relu", {{"negative_slope", "alpha"}}));
  RegisterUnary("elu", "elu", {{"alpha", "alpha"}});
  RegisterPirOpCompat("elu", Unary("elu"));
  RegisterTranslator("celu", Celu, {"celu"});
  RegisterPirOpCompat("celu", Unary("celu"));
  RegisterUnary("swish", "swish", {{"beta", "beta"}});
  RegisterPirOpCompat("swish", Unary("swish", {}, {{"beta", 1.0}}));
  RegisterUnary("hard_swish", "hard_swish",
                {{"threshold", "threshold"}, {"scale", "scale"}, {"offset", "offset"}});
  RegisterPirOpCompat("hardswish", Unary("hard_swish"));  // Paddle 2.x spelled it with a '_'
  RegisterUnary("hard_sigmoid", "hard_sigmoid", {{"slope", "slope"}, {"offset", "offset"}});
  RegisterPirOpCompat("hardsigmoid", Unary("hard_sigmoid"));
  RegisterUnary("relu6", "relu6", {{"threshold", "threshold"}});
  RegisterPirOpCompat("relu6", Unary("relu6", {}, {{"threshold", 6.0}}));
  RegisterUnary("softplus", "softplus", {{"beta", "beta"}, {"threshold", "threshold"}});
  RegisterPirOpCompat("softplus", Unary("softplus"));
  RegisterUnary("selu", "selu", {{"scale", "scale"}, {"alpha", "alpha"}});
  RegisterPirOpCompat("selu", Unary("selu"));
  RegisterUnary("hard_shrink", "hard_shrink", {{"threshold", "threshold"}});
  RegisterPirOpCompat("hardshrink", Unary("hard_shrink"));
  RegisterUnary("softshrink", "softshrink", {{"lambda", "lambda"}});
  RegisterPirOpCompat("softshrink", Unary("softshrink", {{"threshold", "lambda"}}));
  RegisterUnary("thresholded_relu", "thresholded_relu",
                {{"threshold", "threshold"}, {"value", "value"}});
  RegisterPirOpCompat("thresholded_relu", Unary("thresholded_relu"));
  RegisterUnary("brelu", "brelu", {{"t_min", "t_min"}, {"t_max", "t_max"}});
  RegisterPirOpCompat("hardtanh", Unary("brelu"));
  RegisterTranslator("mish", Mish, {"mish"});
  RegisterPirOpCompat("mish", Unary("mish"));
  RegisterTranslator("prelu", Prelu, {"reshape", "prelu"});
  RegisterPirOpCompat("prelu", {"prelu", {pir::T("X"), pir::T("Alpha")}, {"Out"}, {}, {}});
  RegisterTranslator("pow", Pow, {"pow_scalar", "pow", "reshape", "cast"});
  RegisterPirOpCompat("pow", Unary("pow", {{"y", "factor"}}));
  RegisterTranslator("clip", Clip, {"clip", "max", "min", "reshape", "cast"});
  RegisterPirOpCompat("clip", {"clip",
                               {pir::T("X"), pir::Scalar("min", "Min"), pir::Scalar("max", "Max")},
                               {"Out"},
                               {},
                               {}});
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
