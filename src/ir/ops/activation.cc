// Unary math and activations: same shape and dtype in and out.
// Attributes: gelu{approximate: bool}, leaky_relu{alpha}, elu{alpha},
// hard_sigmoid{slope, offset}, softplus{beta, threshold}, relu6{threshold},
// swish{beta}, pow_scalar{factor}. scale{scale, bias, bias_after_scale}:
// bias_after_scale ? x*scale + bias : (x + bias)*scale. clip{min, max}.
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferSame(InferContext& ctx) { ctx.AddOutput(ctx.input(0)); }

const bool kRegistered = [] {
  for (const char* name :
       {"relu", "gelu", "tanh", "sigmoid", "exp", "log", "sqrt", "rsqrt", "abs", "neg", "erf",
        "reciprocal", "square", "silu", "swish", "leaky_relu", "elu", "hard_swish",
        "hard_sigmoid", "relu6", "softplus", "sin", "cos", "floor", "ceil", "round", "sign",
        "log1p", "pow_scalar", "identity", "scale", "clip"}) {
    RegisterOpSchema({name, 1, 1, InferSame});
  }
  return true;
}();

}  // namespace
}  // namespace tiller::ir
