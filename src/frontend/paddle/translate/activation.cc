// Paddle activations and unary math ops (X -> Out), and clip.
#include <cmath>

#include "frontend/paddle/translate.h"

namespace tiller::paddle {
namespace {

// Unary op: X -> Out, with the listed attributes copied (Paddle name -> IR name).
void RegisterUnary(const char* paddle, const char* ir_type,
                   std::vector<std::pair<std::string, std::string>> attrs = {}) {
  std::string t = ir_type;
  RegisterTranslator(paddle, [t, attrs](TranslateContext& c, const OpDesc& op) {
    ir::AttrMap a;
    for (const auto& [from, to] : attrs) {
      if (const ir::Attribute* v = op.attrs.Find(from)) a.Set(to, *v);
    }
    c.SetOut(op, "Out", c.Add1(op, t, {c.In(op, "X")}, a));
  });
}

void Clip(TranslateContext& ctx, const OpDesc& op) {
  double lo = op.attrs.Float("min", -INFINITY), hi = op.attrs.Float("max", INFINITY);
  if (ir::Value* t = ctx.InOpt(op, "Min")) lo = ctx.ConstFloats(op, t).at(0);
  if (ir::Value* t = ctx.InOpt(op, "Max")) hi = ctx.ConstFloats(op, t).at(0);
  ctx.SetOut(op, "Out", ctx.Add1(op, "clip", {ctx.In(op, "X")}, {{"min", lo}, {"max", hi}}));
}

const bool kRegistered = [] {
  for (const char* name : {"relu", "tanh", "sigmoid", "exp", "log", "sqrt", "rsqrt", "abs", "erf",
                           "reciprocal", "square", "silu", "sin", "cos", "floor", "ceil",
                           "round", "sign", "log1p"}) {
    RegisterUnary(name, name);
  }
  RegisterUnary("gelu", "gelu", {{"approximate", "approximate"}});
  RegisterUnary("leaky_relu", "leaky_relu", {{"alpha", "alpha"}});
  RegisterUnary("elu", "elu", {{"alpha", "alpha"}});
  RegisterUnary("swish", "swish", {{"beta", "beta"}});
  RegisterUnary("hard_swish", "hard_swish");
  RegisterUnary("hard_sigmoid", "hard_sigmoid", {{"slope", "slope"}, {"offset", "offset"}});
  RegisterUnary("relu6", "relu6", {{"threshold", "threshold"}});
  RegisterUnary("softplus", "softplus", {{"beta", "beta"}, {"threshold", "threshold"}});
  RegisterUnary("pow", "pow_scalar", {{"factor", "factor"}});
  RegisterTranslator("clip", Clip);
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
