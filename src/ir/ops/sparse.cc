// Sparse COO tensors (paddle.sparse): a tensor of `shape` given by its
// stored entries, indices [rank, nnz] (int64, one column per entry) and
// values [nnz]. The frontend keeps the two side by side (a COO value is not
// an IR value of its own); these ops read them. nnz is part of the compiled
// shape: a feed with another nnz compiles again (pad with zero values to
// keep one compilation).
//   coo_to_dense(indices, values){shape}: the dense tensor, zeros where no
//     entry is stored; an entry stored twice keeps the later value
//     (Paddle's coo_to_dense).
//   coo_softmax(indices, values){shape}: values [nnz], each entry's softmax
//     over the stored entries of its row (the entries that share every
//     index but the last), as Paddle's softmax_coo (axis -1): an explicit
//     zero takes part, an empty position does not.
//   coo_matmul(indices, values, y [..., K, N]){shape: [..., M, K]}: the
//     dense [..., M, N] product of the COO matrix (or batch of matrices:
//     rank 3, the first index is the batch) with the dense y, each entry's
//     product added in entry order (an entry stored twice counts twice, as
//     a sum of stored products).
//   coo_reshape(indices){shape, out_shape}: int64 [rank(out_shape), nnz],
//     each entry's indices in out_shape of its row-major position in
//     shape (paddle.sparse.reshape: the entries keep their order).
// An index outside its dimension is reported (backend::IndexFault) and the
// entry left out (coo_reshape: its indices all -1). Precision: float32
// values. Layout: fixed.
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

// The COO operands: indices int64 [rank(shape), nnz], values [nnz].
void CheckCoo(InferContext& c, const Shape& shape) {
  const TensorType& indices = c.input(0);
  const TensorType& values = c.input(1);
  if (shape.empty()) c.Fail("shape must have at least one dim");
  for (int64_t d : shape)
    if (d < 1) c.Fail("shape {} has a dim below 1", ShapeToString(shape));
  if (indices.dtype != DType::kI64 || indices.shape.size() != 2 ||
      indices.shape[0] != static_cast<int64_t>(shape.size()))
    c.Fail("indices must be int64 [{}, nnz], got {}", shape.size(), indices.ToString());
  if (values.shape != Shape{indices.shape[1]})
    c.Fail("values must be [{}] (one per index column), got {}", indices.shape[1],
           values.ToString());
  if (values.dtype != DType::kF32) c.Fail("values must be float32, got {}", values.ToString());
}

void InferCooToDense(InferContext& c) {
  const Shape shape = c.op().GetInts("shape");
  CheckCoo(c, shape);
  c.AddOutput({c.input(1).dtype, shape});
}

void InferCooSoftmax(InferContext& c) {
  CheckCoo(c, c.op().GetInts("shape"));
  c.AddOutput(c.input(1));
}

void InferCooMatmul(InferContext& c) {
  const Shape shape = c.op().GetInts("shape");
  CheckCoo(c, shape);
  const TensorType& y = c.input(2);
  if (shape.size() != 2 && shape.size() != 3)
    c.Fail("the COO operand must be a matrix or a batch of matrices, got {}", ShapeToString(shape));
  const size_t r = shape.size();
  if (y.dtype != DType::kF32 || y.shape.size() != r || y.shape[r - 2] != shape[r - 1] ||
      (r == 3 && y.shape[0] != shape[0]))
    c.Fail("y must be float32 [{}{}, N], got {}", r == 3 ? fmt::format("{}, ", shape[0]) : "",
           shape[r - 1], y.ToString());
  Shape out(shape.begin(), shape.end() - 1);
  out.push_back(y.shape.back());
  c.AddOutput({DType::kF32, out});
}

void InferCooReshape(InferContext& c) {
  const Shape shape = c.op().GetInts("shape"), out = c.op().GetInts("out_shape");
  const TensorType& indices = c.input(0);
  if (indices.dtype != DType::kI64 || indices.shape.size() != 2 ||
      indices.shape[0] != static_cast<int64_t>(shape.size()))
    c.Fail("indices must be int64 [{}, nnz], got {}", shape.size(), indices.ToString());
  for (const Shape* s : {&shape, &out})
    for (int64_t d : *s)
      if (d < 1) c.Fail("shape {} has a dim below 1", ShapeToString(*s));
  if (NumElements(shape) != NumElements(out))
    c.Fail("{} elements cannot be reshaped to {}", ShapeToString(shape), ShapeToString(out));
  c.AddOutput({DType::kI64, {static_cast<int64_t>(out.size()), indices.shape[1]}});
}

TILLER_REGISTER_OP_SCHEMA(OpSchema{"coo_to_dense", 2, 2, InferCooToDense}
                              .RequiredAttr("shape", AttrKind::kInts)
                              .Precision(PrecisionRule::kAlwaysF32)
                              .Layout(LayoutRule::kFixed));
TILLER_REGISTER_OP_SCHEMA(OpSchema{"coo_softmax", 2, 2, InferCooSoftmax}
                              .RequiredAttr("shape", AttrKind::kInts)
                              .Precision(PrecisionRule::kAlwaysF32)
                              .Layout(LayoutRule::kFixed));
TILLER_REGISTER_OP_SCHEMA(OpSchema{"coo_matmul", 3, 3, InferCooMatmul}
                              .RequiredAttr("shape", AttrKind::kInts)
                              .Precision(PrecisionRule::kAlwaysF32)
                              .Layout(LayoutRule::kFixed));
TILLER_REGISTER_OP_SCHEMA(OpSchema{"coo_reshape", 1, 1, InferCooReshape}
                              .RequiredAttr("shape", AttrKind::kInts)
                              .RequiredAttr("out_shape", AttrKind::kInts)
                              .Precision(PrecisionRule::kFollowsInput)
                              .Layout(LayoutRule::kFixed));

}  // namespace
}  // namespace tiller::ir
