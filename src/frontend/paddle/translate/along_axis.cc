// take_along_axis and put_along_axis (ir/ops/along_axis.cc): the gathers
// and scatters of top-k masks (paddle.topk's indices written into a mask,
// or the kept scores read back). Paddle's Python API broadcasts indices and
// values with expand ops before these, so the ops see matching shapes; a
// one-element values operand is expanded here.
//   legacy take_along_axis(Input, Index){Axis} -> Result
//          put_along_axis(Input, Index, Value){Axis, Reduce, Include_self}
//   PIR    take_along_axis(arr, indices){axis}, put_along_axis(arr, indices,
//          values){axis, reduce, include_self}
// Reduce: assign, add, mul / multiply; mean, amin and amax are refused, as
// is include_self = false with add or mul.
#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"

namespace tiller::paddle {
namespace {

int64_t AxisOf(TranslateContext& ctx, const OpDesc& op, const ir::Value* x) {
  const int rank = static_cast<int>(x->shape().size());
  const int64_t axis = op.attrs.Int("Axis", 0);
  if (rank == 0 || NormalizeAxis(axis, rank) < 0)
    ctx.Invalid(op, "Axis {} is out of range for {}", axis, x->type.ToString());
  return NormalizeAxis(axis, rank);
}

void TakeAlongAxis(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "Input");
  ir::Value* index = ctx.In(op, "Index");
  ctx.SetOut(op, "Result",
             ctx.Add1(op, "take_along_axis", {x, index}, {{"axis", AxisOf(ctx, op, x)}}));
}

void PutAlongAxis(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "Input");
  ir::Value* index = ctx.In(op, "Index");
  ir::Value* values = ctx.In(op, "Value");
  std::string reduce = op.attrs.Str("Reduce", "assign");
  if (reduce == "multiply") reduce = "mul";
  if (reduce != "assign" && reduce != "add" && reduce != "mul")
    ctx.Unsupported(op, "Reduce = '{}' is not supported (assign, add, mul)", reduce);
  if (!op.attrs.Bool("Include_self", true) && reduce != "assign")
    ctx.Unsupported(op, "Include_self = false is not supported with Reduce = '{}'", reduce);
  values = Cast(ctx, op, values, x->dtype());
  if (values->shape() != index->shape()) {
    if (NumElements(values->shape()) != 1)
      ctx.Unsupported(op, "Value {} is neither one element nor Index's shape {}",
                      ShapeToString(values->shape()), ShapeToString(index->shape()));
    std::vector<int64_t> shape(index->shape().begin(), index->shape().end());
    values = ctx.Add1(op, "expand", {ctx.Reshape(op, values, {})}, {{"shape", shape}});
  }
  ctx.SetOut(op, "Result",
             ctx.Add1(op, "put_along_axis", {x, index, values},
                      {{"axis", AxisOf(ctx, op, x)}, {"reduce", reduce}}));
}

const bool kRegistered = [] {
  using pir::T;
  RegisterTranslator("take_along_axis", TakeAlongAxis, {"take_along_axis"});
  RegisterPirOpCompat(
      "take_along_axis",
      {"take_along_axis", {T("Input"), T("Index")}, {"Result"}, {{"axis", "Axis"}}, {}});
  RegisterTranslator("put_along_axis", PutAlongAxis,
                     {"put_along_axis", "cast", "expand", "reshape"});
  RegisterPirOpCompat("put_along_axis",
                      {"put_along_axis",
                       {T("Input"), T("Index"), T("Value")},
                       {"Result"},
                       {{"axis", "Axis"}, {"reduce", "Reduce"}, {"include_self", "Include_self"}},
                       {}});
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
