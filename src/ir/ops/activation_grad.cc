// Gradients of unary math and activations, written with forward IR ops.
// Where the output is cheaper to reuse than the input, rules read output().
#include <cmath>

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

const bool kRegistered = [] {
  Unary("identity", [](GradContext&, Value* g) { return g; });
  Unary("neg", [](GradContext& c, Value* g) { return c.Add("neg", {g}); });
  Unary("scale", [](GradContext& c, Value* g) {
    return Scaled(c, g, c.op().attrs.Float("scale", 1.0));
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
  Unary("abs", [](GradContext& c, Value* g) { return c.Add("mul", {g, c.Add("sign", {c.input(0)})}); });
  Unary("silu", [](GradContext& c, Value* g) {  // s (1 + x (1 - s)), s = sigmoid(x)
    Value* x = c.input(0);
    Value* s = c.Add("sigmoid", {x});
    Value* inner = Scaled(c, c.Add("mul", {x, Scaled(c, s, -1.0, 1.0)}), 1.0, 1.0);
    return c.Add("mul", {g, c.Add("mul", {s, inner})});
  });
  Unary("gelu", [](GradContext& c, Value* g) {
    // Exact gelu: Phi(x) + x phi(x), Phi the normal CDF, phi its density.
    if (c.op().attrs.Bool("approximate", false))
      Fail(ErrorKind::kUnimplemented, "gelu ({}): gradient of the tanh approximation is not implemented",
           c.op().name);
    Value* x = c.input(0);
    Value* cdf = Scaled(c, c.Add("erf", {Scaled(c, x, M_SQRT1_2)}), 0.5, 0.5);
    Value* pdf = Scaled(c, c.Add("exp", {Scaled(c, c.Add("square", {x}), -0.5)}), 0.5 * M_2_SQRTPI * M_SQRT1_2);
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
  return true;
}();

}  // namespace
}  // namespace tiller::ir
