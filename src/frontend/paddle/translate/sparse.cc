// paddle.sparse COO tensors in static programs: creation from indices and
// values, to_dense, values / indices, unary ops on the stored values, the
// softmax over each row's stored entries, the COO x dense matmul (and mv,
// addmm), and the ops whose entry count depends on the data: coalesce, add
// / subtract / multiply / divide of two COO tensors, slice, sum over a dim
// and dense-to-COO (ir/ops/sparse.cc has the IR ops). A COO tensor is its
// stored entries (TranslateContext::Coo), so unary ops act on the values
// and keep the indices, as Paddle's kernels do: relu keeps an entry that
// becomes zero, and a later softmax counts it.
//
// Legacy spellings (Paddle 2.6 programs) and the PIR names mapped onto them:
//   sparse_sparse_coo_tensor  sparse_coo_tensor_sp  (values, indices){shape}
//   sparse_to_dense           coo_to_dense_sp
//   sparse_values             values_coo_sp
//   sparse_indices            indices_sp
//   sparse_relu               relu_coo_sp
//   sparse_softmax            softmax_coo_sp{axis: the last dim only}
//   sparse_matmul             matmul_coo_dense_sp   (COO x, dense y -> dense)
//   sparse_mv, sparse_addmm   mv_coo_sp, addmm_coo_dense_sp{alpha, beta}
//   sparse_abs, sparse_sin, sparse_pow{factor}, sparse_tanh, ...  abs_coo_sp,
//     sin_coo_sp, pow_coo_sp, tanh_coo_sp, ... (PIR only but abs / sin / pow)
//   sparse_reshape{shape: 0 copies, -1 inferred}  reshape_coo_sp (x, shape)
//   sparse_transpose{perm}              transpose_coo_sp
//   sparse_add / _subtract / _multiply / _divide  add_coo_coo_sp, ...
//   sparse_coalesce           coalesce_sp
//   sparse_slice{axes, starts, ends}    slice_coo_sp (x, starts, ends){axes}
//   sparse_sum{axis, keepdim, dtype}    sum_coo_sp (x, axis){keepdim, dtype}
//   sparse_dense_to_coo{sparse_dim}     dense_to_coo_sp
// reshape and transpose move each entry's indices and keep the values and
// their order (as Paddle's kernels do).
// The ops whose entry count depends on the data give a padded COO (room
// for the most entries, padding after them); the sparse ops taking one are
// told so. values() and indices() of a padded COO are fetch targets whose
// entry dim is known after the run (TranslateOptions::entry_counted_outputs:
// the predictor gives back their first count entries), refused elsewhere.
// Gradients: Paddle builds none through sparse ops in static programs
// (the sparse side is stop_gradient; dense ops after to_dense train).
#include <algorithm>

#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"
#include "ir/ops/sparse_conv.h"

