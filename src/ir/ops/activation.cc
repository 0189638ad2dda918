// Unary math and activations: same shape and dtype in and out.
// Attributes: gelu{approximate: bool}, leaky_relu{alpha}, elu{alpha},
// hard_sigmoid{slope, offset}, hard_swish{offset, threshold, scale},
// softplus{beta, threshold}, relu6{threshold}, swish{beta}, pow_scalar{factor},
// round{decimals: int}, selu{scale, alpha}, mish{threshold},
// hard_shrink{threshold}, softshrink{lambda}, thresholded_relu{threshold, value},
// brelu{t_min, t_max}. scale{scale, bias, bias_after_scale}:
// bias_after_scale ? x*scale + bias : (x + bias)*scale. clip{min, max}.
// prelu(x, alpha): x > 0 ? x : alpha * x, with alpha broadcast to x's shape
// numpy-style (the translator reshapes Paddle's per-channel/element alpha).
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferSame(InferContext& ctx) {
  ctx.AddOutput(ctx.input(0));
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

const bool kRegistered = [] {
  for (const char* name :
       {"relu",         "gelu",  "tanh",        "sigmoid",    "exp",         "log",
        "sqrt",         "rsqrt", "abs",         "neg",        "erf",         "reciprocal",
        "square",       "silu",  "swish",       "leaky_relu", "elu",         "hard_swish",
        "hard_sigmoid", "relu6", "softplus",    "sin",        "cos",         "floor",
        "ceil",         "round", "sign",        "log1p",      "pow_scalar",  "identity",
        "scale",        "clip",  "acos",        "asin",       "atan",        "cosh",
        "sinh",         "tan",   "log2",        "log10",      "softsign",    "logsigmoid",
        "mish",         "selu",  "hard_shrink", "softshrink", "tanh_shrink", "thresholded_relu",
        "brelu"}) {
    RegisterOpSchema({name, 1, 1, InferSame});
  }
  RegisterOpSchema({"prelu", 2, 2, InferPrelu});
  return true;
}();

}  // namespace
}  // namespace tiller::ir
