// Paddle elementwise (binary, compare, logic), matmul, scale, sum/mean,
// reduction (logsumexp too), arg-min/max and cumsum ops, each with the PIR
// spellings that map onto it. Activations: activation.cc.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>

#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"
#include "ir/row_gradient.h"

namespace tiller::paddle {
namespace {

std::string DTypeAttr(DType t) {
  return std::string(DTypeName(t));
}

// Old fluid programs may carry MKL-DNN int8 quantization scales on math ops;
// the CPU kernels compute in float, so only the neutral value is accepted.
void CheckNeutralScales(TranslateContext& ctx, const OpDesc& op) {
  for (const char* a : {"Scale_x", "Scale_y", "Scale_out"}) {
    if (op.attrs.Has(a) && op.attrs.Float(a, 1.0) != 1.0)
      ctx.Unsupported(op, "{} = {} (int8 quantization scale)", a, op.attrs.Float(a, 1.0));
  }
}

// MKL-DNN fuse passes of Paddle 2.x folded reshape/transpose into matmul
// through these attributes; such programs are not handled.
void CheckNoFusedLayout(TranslateContext& ctx, const OpDesc& op) {
  for (const char* a : {"fused_reshape_X", "fused_reshape_Y", "fused_reshape_Out",
                        "fused_transpose_X", "fused_transpose_Y", "fused_transpose_Out"}) {
    if (!op.attrs.Ints(a).empty())
      ctx.Unsupported(op, "{} = {} (MKL-DNN fused layout)", a, ShapeToString(op.attrs.Ints(a)));
  }
}

void Binary(TranslateContext& ctx, const OpDesc& op, const std::string& ir_type) {
  CheckNeutralScales(ctx, op);
  ir::Value* x = ctx.In(op, "X");
  ir::Value* y = ctx.In(op, "Y");
  if (ir_type == "mul" && ir::AsRowGradient(x) && NumElements(y->shape()) == 1) {
    // A sparse table's gradient times a scalar (gradient clipping's factor
    // in a legacy program): the rows scaled, so the update still gets rows.
    ir::Value* factor = ctx.Reshape(op, y, {});
    ctx.SetOut(op, "Out", ir::MapGradient(ctx.graph(), x, [&](ir::Value* rows) {
                 return ctx.Add1(op, "mul", {rows, factor});
               }));
    return;
  }
  AlignForAxis(ctx, op, &x, &y);
  ctx.SetOut(op, "Out", ctx.Add1(op, ir_type, {x, y}));
}

void RegisterBinary(const char* paddle, const char* ir_type) {
  std::string t = ir_type;
  std::vector<std::string> emits = {t, "reshape"};
  if (t == "mul") emits.push_back("embedding_grad");  // a row gradient's (Binary)
  RegisterTranslator(
      paddle, [t](TranslateContext& c, const OpDesc& op) { Binary(c, op, t); }, emits);
}

// Swaps the last two dims.
ir::Value* TransposeLast2(TranslateContext& ctx, const OpDesc& op, ir::Value* v) {
  std::vector<int64_t> perm(v->rank());
  for (int i = 0; i < v->rank(); ++i) perm[i] = i;
  std::swap(perm[v->rank() - 1], perm[v->rank() - 2]);
  return ctx.Add1(op, "transpose", {v}, {{"perm", perm}});
}

// Integer matmul (the CPU matmul kernel is float-only): [.., M, K, 1] times
// [.., 1, K, N] broadcast, summed over K. Exact, as integer sums do not
// depend on the order; meant for the small index arithmetic ints are used for.
ir::Value* IntMatmul(TranslateContext& ctx, const OpDesc& op, ir::Value* x, ir::Value* y, bool ta,
                     bool tb) {
  if (x->dtype() != y->dtype())
    ctx.Invalid(op, "operand dtypes differ: {} and {}", DTypeName(x->dtype()),
                DTypeName(y->dtype()));
  if (ta) x = TransposeLast2(ctx, op, x);
  if (tb) y = TransposeLast2(ctx, op, y);
  Shape xs = x->shape(), ys = y->shape();
  if (xs.back() != ys[ys.size() - 2])
    ctx.Invalid(op, "inner dims differ: {} x {}", ShapeToString(xs), ShapeToString(ys));
  xs.push_back(1);
  ys.insert(ys.end() - 2, 1);
  ir::Value* prod = ctx.Add1(op, "mul", {ctx.Reshape(op, x, xs), ctx.Reshape(op, y, ys)});
  ir::AttrMap r{{"axes", std::vector<int64_t>{-2}}, {"keepdim", false}};
  return ctx.Add1(op, "reduce_sum", {prod}, r);
}

// numpy matmul semantics (matmul_v2, bmm and legacy matmul): a 1-D operand
// is a row (x) or column (y) vector whose unit dim is dropped from the result.
void Matmul(TranslateContext& ctx, const OpDesc& op, bool ta, bool tb, double alpha) {
  CheckNoFusedLayout(ctx, op);
  ir::Value* x = ctx.In(op, "X");
  ir::Value* y = ctx.In(op, "Y");
  if (x->rank() == 0 || y->rank() == 0)
    ctx.Invalid(op, "operands must have rank >= 1, got {} and {}", ShapeToString(x->shape()),
                ShapeToString(y->shape()));
  bool x_vec = x->rank() == 1, y_vec = y->rank() == 1;
  if (x_vec) x = ctx.Reshape(op, x, {1, x->shape()[0]});
  if (y_vec) y = ctx.Reshape(op, y, {y->shape()[0], 1});
  ir::Value* out;
  if (x->dtype() == DType::kI32 || x->dtype() == DType::kI64) {
    if (alpha != 1.0) ctx.Unsupported(op, "alpha = {} with integer operands", alpha);
    out = IntMatmul(ctx, op, x, y, ta && !x_vec, tb && !y_vec);
  } else {
    ir::AttrMap attrs{{"transpose_a", ta && !x_vec}, {"transpose_b", tb && !y_vec}};
    if (alpha != 1.0) attrs.Set("alpha", alpha);
    out = ctx.Add1(op, "matmul", {x, y}, attrs);
  }
  if (x_vec || y_vec) {
    Shape s = out->shape();
    if (y_vec) s.pop_back();
    if (x_vec) s.erase(s.end() - (y_vec ? 1 : 2));
    out = ctx.Reshape(op, out, s);
  }
  ctx.SetOut(op, "Out", out);
}

// Legacy matmul (v1). head_number splits the product into heads (a fused
// multi-head attention form) and force_fp32_output only matters for bf16
// MKL-DNN kernels; neither changes a float32 CPU result when neutral.
void MatmulV1(TranslateContext& ctx, const OpDesc& op) {
  CheckNeutralScales(ctx, op);
  if (op.attrs.Int("head_number", 1) != 1)
    ctx.Unsupported(op, "head_number = {}", op.attrs.Int("head_number", 1));
  Matmul(ctx, op, op.attrs.Bool("transpose_X", false), op.attrs.Bool("transpose_Y", false),
         op.attrs.Float("alpha", 1.0));
}

void Bmm(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  ir::Value* y = ctx.In(op, "Y");
  if (x->rank() != 3 || y->rank() != 3 || x->shape()[0] != y->shape()[0])
    ctx.Invalid(op, "bmm needs [B, M, K] and [B, K, N], got {} and {}", ShapeToString(x->shape()),
                ShapeToString(y->shape()));
  Matmul(ctx, op, false, false, 1.0);
}

// Legacy `mul` (what fluid's fc wrote): X and Y are flattened to matrices at
// x_num_col_dims / y_num_col_dims; the result keeps X's leading and Y's
// trailing dims.
void Mul(TranslateContext& ctx, const OpDesc& op) {
  CheckNeutralScales(ctx, op);
  ir::Value* x = ctx.In(op, "X");
  ir::Value* y = ctx.In(op, "Y");
  int64_t xn = op.attrs.Int("x_num_col_dims", 1), yn = op.attrs.Int("y_num_col_dims", 1);
  if (xn < 1 || xn >= x->rank() || yn < 1 || yn >= y->rank())
    ctx.Invalid(op, "x_num_col_dims {} / y_num_col_dims {} do not fit {} and {}", xn, yn,
                ShapeToString(x->shape()), ShapeToString(y->shape()));
  auto prod = [](const Shape& s, int64_t from, int64_t to) {
    int64_t p = 1;
    for (int64_t i = from; i < to; ++i) p *= s[i];
    return p;
  };
  const Shape& xs = x->shape();
  const Shape& ys = y->shape();
  ir::Value* x2 = ctx.Reshape(op, x, {prod(xs, 0, xn), prod(xs, xn, x->rank())});
  ir::Value* y2 = ctx.Reshape(op, y, {prod(ys, 0, yn), prod(ys, yn, y->rank())});
  ir::Value* out = ctx.Add1(op, "matmul", {x2, y2});
  Shape s(xs.begin(), xs.begin() + xn);
  s.insert(s.end(), ys.begin() + yn, ys.end());
  ctx.SetOut(op, "Out", ctx.Reshape(op, out, s));
}

// dot: 1-D x 1-D -> 0-D, or row-wise over [B, N] x [B, N] -> [B].
void Dot(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  ir::Value* y = ctx.In(op, "Y");
  if (x->shape() != y->shape() || x->rank() < 1 || x->rank() > 2)
    ctx.Invalid(op, "dot needs equal 1-D or 2-D operands, got {} and {}", ShapeToString(x->shape()),
                ShapeToString(y->shape()));
  ir::Value* prod = ctx.Add1(op, "mul", {x, y});
  ir::AttrMap a{{"axes", std::vector<int64_t>{-1}}, {"keepdim", false}};
  ctx.SetOut(op, "Out", ctx.Add1(op, "reduce_sum", {prod}, a));
}

// scale: out = x * scale + bias (bias_after_scale) or (x + bias) * scale.
// A float32 / float64 x with a scale known at compile time becomes `scale`,
// whose factor passes can fold (into matmuls, attention). A scale computed
// at run time (ScaleTensor), and integer or half x, become scale_tensor,
// which computes in x's arithmetic with the factor converted to x's dtype,
// as Paddle's kernel (integers truncate scale and bias, and wrap).
void Scale(TranslateContext& ctx, const OpDesc& op) {
  double scale = op.attrs.Float("scale", 1.0), bias = op.attrs.Float("bias", 0.0);
  if (ir::Value* t = ctx.InOpt(op, "BiasTensor")) bias = ctx.ConstFloat(op, t);
  bool after = op.attrs.Bool("bias_after_scale", true);
  ir::Value* x = ctx.In(op, "X");
  ir::Value* t = ctx.InOpt(op, "ScaleTensor");
  if (t && NumElements(t->shape()) != 1)
    ctx.Invalid(op, "ScaleTensor '{}' has shape {}: the scale is one value", t->name,
                ShapeToString(t->shape()));
  if ((x->dtype() == DType::kF32 || x->dtype() == DType::kF64) && (!t || t->data)) {
    if (t) scale = ctx.ConstFloat(op, t);
    ir::AttrMap a{{"scale", scale}, {"bias", bias}, {"bias_after_scale", after}};
    ctx.SetOut(op, "Out", ctx.Add1(op, "scale", {x}, a));
    return;
  }
  // Paddle converts the factor to x's type (a float factor truncates for
  // integer x); a constant factor's cast folds at compile time.
  ir::Value* s = Cast(ctx, op, t ? t : ctx.ConstScalar(scale, DType::kF64), x->dtype());
  ir::AttrMap a{{"bias", bias}, {"bias_after_scale", after}};
  ctx.SetOut(op, "Out", ctx.Add1(op, "scale_tensor", {x, s}, a));
}

// Reduction axes from `dim` or, in PIR programs, a compile-time tensor.
std::vector<int64_t> ReduceAxes(TranslateContext& ctx, const OpDesc& op) {
  std::vector<int64_t> axes = IntsFrom(ctx, op, "dim", "DimTensor", "DimTensorList");
  if (op.attrs.Bool("reduce_all", false)) axes.clear();
  return axes;
}

void Reduce(TranslateContext& ctx, const OpDesc& op, const std::string& ir_type) {
  ir::Value* x = ctx.In(op, "X");
  std::vector<int64_t> axes = ReduceAxes(ctx, op);
  // out_dtype (-1: the input's) converts before reducing, as Paddle
  // accumulates in the output type (sum of int32/bool gives int64).
  if (op.attrs.Int("out_dtype", -1) != -1) {
    if (ir_type != "reduce_sum" && ir_type != "reduce_mean" && ir_type != "reduce_prod")
      ctx.Unsupported(op, "out_dtype = {}", op.attrs.Int("out_dtype", -1));
    x = Cast(ctx, op, x, PaddleAttrDType(ctx, op, "out_dtype"));
  } else if ((x->dtype() == DType::kBool || x->dtype() == DType::kI32) && ir_type == "reduce_sum") {
    // Paddle 3's sum kernel gives int64 for bool and int32 inputs (also in
    // legacy programs, whatever dtype the output variable declares).
    x = Cast(ctx, op, x, DType::kI64);
  }
  ir::AttrMap a{{"axes", axes}, {"keepdim", op.attrs.Bool("keep_dim", false)}};
  ctx.SetOut(op, "Out", ctx.Add1(op, ir_type, {x}, a));
}

// reduce_all / reduce_any (paddle.all / paddle.any): whether every / some
// element is true (a number: not 0; NaN is true), as the minimum / maximum
// of the truth values taken as 0.0 and 1.0.
void ReduceLogical(TranslateContext& ctx, const OpDesc& op, bool all) {
  ir::Value* x = ctx.In(op, "X");
  if (x->dtype() != DType::kBool)
    x = ctx.Add1(op, "not_equal", {x, ctx.ConstScalar(0.0, x->dtype())});
  ir::AttrMap a{{"axes", ReduceAxes(ctx, op)}, {"keepdim", op.attrs.Bool("keep_dim", false)}};
  ir::Value* r =
      ctx.Add1(op, all ? "reduce_min" : "reduce_max", {Cast(ctx, op, x, DType::kF32)}, a);
  ctx.SetOut(op, "Out", Cast(ctx, op, r, DType::kBool));
}

// logsumexp{axis, keepdim, reduce_all}: an empty axis list reduces every
// axis, as does reduce_all (whatever axis says), as in Paddle's kernel.
void LogSumExp(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  std::vector<int64_t> axes = op.attrs.Ints("axis", {});
  if (op.attrs.Bool("reduce_all", false)) axes.clear();
  const int64_t rank = std::max(x->rank(), 1);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      ctx.Invalid(op, "axis {} out of range for input {}", a, ShapeToString(x->shape()));
  }
  ir::AttrMap a{{"axes", axes}, {"keepdim", op.attrs.Bool("keepdim", false)}};
  ctx.SetOut(op, "Out", ctx.Add1(op, "logsumexp", {x}, a));
}

void Mean(TranslateContext& ctx, const OpDesc& op) {
  ir::AttrMap a{{"axes", std::vector<int64_t>{}}, {"keepdim", false}};
  ctx.SetOut(op, "Out", ctx.Add1(op, "reduce_mean", {ctx.In(op, "X")}, a));
}

// sum (add_n): adds its inputs left to right, like Paddle's kernel.
void Sum(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> xs = ctx.Ins(op, "X");
  if (xs.empty()) ctx.Invalid(op, "no inputs");
  ir::Value* acc = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) {
    if (xs[i]->shape() != xs[0]->shape())
      ctx.Invalid(op, "input shapes differ: {} and {}", ShapeToString(xs[0]->shape()),
                  ShapeToString(xs[i]->shape()));
    acc = ctx.Add1(op, "add", {acc, xs[i]});
  }
  if (xs.size() == 1) acc = ctx.Add1(op, "identity", {acc});
  ctx.SetOut(op, "Out", acc);
}