namespace tiller::paddle {
namespace {

using Coo = TranslateContext::Coo;

void SparseCooTensor(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* values = ctx.In(op, "values");
  ir::Value* indices = ctx.In(op, "indices");
  const std::vector<int64_t> shape = op.attrs.Ints("shape", {});
  if (shape.empty()) ctx.Invalid(op, "attribute shape is missing or empty");
  const Shape& is = indices->shape();
  if (is.size() != 2 || is[0] < 1 || is[0] > static_cast<int64_t>(shape.size()))
    ctx.Invalid(op, "indices must be [sparse_dim <= {}, nnz] for a tensor of shape {}, got {}",
                shape.size(), ShapeToString(shape), ShapeToString(is));
  // A hybrid COO tensor (indices over the first sparse_dim dims) stores a
  // block of the other dims per entry.
  Shape want{is[1]};
  want.insert(want.end(), shape.begin() + is[0], shape.end());
  if (values->shape() != want)
    ctx.Invalid(op, "values must be {} for indices {} of a tensor of shape {}, got {}",
                ShapeToString(want), ShapeToString(is), ShapeToString(shape),
                ShapeToString(values->shape()));
  if (!IsInteger(indices->dtype()))
    ctx.Invalid(op, "indices must be integers, got {}", DTypeName(indices->dtype()));
  if (values->dtype() != DType::kF32)
    ctx.Unsupported(op, "values of {}: sparse tensors are supported in float32",
                    DTypeName(values->dtype()));
  Coo out;
  out.indices = Cast(ctx, op, indices, DType::kI64);
  out.values = values;
  out.shape = shape;
  out.index_dtype = indices->dtype();  // what indices() gives back
  ctx.SetCooOut(op, "out", out);
}

// A COO input of an op that takes one value per entry only.
const Coo& ScalarCooIn(TranslateContext& ctx, const OpDesc& op, const std::string& slot = "x") {
  const Coo& x = ctx.CooIn(op, slot);
  if (x.indices->shape()[0] != static_cast<int64_t>(x.shape.size()))
    ctx.Unsupported(op,
                    "'{}' is a hybrid COO tensor (indices over {} of its {} dims, a block of "
                    "values per entry): this op takes one value per entry",
                    slot, x.indices->shape()[0], x.shape.size());
  return x;
}

ir::AttrMap CooAttrs(const Coo& x) {
  return {{"shape", x.shape}, {"padded", x.padded()}};
}

void ToDense(TranslateContext& ctx, const OpDesc& op) {
  const Coo& x = ctx.CooIn(op, "x");
  ctx.SetOut(op, "out", ctx.Add1(op, "coo_to_dense", {x.indices, x.values}, CooAttrs(x)));
}

// values() / indices() of a padded COO: the padded tensor as a fetch
// target of which the first `count` slices along `dim` hold the entries
// (TranslateOptions::entry_counted_outputs), count being the columns of the
// indices before the first -1. Refused where the caller cannot take such an
// output.
ir::Value* EntryCounted(TranslateContext& ctx, const OpDesc& op, const Coo& x, ir::Value* v,
                        int64_t dim) {
  if (!ctx.entry_counted_outputs())
    ctx.Unsupported(op,
                    "its input's entries come from {}, whose entry count depends on the data: "
                    "values() and indices() of such a tensor are fetch targets of a predictor "
                    "only (not of training or IPU programs: to_dense() and the sparse ops take "
                    "it there)",
                    x.padded_by);
  const int64_t room = x.values->shape()[0];
  ir::Value* first_row = ctx.Reshape(op,
                                     ctx.Add1(op, "slice", {x.indices},
                                              {{"axes", std::vector<int64_t>{0}},
                                               {"starts", std::vector<int64_t>{0}},
                                               {"ends", std::vector<int64_t>{1}}}),
                                     {room});
  ir::Value* held = ctx.Add1(op, "not_equal", {first_row, ctx.ConstI64({-1}, {1})});
  ir::Value* count = ctx.Add1(op, "reduce_sum", {Cast(ctx, op, held, DType::kI64)},
                              {{"axes", std::vector<int64_t>{0}}, {"keepdim", true}});
  count = ctx.Add1(op, "concat", {count, ctx.ConstI64({dim}, {1})}, {{"axis", int64_t{0}}});
  // Its own value, so that the check that only fetches read it does not see
  // the sparse ops reading the COO's values.
  ir::Value* out = ctx.Add1(op, "identity", {v});
  ctx.MarkEntryCounted(out, count);
  return out;
}

void Values(TranslateContext& ctx, const OpDesc& op) {
  const Coo& x = ctx.CooIn(op, "x");
  if (x.padded()) {  // the entries are values' first dim
    ctx.SetOut(op, "out", EntryCounted(ctx, op, x, x.values, 0));
    return;
  }
  ctx.SetOut(op, "out", x.sum_of_all ? ctx.Reshape(op, x.values, Shape{}) : x.values);
}

void Indices(TranslateContext& ctx, const OpDesc& op) {
  const Coo& x = ctx.CooIn(op, "x");
  if (x.padded()) {
    ctx.SetOut(op, "out", EntryCounted(ctx, op, x, Cast(ctx, op, x.indices, x.index_dtype), 1));
    return;
  }
  ir::Value* indices = x.sum_of_all ? ctx.Reshape(op, x.indices, Shape{1}) : x.indices;
  ctx.SetOut(op, "out", Cast(ctx, op, indices, x.index_dtype));
}

// An elementwise op on the stored values; the indices stay.
void RegisterValuesOp(const std::string& paddle, const std::string& t, const std::string& pir,
                      const std::vector<const char*>& attrs = {}) {
  RegisterTranslator(paddle,
                     [t, attrs](TranslateContext& ctx, const OpDesc& op) {
                       Coo x = ctx.CooIn(op, "x");
                       ir::AttrMap a;
                       for (const char* name : attrs) {
                         if (const ir::Attribute* v = op.attrs.Find(name)) a.Set(name, *v);
                       }
                       x.values = ctx.Add1(op, t, {x.values}, a);
                       ctx.SetCooOut(op, "out", x);
                     },
                     {t});
  RegisterPirOpCompat(pir, {paddle, {pir::T("x")}, {"out"}, {}, {}});
}

void Softmax(TranslateContext& ctx, const OpDesc& op) {
  Coo x = ScalarCooIn(ctx, op);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t axis = op.attrs.Int("axis", -1);
  if (axis != -1 && axis != rank - 1)
    ctx.Unsupported(op, "axis = {}: the softmax of a sparse tensor is over its last dim", axis);
  x.values = ctx.Add1(op, "coo_softmax", {x.indices, x.values}, CooAttrs(x));
  ctx.SetCooOut(op, "out", x);
}

void Matmul(TranslateContext& ctx, const OpDesc& op) {
  if (!ctx.IsCoo(op, "x") || ctx.IsCoo(op, "y"))
    ctx.Unsupported(op, "only a sparse COO x times a dense y is supported");
  const Coo& x = ScalarCooIn(ctx, op);
  ir::Value* y = ctx.In(op, "y");
  ctx.SetOut(op, "out", ctx.Add1(op, "coo_matmul", {x.indices, x.values, y}, CooAttrs(x)));
}

void Reshape(TranslateContext& ctx, const OpDesc& op) {
  Coo x = ScalarCooIn(ctx, op);
  const Shape shape = ResolveTargetShape(
      ctx, op, x.shape, IntsFrom(ctx, op, "shape", "ShapeTensor", "ShapeTensorList"));
  x.indices = ctx.Add1(op, "coo_reshape", {x.indices},
                       {{"shape", x.shape}, {"out_shape", shape}, {"padded", x.padded()}});
  x.shape = shape;
  ctx.SetCooOut(op, "out", x);
}

// The indices' rows in perm's order: gather along the first dim.
void Transpose(TranslateContext& ctx, const OpDesc& op) {
  Coo x = ScalarCooIn(ctx, op);
  const std::vector<int64_t> perm = op.attrs.Ints("perm", {});
  const auto rank = static_cast<int64_t>(x.shape.size());
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t p : perm) {
    valid = valid && p >= 0 && p < rank && !seen[static_cast<size_t>(p)];
    if (valid) seen[static_cast<size_t>(p)] = true;
  }
  if (!valid) ctx.Invalid(op, "perm {} is not a permutation of {} dims", ShapeToString(perm), rank);
  Shape shape;
  for (int64_t p : perm) shape.push_back(x.shape[static_cast<size_t>(p)]);
  x.indices =
      ctx.Add1(op, "gather", {x.indices, ctx.ConstI64(perm, {rank})}, {{"axis", int64_t{0}}});
  x.shape = shape;
  ctx.SetCooOut(op, "out", x);
}

// A COO result of `ir_type` (two outputs: indices, values), padded.
Coo PaddedOut(TranslateContext& ctx, const OpDesc& op, const std::string& ir_type,
              std::vector<ir::Value*> inputs, ir::AttrMap attrs, Shape shape,
              DType index_dtype = DType::kI64) {
  ir::Op* o = ctx.AddOp(op, ir_type, std::move(inputs), std::move(attrs));
  Coo out;
  out.indices = o->outputs[0];
  out.values = o->outputs[1];
  out.shape = std::move(shape);
  out.padded_by = op.type;
  out.index_dtype = index_dtype;  // Paddle's slice and dense-to-COO give int64, the others x's
  return out;
}

// x + y, x - y, x * y or x / y of two COO tensors of one shape.
// x + y for a dense y of the last dim's size: added to each entry's values
// (Paddle's add_coo_dense, how sparse convolutions add their bias).
void AddCooDense(TranslateContext& ctx, const OpDesc& op) {
  Coo x = ctx.CooIn(op, "x");
  ir::Value* y = ctx.In(op, "y");
  if (y->shape() != Shape{x.shape.back()} || x.values->rank() < 2)
    ctx.Unsupported(op,
                    "a dense y must be one value per channel of a hybrid COO x ([{}]), got {} "
                    "(Paddle's add_coo_dense takes no other)",
                    x.shape.back(), ShapeToString(y->shape()));
  x.values = ctx.Add1(op, "add", {x.values, y});
  ctx.SetCooOut(op, "out", x);
}

void Merge(TranslateContext& ctx, const OpDesc& op, const char* kind) {
  if (std::string_view(kind) == "add" && ctx.IsCoo(op, "x") && !ctx.IsCoo(op, "y")) {
    AddCooDense(ctx, op);
    return;
  }
  if (!ctx.IsCoo(op, "x") || !ctx.IsCoo(op, "y"))
    ctx.Unsupported(op,
                    "only two sparse COO tensors (or add of a COO and a dense per-channel "
                    "vector) are supported");
  const Coo& x = ctx.CooIn(op, "x");
  const Coo& y = ctx.CooIn(op, "y");
  if (x.shape != y.shape)
    ctx.Invalid(op, "x {} and y {} must have the same shape", ShapeToString(x.shape),
                ShapeToString(y.shape));
  if (x.indices->shape()[0] != y.indices->shape()[0])
    ctx.Unsupported(op, "x indexes {} of its dims and y {}: both must index the same dims",
                    x.indices->shape()[0], y.indices->shape()[0]);
  ctx.SetCooOut(op, "out",
                PaddedOut(ctx, op, "coo_merge", {x.indices, x.values, y.indices, y.values},
                          {{"shape", x.shape},
                           {"kind", std::string(kind)},
                           {"x_padded", x.padded()},
                           {"y_padded", y.padded()}},
                          x.shape, x.index_dtype));
}

void Coalesce(TranslateContext& ctx, const OpDesc& op) {
  const Coo& x = ctx.CooIn(op, "x");
  ctx.SetCooOut(op, "out",
                PaddedOut(ctx, op, "coo_coalesce", {x.indices, x.values}, CooAttrs(x), x.shape,
                          x.index_dtype));
}

// Paddle's sparse slice normalizes as its dense slice does: a negative
// axis, start or end counts from the end; starts and ends are clamped to
// the dim; an end before its start is an error.
void Slice(TranslateContext& ctx, const OpDesc& op) {
  const Coo& x = ScalarCooIn(ctx, op);
  std::vector<int64_t> axes = IntsFrom(ctx, op, "axes", "AxesTensor", "AxesTensorList");
  std::vector<int64_t> starts = IntsFrom(ctx, op, "starts", "StartsTensor", "StartsTensorList");
  std::vector<int64_t> ends = IntsFrom(ctx, op, "ends", "EndsTensor", "EndsTensorList");
  const auto rank = static_cast<int64_t>(x.shape.size());
  if (axes.size() != starts.size() || axes.size() != ends.size())
    ctx.Invalid(op, "axes {}, starts {} and ends {} must have the same length", ShapeToString(axes),
                ShapeToString(starts), ShapeToString(ends));
  Shape shape = x.shape;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0) axes[i] = std::max<int64_t>(0, axes[i] + rank);
    if (axes[i] >= rank)
      ctx.Invalid(op, "axis {} is not a dim of {}", axes[i], ShapeToString(x.shape));
    const int64_t dim = x.shape[static_cast<size_t>(axes[i])];
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < -dim ? 0 : ends[i];
    if (end < 0) end += dim;
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    if (end < start)
      ctx.Invalid(op, "axis {}: end {} is before start {}", axes[i], ends[i], starts[i]);
    starts[i] = start;
    ends[i] = end;
    shape[static_cast<size_t>(axes[i])] = end - start;
  }
  for (int64_t d : shape)
    if (d < 1)
      ctx.Unsupported(op, "the slice {} of {} is empty", ShapeToString(shape),
                      ShapeToString(x.shape));
  ir::AttrMap a = CooAttrs(x);
  a.Set("axes", axes);
  a.Set("starts", starts);
  a.Set("ends", ends);
  ctx.SetCooOut(op, "out", PaddedOut(ctx, op, "coo_slice", {x.indices, x.values}, a, shape));
}

