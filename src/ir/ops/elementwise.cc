// Elementwise ops: binary with numpy broadcasting (atan2 and the bitwise
// ops of integers too), comparisons and logic (bool results), `cast` and
// `where`, with their gradient rules. Unary math lives in activation.cc;
// bitwise_not is here, beside the other bitwise ops.
//   cast{dtype: string, required: "float32"...}; the others take no
//   attributes. where(cond, x, y) broadcasts all three.
// Operands broadcast, so each input gradient is summed back to the operand's
// shape (GradContext::ReduceTo).
//
// Precision: pow and atan2 run in float32 (pow overflows half precision for
// moderate operands; atan2 squares its operands' magnitudes in its
// gradient); the arithmetic, comparisons, logic, cast and where follow their
// inputs (cast's output dtype is its attribute). Layout: elementwise, so
// agnostic; a broadcast operand (a per-channel bias) must be permuted with
// the others.
#include <string>

#include "ir/grad.h"
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferBinary(InferContext& ctx, bool bool_out) {
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  if (a.dtype != b.dtype)
    ctx.Fail("operand dtypes differ: {} vs {}", DTypeName(a.dtype), DTypeName(b.dtype));
  Shape out;
  if (!BroadcastShapes(a.shape, b.shape, &out))
    ctx.Fail("shapes {} and {} do not broadcast", ShapeToString(a.shape), ShapeToString(b.shape));
  ctx.AddOutput({bool_out ? DType::kBool : a.dtype, out});
}

void InferCast(InferContext& c) {
  DType to;
  const std::string& name = c.op().GetStr("dtype");
  if (!ParseDType(name, &to)) c.Fail("unknown cast dtype '{}'", name);
  c.AddOutput({to, c.input(0).shape});
}

void InferWhere(InferContext& c) {
  if (c.input(0).dtype != DType::kBool) c.Fail("condition must be bool");
  if (c.input(1).dtype != c.input(2).dtype) c.Fail("x and y dtypes differ");
  Shape s1, s2;
  if (!BroadcastShapes(c.input(0).shape, c.input(1).shape, &s1) ||
      !BroadcastShapes(s1, c.input(2).shape, &s2))
    c.Fail("shapes do not broadcast");
  c.AddOutput({c.input(1).dtype, s2});
}

OpSchema Elementwise(const char* name, int inputs, std::function<void(InferContext&)> infer,
                     PrecisionRule precision = PrecisionRule::kFollowsInput) {
  return OpSchema{name, inputs, inputs, std::move(infer)}.Precision(precision).Layout(
      LayoutRule::kAgnostic);
}

const bool kSchemasRegistered = [] {
  auto arith = [](InferContext& c) { InferBinary(c, false); };
  auto boolean = [](InferContext& c) { InferBinary(c, true); };
  for (const char* name : {"add", "sub", "mul", "div", "max", "min", "mod", "floor_div"})
    RegisterOpSchema(Elementwise(name, 2, arith).NoAttrs());
  RegisterOpSchema(Elementwise("pow", 2, arith, PrecisionRule::kAlwaysF32).NoAttrs());
  RegisterOpSchema(Elementwise("atan2", 2, arith, PrecisionRule::kAlwaysF32).NoAttrs());
  for (const char* name : {"bitwise_and", "bitwise_or", "bitwise_xor"})
    RegisterOpSchema(Elementwise(name, 2, arith).NoAttrs());
  RegisterOpSchema(
      Elementwise("bitwise_not", 1, [](InferContext& c) { c.AddOutput(c.input(0)); }).NoAttrs());
  for (const char* name : {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
                           "logical_and", "logical_or", "logical_xor"}) {
    RegisterOpSchema(Elementwise(name, 2, boolean).NoAttrs());
  }
  RegisterOpSchema(Elementwise("logical_not", 1, [](InferContext& c) {
                     c.AddOutput({DType::kBool, c.input(0).shape});
                   }).NoAttrs());
  RegisterOpSchema(Elementwise("cast", 1, InferCast).RequiredAttr("dtype", AttrKind::kString));
  RegisterOpSchema(Elementwise("where", 3, InferWhere).NoAttrs());
  return true;
}();

// ---- Gradients ----------------------------------------------------------

void SetBoth(GradContext& c, Value* ga, Value* gb) {
  if (c.needs_grad(0)) c.SetInputGrad(0, c.ReduceTo(ga, c.input(0)->shape()));
  if (c.needs_grad(1)) c.SetInputGrad(1, c.ReduceTo(gb, c.input(1)->shape()));
}

// 1.0 where `cond` holds, else 0.0, in the gradient's dtype.
Value* Mask(GradContext& c, Value* cond) {
  return c.Add("cast", {cond}, {{"dtype", std::string(DTypeName(c.out_grad()->dtype()))}});
}

