// Unary math and activations: same shape and dtype in and out, with their
// gradient rules (written with forward IR ops; where the output is cheaper
// to reuse than the input, rules read output()).
//
// Attributes (kind, default; the schemas below declare them; a kind not
// named is float):
//   gelu{approximate: bool = false}: the tanh approximation
//   leaky_relu{alpha = 0.02}; elu{alpha = 1.0}; relu6{threshold = 6.0}
//   celu{alpha = 1.0}: max(0, x) + min(0, alpha (exp(x / alpha) - 1))
//   hard_sigmoid{slope = 0.1666667, offset = 0.5}: clamp(slope x + offset, 0, 1)
//   hard_swish{offset = 3.0, threshold = 6.0, scale = 6.0}:
//     x clamp(x + offset, 0, threshold) / scale
//   softplus{beta = 1.0, threshold = 20.0}: x where beta x > threshold
//   swish{beta = 1.0}; pow_scalar{factor = 1.0}; round{decimals: int = 0}
//   selu{scale = 1.0507..., alpha = 1.6732...}; mish{threshold = 20.0}
//   hard_shrink{threshold = 0.5}; softshrink{lambda = 0.5}
//   thresholded_relu{threshold = 1.0, value = 0.0}: x > threshold ? x : value
//   brelu{t_min = 0.0, t_max = 24.0}
//   scale{scale = 1.0, bias = 0.0, bias_after_scale: bool = true}:
//     bias_after_scale ? x*scale + bias : (x + bias)*scale
//   scale_tensor(x, s){bias = 0.0, bias_after_scale: bool = true}: scale's
//     formula with the factor read at run time from s, one element of x's
//     dtype (Paddle's ScaleTensor); computed in x's arithmetic as Paddle
//     does: integers wrap, float16 / bfloat16 round after each operation.
//     s gets no gradient (Paddle's scale_grad has none for it).
//   clip{min = -inf, max = +inf}: x < min ? min : (x > max ? max : x)
//   identity{checkpoint: bool = false}: marks a recomputation checkpoint
//   (Paddle's checkpointoutput).
//   prelu(x, alpha): x > 0 ? x : alpha * x, with alpha broadcast to x's shape
//   numpy-style (the translator reshapes Paddle's per-channel/element alpha).
//   The other ops take no attributes.
//
// Precision: the exp/log family and the ops that overflow, blow up or cancel
// in half precision (exp, log*, logsigmoid, softplus, mish, reciprocal,
// rsqrt, square, pow_scalar, tan, acos, asin, sinh, cosh, tanh_shrink) run in
// float32; the bounded or piecewise-linear rest follows its input.
// Layout: elementwise, so agnostic (prelu's broadcast alpha, like a binary
// op's operand, must be permuted with x; scale_tensor's factor is one
// element, the same in any layout).
#include <cmath>
#include <limits>

#include "ir/grad.h"
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferSame(InferContext& ctx) {
  ctx.AddOutput(ctx.input(0));
}

void InferScaleTensor(InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& s = ctx.input(1);
  if (s.dtype != x.dtype)
    ctx.Fail("scale dtype {} differs from x dtype {}", DTypeName(s.dtype), DTypeName(x.dtype));
  if (NumElements(s.shape) != 1)
    ctx.Fail("scale must hold one element, got shape {}", ShapeToString(s.shape));
  ctx.AddOutput(x);
}

void InferPrelu(InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& alpha = ctx.input(1);
  if (alpha.dtype != x.dtype)
    ctx.Fail("alpha dtype {} differs from x dtype {}", DTypeName(alpha.dtype), DTypeName(x.dtype));
  Shape out;
  if (!BroadcastShapes(x.shape, alpha.shape, &out) || out != x.shape)
    ctx.Fail("alpha shape {} does not broadcast to x shape {}", ShapeToString(alpha.shape),
             ShapeToString(x.shape));
  ctx.AddOutput(x);
}