// Paddle's sum_coo: no axis sums every value into one entry at the origin
// (indices [rank, 1] and values [1] with keepdim, else indices [1] and a
// 0-d value of a tensor of shape [1]); one axis gives the sums over it, an
// entry per distinct position of the other dims.
void Sum(TranslateContext& ctx, const OpDesc& op) {
  const Coo& x = ScalarCooIn(ctx, op);
  const std::vector<int64_t> axes = IntsFrom(ctx, op, "axis", "AxisTensor", "AxisTensorList");
  const bool keep = op.attrs.Bool("keepdim", false);
  if (op.attrs.Int("dtype", -1) != -1 && PaddleAttrDType(ctx, op, "dtype") != DType::kF32)
    ctx.Unsupported(op, "dtype {}: sparse tensors are supported in float32",
                    DTypeName(PaddleAttrDType(ctx, op, "dtype")));
  const auto rank = static_cast<int64_t>(x.shape.size());
  if (axes.empty()) {
    ir::Value* sum = ctx.Add1(op, "reduce_sum", {x.values},
                              {{"axes", std::vector<int64_t>{}}, {"keepdim", true}});
    const int64_t index_rows = keep ? rank : 1;
    Coo out;
    out.indices =
        ctx.ConstI64(std::vector<int64_t>(static_cast<size_t>(index_rows), 0), {index_rows, 1});
    out.values = sum;
    out.shape = keep ? Shape(static_cast<size_t>(rank), 1) : Shape{1};
    out.index_dtype = x.index_dtype;
    out.sum_of_all = !keep;
    ctx.SetCooOut(op, "out", out);
    return;
  }
  if (axes.size() > 1)
    ctx.Unsupported(op, "axis {}: Paddle's kernel sums over the first axis only; sum one at a time",
                    ShapeToString(axes));
  const int axis = NormalizeAxis(axes[0], static_cast<int>(rank));
  if (axis < 0) ctx.Invalid(op, "axis {} is not a dim of {}", axes[0], ShapeToString(x.shape));
  Shape shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis)
      shape.push_back(x.shape[static_cast<size_t>(d)]);
    else if (keep || rank == 1)
      shape.push_back(1);
  }
  ir::AttrMap a = CooAttrs(x);
  a.Set("axis", static_cast<int64_t>(axis));
  a.Set("keepdim", keep);
  ctx.SetCooOut(op, "out",
                PaddedOut(ctx, op, "coo_sum", {x.indices, x.values}, a, shape, x.index_dtype));
}

