// Scans along one axis.
//   cumsum(x){axis: int = -1, exclusive: bool = false, reverse: bool = false}:
//     running sums, same shape and dtype
//   cumprod(x){the same attributes}: running products (exclusive: the
//     first is 1); integers wrap around
// Precision: float32 (a running sum accumulates rounding error, like a
// reduction). Layout: reads `axis`.
// Gradient: the adjoint of a running sum sums the other way, so it is the
// same cumsum with `reverse` flipped (an exclusive one stays exclusive).
// cumprod has none yet (Paddle's treats zeros apart): a loss that depends
// on one is refused by autodiff, naming the op.
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

TILLER_REGISTER_GRAD("cumsum", [](GradContext& c) {
  AttrMap a = c.op().attrs;
  a.Set("reverse", !c.op().GetBool("reverse"));
  c.SetInputGrad(0, c.Add("cumsum", {c.out_grad()}, a));
});

}  // namespace
}  // namespace tiller::ir