constexpr auto kF32 = PrecisionRule::kAlwaysF32;
constexpr auto kFollows = PrecisionRule::kFollowsInput;

OpSchema UnarySchema(const char* name, PrecisionRule precision) {
  return OpSchema{name, 1, 1, InferSame}.Precision(precision).Layout(LayoutRule::kAgnostic);
}

const bool kSchemasRegistered = [] {
  for (const char* name : {"relu", "tanh", "sigmoid", "sqrt", "abs", "neg", "erf", "silu", "sin",
                           "cos", "floor", "ceil", "sign", "atan", "softsign"}) {
    RegisterOpSchema(UnarySchema(name, kFollows).NoAttrs());
  }
  for (const char* name :
       {"exp", "log", "log1p", "log2", "log10", "logsigmoid", "reciprocal", "rsqrt", "square",
        "tan", "acos", "asin", "sinh", "cosh", "tanh_shrink", "asinh", "acosh", "atanh", "expm1"}) {
    RegisterOpSchema(UnarySchema(name, kF32).NoAttrs());
  }
  RegisterOpSchema(UnarySchema("identity", kFollows).Attr("checkpoint", false));
  RegisterOpSchema(UnarySchema("gelu", kFollows).Attr("approximate", false));
  RegisterOpSchema(UnarySchema("leaky_relu", kFollows).Attr("alpha", 0.02));
  RegisterOpSchema(UnarySchema("elu", kFollows).Attr("alpha", 1.0));
  RegisterOpSchema(UnarySchema("celu", kFollows).Attr("alpha", 1.0));
  RegisterOpSchema(UnarySchema("relu6", kFollows).Attr("threshold", 6.0));
  RegisterOpSchema(
      UnarySchema("hard_sigmoid", kFollows).Attr("slope", 0.1666667).Attr("offset", 0.5));
  RegisterOpSchema(UnarySchema("hard_swish", kFollows)
                       .Attr("offset", 3.0)
                       .Attr("threshold", 6.0)
                       .Attr("scale", 6.0));
  RegisterOpSchema(UnarySchema("softplus", kF32).Attr("beta", 1.0).Attr("threshold", 20.0));
  RegisterOpSchema(UnarySchema("swish", kFollows).Attr("beta", 1.0));
  RegisterOpSchema(UnarySchema("pow_scalar", kF32).Attr("factor", 1.0));
  RegisterOpSchema(UnarySchema("round", kFollows).Attr("decimals", int64_t{0}));
  RegisterOpSchema(UnarySchema("selu", kFollows)
                       .Attr("scale", 1.0507009873554804934193349852946)
                       .Attr("alpha", 1.6732632423543772848170429916717));
  RegisterOpSchema(UnarySchema("mish", kF32).Attr("threshold", 20.0));
  RegisterOpSchema(UnarySchema("hard_shrink", kFollows).Attr("threshold", 0.5));
  RegisterOpSchema(UnarySchema("softshrink", kFollows).Attr("lambda", 0.5));
  RegisterOpSchema(
      UnarySchema("thresholded_relu", kFollows).Attr("threshold", 1.0).Attr("value", 0.0));
  RegisterOpSchema(UnarySchema("brelu", kFollows).Attr("t_min", 0.0).Attr("t_max", 24.0));
  RegisterOpSchema(UnarySchema("scale", kFollows)
                       .Attr("scale", 1.0)
                       .Attr("bias", 0.0)
                       .Attr("bias_after_scale", true));
  RegisterOpSchema(OpSchema{"scale_tensor", 2, 2, InferScaleTensor}
                       .Attr("bias", 0.0)
                       .Attr("bias_after_scale", true)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kAgnostic));
  RegisterOpSchema(UnarySchema("clip", kFollows)
                       .Attr("min", -std::numeric_limits<double>::infinity())
                       .Attr("max", std::numeric_limits<double>::infinity()));
  RegisterOpSchema(OpSchema{"prelu", 2, 2, InferPrelu}.NoAttrs().Precision(kFollows).Layout(
      LayoutRule::kAgnostic));
  return true;
}();