void DenseToCoo(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "x");
  const int64_t sparse_dim = op.attrs.Int("sparse_dim", x->rank());
  if (sparse_dim != x->rank())
    ctx.Unsupported(op,
                    "sparse_dim = {} of a rank-{} tensor: hybrid COO tensors (dense values per "
                    "entry) are not supported",
                    sparse_dim, x->rank());
  if (x->dtype() != DType::kF32)
    ctx.Unsupported(op, "x of {}: sparse tensors are supported in float32", DTypeName(x->dtype()));
  ctx.SetCooOut(op, "out", PaddedOut(ctx, op, "dense_to_coo", {x}, {}, x->shape()));
}

// The COO matrix x [M, K] times the dense vector [K]: a matmul by [K, 1].
void Mv(TranslateContext& ctx, const OpDesc& op) {
  const Coo& x = ScalarCooIn(ctx, op);
  ir::Value* vec = ctx.In(op, "vec");
  if (x.shape.size() != 2 || vec->shape() != Shape{x.shape[1]})
    ctx.Invalid(op, "x must be a COO matrix and vec a vector of its columns, got {} and {}",
                ShapeToString(x.shape), ShapeToString(vec->shape()));
  ir::Value* y = ctx.Reshape(op, vec, {x.shape[1], 1});
  ir::Value* out = ctx.Add1(op, "coo_matmul", {x.indices, x.values, y}, CooAttrs(x));
  ctx.SetOut(op, "out", ctx.Reshape(op, out, {x.shape[0]}));
}

