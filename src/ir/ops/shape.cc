// Data-movement and reduction ops.
//   reshape(x){shape: concrete dims}: a view, no data moves
//   transpose(x){perm}
//   slice(x){axes, starts, ends, steps}: python slicing (see ResolveSlice)
//   concat(x...){axis}, split(x){axis, sections: sizes} -> one output per section
//   expand(x){shape}: numpy broadcast of x to `shape`
//   gather(x, index int){axis}: numpy take
//   reduce_sum|mean|max|min|prod(x){axes (empty: all), keepdim}
//   argmax|argmin(x){axis, keepdim, dtype "int64"|"int32"}
#include <algorithm>

#include "ir/ops/op_helpers.h"
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferReshape(InferContext& c) {
  Shape shape = c.attrs().Ints("shape");
  for (int64_t d : shape) {
    if (d < 0) c.Fail("target shape {} is not concrete", ShapeToString(shape));
  }
  if (NumElements(shape) != NumElements(c.input(0).shape))
    c.Fail("cannot reshape {} to {}", ShapeToString(c.input(0).shape), ShapeToString(shape));
  c.AddOutput({c.input(0).dtype, shape});
}

void InferTranspose(InferContext& c) {
  const TensorType& x = c.input(0);
  auto perm = c.attrs().Ints("perm");
  if (perm.size() != x.shape.size()) c.Fail("perm has {} dims, input {}", perm.size(), x.shape.size());
  Shape out(perm.size());
  std::vector<bool> seen(perm.size(), false);
  for (size_t i = 0; i < perm.size(); ++i) {
    int a = NormalizeAxis(perm[i], static_cast<int>(perm.size()));
    if (a < 0 || seen[a]) c.Fail("perm is not a permutation");
    seen[a] = true;
    out[i] = x.shape[a];
  }
  c.AddOutput({x.dtype, out});
}

void InferSlice(InferContext& c) {
  SliceSpec spec;
  if (!ResolveSlice(c.input(0).shape, c.attrs(), &spec))
    c.Fail("bad axes/starts/ends/steps for input {}", ShapeToString(c.input(0).shape));
  c.AddOutput({c.input(0).dtype, spec.out});
}

void InferConcat(InferContext& c) {
  const TensorType& first = c.input(0);
  int rank = static_cast<int>(first.shape.size());
  int axis = NormalizeAxis(c.attrs().Int("axis", 0), rank);
  if (axis < 0) c.Fail("axis out of range");
  Shape out = first.shape;
  out[axis] = 0;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const TensorType& t = c.input(i);
    if (t.dtype != first.dtype || static_cast<int>(t.shape.size()) != rank)
      c.Fail("input {} is {}, input 0 is {}", i, t.ToString(), first.ToString());
    for (int d = 0; d < rank; ++d) {
      if (d != axis && t.shape[d] != first.shape[d])
        c.Fail("input {} is {}, input 0 is {}", i, t.ToString(), first.ToString());
    }
    out[axis] += t.shape[axis];
  }
  c.AddOutput({first.dtype, out});
}

void InferSplit(InferContext& c) {
  const TensorType& x = c.input(0);
  int axis = NormalizeAxis(c.attrs().Int("axis", 0), static_cast<int>(x.shape.size()));
  if (axis < 0) c.Fail("axis out of range");
  auto sections = c.attrs().Ints("sections");
  int64_t total = 0;
  for (int64_t s : sections) total += s;
  if (total != x.shape[axis]) c.Fail("sections sum to {}, dim is {}", total, x.shape[axis]);
  for (int64_t s : sections) {
    Shape out = x.shape;
    out[axis] = s;
    c.AddOutput({x.dtype, out});
  }
}

void InferExpand(InferContext& c) {
  Shape target = c.attrs().Ints("shape"), out;
  if (!BroadcastShapes(c.input(0).shape, target, &out) || out != target)
    c.Fail("cannot expand {} to {}", ShapeToString(c.input(0).shape), ShapeToString(target));
  c.AddOutput({c.input(0).dtype, out});
}

void InferGather(InferContext& c) {
  const TensorType& x = c.input(0);
  const TensorType& idx = c.input(1);
  if (!IsInteger(idx.dtype)) c.Fail("index must be an integer tensor");
  int axis = NormalizeAxis(c.attrs().Int("axis", 0), static_cast<int>(x.shape.size()));
  if (axis < 0) c.Fail("axis out of range");
  Shape out(x.shape.begin(), x.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
  c.AddOutput({x.dtype, out});
}

void InferReduce(InferContext& c) {
  const TensorType& x = c.input(0);
  std::vector<int> axes;
  if (!ResolveAxes(c.attrs().Ints("axes"), static_cast<int>(x.shape.size()), &axes))
    c.Fail("axes out of range for {}", ShapeToString(x.shape));
  c.AddOutput({x.dtype, ReducedShape(x.shape, axes, c.attrs().Bool("keepdim", false))});
}

void InferArg(InferContext& c) {
  const TensorType& x = c.input(0);
  int axis = NormalizeAxis(c.attrs().Int("axis", -1), static_cast<int>(x.shape.size()));
  if (axis < 0) c.Fail("axis out of range");
  DType dt;
  if (!ParseDType(c.attrs().Str("dtype", "int64"), &dt) || (dt != DType::kI64 && dt != DType::kI32))
    c.Fail("dtype must be int32 or int64");
  c.AddOutput({dt, ReducedShape(x.shape, {axis}, c.attrs().Bool("keepdim", false))});
}

const bool kRegistered = [] {
  RegisterOpSchema({"reshape", 1, 1, InferReshape, /*view=*/true});
  RegisterOpSchema({"transpose", 1, 1, InferTranspose});
  RegisterOpSchema({"slice", 1, 1, InferSlice});
  RegisterOpSchema({"concat", 1, 1 << 20, InferConcat});
  RegisterOpSchema({"split", 1, 1, InferSplit});
  RegisterOpSchema({"expand", 1, 1, InferExpand});
  RegisterOpSchema({"gather", 2, 2, InferGather});
  for (const char* n : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"})
    RegisterOpSchema({n, 1, 1, InferReduce});
  RegisterOpSchema({"argmax", 1, 1, InferArg});
  RegisterOpSchema({"argmin", 1, 1, InferArg});
  return true;
}();

}  // namespace
}  // namespace tiller::ir