void ArgMinMax(TranslateContext& ctx, const OpDesc& op, const std::string& ir_type) {
  ir::Value* x = ctx.In(op, "X");
  int64_t axis = op.attrs.Int("axis", -1);
  if (ir::Value* t = ctx.InOpt(op, "AxisTensor")) axis = ctx.ConstInt(op, t);
  bool keepdim = op.attrs.Bool("keepdims", false), flatten = op.attrs.Bool("flatten", false);
  Shape in_shape = x->shape();
  if (flatten || x->rank() == 0) {
    x = ctx.Reshape(op, x, {NumElements(in_shape)});
    axis = 0;
  } else if (axis < -x->rank() || axis >= x->rank()) {
    ctx.Invalid(op, "axis {} out of range for {}", axis, ShapeToString(in_shape));
  }
  // -1 (unset) means int64.
  DType dt = op.attrs.Int("dtype", -1) == -1 ? DType::kI64 : PaddleAttrDType(ctx, op, "dtype");
  if (dt != DType::kI32 && dt != DType::kI64)
    ctx.Unsupported(op, "dtype = {} (index dtype must be int32 or int64)", DTypeName(dt));
  ir::AttrMap a{{"axis", axis}, {"keepdim", keepdim && !flatten}, {"dtype", DTypeAttr(dt)}};
  ir::Value* out = ctx.Add1(op, ir_type, {x}, a);
  // Flattened: a 0-D index, or all-ones dims of the input's rank with keepdims.
  if (flatten || in_shape.empty())
    out = ctx.Reshape(op, out, keepdim ? Shape(in_shape.size(), 1) : Shape{});
  ctx.SetOut(op, "Out", out);
}