// beta * input + alpha * (x @ y), x a COO matrix (or batch), the rest dense.
void Addmm(TranslateContext& ctx, const OpDesc& op) {
  const Coo& x = ScalarCooIn(ctx, op);
  ir::Value* input = ctx.In(op, "input");
  ir::Value* y = ctx.In(op, "y");
  const double alpha = op.attrs.Float("alpha", 1.0), beta = op.attrs.Float("beta", 1.0);
  ir::Value* xy = ctx.Add1(op, "coo_matmul", {x.indices, x.values, y}, CooAttrs(x));
  if (input->shape() != xy->shape())
    ctx.Invalid(op, "input {} must have the shape of x @ y, {}", ShapeToString(input->shape()),
                ShapeToString(xy->shape()));
  ir::Value* a = ctx.Add1(op, "scale", {xy}, {{"scale", alpha}});
  ir::Value* b = ctx.Add1(op, "scale", {input}, {{"scale", beta}});
  ctx.SetOut(op, "out", ctx.Add1(op, "add", {b, a}));
}

// The values' dtype must stay float32; the indices' is what indices() gives.
void CastCoo(TranslateContext& ctx, const OpDesc& op) {
  Coo x = ctx.CooIn(op, "x");
  if (op.attrs.Int("value_dtype", -1) != -1 &&
      PaddleAttrDType(ctx, op, "value_dtype") != DType::kF32)
    ctx.Unsupported(op, "value_dtype {}: sparse tensors are supported in float32",
                    DTypeName(PaddleAttrDType(ctx, op, "value_dtype")));
  if (op.attrs.Int("index_dtype", -1) != -1) {
    const DType to = PaddleAttrDType(ctx, op, "index_dtype");
    if (!IsInteger(to)) ctx.Invalid(op, "index_dtype {} is not an integer type", DTypeName(to));
    x.index_dtype = to;
  }
  ctx.SetCooOut(op, "out", x);
}

