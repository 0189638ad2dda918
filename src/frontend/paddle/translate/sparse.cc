// paddle.sparse COO tensors in static programs: creation from indices and
// values, to_dense, values / indices, unary ops on the stored values, the
// softmax over each row's stored entries and the COO x dense matmul
// (ir/ops/sparse.cc has the IR ops). A COO tensor is its stored entries
// (TranslateContext::Coo), so unary ops act on the values and keep the
// indices, as Paddle's kernels do: relu keeps an entry that becomes zero,
// and a later softmax counts it.
//
// Legacy spellings (Paddle 2.6 programs) and the PIR names mapped onto them:
//   sparse_sparse_coo_tensor  sparse_coo_tensor_sp  (values, indices){shape}
//   sparse_to_dense           coo_to_dense_sp
//   sparse_values             values_coo_sp
//   sparse_indices            indices_sp
//   sparse_relu               relu_coo_sp
//   sparse_softmax            softmax_coo_sp{axis: the last dim only}
//   sparse_matmul             matmul_coo_dense_sp   (COO x, dense y -> dense)
//   sparse_abs, sparse_sin, sparse_pow{factor}      abs_coo_sp, sin_coo_sp,
//                                                   pow_coo_sp (PIR only)
//   sparse_reshape{shape: 0 copies, -1 inferred}  reshape_coo_sp (x, shape)
//   sparse_transpose{perm}              transpose_coo_sp
// reshape and transpose move each entry's indices and keep the values and
// their order (as Paddle's kernels do).
// Gradients: Paddle builds none through sparse ops in static programs
// (the sparse side is stop_gradient; dense ops after to_dense train).
#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"

namespace tiller::paddle {
namespace {

using Coo = TranslateContext::Coo;

void SparseCooTensor(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* values = ctx.In(op, "values");
  ir::Value* indices = ctx.In(op, "indices");
  const std::vector<int64_t> shape = op.attrs.Ints("shape", {});
  if (shape.empty()) ctx.Invalid(op, "attribute shape is missing or empty");
  const Shape& is = indices->shape();
  if (is.size() != 2 || is[0] != static_cast<int64_t>(shape.size()))
    ctx.Invalid(op, "indices must be [{}, nnz] for a tensor of shape {}, got {}", shape.size(),
                ShapeToString(shape), ShapeToString(is));
  if (values->shape() != Shape{is[1]})
    ctx.Unsupported(op,
                    "values {} are not one per index column ({} of them); hybrid COO tensors "
                    "(dense values per entry) are not supported",
                    ShapeToString(values->shape()), is[1]);
  if (!IsInteger(indices->dtype()))
    ctx.Invalid(op, "indices must be integers, got {}", DTypeName(indices->dtype()));
  if (values->dtype() != DType::kF32)
    ctx.Unsupported(op, "values of {}: sparse tensors are supported in float32",
                    DTypeName(values->dtype()));
  ctx.SetCooOut(op, "out", {Cast(ctx, op, indices, DType::kI64), values, Shape(shape)});
}

void ToDense(TranslateContext& ctx, const OpDesc& op) {
  const Coo& x = ctx.CooIn(op, "x");
  ctx.SetOut(op, "out", ctx.Add1(op, "coo_to_dense", {x.indices, x.values}, {{"shape", x.shape}}));
}

void Values(TranslateContext& ctx, const OpDesc& op) {
  ctx.SetOut(op, "out", ctx.CooIn(op, "x").values);
}

void Indices(TranslateContext& ctx, const OpDesc& op) {
  ctx.SetOut(op, "out", ctx.CooIn(op, "x").indices);
}

// An elementwise op on the stored values; the indices stay.
void RegisterValuesOp(const char* paddle, const char* ir_type, const char* pir,
                      const std::vector<const char*>& attrs = {}) {
  const std::string t = ir_type;
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
  Coo x = ctx.CooIn(op, "x");
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t axis = op.attrs.Int("axis", -1);
  if (axis != -1 && axis != rank - 1)
    ctx.Unsupported(op, "axis = {}: the softmax of a sparse tensor is over its last dim", axis);
  x.values = ctx.Add1(op, "coo_softmax", {x.indices, x.values}, {{"shape", x.shape}});
  ctx.SetCooOut(op, "out", x);
}

void Matmul(TranslateContext& ctx, const OpDesc& op) {
  if (!ctx.IsCoo(op, "x") || ctx.IsCoo(op, "y"))
    ctx.Unsupported(op, "only a sparse COO x times a dense y is supported");
  const Coo& x = ctx.CooIn(op, "x");
  ir::Value* y = ctx.In(op, "y");
  ctx.SetOut(op, "out", ctx.Add1(op, "coo_matmul", {x.indices, x.values, y}, {{"shape", x.shape}}));
}

void Reshape(TranslateContext& ctx, const OpDesc& op) {
  Coo x = ctx.CooIn(op, "x");
  const Shape shape = ResolveTargetShape(
      ctx, op, x.shape, IntsFrom(ctx, op, "shape", "ShapeTensor", "ShapeTensorList"));
  x.indices = ctx.Add1(op, "coo_reshape", {x.indices}, {{"shape", x.shape}, {"out_shape", shape}});
  x.shape = shape;
  ctx.SetCooOut(op, "out", x);
}

// The indices' rows in perm's order: gather along the first dim.
void Transpose(TranslateContext& ctx, const OpDesc& op) {
  Coo x = ctx.CooIn(op, "x");
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

const bool kRegistered = [] {
  using pir::T;
  RegisterTranslator("sparse_sparse_coo_tensor", SparseCooTensor, {"cast"});
  RegisterPirOpCompat("sparse_coo_tensor_sp",
                      {"sparse_sparse_coo_tensor", {T("values"), T("indices")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_to_dense", ToDense, {"coo_to_dense"});
  RegisterPirOpCompat("coo_to_dense_sp", {"sparse_to_dense", {T("x")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_values", Values, {});
  RegisterPirOpCompat("values_coo_sp", {"sparse_values", {T("x")}, {"out"}, {}, {}});
  RegisterTranslator("sparse_indices", Indices, {});
  RegisterPirOpCompat("indices_sp", {"sparse_indices", {T("x")}, {"out"}, {}, {}});
  RegisterValuesOp("sparse_relu", "relu", "relu_coo_sp");
  RegisterValuesOp("sparse_abs", "abs", "abs_coo_sp");
  RegisterValuesOp("sparse_sin", "sin", "sin_coo_sp");
  RegisterValuesOp("sparse_pow", "pow_scalar", "pow_coo_sp", {"factor"});
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
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