void Cumsum(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  int64_t axis = op.attrs.Int("axis", -1);
  if (ir::Value* t = ctx.InOpt(op, "AxisTensor")) axis = ctx.ConstInt(op, t);
  if (op.attrs.Bool("flatten", false) || x->rank() == 0) {
    x = ctx.Reshape(op, x, {NumElements(x->shape())});
    axis = 0;
  } else if (axis < -x->rank() || axis >= x->rank()) {
    ctx.Invalid(op, "axis {} out of range for {}", axis, ShapeToString(x->shape()));
  }
  ir::AttrMap a{{"axis", axis},
                {"exclusive", op.attrs.Bool("exclusive", false)},
                {"reverse", op.attrs.Bool("reverse", false)}};
  ctx.SetOut(op, "Out", ctx.Add1(op, "cumsum", {x}, a));
}

// cumprod(X){dim; PIR: exclusive, reverse}: running products along dim (a
// 0-d tensor, dim 0: itself, as in Paddle).
void Cumprod(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  int64_t dim = op.attrs.Int("dim", -1);
  const Shape shape = x->shape();
  if (x->rank() == 0 ? dim != 0 : dim < -x->rank() || dim >= x->rank())
    ctx.Invalid(op, "dim {} out of range for {}", dim, ShapeToString(shape));
  if (x->rank() == 0) x = ctx.Reshape(op, x, {1});
  ir::AttrMap a{{"axis", dim},
                {"exclusive", op.attrs.Bool("exclusive", false)},
                {"reverse", op.attrs.Bool("reverse", false)}};
  ir::Value* out = ctx.Add1(op, "cumprod", {x}, a);
  ctx.SetOut(op, "Out", shape.empty() ? ctx.Reshape(op, out, shape) : out);
}