// ---- Gradients ----------------------------------------------------------

using Rule = Value* (*)(GradContext&, Value* g);

void Unary(const char* op, Rule rule) {
  RegisterGrad(op, [rule](GradContext& c) {
    if (c.needs_grad(0)) c.SetInputGrad(0, rule(c, c.out_grad()));
  });
}

Value* Scaled(GradContext& c, Value* x, double scale, double bias = 0.0) {
  return c.Add("scale", {x}, {{"scale", scale}, {"bias", bias}, {"bias_after_scale", true}});
}

Value* Cast(GradContext& c, Value* cond, DType to) {
  return c.Add("cast", {cond}, {{"dtype", std::string(DTypeName(to))}});
}

// 1.0 where `cond` holds, else 0.0, in x's dtype.
Value* Mask(GradContext& c, Value* cond) {
  return Cast(c, cond, c.input(0)->dtype());
}
Value* Const(GradContext& c, double v) {
  return c.Constant(v, c.input(0)->dtype());
}
Value* Cmp(GradContext& c, const char* op, Value* a, double b) {
  return c.Add(op, {a, Const(c, b)});
}
// g where lo < v < hi (strict, as Paddle's clip/relu6 gradients), else 0.
Value* PassInside(GradContext& c, Value* g, Value* v, double lo, double hi) {
  Value* in = c.Add("logical_and", {Cmp(c, "greater", v, lo), Cmp(c, "less", v, hi)});
  return c.Add("mul", {g, Mask(c, in)});
}
// g where |x| > t, else 0 (the shrink family).
Value* PassOutside(GradContext& c, Value* g, Value* x, double t) {
  return c.Add("mul", {g, Mask(c, Cmp(c, "greater", c.Add("abs", {x}), t))});
}