TILLER_REGISTER_GRAD("add", [](GradContext& c) { SetBoth(c, c.out_grad(), c.out_grad()); });
TILLER_REGISTER_GRAD("sub", [](GradContext& c) {
  SetBoth(c, c.out_grad(), c.needs_grad(1) ? c.Add("neg", {c.out_grad()}) : nullptr);
});
TILLER_REGISTER_GRAD("mul", [](GradContext& c) {
  Value* g = c.out_grad();
  SetBoth(c, c.needs_grad(0) ? c.Add("mul", {g, c.input(1)}) : nullptr,
          c.needs_grad(1) ? c.Add("mul", {g, c.input(0)}) : nullptr);
});
// d(a/b) = g/b, -g*a/b^2 = -(g*out)/b
TILLER_REGISTER_GRAD("div", [](GradContext& c) {
  Value* g = c.out_grad();
  Value* ga = c.needs_grad(0) ? c.Add("div", {g, c.input(1)}) : nullptr;
  Value* gb = c.needs_grad(1)
                  ? c.Add("neg", {c.Add("div", {c.Add("mul", {g, c.output()}), c.input(1)})})
                  : nullptr;
  SetBoth(c, ga, gb);
});
// The gradient goes to the operand that was selected (ties: the first, as Paddle).
void MinMax(GradContext& c, const char* pick_a) {
  Value* g = c.out_grad();
  Value* a_wins = Mask(c, c.Add(pick_a, {c.input(0), c.input(1)}));
  Value* ga = c.Add("mul", {g, a_wins});
  SetBoth(c, ga, c.needs_grad(1) ? c.Add("sub", {g, ga}) : nullptr);
}
TILLER_REGISTER_GRAD("max", [](GradContext& c) { MinMax(c, "greater_equal"); });
// mod(a, b) = a - floor(a / b) b: d a = g, d b = -g floor(a / b) (almost
// everywhere); floor_div is piecewise constant: no gradient.
TILLER_REGISTER_GRAD("mod", [](GradContext& c) {
  Value* g = c.out_grad();
  Value* gb = c.needs_grad(1)
                  ? c.Add("neg", {c.Add("mul", {g, c.Add("floor_div", {c.input(0), c.input(1)})})})
                  : nullptr;
  SetBoth(c, g, gb);
});
TILLER_REGISTER_GRAD("floor_div", [](GradContext&) {});
// where(cond, x, y): the gradient goes to the operand that was picked.
TILLER_REGISTER_GRAD("where", [](GradContext& c) {
  Value* g = c.out_grad();
  Value* cond = c.input(0);
  Value* zero = c.Constant(0.0, g->dtype());
  if (c.needs_grad(1))
    c.SetInputGrad(1, c.ReduceTo(c.Add("where", {cond, g, zero}), c.input(1)->shape()));
  if (c.needs_grad(2))
    c.SetInputGrad(2, c.ReduceTo(c.Add("where", {cond, zero, g}), c.input(2)->shape()));
});
// pow(a, b): d a = g b a^(b - 1), d b = g out log(a), Paddle's formulas.
TILLER_REGISTER_GRAD("pow", [](GradContext& c) {
  Value* a = c.input(0);
  Value* b = c.input(1);
  Value* g = c.out_grad();
  Value* ga = nullptr;
  if (c.needs_grad(0)) {
    Value* bm1 = c.Add("sub", {b, c.Constant(1.0, b->dtype())});
    ga = c.Add("mul", {g, c.Add("mul", {b, c.Add("pow", {a, bm1})})});
  }
  Value* gb =
      c.needs_grad(1) ? c.Add("mul", {g, c.Add("mul", {c.output(), c.Add("log", {a})})}) : nullptr;
  SetBoth(c, ga, gb);
});
TILLER_REGISTER_GRAD("min", [](GradContext& c) { MinMax(c, "less_equal"); });
// atan2(a, b): d a = g b / (a^2 + b^2), d b = -g a / (a^2 + b^2), Paddle's
// formulas (NaN at the origin, as there).
TILLER_REGISTER_GRAD("atan2", [](GradContext& c) {
  Value* a = c.input(0);
  Value* b = c.input(1);
  Value* g = c.out_grad();
  Value* norm = c.Add("add", {c.Add("mul", {a, a}), c.Add("mul", {b, b})});
  Value* ga = c.needs_grad(0) ? c.Add("div", {c.Add("mul", {g, b}), norm}) : nullptr;
  Value* gb =
      c.needs_grad(1) ? c.Add("neg", {c.Add("div", {c.Add("mul", {g, a}), norm})}) : nullptr;
  SetBoth(c, ga, gb);
});

TILLER_REGISTER_GRAD("cast", [](GradContext& c) {
  if (c.needs_grad(0))
    c.SetInputGrad(
        0, c.Add("cast", {c.out_grad()}, {{"dtype", std::string(DTypeName(c.input(0)->dtype()))}}));
});

}  // namespace
}  // namespace tiller::ir
