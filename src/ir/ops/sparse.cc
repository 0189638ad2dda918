// Sparse COO tensors (paddle.sparse): a tensor of `shape` given by its
// stored entries, indices [rank, nnz] (int64, one column per entry) and
// values [nnz]. The frontend keeps the two side by side (a COO value is not
// an IR value of its own); these ops read them. nnz is part of the compiled
// shape: a feed with another nnz compiles again (pad with zero values to
// keep one compilation).
//   coo_to_dense(indices, values){shape}: the dense tensor, zeros where no
//     entry is stored; an entry stored twice keeps the later value
//     (Paddle's coo_to_dense). Its values may be bool (sparse isnan).
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
//
// Ops whose entry count depends on the data give a padded COO: their
// outputs have room for the most entries the op can give, the entries
// first and padding after them, a padding entry's indices all -1 and its
// value 0. An op reading such a tensor says so with padded = true (for
// coo_merge, x_padded / y_padded): its entries end at the first index -1.
// Without it an index -1 is an index outside its dimension, as in a feed.
//   coo_coalesce(indices, values){shape}: the distinct positions in
//     row-major order, each the sum of its entries in entry order (Paddle's
//     coalesce_coo); room for nnz.
//   coo_merge(xi, xv, yi, yv){shape, kind}: Paddle's elementwise add,
//     subtract, multiply or divide of two COO tensors of one shape: a merge
//     of the two entry lists by row-major position, each in entry order,
//     taking y's value at a position from its last entry there and 0 where
//     one side has no entry (divide walks every position of y, so 0 / 0 is
//     NaN where neither stores one); add of two tensors with equal indices
//     adds the values entry by entry. Room for nx + ny (divide: nx + numel).
//   coo_slice(indices, values){shape, axes, starts, ends}: the entries
//     inside [start, end) on each axis (normalized, 0 <= start <= end <=
//     dim), moved to the slice's origin, in entry order; room for nnz.
//   coo_sum(indices, values){shape, axis, keepdim}: the sum over one dim,
//     a COO tensor of the other dims (keepdim, or a rank-1 input: that dim
//     kept as 1), its distinct positions in row-major order, each summed
//     from 0 in entry order (Paddle's sum_coo); room for nnz.
//   dense_to_coo(x): the entries of x that are not 0 (NaN is kept), in
//     row-major order; room for numel.
//   coo_subm_conv3d(indices [4, nnz], values [nnz, C], weight [kD, kH, kW,
//     C, C_out]){shape [N, D, H, W, C], paddings, dilations}: Paddle's
//     submanifold sparse convolution (stride 1): an output at each input
//     entry's position, out[o] = sum over the kernel offsets k (in order) of
//     values[i] x weight[k] for the entry i at position o - padding + k *
//     dilation, where one is stored. Values [nnz, C_out].
//   coo_conv3d(indices, values, weight){shape, paddings, dilations,
//     strides}: Paddle's ordinary sparse convolution: an output entry at
//     each position of the output grid some input entry reaches (o * stride
//     - padding + k * dilation = an input position), in row-major order,
//     its value summed as the submanifold one's. A padded hybrid COO: room
//     for min(nnz x kernel volume, the grid's cells) entries.
// coo_to_dense, coo_coalesce and coo_merge also take hybrid COO tensors
// (indices over the first sparse_dim dims, values [nnz, the other dims]: a
// block of values per entry, merged and summed as one; divide walks every
// position of the sparse dims).
// An index outside its dimension is reported (backend::IndexFault) and the
// entry left out (coo_reshape: its indices all -1). Precision: float32
// values. Layout: fixed.
#include <algorithm>

#include "ir/op_schema.h"
#include "ir/ops/sparse_conv.h"