// The operands the bitwise ops take: bool (as the logical ops) and
// integers; others are refused naming the dtype.
void CheckBitwiseOperand(TranslateContext& ctx, const OpDesc& op, const ir::Value* v) {
  if (v->dtype() != DType::kBool && !IsInteger(v->dtype()))
    ctx.Unsupported(op, "{} operands (bool and integer ones are)", DTypeName(v->dtype()));
}

// The p-norm of |v| reduced over `axes` (empty: all), composed from IR ops:
// p = 0 counts nonzeros, +-inf take max/min, p = 1 and 2 avoid pow.
ir::Value* PNorm(TranslateContext& ctx, const OpDesc& op, ir::Value* v, double p,
                 const std::vector<int64_t>& axes, bool keepdim) {
  ir::AttrMap r{{"axes", axes}, {"keepdim", keepdim}};
  if (p == 0) {
    ir::Value* zero = ctx.ConstScalar(0.0, v->dtype());
    ir::Value* nz = Cast(ctx, op, ctx.Add1(op, "not_equal", {v, zero}), v->dtype());
    return ctx.Add1(op, "reduce_sum", {nz}, r);
  }
  ir::Value* a = ctx.Add1(op, "abs", {v});
  if (std::isinf(p)) return ctx.Add1(op, p > 0 ? "reduce_max" : "reduce_min", {a}, r);
  if (p == 1) return ctx.Add1(op, "reduce_sum", {a}, r);
  if (p == 2) {
    ir::Value* s = ctx.Add1(op, "reduce_sum", {ctx.Add1(op, "square", {a})}, r);
    return ctx.Add1(op, "sqrt", {s});
  }
  ir::Value* powed = ctx.Add1(op, "pow_scalar", {a}, {{"factor", p}});
  ir::Value* s = ctx.Add1(op, "reduce_sum", {powed}, r);
  return ctx.Add1(op, "pow_scalar", {s}, {{"factor", 1.0 / p}});
}

