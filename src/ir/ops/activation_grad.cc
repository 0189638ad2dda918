// Gradients of unary math and activations, written with forward IR ops.
// Where the output is cheaper to reuse than the input, rules read output().
#include <cmath>
#include <limits>

#include "ir/grad.h"

namespace tiller::ir {
namespace {

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

const bool kRegistered = [] {
  Unary("identity", [](GradContext&, Value* g) { return g; });
  Unary("print", [](GradContext&, Value* g) { return g; });  // prints the forward value only
  Unary("neg", [](GradContext& c, Value* g) { return c.Add("neg", {g}); });
  Unary("scale",
        [](GradContext& c, Value* g) { return Scaled(c, g, c.op().attrs.Float("scale", 1.0)); });
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
  Unary("gelu", [](GradContext& c, Value* g) {
    Value* x = c.input(0);
    if (c.op().attrs.Bool("approximate", false)) {
      // y = x (1 + t) / 2, t = tanh(k (x + 0.044715 x^3)), k = sqrt(2 / pi):
      // y' = (1 + t) / 2 + x (1 - t^2) k (1 + 3 * 0.044715 x^2) / 2.
      const double k = M_2_SQRTPI * M_SQRT1_2;
      Value* x2 = c.Add("square", {x});
      Value* u = Scaled(c, c.Add("mul", {x, Scaled(c, x2, 0.044715, 1.0)}), k);
      Value* t = c.Add("tanh", {u});
      Value* du = Scaled(c, x2, 3 * 0.044715 * k, k);
      Value* sech2 = Scaled(c, c.Add("square", {t}), -1.0, 1.0);
      Value* d = c.Add("add", {Scaled(c, t, 0.5, 0.5),
                               Scaled(c, c.Add("mul", {x, c.Add("mul", {sech2, du})}), 0.5)});
      return c.Add("mul", {g, d});
    }
    // Exact gelu: Phi(x) + x phi(x), Phi the normal CDF, phi its density.
    Value* cdf = Scaled(c, c.Add("erf", {Scaled(c, x, M_SQRT1_2)}), 0.5, 0.5);
    Value* pdf = Scaled(c, c.Add("exp", {Scaled(c, c.Add("square", {x}), -0.5)}),
                        0.5 * M_2_SQRTPI * M_SQRT1_2);
    return c.Add("mul", {g, c.Add("add", {cdf, c.Add("mul", {x, pdf})})});
  });
  Unary("leaky_relu", [](GradContext& c, Value* g) {
    double alpha = c.op().attrs.Float("alpha", 0.02);
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
  Unary("cast", [](GradContext& c, Value* g) {
    return c.Add("cast", {g}, {{"dtype", std::string(DTypeName(c.input(0)->dtype()))}});
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
    double alpha = c.op().attrs.Float("alpha", 1.0);
    Value* neg = c.Add("mul", {g, Scaled(c, c.output(), 1.0, alpha)});
    return c.Add("where", {Cmp(c, "greater", c.input(0), 0.0), g, neg});
  });
  Unary("selu", [](GradContext& c, Value* g) {  // x > 0 ? scale : scale alpha exp(x)
    const AttrMap& a = c.op().attrs;
    double scale = a.Float("scale", 1.0507009873554804934193349852946);
    double alpha = a.Float("alpha", 1.6732632423543772848170429916717);
    Value* neg = c.Add("mul", {g, Scaled(c, c.Add("exp", {c.input(0)}), scale * alpha)});
    return c.Add("where", {Cmp(c, "greater", c.input(0), 0.0), Scaled(c, g, scale), neg});
  });
  Unary("relu6", [](GradContext& c, Value* g) {
    return PassInside(c, g, c.output(), 0.0, c.op().attrs.Float("threshold", 6.0));
  });
  Unary("brelu", [](GradContext& c, Value* g) {
    const AttrMap& a = c.op().attrs;
    return PassInside(c, g, c.input(0), a.Float("t_min", 0.0), a.Float("t_max", 24.0));
  });
  Unary("clip", [](GradContext& c, Value* g) {
    const AttrMap& a = c.op().attrs;
    double inf = std::numeric_limits<double>::infinity();
    return PassInside(c, g, c.input(0), a.Float("min", -inf), a.Float("max", inf));
  });
  Unary("hard_sigmoid", [](GradContext& c, Value* g) {  // slope where 0 < y < 1
    return Scaled(c, PassInside(c, g, c.output(), 0.0, 1.0),
                  c.op().attrs.Float("slope", 0.1666667));
  });
  Unary("hard_swish", [](GradContext& c, Value* g) {
    // u = x + offset: 0 for u <= 0, (2x + offset) / scale inside, threshold / scale above.
    const AttrMap& a = c.op().attrs;
    double o = a.Float("offset", 3.0), t = a.Float("threshold", 6.0), s = a.Float("scale", 6.0);
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
    const AttrMap& a = c.op().attrs;
    double beta = a.Float("beta", 1.0), threshold = a.Float("threshold", 20.0);
    Value* x = c.input(0);
    Value* d = c.Add("mul", {g, c.Add("sigmoid", {Scaled(c, x, beta)})});
    return c.Add("where", {Cmp(c, "greater", Scaled(c, x, beta), threshold), g, d});
  });
  Unary("swish", [](GradContext& c, Value* g) {  // s (1 + beta x (1 - s)), s = sigmoid(beta x)
    double beta = c.op().attrs.Float("beta", 1.0);
    Value* x = c.input(0);
    Value* s = c.Add("sigmoid", {Scaled(c, x, beta)});
    Value* inner = Scaled(c, c.Add("mul", {x, Scaled(c, s, -1.0, 1.0)}), beta, 1.0);
    return c.Add("mul", {g, c.Add("mul", {s, inner})});
  });
  Unary("mish", [](GradContext& c, Value* g) {
    // y = x tanh(sp), sp = softplus(x) (= x above threshold): tanh(sp) + x (1 - tanh^2) sp'.
    double th = c.op().attrs.Float("threshold", 20.0);
    Value* x = c.input(0);
    Value* above = Cmp(c, "greater", x, th);
    Value* sp = c.Add("where", {above, x, c.Add("log1p", {c.Add("exp", {x})})});
    Value* dsp = c.Add("where", {above, Const(c, 1.0), c.Add("sigmoid", {x})});
    Value* t = c.Add("tanh", {sp});
    Value* sech2 = Scaled(c, c.Add("square", {t}), -1.0, 1.0);
    return c.Add("mul", {g, c.Add("add", {t, c.Add("mul", {x, c.Add("mul", {sech2, dsp})})})});
  });
  Unary("hard_shrink", [](GradContext& c, Value* g) {
    return PassOutside(c, g, c.input(0), c.op().attrs.Float("threshold", 0.5));
  });
  Unary("softshrink", [](GradContext& c, Value* g) {
    return PassOutside(c, g, c.input(0), c.op().attrs.Float("lambda", 0.5));
  });
  Unary("thresholded_relu", [](GradContext& c, Value* g) {
    return c.Add("mul",
                 {g, Mask(c, Cmp(c, "greater", c.input(0), c.op().attrs.Float("threshold", 1.0)))});
  });
  Unary("pow_scalar", [](GradContext& c, Value* g) {  // factor x^(factor - 1)
    double f = c.op().attrs.Float("factor", 1.0);
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
