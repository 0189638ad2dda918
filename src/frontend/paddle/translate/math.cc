// Paddle elementwise (binary, compare, logic), matmul, scale, sum/mean,
// reduction, arg-min/max and cumsum ops. Activations: activation.cc.
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"

namespace tiller::paddle {
namespace {

void Binary(TranslateContext& ctx, const OpDesc& op, const std::string& ir_type) {
  ir::Value* x = ctx.In(op, "X");
  ir::Value* y = ctx.In(op, "Y");
  AlignForAxis(ctx, op, &x, &y);
  ctx.SetOut(op, "Out", ctx.Add1(op, ir_type, {x, y}));
}

void RegisterBinary(const char* paddle, const char* ir_type) {
  std::string t = ir_type;
  RegisterTranslator(paddle, [t](TranslateContext& c, const OpDesc& op) { Binary(c, op, t); });
}

void Matmul(TranslateContext& ctx, const OpDesc& op, bool ta, bool tb, double alpha) {
  ir::Value* x = ctx.In(op, "X");
  ir::Value* y = ctx.In(op, "Y");
  bool x_vec = x->rank() == 1, y_vec = y->rank() == 1;
  if (x_vec) x = ctx.Reshape(op, x, {1, x->shape()[0]});
  if (y_vec) y = ctx.Reshape(op, y, {y->shape()[0], 1});
  ir::AttrMap attrs{{"transpose_a", ta && !x_vec}, {"transpose_b", tb && !y_vec}};
  if (alpha != 1.0) attrs.Set("alpha", alpha);
  ir::Value* out = ctx.Add1(op, "matmul", {x, y}, attrs);
  if (x_vec || y_vec) {
    Shape s = out->shape();
    if (y_vec) s.pop_back();
    if (x_vec) s.erase(s.end() - (y_vec ? 1 : 2));
    out = ctx.Reshape(op, out, s);
  }
  ctx.SetOut(op, "Out", out);
}

// Legacy `mul` (what fluid's fc wrote): X and Y are flattened to matrices at
// x_num_col_dims / y_num_col_dims; the result keeps X's leading and Y's
// trailing dims.
void Mul(TranslateContext& ctx, const OpDesc& op) {
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

void Scale(TranslateContext& ctx, const OpDesc& op) {
  double scale = op.attrs.Float("scale", 1.0);
  if (ir::Value* t = ctx.InOpt(op, "ScaleTensor")) scale = ctx.ConstFloats(op, t).at(0);
  ir::AttrMap a{{"scale", scale},
                {"bias", op.attrs.Float("bias", 0.0)},
                {"bias_after_scale", op.attrs.Bool("bias_after_scale", true)}};
  ctx.SetOut(op, "Out", ctx.Add1(op, "scale", {ctx.In(op, "X")}, a));
}

void Reduce(TranslateContext& ctx, const OpDesc& op, const std::string& ir_type) {
  ir::Value* x = ctx.In(op, "X");
  std::vector<int64_t> axes = op.attrs.Ints("dim");
  if (ir::Value* t = ctx.InOpt(op, "AxesTensor")) axes = ctx.ConstInts(op, t);
  if (op.attrs.Bool("reduce_all", false)) axes.clear();
  ir::AttrMap a{{"axes", axes}, {"keepdim", op.attrs.Bool("keep_dim", false)}};
  ctx.SetOut(op, "Out", ctx.Add1(op, ir_type, {x}, a));
}

void Mean(TranslateContext& ctx, const OpDesc& op) {
  ir::AttrMap a{{"axes", std::vector<int64_t>{}}, {"keepdim", false}};
  ctx.SetOut(op, "Out", ctx.Add1(op, "reduce_mean", {ctx.In(op, "X")}, a));
}

void Sum(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> xs = ctx.Ins(op, "X");
  if (xs.empty()) ctx.Invalid(op, "no inputs");
  ir::Value* acc = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) acc = ctx.Add1(op, "add", {acc, xs[i]});
  if (xs.size() == 1) acc = ctx.Add1(op, "identity", {acc});
  ctx.SetOut(op, "Out", acc);
}

void ArgMinMax(TranslateContext& ctx, const OpDesc& op, const std::string& ir_type) {
  ir::Value* x = ctx.In(op, "X");
  int64_t axis = op.attrs.Int("axis", -1);
  if (op.attrs.Bool("flatten", false)) {
    x = ctx.Reshape(op, x, {NumElements(x->shape())});
    axis = 0;
  }
  DType dt = op.attrs.Has("dtype") ? PaddleAttrDType(ctx, op, "dtype") : DType::kI64;
  ir::AttrMap a{{"axis", axis},
                {"keepdim", op.attrs.Bool("keepdims", false)},
                {"dtype", std::string(DTypeName(dt))}};
  ctx.SetOut(op, "Out", ctx.Add1(op, ir_type, {x}, a));
}

void Cumsum(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  int64_t axis = op.attrs.Int("axis", -1);
  if (ir::Value* t = ctx.InOpt(op, "AxisTensor")) axis = ctx.ConstInts(op, t).at(0);
  if (op.attrs.Bool("flatten", false)) {
    x = ctx.Reshape(op, x, {NumElements(x->shape())});
    axis = 0;
  }
  ir::AttrMap a{{"axis", axis},
                {"exclusive", op.attrs.Bool("exclusive", false)},
                {"reverse", op.attrs.Bool("reverse", false)}};
  ctx.SetOut(op, "Out", ctx.Add1(op, "cumsum", {x}, a));
}

const bool kRegistered = [] {
  RegisterTranslator("cumsum", Cumsum);
  RegisterBinary("elementwise_add", "add");
  RegisterBinary("elementwise_sub", "sub");
  RegisterBinary("elementwise_mul", "mul");
  RegisterBinary("elementwise_div", "div");
  RegisterBinary("elementwise_max", "max");
  RegisterBinary("elementwise_min", "min");
  RegisterBinary("elementwise_pow", "pow");
  RegisterBinary("elementwise_mod", "mod");
  RegisterBinary("elementwise_floordiv", "floor_div");
  RegisterBinary("equal", "equal");
  RegisterBinary("not_equal", "not_equal");
  RegisterBinary("less_than", "less");
  RegisterBinary("less_equal", "less_equal");
  RegisterBinary("greater_than", "greater");
  RegisterBinary("greater_equal", "greater_equal");
  RegisterBinary("logical_and", "logical_and");
  RegisterBinary("logical_or", "logical_or");
  RegisterBinary("logical_xor", "logical_xor");
  RegisterTranslator("logical_not", [](TranslateContext& c, const OpDesc& op) {
    c.SetOut(op, "Out", c.Add1(op, "logical_not", {c.In(op, "X")}));
  });
  RegisterTranslator("matmul_v2", [](TranslateContext& c, const OpDesc& op) {
    Matmul(c, op, op.attrs.Bool("trans_x", false), op.attrs.Bool("trans_y", false), 1.0);
  });
  RegisterTranslator("matmul", [](TranslateContext& c, const OpDesc& op) {
    Matmul(c, op, op.attrs.Bool("transpose_X", false), op.attrs.Bool("transpose_Y", false),
           op.attrs.Float("alpha", 1.0));
  });
  RegisterTranslator("scale", Scale);
  RegisterTranslator("mul", Mul);
  RegisterTranslator("sum", Sum);
  RegisterTranslator("mean", Mean);
  for (auto [paddle, ir_type] : {std::pair{"reduce_sum", "reduce_sum"}, {"reduce_mean", "reduce_mean"},
                                 {"reduce_max", "reduce_max"}, {"reduce_min", "reduce_min"},
                                 {"reduce_prod", "reduce_prod"}}) {
    std::string t = ir_type;
    RegisterTranslator(paddle, [t](TranslateContext& c, const OpDesc& op) { Reduce(c, op, t); });
  }
  RegisterTranslator("arg_max", [](TranslateContext& c, const OpDesc& op) { ArgMinMax(c, op, "argmax"); });
  RegisterTranslator("arg_min", [](TranslateContext& c, const OpDesc& op) { ArgMinMax(c, op, "argmin"); });
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