void CheckFloat(TranslateContext& ctx, const OpDesc& op, const ir::Value* v) {
  if (v->dtype() != DType::kF32 && v->dtype() != DType::kF64)
    ctx.Unsupported(op, "input dtype {} (Paddle defines {} for float types)", DTypeName(v->dtype()),
                    op.type);
}

// p_norm: epsilon only guards the gradient; the forward value ignores it.
void PNormOp(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  CheckFloat(ctx, op, x);
  double p = op.attrs.Float("porder", 2.0);
  bool keepdim = op.attrs.Bool("keepdim", false);
  int64_t axis = op.attrs.Int("axis", -1);
  ir::Value* out;
  if (op.attrs.Bool("asvector", false) || x->rank() == 0) {
    out = PNorm(ctx, op, x, p, {}, keepdim);
  } else {
    if (axis < -x->rank() || axis >= x->rank())
      ctx.Invalid(op, "axis {} out of range for {}", axis, ShapeToString(x->shape()));
    out = PNorm(ctx, op, x, p, {axis}, keepdim);
  }
  ctx.SetOut(op, "Out", out);
}

// dist: the p-norm of the broadcast difference, as a 0-D tensor.
void Dist(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  ir::Value* y = ctx.In(op, "Y");
  CheckFloat(ctx, op, x);
  ir::Value* d = ctx.Add1(op, "sub", {x, y});
  ctx.SetOut(op, "Out", PNorm(ctx, op, d, op.attrs.Float("p", 2.0), {}, false));
}

