// Search, encoding and random-generation ops.
//   top_k and argsort take {values, indices} (bools, default true): which
//   outputs exist, in that order. A translator leaves out an output nobody
//   reads, so no op ever has a dead output.
//   top_k(x){k, axis, largest, sorted} -> values (x's dtype), indices int64.
//     Ties resolve to the lower index; sorted=false still returns sorted rows
//     (a valid answer: Paddle leaves the order unspecified).
//   argsort(x){axis, descending} -> sorted values, indices int64. Always a
//     stable sort: equal values keep their index order in both directions.
//   one_hot(ids int32|int64){depth, dtype}: out = ids.shape + [depth], 1 at
//     the id and 0 elsewhere; an id outside [0, depth) gives a zero row.
//   random_normal(){shape, dtype, mean, std, seed}
//   random_uniform(){shape, dtype, min, max, seed}: [min, max)
//     No inputs, so they are never folded; every run draws the same numbers
//     from `seed` (a counter-based generator, independent of thread count).
#include <algorithm>

#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"

namespace tiller::ir {
namespace {

void AddSortOutputs(InferContext& c, DType dt, const Shape& shape) {
  bool values = c.attrs().Bool("values", true), indices = c.attrs().Bool("indices", true);
  if (!values && !indices) c.Fail("neither values nor indices requested");
  if (values) c.AddOutput({dt, shape});
  if (indices) c.AddOutput({DType::kI64, shape});
}

void InferTopK(InferContext& c) {
  const TensorType& x = c.input(0);
  int rank = static_cast<int>(x.shape.size());
  int axis = NormalizeAxis(c.attrs().Int("axis", -1), std::max(rank, 1));
  if (axis < 0) c.Fail("axis out of range for {}", ShapeToString(x.shape));
  int64_t k = c.attrs().Int("k", 1);
  int64_t dim = rank == 0 ? 1 : x.shape[axis];
  if (k < 0 || k > dim) c.Fail("k = {} out of range for dim {}", k, dim);
  Shape out = x.shape;
  if (rank > 0) out[axis] = k;
  AddSortOutputs(c, x.dtype, out);
}

void InferArgsort(InferContext& c) {
  const TensorType& x = c.input(0);
  int rank = static_cast<int>(x.shape.size());
  if (NormalizeAxis(c.attrs().Int("axis", -1), std::max(rank, 1)) < 0)
    c.Fail("axis out of range for {}", ShapeToString(x.shape));
  AddSortOutputs(c, x.dtype, x.shape);
}

void InferOneHot(InferContext& c) {
  const TensorType& ids = c.input(0);
  if (ids.dtype != DType::kI32 && ids.dtype != DType::kI64) c.Fail("ids must be int32 or int64");
  int64_t depth = c.attrs().Int("depth", -1);
  if (depth < 0) c.Fail("depth {} is negative", depth);
  DType dt;
  if (!ParseDType(c.attrs().Str("dtype", "float32"), &dt)) c.Fail("unknown dtype");
  Shape out = ids.shape;
  out.push_back(depth);
  c.AddOutput({dt, out});
}

void InferRandom(InferContext& c) {
  Shape shape = c.attrs().Ints("shape");
  for (int64_t d : shape) {
    if (d < 0) c.Fail("shape {} is not concrete", ShapeToString(shape));
  }
  DType dt;
  if (!ParseDType(c.attrs().Str("dtype", "float32"), &dt)) c.Fail("unknown dtype");
  c.AddOutput({dt, shape});
}

const bool kRegistered = [] {
  RegisterOpSchema({"top_k", 1, 1, InferTopK});
  RegisterOpSchema({"argsort", 1, 1, InferArgsort});
  RegisterOpSchema({"one_hot", 1, 1, InferOneHot});
  RegisterOpSchema({"random_normal", 0, 0, InferRandom});
  RegisterOpSchema({"random_uniform", 0, 0, InferRandom});
  return true;
}();

}  // namespace
}  // namespace tiller::ir
