// Search, encoding and random-generation ops.
//   top_k and argsort take {values: bool = true, indices: bool = true}:
//   which outputs exist, in that order. A translator leaves out an output
//   nobody reads, so no op ever has a dead output.
//   top_k(x){k: int = 1, axis: int = -1, largest: bool = true,
//     sorted: bool = true} -> values (x's dtype), indices int64.
//     Ties resolve to the lower index; sorted=false still returns sorted rows
//     (a valid answer: Paddle leaves the order unspecified).
//   argsort(x){axis: int = -1, descending: bool = false} -> sorted values,
//     indices int64. Always a stable sort: equal values keep their index
//     order in both directions.
//   one_hot(ids int32|int64){depth: int, required; dtype: string =
//     "float32"}: out = ids.shape + [depth], 1 at the id and 0 elsewhere; an
//     id outside [0, depth) gives a zero row.
//   random_normal(){shape: ints = [], dtype: string = "float32",
//     mean = 0.0, std = 1.0, seed: int = 0}
//   random_uniform(){shape, dtype, seed as random_normal; min = -1.0,
//     max = 1.0}: [min, max)
//     No inputs, so they are never folded; every run draws the same numbers
//     from `seed` (a counter-based generator, independent of thread count).
// Precision: all follow their input (selection is exact; one_hot and the
// random ops make the dtype their attribute names). Layout: top_k and
// argsort read `axis`; one_hot (appends the depth dim) and the random ops
// (a shape attribute) are fixed.
#include <algorithm>

#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"

namespace tiller::ir {
namespace {

void AddSortOutputs(InferContext& c, DType dt, const Shape& shape) {
  bool values = c.op().GetBool("values"), indices = c.op().GetBool("indices");
  if (!values && !indices) c.Fail("neither values nor indices requested");
  if (values) c.AddOutput({dt, shape});
  if (indices) c.AddOutput({DType::kI64, shape});
}

void InferTopK(InferContext& c) {
  const TensorType& x = c.input(0);
  int rank = static_cast<int>(x.shape.size());
  int axis = NormalizeAxis(c.op().GetInt("axis"), std::max(rank, 1));
  if (axis < 0) c.Fail("axis out of range for {}", ShapeToString(x.shape));
  int64_t k = c.op().GetInt("k");
  int64_t dim = rank == 0 ? 1 : x.shape[axis];
  if (k < 0 || k > dim) c.Fail("k = {} out of range for dim {}", k, dim);
  Shape out = x.shape;
  if (rank > 0) out[axis] = k;
  AddSortOutputs(c, x.dtype, out);
}

void InferArgsort(InferContext& c) {
  const TensorType& x = c.input(0);
  int rank = static_cast<int>(x.shape.size());
  if (NormalizeAxis(c.op().GetInt("axis"), std::max(rank, 1)) < 0)
    c.Fail("axis out of range for {}", ShapeToString(x.shape));
  AddSortOutputs(c, x.dtype, x.shape);
}

void InferOneHot(InferContext& c) {
  const TensorType& ids = c.input(0);
  if (ids.dtype != DType::kI32 && ids.dtype != DType::kI64) c.Fail("ids must be int32 or int64");
  int64_t depth = c.op().GetInt("depth");
  if (depth < 0) c.Fail("depth {} is negative", depth);
  DType dt;
  if (!ParseDType(c.op().GetStr("dtype"), &dt)) c.Fail("unknown dtype");
  Shape out = ids.shape;
  out.push_back(depth);
  c.AddOutput({dt, out});
}

void InferRandom(InferContext& c) {
  Shape shape = c.op().GetInts("shape");
  for (int64_t d : shape) {
    if (d < 0) c.Fail("shape {} is not concrete", ShapeToString(shape));
  }
  DType dt;
  if (!ParseDType(c.op().GetStr("dtype"), &dt)) c.Fail("unknown dtype");
  c.AddOutput({dt, shape});
}

constexpr auto kFollows = PrecisionRule::kFollowsInput;

OpSchema Random(const char* name) {
  return OpSchema{name, 0, 0, InferRandom}
      .Attr("shape", std::vector<int64_t>{})
      .Attr("dtype", "float32")
      .Attr("seed", int64_t{0})
      .Precision(kFollows)
      .Layout(LayoutRule::kFixed);
}

const bool kRegistered = [] {
  RegisterOpSchema(OpSchema{"top_k", 1, 1, InferTopK}
                       .Attr("k", int64_t{1})
                       .Attr("axis", int64_t{-1})
                       .Attr("largest", true)
                       .Attr("sorted", true)
                       .Attr("values", true)
                       .Attr("indices", true)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kAxisAttrs, {"axis"}));
  RegisterOpSchema(OpSchema{"argsort", 1, 1, InferArgsort}
                       .Attr("axis", int64_t{-1})
                       .Attr("descending", false)
                       .Attr("values", true)
                       .Attr("indices", true)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kAxisAttrs, {"axis"}));
  RegisterOpSchema(OpSchema{"one_hot", 1, 1, InferOneHot}
                       .RequiredAttr("depth", AttrKind::kInt)
                       .Attr("dtype", "float32")
                       // Paddle's: an id outside [0, depth) gives a zero row
                       // instead of an error.
                       .Attr("allow_out_of_range", false)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(Random("random_normal").Attr("mean", 0.0).Attr("std", 1.0));
  RegisterOpSchema(Random("random_uniform").Attr("min", -1.0).Attr("max", 1.0));
  return true;
}();

}  // namespace
}  // namespace tiller::ir
