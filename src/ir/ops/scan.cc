// Scans along one axis.
//   cumsum(x){axis: int = -1, exclusive: bool = false, reverse: bool = false}:
//     running sums, same shape and dtype
//   cumprod(x){the same attributes}: running products (exclusive: the
//     first is 1); integers wrap around
// Precision: float32 (a running sum accumulates rounding error, like a
// reduction). Layout: reads `axis`.
//   cumprod_grad(x, out_grad){cumprod's attributes}: cumprod's input
//     gradient (float32, float64), same shape as x
// Gradient: the adjoint of a running sum sums the other way, so it is the
// same cumsum with `reverse` flipped (an exclusive one stays exclusive).
// cumprod's is its own op: in scan order, the gradient of x_i is the
// product of the x before it times R_i = sum over the outputs j that x_i
// is a factor of, of out_grad_j times the x after i up to j, which a
// running recurrence gives without dividing by x (Paddle's kernel divides
// the reversed sum of out_grad x out by x_i and treats zeros apart; this
// is the same number, with zeros in x needing no case of their own).
// cumprod_grad has no gradient of its own.
#include "ir/grad.h"
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferScan(InferContext& c) {
  const TensorType& x = c.input(0);
  int rank = static_cast<int>(x.shape.size());
  int64_t axis = c.op().GetInt("axis");
  if (NormalizeAxis(axis, std::max(rank, 1)) < 0)
    c.Fail("axis {} out of range for {}", axis, ShapeToString(x.shape));
  c.AddOutput(x);
}

OpSchema Scan(const char* name) {
  return OpSchema{name, 1, 1, InferScan}
      .Attr("axis", int64_t{-1})
      .Attr("exclusive", false)
      .Attr("reverse", false)
      .Precision(PrecisionRule::kAlwaysF32)
      .Layout(LayoutRule::kAxisAttrs, {"axis"});
}

TILLER_REGISTER_OP_SCHEMA(Scan("cumsum"));
TILLER_REGISTER_OP_SCHEMA(Scan("cumprod"));

void InferCumprodGrad(InferContext& c) {
  if (c.input(1).shape != c.input(0).shape || c.input(1).dtype != c.input(0).dtype)
    c.Fail("out_grad {} must be x's {}", c.input(1).ToString(), c.input(0).ToString());
  InferScan(c);
}

TILLER_REGISTER_OP_SCHEMA(OpSchema{"cumprod_grad", 2, 2, InferCumprodGrad}
                              .Attr("axis", int64_t{-1})
                              .Attr("exclusive", false)
                              .Attr("reverse", false)
                              .Precision(PrecisionRule::kAlwaysF32)
                              .Layout(LayoutRule::kAxisAttrs, {"axis"}));

TILLER_REGISTER_GRAD("cumsum", [](GradContext& c) {
  AttrMap a = c.op().attrs;
  a.Set("reverse", !c.op().GetBool("reverse"));
  c.SetInputGrad(0, c.Add("cumsum", {c.out_grad()}, a));
});

TILLER_REGISTER_GRAD("cumprod", [](GradContext& c) {
  c.SetInputGrad(0, c.Add("cumprod_grad", {c.input(0), c.out_grad()}, c.op().attrs));
});

}  // namespace
}  // namespace tiller::ir