const bool kGradsRegistered = [] {
  Unary("identity", [](GradContext&, Value* g) { return g; });
  Unary("neg", [](GradContext& c, Value* g) { return c.Add("neg", {g}); });
  Unary("scale", [](GradContext& c, Value* g) { return Scaled(c, g, c.op().GetFloat("scale")); });
  RegisterGrad("scale_tensor", [](GradContext& c) {
    if (c.needs_grad(0)) c.SetInputGrad(0, c.Add("scale_tensor", {c.out_grad(), c.input(1)}));
  });
  Unary("relu", [](GradContext& c, Value* g) {
    Value* zero = c.Constant(0.0, c.input(0)->dtype());
    return c.Add("mul", {g, Cast(c, c.Add("greater", {c.output(), zero}), g->dtype())});
  });
  Unary("exp", [](GradContext& c, Value* g) { return c.Add("mul", {g, c.output()}); });
  Unary("log", [](GradContext& c, Value* g) { return c.Add("div", {g, c.input(0)}); });
  Unary("sqrt", [](GradContext& c, Value* g) {  // g / (2 sqrt x)
    return c.Add("div", {g, Scaled(c, c.output(), 2.0)});
  });
  Unary("rsqrt", [](GradContext& c, Value* g) {  // -0.5 g y^3
    Value* y = c.output();
    return Scaled(c, c.Add("mul", {g, c.Add("mul", {y, c.Add("square", {y})})}), -0.5);
  });
  Unary("square", [](GradContext& c, Value* g) {
    return c.Add("mul", {g, Scaled(c, c.input(0), 2.0)});
  });
  Unary("tanh", [](GradContext& c, Value* g) {  // g (1 - y^2)
    return c.Add("mul", {g, Scaled(c, c.Add("square", {c.output()}), -1.0, 1.0)});
  });
  Unary("sigmoid", [](GradContext& c, Value* g) {  // g y (1 - y)
    Value* y = c.output();
    return c.Add("mul", {g, c.Add("mul", {y, Scaled(c, y, -1.0, 1.0)})});
  });
  Unary("abs", [](GradContext& c, Value* g) {
    return c.Add("mul", {g, c.Add("sign", {c.input(0)})});
  });
  Unary("silu", [](GradContext& c, Value* g) {  // s (1 + x (1 - s)), s = sigmoid(x)
    Value* x = c.input(0);
    Value* s = c.Add("sigmoid", {x});
    Value* inner = Scaled(c, c.Add("mul", {x, Scaled(c, s, -1.0, 1.0)}), 1.0, 1.0);
    return c.Add("mul", {g, c.Add("mul", {s, inner})});
  });
  Unary("gelu", [](GradContext& c, Value* g) {  // one op: grad_ops.cc
    return c.Add("gelu_grad", {c.input(0), g}, {{"approximate", c.op().GetBool("approximate")}});
  });
  Unary("leaky_relu", [](GradContext& c, Value* g) {
    double alpha = c.op().GetFloat("alpha");
    Value* zero = c.Constant(0.0, c.input(0)->dtype());
    Value* pos = Cast(c, c.Add("greater", {c.input(0), zero}), g->dtype());
    // alpha + (1 - alpha) * [x > 0]
    return c.Add("mul", {g, Scaled(c, pos, 1.0 - alpha, alpha)});
  });
  Unary("erf", [](GradContext& c, Value* g) {  // 2/sqrt(pi) exp(-x^2)
    Value* e = c.Add("exp", {Scaled(c, c.Add("square", {c.input(0)}), -1.0)});
    return c.Add("mul", {g, Scaled(c, e, M_2_SQRTPI)});
  });
  Unary("reciprocal", [](GradContext& c, Value* g) {  // -g y^2
    return Scaled(c, c.Add("mul", {g, c.Add("square", {c.output()})}), -1.0);
  });
  Unary("sin", [](GradContext& c, Value* g) {
    return c.Add("mul", {g, c.Add("cos", {c.input(0)})});
  });
  Unary("cos", [](GradContext& c, Value* g) {
    return c.Add("neg", {c.Add("mul", {g, c.Add("sin", {c.input(0)})})});
  });
  Unary("tan", [](GradContext& c, Value* g) {  // 1 + y^2
    return c.Add("mul", {g, Scaled(c, c.Add("square", {c.output()}), 1.0, 1.0)});
  });
  Unary("sinh", [](GradContext& c, Value* g) {
    return c.Add("mul", {g, c.Add("cosh", {c.input(0)})});
  });
  Unary("cosh", [](GradContext& c, Value* g) {
    return c.Add("mul", {g, c.Add("sinh", {c.input(0)})});
  });
  Unary("atan", [](GradContext& c, Value* g) {  // 1 / (1 + x^2)
    return c.Add("div", {g, Scaled(c, c.Add("square", {c.input(0)}), 1.0, 1.0)});
  });
  Unary("asin", [](GradContext& c, Value* g) {  // 1 / sqrt(1 - x^2)
    return c.Add("mul", {g, c.Add("rsqrt", {Scaled(c, c.Add("square", {c.input(0)}), -1.0, 1.0)})});
  });
  Unary("acos", [](GradContext& c, Value* g) {
    Value* r = c.Add("rsqrt", {Scaled(c, c.Add("square", {c.input(0)}), -1.0, 1.0)});
    return c.Add("neg", {c.Add("mul", {g, r})});
  });
  Unary("asinh", [](GradContext& c, Value* g) {  // 1 / sqrt(x^2 + 1)
    return c.Add("mul", {g, c.Add("rsqrt", {Scaled(c, c.Add("square", {c.input(0)}), 1.0, 1.0)})});
  });
  Unary("acosh", [](GradContext& c, Value* g) {  // 1 / sqrt(x^2 - 1)
    return c.Add("mul", {g, c.Add("rsqrt", {Scaled(c, c.Add("square", {c.input(0)}), 1.0, -1.0)})});
  });
  Unary("atanh", [](GradContext& c, Value* g) {  // 1 / (1 - x^2)
    return c.Add("div", {g, Scaled(c, c.Add("square", {c.input(0)}), -1.0, 1.0)});
  });
  Unary("expm1", [](GradContext& c, Value* g) {  // exp(x) = y + 1
    return c.Add("mul", {g, Scaled(c, c.output(), 1.0, 1.0)});
  });
  Unary("log1p", [](GradContext& c, Value* g) {
    return c.Add("div", {g, Scaled(c, c.input(0), 1.0, 1.0)});
  });
  Unary("log2", [](GradContext& c, Value* g) {
    return c.Add("div", {g, Scaled(c, c.input(0), M_LN2)});
  });
  Unary("log10", [](GradContext& c, Value* g) {
    return c.Add("div", {g, Scaled(c, c.input(0), M_LN10)});
  });
  Unary("logsigmoid", [](GradContext& c, Value* g) {  // sigmoid(-x)
    return c.Add("mul", {g, c.Add("sigmoid", {c.Add("neg", {c.input(0)})})});
  });
  Unary("softsign", [](GradContext& c, Value* g) {  // 1 / (1 + |x|)^2
    return c.Add("div", {g, c.Add("square", {Scaled(c, c.Add("abs", {c.input(0)}), 1.0, 1.0)})});
  });
  Unary("tanh_shrink", [](GradContext& c, Value* g) {  // tanh(x)^2
    return c.Add("mul", {g, c.Add("square", {c.Add("tanh", {c.input(0)})})});
  });
  Unary("elu", [](GradContext& c, Value* g) {  // x > 0 ? 1 : alpha exp(x) = y + alpha
    double alpha = c.op().GetFloat("alpha");
    Value* neg = c.Add("mul", {g, Scaled(c, c.output(), 1.0, alpha)});
    return c.Add("where", {Cmp(c, "greater", c.input(0), 0.0), g, neg});
  });
  Unary("celu", [](GradContext& c, Value* g) {  // x > 0 ? 1 : exp(x / alpha)
    double alpha = c.op().GetFloat("alpha");
    Value* neg = c.Add("mul", {g, c.Add("exp", {Scaled(c, c.input(0), 1.0 / alpha)})});
    return c.Add("where", {Cmp(c, "greater", c.input(0), 0.0), g, neg});
  });
  Unary("selu", [](GradContext& c, Value* g) {  // x > 0 ? scale : scale alpha exp(x)
    const Op& a = c.op();
    double scale = a.GetFloat("scale");
    double alpha = a.GetFloat("alpha");
    Value* neg = c.Add("mul", {g, Scaled(c, c.Add("exp", {c.input(0)}), scale * alpha)});
    return c.Add("where", {Cmp(c, "greater", c.input(0), 0.0), Scaled(c, g, scale), neg});
  });
  Unary("relu6", [](GradContext& c, Value* g) {
    return PassInside(c, g, c.output(), 0.0, c.op().GetFloat("threshold"));
  });
  Unary("brelu", [](GradContext& c, Value* g) {
    const Op& a = c.op();
    return PassInside(c, g, c.input(0), a.GetFloat("t_min"), a.GetFloat("t_max"));
  });
  Unary("clip", [](GradContext& c, Value* g) {
    const Op& a = c.op();
    return PassInside(c, g, c.input(0), a.GetFloat("min"), a.GetFloat("max"));
  });
  Unary("hard_sigmoid", [](GradContext& c, Value* g) {  // slope where 0 < y < 1
    return Scaled(c, PassInside(c, g, c.output(), 0.0, 1.0), c.op().GetFloat("slope"));
  });
  Unary("hard_swish", [](GradContext& c, Value* g) {
    // u = x + offset: 0 for u <= 0, (2x + offset) / scale inside, threshold / scale above.
    const Op& a = c.op();
    double o = a.GetFloat("offset"), t = a.GetFloat("threshold"), s = a.GetFloat("scale");
    Value* x = c.input(0);
    Value* u = Scaled(c, x, 1.0, o);
    Value* inside =
        Mask(c, c.Add("logical_and", {Cmp(c, "greater", u, 0.0), Cmp(c, "less", u, t)}));
    Value* above = Mask(c, Cmp(c, "greater_equal", u, t));
    Value* d = c.Add(
        "add", {c.Add("mul", {inside, Scaled(c, x, 2.0 / s, o / s)}), Scaled(c, above, t / s)});
    return c.Add("mul", {g, d});
  });
  Unary("softplus", [](GradContext& c, Value* g) {  // sigmoid(beta x), 1 above the threshold
    const Op& a = c.op();
    double beta = a.GetFloat("beta"), threshold = a.GetFloat("threshold");
    Value* x = c.input(0);
    Value* d = c.Add("mul", {g, c.Add("sigmoid", {Scaled(c, x, beta)})});
    return c.Add("where", {Cmp(c, "greater", Scaled(c, x, beta), threshold), g, d});
  });
  Unary("swish", [](GradContext& c, Value* g) {  // s (1 + beta x (1 - s)), s = sigmoid(beta x)
    double beta = c.op().GetFloat("beta");
    Value* x = c.input(0);
    Value* s = c.Add("sigmoid", {Scaled(c, x, beta)});
    Value* inner = Scaled(c, c.Add("mul", {x, Scaled(c, s, -1.0, 1.0)}), beta, 1.0);
    return c.Add("mul", {g, c.Add("mul", {s, inner})});
  });
  Unary("mish", [](GradContext& c, Value* g) {
    // y = x tanh(sp), sp = softplus(x) (= x above threshold): tanh(sp) + x (1 - tanh^2) sp'.
    double th = c.op().GetFloat("threshold");
    Value* x = c.input(0);
    Value* above = Cmp(c, "greater", x, th);
    Value* sp = c.Add("where", {above, x, c.Add("log1p", {c.Add("exp", {x})})});
    Value* dsp = c.Add("where", {above, Const(c, 1.0), c.Add("sigmoid", {x})});
    Value* t = c.Add("tanh", {sp});
    Value* sech2 = Scaled(c, c.Add("square", {t}), -1.0, 1.0);
    return c.Add("mul", {g, c.Add("add", {t, c.Add("mul", {x, c.Add("mul", {sech2, dsp})})})});
  });
  Unary("hard_shrink", [](GradContext& c, Value* g) {
    return PassOutside(c, g, c.input(0), c.op().GetFloat("threshold"));
  });
  Unary("softshrink", [](GradContext& c, Value* g) {
    return PassOutside(c, g, c.input(0), c.op().GetFloat("lambda"));
  });
  Unary("thresholded_relu", [](GradContext& c, Value* g) {
    return c.Add("mul", {g, Mask(c, Cmp(c, "greater", c.input(0), c.op().GetFloat("threshold")))});
  });
  Unary("pow_scalar", [](GradContext& c, Value* g) {  // factor x^(factor - 1)
    double f = c.op().GetFloat("factor");
    Value* p = c.Add("pow_scalar", {c.input(0)}, {{"factor", f - 1.0}});
    return c.Add("mul", {g, Scaled(c, p, f)});
  });
  // Piecewise constant: zero gradient almost everywhere, as Paddle's.
  for (const char* op : {"floor", "ceil", "round", "sign"}) {
    RegisterGrad(op, [](GradContext&) {});
  }
  RegisterGrad("prelu", [](GradContext& c) {  // x > 0 ? 1 : alpha; d alpha = x where x <= 0
    Value* x = c.input(0);
    Value* alpha = c.input(1);
    Value* g = c.out_grad();
    Value* pos = Cmp(c, "greater", x, 0.0);
    if (c.needs_grad(0)) c.SetInputGrad(0, c.Add("where", {pos, g, c.Add("mul", {g, alpha})}));
    if (c.needs_grad(1)) {
      Value* da = c.Add("where", {pos, Const(c, 0.0), c.Add("mul", {g, x})});
      c.SetInputGrad(1, c.ReduceTo(da, alpha->shape()));
    }
  });
  return true;
}();

}  // namespace
}  // namespace tiller::ir