void ScaleCoo(TranslateContext& ctx, const OpDesc& op) {
  Coo x = ctx.CooIn(op, "x");
  ir::AttrMap a{{"scale", op.attrs.Float("scale", 1.0)},
                {"bias", op.attrs.Float("bias", 0.0)},
                {"bias_after_scale", op.attrs.Bool("bias_after_scale", true)}};
  x.values = ctx.Add1(op, "scale", {x.values}, a);
  ctx.SetCooOut(op, "out", x);
}

// x / scalar on the values, a division as Paddle's kernel does.
void DivideScalar(TranslateContext& ctx, const OpDesc& op) {
  Coo x = ctx.CooIn(op, "x");
  ir::Value* d = ctx.ConstF32({static_cast<float>(op.attrs.Float("scalar", 1.0))}, {1});
  x.values = ctx.Add1(op, "div", {x.values, d});
  ctx.SetCooOut(op, "out", x);
}

// Paddle's sparse conv3d on a hybrid COO [N, D, H, W, C] with a kernel
// [kD, kH, kW, C, C_out]. The submanifold form gives an output at each
// input entry (a COO with x's indices); the ordinary form gives the
// positions of the output grid the data reaches, a padded COO.
void Conv3d(TranslateContext& ctx, const OpDesc& op) {
  const Coo& x = ctx.CooIn(op, "x");
  ir::Value* kernel = ctx.In(op, "kernel");
  if (op.attrs.Int("groups", 1) != 1) ctx.Unsupported(op, "groups = {}", op.attrs.Int("groups", 1));
  if (x.shape.size() != 5 || x.indices->shape()[0] != 4)
    ctx.Invalid(op,
                "x must be a hybrid COO [N, D, H, W, C] indexed over N, D, H, W, got {} with "
                "indices {}",
                ShapeToString(x.shape), ShapeToString(x.indices->shape()));
  const std::vector<int64_t> paddings = op.attrs.Ints("paddings", {0, 0, 0});
  const std::vector<int64_t> dilations = op.attrs.Ints("dilations", {1, 1, 1});
  const std::vector<int64_t> strides = op.attrs.Ints("strides", {1, 1, 1});
  const Shape& k = kernel->shape();
  if (!op.attrs.Bool("subm", false)) {
    // The IR op checks the window; the COO's shape needs it well formed.
    const bool window =
        k.size() == 5 && paddings.size() == 3 && dilations.size() == 3 && strides.size() == 3 &&
        std::all_of(strides.begin(), strides.end(), [](int64_t v) { return v > 0; });
    if (!window)
      ctx.Invalid(op,
                  "kernel {} must be [kD, kH, kW, C, C_out] and paddings {}, dilations {}, "
                  "strides {} 3 values each, strides >= 1",
                  ShapeToString(k), ShapeToString(paddings), ShapeToString(dilations),
                  ShapeToString(strides));
    Shape shape = ir::SparseConvGrid(x.shape, k, paddings, dilations, strides);
    shape.push_back(k[4]);
    ir::AttrMap a = CooAttrs(x);
    a.Set("paddings", paddings);
    a.Set("dilations", dilations);
    a.Set("strides", strides);
    ctx.SetCooOut(
        op, "out",
        PaddedOut(ctx, op, "coo_conv3d", {x.indices, x.values, kernel}, a, shape, x.index_dtype));
    return;
  }
  if (strides != std::vector<int64_t>{1, 1, 1})
    ctx.Unsupported(op, "strides {}: a submanifold convolution keeps its input's positions",
                    ShapeToString(strides));
  // Paddle keeps a submanifold output's dims only for odd kernels padded
  // by half their size without dilation; otherwise its output shrinks to
  // the positions inside a smaller grid (seen in Paddle 3.3.1 with
  // dilation 2), which Tiller does not follow.
  bool same = k.size() == 5 && paddings.size() == 3 && dilations == std::vector<int64_t>{1, 1, 1};
  for (size_t i = 0; same && i < 3; ++i) same = k[i] % 2 == 1 && paddings[i] == k[i] / 2;
  if (!same)
    ctx.Unsupported(op,
                    "a submanifold conv3d with kernel {}, paddings {} and dilations {}: only odd "
                    "kernels padded by half their size, without dilation, keep Paddle's "
                    "positions",
                    ShapeToString(k), ShapeToString(paddings), ShapeToString(dilations));
  Coo out = x;
  ir::AttrMap a = CooAttrs(x);
  a.Set("paddings", paddings);
  a.Set("dilations", dilations);
  out.values = ctx.Add1(op, "coo_subm_conv3d", {x.indices, x.values, kernel}, a);
  out.shape.back() = k.back();
  ctx.SetCooOut(op, "out", out);
}