namespace tiller::ir {
namespace {

// The COO operands: indices int64 [rank(shape), nnz], values [nnz]; with
// `hybrid`, indices may cover the leading sparse_dim dims only and values
// be [nnz, the remaining dims] (a hybrid COO tensor: a dense block per
// entry, as sparse convolutions keep their channels).
void CheckCoo(InferContext& c, const Shape& shape, bool hybrid = false, bool bool_values = false) {
  const TensorType& indices = c.input(0);
  const TensorType& values = c.input(1);
  if (shape.empty()) c.Fail("shape must have at least one dim");
  for (int64_t d : shape)
    if (d < 1) c.Fail("shape {} has a dim below 1", ShapeToString(shape));
  const int64_t sparse_dim = indices.shape.size() == 2 ? indices.shape[0] : -1;
  const auto rank = static_cast<int64_t>(shape.size());
  if (indices.dtype != DType::kI64 || sparse_dim < 1 || sparse_dim > rank ||
      (!hybrid && sparse_dim != rank))
    c.Fail("indices must be int64 [{}, nnz], got {}", hybrid ? "sparse_dim" : std::to_string(rank),
           indices.ToString());
  Shape want{indices.shape[1]};
  want.insert(want.end(), shape.begin() + sparse_dim, shape.end());
  if (values.shape != want)
    c.Fail("values must be {} (one per index column), got {}", ShapeToString(want),
           values.ToString());
  if (values.dtype != DType::kF32 && !(bool_values && values.dtype == DType::kBool))
    c.Fail("values must be float32{}, got {}", bool_values ? " or bool" : "", values.ToString());
}

void InferCooToDense(InferContext& c) {
  const Shape shape = c.op().GetInts("shape");
  CheckCoo(c, shape, /*hybrid=*/true, /*bool_values=*/true);
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

// Two outputs: indices int64 [rank, room], values float32 [room, block...]
// (`block`: the dense dims of a hybrid COO's values, none for one value
// per entry).
void AddCooOutputs(InferContext& c, size_t rank, int64_t room, const Shape& block = {}) {
  c.AddOutput({DType::kI64, {static_cast<int64_t>(rank), room}});
  Shape values{room};
  values.insert(values.end(), block.begin(), block.end());
  c.AddOutput({DType::kF32, values});
}

// The dense dims each entry of a (hybrid) COO values operand holds.
Shape ValueBlock(const TensorType& values) {
  return Shape(values.shape.begin() + 1, values.shape.end());
}

void InferCooCoalesce(InferContext& c) {
  const Shape shape = c.op().GetInts("shape");
  CheckCoo(c, shape, /*hybrid=*/true);
  AddCooOutputs(c, c.input(0).shape[0], c.input(1).shape[0], ValueBlock(c.input(1)));
}

void InferCooMerge(InferContext& c) {
  const Shape shape = c.op().GetInts("shape");
  CheckCoo(c, shape, /*hybrid=*/true);
  const TensorType& xi = c.input(0);
  const TensorType& yi = c.input(2);
  const TensorType& yv = c.input(3);
  const Shape block = ValueBlock(c.input(1));
  Shape want_yv{yi.shape.size() == 2 ? yi.shape[1] : -1};
  want_yv.insert(want_yv.end(), block.begin(), block.end());
  if (yi.dtype != DType::kI64 || yi.shape.size() != 2 || yi.shape[0] != xi.shape[0] ||
      yv.dtype != DType::kF32 || yv.shape != want_yv)
    c.Fail("y must be int64 indices [{}, nnz] and float32 values {} as x's, got {} and {}",
           xi.shape[0], ShapeToString(want_yv), yi.ToString(), yv.ToString());
  const std::string kind = c.op().GetStr("kind");
  if (kind != "add" && kind != "subtract" && kind != "multiply" && kind != "divide")
    c.Fail("kind must be add, subtract, multiply or divide, got '{}'", kind);
  const int64_t nx = c.input(1).shape[0];
  const Shape sparse(shape.begin(), shape.begin() + xi.shape[0]);
  AddCooOutputs(c, sparse.size(), nx + (kind == "divide" ? NumElements(sparse) : yi.shape[1]),
                block);
}

void InferCooSlice(InferContext& c) {
  const Shape shape = c.op().GetInts("shape");
  CheckCoo(c, shape);
  const auto axes = c.op().GetInts("axes"), starts = c.op().GetInts("starts"),
             ends = c.op().GetInts("ends");
  if (axes.size() != starts.size() || axes.size() != ends.size())
    c.Fail("axes, starts and ends must have one entry each per axis, got {}, {} and {}",
           axes.size(), starts.size(), ends.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(shape.size()))
      c.Fail("axis {} is not a dim of {}", axes[i], ShapeToString(shape));
    const int64_t dim = shape[static_cast<size_t>(axes[i])];
    if (starts[i] < 0 || starts[i] > ends[i] || ends[i] > dim)
      c.Fail("axis {}: [{}, {}) is not inside [0, {}]", axes[i], starts[i], ends[i], dim);
  }
  AddCooOutputs(c, shape.size(), c.input(1).shape[0]);
}

void InferCooSum(InferContext& c) {
  const Shape shape = c.op().GetInts("shape");
  CheckCoo(c, shape);
  const int64_t axis = c.op().GetInt("axis");
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    c.Fail("axis {} is not a dim of {}", axis, ShapeToString(shape));
  const bool keep = c.op().GetBool("keepdim") || shape.size() == 1;
  AddCooOutputs(c, keep ? shape.size() : shape.size() - 1, c.input(1).shape[0]);
}

// The operands of both sparse convolutions: x a hybrid COO [N, D, H, W, C]
// indexed over N, D, H, W, weight float32 [kD, kH, kW, C, C_out], and the
// window attributes `window` of 3 values each (paddings >= 0, the others
// >= 1). Returns the weight.
const TensorType& CheckSparseConv(InferContext& c, const Shape& shape,
                                  std::initializer_list<const char*> window) {
  CheckCoo(c, shape, /*hybrid=*/true);
  const TensorType& w = c.input(2);
  if (shape.size() != 5 || c.input(0).shape[0] != 4)
    c.Fail("x must be a hybrid COO [N, D, H, W, C] with 4 index rows, got {} and {}",
           ShapeToString(shape), c.input(0).ToString());
  if (w.dtype != DType::kF32 || w.shape.size() != 5 || w.shape[3] != shape[4])
    c.Fail("weight must be float32 [kD, kH, kW, {}, C_out], got {}", shape[4], w.ToString());
  for (const char* a : window) {
    const auto& v = c.op().GetInts(a);
    const int64_t least = std::string_view(a) == "paddings" ? 0 : 1;
    if (v.size() != 3) c.Fail("{} must have 3 values, got {}", a, ShapeToString(v));
    for (int64_t x : v)
      if (x < least) c.Fail("{} {} is below {}", a, ShapeToString(v), least);
  }
  return w;
}

void InferCooSubmConv3d(InferContext& c) {
  const TensorType& w = CheckSparseConv(c, c.op().GetInts("shape"), {"paddings", "dilations"});
  c.AddOutput({DType::kF32, {c.input(1).shape[0], w.shape[4]}});
}

void InferCooConv3d(InferContext& c) {
  const Shape shape = c.op().GetInts("shape");
  const TensorType& w = CheckSparseConv(c, shape, {"paddings", "dilations", "strides"});
  const Shape grid = SparseConvGrid(shape, w.shape, c.op().GetInts("paddings"),
                                    c.op().GetInts("dilations"), c.op().GetInts("strides"));
  for (size_t i = 1; i < 4; ++i)
    if (grid[i] < 1) c.Fail("the window leaves no output along dim {}", i);
  const int64_t room =
      std::min(c.input(1).shape[0] * w.shape[0] * w.shape[1] * w.shape[2], NumElements(grid));
  c.AddOutput({DType::kI64, {4, room}});
  c.AddOutput({DType::kF32, {room, w.shape[4]}});
}

void InferDenseToCoo(InferContext& c) {
  const TensorType& x = c.input(0);
  if (x.dtype != DType::kF32 || x.shape.empty())
    c.Fail("x must be float32 of rank >= 1, got {}", x.ToString());
  AddCooOutputs(c, x.shape.size(), NumElements(x.shape));
}

// A COO op: its dense shape, whether its COO input is padded, float32,
// fixed layout.
OpSchema CooSchema(const char* name, int inputs, void (*infer)(InferContext&)) {
  return OpSchema{name, inputs, inputs, infer}
      .RequiredAttr("shape", AttrKind::kInts)
      .Attr("padded", false)
      .Precision(PrecisionRule::kAlwaysF32)
      .Layout(LayoutRule::kFixed);
}

TILLER_REGISTER_OP_SCHEMA(CooSchema("coo_to_dense", 2, InferCooToDense));
TILLER_REGISTER_OP_SCHEMA(CooSchema("coo_softmax", 2, InferCooSoftmax));
TILLER_REGISTER_OP_SCHEMA(CooSchema("coo_matmul", 3, InferCooMatmul));
TILLER_REGISTER_OP_SCHEMA(CooSchema("coo_reshape", 1, InferCooReshape)
                              .RequiredAttr("out_shape", AttrKind::kInts)
                              .Precision(PrecisionRule::kFollowsInput));
TILLER_REGISTER_OP_SCHEMA(CooSchema("coo_coalesce", 2, InferCooCoalesce));
TILLER_REGISTER_OP_SCHEMA(OpSchema{"coo_merge", 4, 4, InferCooMerge}
                              .RequiredAttr("shape", AttrKind::kInts)
                              .RequiredAttr("kind", AttrKind::kString)
                              .Attr("x_padded", false)
                              .Attr("y_padded", false)
                              .Precision(PrecisionRule::kAlwaysF32)
                              .Layout(LayoutRule::kFixed));
TILLER_REGISTER_OP_SCHEMA(CooSchema("coo_slice", 2, InferCooSlice)
                              .RequiredAttr("axes", AttrKind::kInts)
                              .RequiredAttr("starts", AttrKind::kInts)
                              .RequiredAttr("ends", AttrKind::kInts));
TILLER_REGISTER_OP_SCHEMA(CooSchema("coo_sum", 2, InferCooSum)
                              .RequiredAttr("axis", AttrKind::kInt)
                              .Attr("keepdim", false));
TILLER_REGISTER_OP_SCHEMA(CooSchema("coo_subm_conv3d", 3, InferCooSubmConv3d)
                              .RequiredAttr("paddings", AttrKind::kInts)
                              .RequiredAttr("dilations", AttrKind::kInts));
TILLER_REGISTER_OP_SCHEMA(CooSchema("coo_conv3d", 3, InferCooConv3d)
                              .RequiredAttr("paddings", AttrKind::kInts)
                              .RequiredAttr("dilations", AttrKind::kInts)
                              .RequiredAttr("strides", AttrKind::kInts));
TILLER_REGISTER_OP_SCHEMA(OpSchema{"dense_to_coo", 1, 1, InferDenseToCoo}
                              .NoAttrs()
                              .Precision(PrecisionRule::kAlwaysF32)
                              .Layout(LayoutRule::kFixed));

}  // namespace
}  // namespace tiller::ir
