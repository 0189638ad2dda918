// Gathers and scatters along one axis, index by index (numpy's
// take_along_axis / put_along_axis; the ops of top-k masks and sparse
// attention patterns chosen per step).
//   take_along_axis(x, indices int32|int64){axis}: out[..., j, ...] =
//     x[..., indices[..., j, ...], ...] along `axis`; indices has x's rank
//     and x's dims except along `axis`; out has indices' shape.
//   put_along_axis(x, indices, values){axis, reduce = "assign" | "add" |
//     "mul"}: x with values[..., j, ...] written to (added to, multiplied
//     into) x[..., indices[..., j, ...], ...]; values has indices' shape.
//     Positions in order: an index given twice keeps the later value
//     (assign) or takes both (add, mul).
// An index in [-n, 0) counts from the end (n: x's dim along `axis`); one
// outside [-n, n) is reported (backend::IndexFault) and left out.
// Precision: follows x. Layout: reads `axis`.
// Gradients: take_along_axis's x gradient adds dy at the taken positions;
// put_along_axis's values gradient takes dy at the written positions, its
// x gradient is dy (add) or dy with the written positions zero (assign);
// none for mul.
#include "ir/grad.h"
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void CheckAlong(InferContext& c, const TensorType& x, const TensorType& indices) {
  const int rank = static_cast<int>(x.shape.size());
  const int axis = NormalizeAxis(c.op().GetInt("axis"), std::max(rank, 1));
  if (axis < 0 || rank == 0)
    c.Fail("axis {} out of range for {}", c.op().GetInt("axis"), x.ToString());
  if (indices.dtype != DType::kI32 && indices.dtype != DType::kI64)
    c.Fail("indices must be int32 or int64, got {}", indices.ToString());
  if (indices.shape.size() != x.shape.size())
    c.Fail("indices {} must have the rank of x {}", indices.ToString(), x.ToString());
  for (int d = 0; d < rank; ++d) {
    if (d != axis && indices.shape[d] != x.shape[d])
      c.Fail("indices {} must match x {} except along axis {}", ShapeToString(indices.shape),
             ShapeToString(x.shape), axis);
  }
}

void InferTake(InferContext& c) {
  CheckAlong(c, c.input(0), c.input(1));
  c.AddOutput({c.input(0).dtype, c.input(1).shape});
}

void InferPut(InferContext& c) {
  CheckAlong(c, c.input(0), c.input(1));
  const TensorType& values = c.input(2);
  if (values.shape != c.input(1).shape || values.dtype != c.input(0).dtype)
    c.Fail("values {} must be {} of indices' shape {}", values.ToString(),
           DTypeName(c.input(0).dtype), ShapeToString(c.input(1).shape));
  const std::string& reduce = c.op().GetStr("reduce");
  if (reduce != "assign" && reduce != "add" && reduce != "mul")
    c.Fail("reduce '{}' is not assign, add or mul", reduce);
  c.AddOutput(c.input(0));
}

Value* Zeros(GradContext& c, const TensorType& t) {
  std::vector<int64_t> shape(t.shape.begin(), t.shape.end());
  return c.Add("expand", {c.Constant(0.0, t.dtype)}, {{"shape", shape}});
}

TILLER_REGISTER_OP_SCHEMA(OpSchema{"take_along_axis", 2, 2, InferTake}
                              .RequiredAttr("axis", AttrKind::kInt)
                              .Precision(PrecisionRule::kFollowsInput)
                              .Layout(LayoutRule::kAxisAttrs, {"axis"}));
TILLER_REGISTER_OP_SCHEMA(OpSchema{"put_along_axis", 3, 3, InferPut}
                              .RequiredAttr("axis", AttrKind::kInt)
                              .Attr("reduce", "assign")
                              .Precision(PrecisionRule::kFollowsInput)
                              .Layout(LayoutRule::kAxisAttrs, {"axis"}));

TILLER_REGISTER_GRAD("take_along_axis", [](GradContext& c) {
  c.SetInputGrad(0, c.Add("put_along_axis", {Zeros(c, c.input(0)->type), c.input(1), c.out_grad()},
                          {{"axis", c.op().GetInt("axis")}, {"reduce", "add"}}));
});

TILLER_REGISTER_GRAD("put_along_axis", [](GradContext& c) {
  const std::string& reduce = c.op().GetStr("reduce");
  if (reduce == "mul")
    Fail(ErrorKind::kUnimplemented, "put_along_axis {} (reduce mul) has no gradient yet",
         c.op().name);
  const int64_t axis = c.op().GetInt("axis");
  Value* dy = c.out_grad();
  if (c.needs_grad(0))
    c.SetInputGrad(0, reduce == "add"
                          ? dy
                          : c.Add("put_along_axis", {dy, c.input(1), Zeros(c, c.input(2)->type)},
                                  {{"axis", axis}, {"reduce", "assign"}}));
  if (c.needs_grad(2))
    c.SetInputGrad(2, c.Add("take_along_axis", {dy, c.input(1)}, {{"axis", axis}}));
});

}  // namespace
}  // namespace tiller::ir