// Inference batch norm over a hybrid COO's channels (its values [nnz, C]),
// with the running statistics as Paddle Inference's test mode.
void BatchNormCoo(TranslateContext& ctx, const OpDesc& op) {
  Coo x = ctx.CooIn(op, "X");
  if (ctx.training())
    ctx.Unsupported(op,
                    "training a sparse batch norm: Paddle builds no gradient through sparse "
                    "ops in static programs");
  if (x.values->rank() != 2)
    ctx.Unsupported(op,
                    "x must be a hybrid COO with one channel dim (values [nnz, C]), got "
                    "values {}",
                    ShapeToString(x.values->shape()));
  x.values = ctx.Add1(op, "batch_norm",
                      {x.values, ctx.In(op, "Scale"), ctx.In(op, "Bias"), ctx.In(op, "Mean"),
                       ctx.In(op, "Variance")},
                      {{"epsilon", op.attrs.Float("epsilon", 1e-5)}});
  ctx.SetCooOut(op, "Y", x);
}

const bool kRegistered = [] {
  using pir::T;
  RegisterTranslator("sparse_sparse_coo_tensor", SparseCooTensor, {"cast"});
  RegisterPirOpCompat("sparse_coo_tensor_sp",
                      {"sparse_sparse_coo_tensor", {T("values"), T("indices")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_to_dense", ToDense, {"coo_to_dense"});
  RegisterPirOpCompat("coo_to_dense_sp", {"sparse_to_dense", {T("x")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_values", Values,
                     {"reshape", "slice", "not_equal", "cast", "reduce_sum", "concat", "identity"});
  RegisterPirOpCompat("values_coo_sp", {"sparse_values", {T("x")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_indices", Indices,
                     {"reshape", "slice", "not_equal", "cast", "reduce_sum", "concat", "identity"});
  RegisterPirOpCompat("indices_sp", {"sparse_indices", {T("x")}, {"out"}, {}, {}});
  RegisterValuesOp("sparse_relu", "relu", "relu_coo_sp");
  RegisterValuesOp("sparse_abs", "abs", "abs_coo_sp");
  RegisterValuesOp("sparse_sin", "sin", "sin_coo_sp");
  RegisterValuesOp("sparse_pow", "pow_scalar", "pow_coo_sp", {"factor"});
  for (const char* name : {"tanh", "sqrt", "square", "sinh", "tan", "asin", "atan", "acos", "log1p",
                           "relu6", "asinh", "atanh", "expm1"}) {
    RegisterValuesOp(std::string("sparse_") + name, name, std::string(name) + "_coo_sp");
  }
  RegisterValuesOp("sparse_leaky_relu", "leaky_relu", "leaky_relu_coo_sp", {"alpha"});
  // isnan: bool values, true where a stored value is NaN (unequal to itself).
  RegisterTranslator("sparse_isnan",
                     [](TranslateContext& ctx, const OpDesc& op) {
                       Coo x = ctx.CooIn(op, "x");
                       x.values = ctx.Add1(op, "not_equal", {x.values, x.values});
                       ctx.SetCooOut(op, "out", x);
                     },
                     {"not_equal"});
  RegisterPirOpCompat("isnan_coo_sp", {"sparse_isnan", {T("x")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_softmax", Softmax, {"coo_softmax"});
  RegisterPirOpCompat("softmax_coo_sp", {"sparse_softmax", {T("x")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_reshape", Reshape, {"coo_reshape"});
  RegisterPirOpCompat("reshape_coo_sp",
                      {"sparse_reshape",
                       {T("x"), pir::IntArray("shape", "ShapeTensor", "ShapeTensorList")},
                       {"out"},
                       {},
                       {}});
  RegisterTranslator("sparse_transpose", Transpose, {"gather"});
  RegisterPirOpCompat("transpose_coo_sp", {"sparse_transpose", {T("x")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_matmul", Matmul, {"coo_matmul"});
  RegisterPirOpCompat("matmul_coo_dense_sp", {"sparse_matmul", {T("x"), T("y")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_mv", Mv, {"coo_matmul", "reshape"});
  RegisterPirOpCompat("mv_coo_sp", {"sparse_mv", {T("x"), T("vec")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_addmm", Addmm, {"coo_matmul", "scale", "add"});
  RegisterPirOpCompat("addmm_coo_dense_sp",
                      {"sparse_addmm", {T("input"), T("x"), T("y")}, {"out"}, {}, {}});
  for (const char* kind : {"add", "subtract", "multiply", "divide"}) {
    const std::string legacy = std::string("sparse_") + kind;
    RegisterTranslator(legacy,
                       [kind](TranslateContext& ctx, const OpDesc& op) { Merge(ctx, op, kind); },
                       {"coo_merge", "add"});
    RegisterPirOpCompat(std::string(kind) + "_coo_coo_sp",
                        {legacy, {T("x"), T("y")}, {"out"}, {}, {}});
  }
  RegisterPirOpCompat("add_coo_dense_sp", {"sparse_add", {T("x"), T("y")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_conv3d", Conv3d, {"coo_subm_conv3d", "coo_conv3d"});
  RegisterPirOpCompat(
      "conv3d_sp",
      {"sparse_conv3d", {T("x"), T("kernel")}, {"out", "rulebook", "counter"}, {}, {}});
  RegisterTranslator("sparse_batch_norm", BatchNormCoo, {"batch_norm"});
  const PirOpCompat batch_norm = {
      "sparse_batch_norm",
      {T("X"), T("Mean"), T("Variance"), T("Scale"), T("Bias")},
      {"Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"},
      {},
      {}};
  RegisterPirOpCompat("batch_norm_sp", batch_norm);
  RegisterPirOpCompat("batch_norm_sp_", batch_norm);
  RegisterTranslator("sparse_coalesce", Coalesce, {"coo_coalesce"});
  RegisterPirOpCompat("coalesce_sp", {"sparse_coalesce", {T("x")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_slice", Slice, {"coo_slice"});
  RegisterPirOpCompat("slice_coo_sp",
                      {"sparse_slice",
                       {T("x"), pir::IntArray("starts", "StartsTensor", "StartsTensorList"),
                        pir::IntArray("ends", "EndsTensor", "EndsTensorList")},
                       {"out"},
                       {},
                       {}});
  RegisterTranslator("sparse_sum", Sum, {"coo_sum", "reduce_sum"});
  RegisterPirOpCompat("sum_coo_sp",
                      {"sparse_sum",
                       {T("x"), pir::IntArray("axis", "AxisTensor", "AxisTensorList")},
                       {"out"},
                       {},
                       {}});
  RegisterTranslator("sparse_dense_to_coo", DenseToCoo, {"dense_to_coo"});
  RegisterPirOpCompat("dense_to_coo_sp", {"sparse_dense_to_coo", {T("x")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_cast", CastCoo, {"cast"});
  RegisterPirOpCompat("cast_coo_sp", {"sparse_cast", {T("x")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_scale", ScaleCoo, {"scale"});
  RegisterPirOpCompat("scale_coo_sp", {"sparse_scale", {T("x")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_divide_scalar", DivideScalar, {"div"});
  RegisterPirOpCompat("divide_scalar_coo_sp", {"sparse_divide_scalar", {T("x")}, {"out"}, {}, {}});
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