// isnan / isinf / isfinite (Paddle's _v2 ops), from comparisons: NaN is
// the one value unequal to itself, and |x| < inf holds for the finite ones
// only (NaN compares false). Integers are always finite, never NaN or inf.
ir::Value* NumberClass(TranslateContext& ctx, const OpDesc& op, const std::string& kind) {
  ir::Value* x = ctx.In(op, "X");
  const DType t = x->dtype();
  if (t == DType::kI32 || t == DType::kI64)
    return ctx.Add1(op, kind == "isfinite" ? "equal" : "not_equal", {x, x});
  if (t != DType::kF32 && t != DType::kF64)
    ctx.Unsupported(op, "input dtype {} (float32, float64, int32 and int64 are supported)",
                    DTypeName(t));
  if (kind == "isnan") return ctx.Add1(op, "not_equal", {x, x});
  ir::Value* a = ctx.Add1(op, "abs", {x});
  ir::Value* inf = ctx.ConstScalar(INFINITY, t);
  return ctx.Add1(op, kind == "isinf" ? "equal" : "less", {a, inf});
}

const bool kRegistered = [] {
  using pir::Scalar;
  using pir::T;
  // Each translator with the PIR spellings that map onto it.
  RegisterTranslator("cumsum", Cumsum, {"cumsum", "reshape"});
  RegisterTranslator("cumprod", Cumprod, {"cumprod", "reshape"});
  RegisterPirOpCompat("cumprod", {"cumprod", {T("X")}, {"Out"}, {}, {}});
  RegisterPirOpCompat("cumsum",
                      {"cumsum", {T("X"), Scalar("axis", "AxisTensor")}, {"Out"}, {}, {}});
  RegisterBinary("elementwise_add", "add");
  RegisterPirOpCompat("add", pir::Binary("elementwise_add"));
  RegisterBinary("elementwise_sub", "sub");
  RegisterPirOpCompat("subtract", pir::Binary("elementwise_sub"));
  RegisterBinary("elementwise_mul", "mul");
  RegisterPirOpCompat("multiply", pir::Binary("elementwise_mul"));
  RegisterBinary("elementwise_div", "div");
  RegisterPirOpCompat("divide", pir::Binary("elementwise_div"));
  RegisterBinary("elementwise_max", "max");
  RegisterPirOpCompat("maximum", pir::Binary("elementwise_max"));
  RegisterBinary("elementwise_min", "min");
  RegisterPirOpCompat("minimum", pir::Binary("elementwise_min"));
  RegisterBinary("elementwise_pow", "pow");
  RegisterPirOpCompat("elementwise_pow", pir::Binary("elementwise_pow"));
  RegisterBinary("elementwise_mod", "mod");
  RegisterPirOpCompat("remainder", pir::Binary("elementwise_mod"));
  RegisterBinary("elementwise_floordiv", "floor_div");
  RegisterPirOpCompat("floor_divide", pir::Binary("elementwise_floordiv"));
  RegisterBinary("equal", "equal");
  RegisterPirOpCompat("equal", pir::Binary("equal"));
  RegisterBinary("not_equal", "not_equal");
  RegisterPirOpCompat("not_equal", pir::Binary("not_equal"));
  RegisterBinary("less_than", "less");
  RegisterPirOpCompat("less_than", pir::Binary("less_than"));
  RegisterBinary("less_equal", "less_equal");
  RegisterPirOpCompat("less_equal", pir::Binary("less_equal"));
  RegisterBinary("greater_than", "greater");
  RegisterPirOpCompat("greater_than", pir::Binary("greater_than"));
  RegisterBinary("greater_equal", "greater_equal");
  RegisterPirOpCompat("greater_equal", pir::Binary("greater_equal"));
  // The logical ops have no `axis`.
  RegisterBinary("logical_and", "logical_and");
  RegisterPirOpCompat("logical_and", {"logical_and", {T("X"), T("Y")}, {"Out"}, {}, {}});
  RegisterBinary("logical_or", "logical_or");
  RegisterPirOpCompat("logical_or", {"logical_or", {T("X"), T("Y")}, {"Out"}, {}, {}});
  RegisterBinary("logical_xor", "logical_xor");
  RegisterPirOpCompat("logical_xor", {"logical_xor", {T("X"), T("Y")}, {"Out"}, {}, {}});
  RegisterTranslator("logical_not",
                     [](TranslateContext& c, const OpDesc& op) {
                       c.SetOut(op, "Out", c.Add1(op, "logical_not", {c.In(op, "X")}));
                     },
                     {"logical_not"});
  RegisterPirOpCompat("logical_not", pir::Unary("logical_not"));
  // Paddle's `&`, `|`, `^` and `~` on tensors are the bitwise ops: on bool
  // tensors (masks, the common use) the logical ones, on integers bitwise.
  for (const auto& [bitwise, logical] :
       {std::pair{"bitwise_and", "logical_and"}, std::pair{"bitwise_or", "logical_or"},
        std::pair{"bitwise_xor", "logical_xor"}}) {
    const std::string ir_bitwise = bitwise, ir_logical = logical;
    RegisterTranslator(bitwise,
                       [ir_bitwise, ir_logical](TranslateContext& c, const OpDesc& op) {
                         ir::Value* x = c.In(op, "X");
                         ir::Value* y = c.In(op, "Y");
                         CheckBitwiseOperand(c, op, x);
                         CheckBitwiseOperand(c, op, y);
                         const bool masks = x->dtype() == DType::kBool;
                         c.SetOut(op, "Out", c.Add1(op, masks ? ir_logical : ir_bitwise, {x, y}));
                       },
                       {ir_bitwise, ir_logical});
    RegisterPirOpCompat(bitwise, {bitwise, {T("X"), T("Y")}, {"Out"}, {}, {}});
  }
  RegisterTranslator(
      "bitwise_not",
      [](TranslateContext& c, const OpDesc& op) {
        ir::Value* x = c.In(op, "X");
        CheckBitwiseOperand(c, op, x);
        c.SetOut(op, "Out",
                 c.Add1(op, x->dtype() == DType::kBool ? "logical_not" : "bitwise_not", {x}));
      },
      {"logical_not", "bitwise_not"});
  RegisterPirOpCompat("bitwise_not", pir::Unary("bitwise_not"));
  // atan2(X1, X2) = the angle of the point (X2, X1); integers in float64,
  // as Paddle's output is.
  RegisterTranslator("atan2",
                     [](TranslateContext& c, const OpDesc& op) {
                       ir::Value* a = c.In(op, "X1");
                       ir::Value* b = c.In(op, "X2");
                       if (a->dtype() != b->dtype())
                         c.Invalid(op, "operand dtypes differ: {} and {}", DTypeName(a->dtype()),
                                   DTypeName(b->dtype()));
                       if (IsInteger(a->dtype())) {
                         a = c.Add1(op, "cast", {a}, {{"dtype", std::string("float64")}});
                         b = c.Add1(op, "cast", {b}, {{"dtype", std::string("float64")}});
                       }
                       c.SetOut(op, "Out", c.Add1(op, "atan2", {a, b}));
                     },
                     {"atan2", "cast"});
  RegisterPirOpCompat("atan2", {"atan2", {T("X1"), T("X2")}, {"Out"}, {}, {}});
  // Elementwise (the _v2 ops; the legacy ops without it reduce to one bool
  // and have no translator).
  for (const char* name : {"isnan", "isinf", "isfinite"}) {
    const std::string legacy = std::string(name) + "_v2";
    RegisterTranslator(legacy,
                       [name](TranslateContext& c, const OpDesc& op) {
                         c.SetOut(op, "Out", NumberClass(c, op, name));
                       },
                       {"not_equal", "equal", "less", "abs"});
    RegisterPirOpCompat(name, pir::Unary(legacy.c_str()));
  }
  // Float operands become one matmul; integer ones mul + reduce_sum.
  const std::vector<std::string> matmul_ops = {"matmul", "reshape", "transpose", "mul",
                                               "reduce_sum"};
  RegisterTranslator(
      "matmul_v2",
      [](TranslateContext& c, const OpDesc& op) {
        Matmul(c, op, op.attrs.Bool("trans_x", false), op.attrs.Bool("trans_y", false), 1.0);
      },
      matmul_ops);
  RegisterPirOpCompat("matmul", {"matmul_v2",
                                 {T("X"), T("Y")},
                                 {"Out"},
                                 {{"transpose_x", "trans_x"}, {"transpose_y", "trans_y"}},
                                 {}});
  RegisterTranslator("matmul", MatmulV1, matmul_ops);
  RegisterTranslator("bmm", Bmm, matmul_ops);
  RegisterPirOpCompat("bmm", {"bmm", {T("X"), T("Y")}, {"Out"}, {}, {}});
  // Mapped, with no translator: translation reports it as unsupported.
  RegisterPirOpCompat("einsum",
                      {"einsum", {T("Operands")}, {"Out", "InnerCache", "XShape"}, {}, {}});
  RegisterTranslator("dot", Dot, {"mul", "reduce_sum"});
  RegisterPirOpCompat("dot", {"dot", {T("X"), T("Y")}, {"Out"}, {}, {}});
  const std::vector<std::string> pnorm_ops = {"abs",        "reduce_sum", "reduce_max",
                                              "reduce_min", "square",     "sqrt",
                                              "pow_scalar", "not_equal",  "cast"};
  RegisterTranslator("p_norm", PNormOp, pnorm_ops);
  RegisterPirOpCompat("p_norm", pir::Unary("p_norm"));
  std::vector<std::string> dist_ops = pnorm_ops;
  dist_ops.push_back("sub");
  RegisterTranslator("dist", Dist, dist_ops);
  RegisterPirOpCompat("dist", {"dist", {T("X"), T("Y")}, {"Out"}, {}, {}});
  // A run-time, integer or half scale is scale_tensor (its factor cast).
  RegisterTranslator("scale", Scale, {"scale", "scale_tensor", "cast"});
  RegisterPirOpCompat("scale",
                      {"scale", {T("X"), Scalar("scale", "ScaleTensor")}, {"Out"}, {}, {}});
  RegisterTranslator("mul", Mul, {"reshape", "matmul"});
  RegisterTranslator("sum", Sum, {"add", "identity"});
  RegisterPirOpCompat("add_n", {"sum", {T("X")}, {"Out"}, {}, {}});
  RegisterTranslator("mean", Mean, {"reduce_mean"});
  RegisterPirOpCompat("mean_all", pir::Unary("mean"));
  RegisterTranslator("logsumexp", LogSumExp, {"logsumexp"});
  RegisterPirOpCompat("logsumexp", pir::Unary("logsumexp"));
  for (auto [paddle, ir_type] : {std::pair{"reduce_sum", "reduce_sum"},
                                 {"reduce_mean", "reduce_mean"},
                                 {"reduce_max", "reduce_max"},
                                 {"reduce_min", "reduce_min"},
                                 {"reduce_prod", "reduce_prod"}}) {
    std::string t = ir_type;
    RegisterTranslator(paddle, [t](TranslateContext& c, const OpDesc& op) { Reduce(c, op, t); },
                       {t, "cast"});
  }
  RegisterPirOpCompat("sum", pir::Reduce("reduce_sum"));
  RegisterPirOpCompat("mean", pir::Reduce("reduce_mean"));
  RegisterPirOpCompat("max", pir::Reduce("reduce_max"));
  RegisterPirOpCompat("min", pir::Reduce("reduce_min"));
  RegisterPirOpCompat("prod", pir::Reduce("reduce_prod"));
  RegisterTranslator("reduce_all",
                     [](TranslateContext& c, const OpDesc& op) { ReduceLogical(c, op, true); },
                     {"not_equal", "cast", "reduce_min"});
  // PIR's all / any keep their axes as an attribute (no tensor operand).
  RegisterPirOpCompat(
      "all", {"reduce_all", {T("X")}, {"Out"}, {{"axis", "dim"}, {"keepdim", "keep_dim"}}, {}});
  RegisterTranslator("reduce_any",
                     [](TranslateContext& c, const OpDesc& op) { ReduceLogical(c, op, false); },
                     {"not_equal", "cast", "reduce_max"});
  RegisterPirOpCompat(
      "any", {"reduce_any", {T("X")}, {"Out"}, {{"axis", "dim"}, {"keepdim", "keep_dim"}}, {}});
  RegisterTranslator("arg_max",
                     [](TranslateContext& c, const OpDesc& op) { ArgMinMax(c, op, "argmax"); },
                     {"argmax", "reshape"});
  RegisterPirOpCompat("argmax",
                      {"arg_max", {T("X"), Scalar("axis", "AxisTensor")}, {"Out"}, {}, {}});
  RegisterTranslator("arg_min",
                     [](TranslateContext& c, const OpDesc& op) { ArgMinMax(c, op, "argmin"); },
                     {"argmin", "reshape"});
  RegisterPirOpCompat("argmin",
                      {"arg_min", {T("X"), Scalar("axis", "AxisTensor")}, {"Out"}, {}, {}});
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
