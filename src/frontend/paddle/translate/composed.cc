// Paddle ops that are compositions of other IR ops, each with the PIR
// spellings that map onto it: tril / triu (a constant mask), pixel_shuffle
// (reshape and transpose), roll (slices and a concat), addmm and mv (a
// matmul and scales), logit (clip, divide, log), scatter (put_along_axis
// of whole rows).
#include <cmath>
#include <string>
#include <vector>

#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"

namespace tiller::paddle {
namespace {

// tril_triu{diagonal, lower}: x where column - row <= diagonal (lower) or
// >= diagonal (upper) over the last two dims, 0 elsewhere (NaN included).
void TrilTriu(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  const bool lower = op.attrs.Bool("lower", true);
  if (x->rank() < 2)
    ctx.Invalid(op, "x must have at least 2 dims, got {}", ShapeToString(x->shape()));
  const int64_t diagonal = op.attrs.Int("diagonal", 0);
  const int64_t h = x->shape()[x->rank() - 2], w = x->shape()[x->rank() - 1];
  std::vector<int64_t> keep(static_cast<size_t>(h * w));
  for (int64_t i = 0; i < h; ++i)
    for (int64_t j = 0; j < w; ++j)
      keep[static_cast<size_t>(i * w + j)] = lower ? j - i <= diagonal : j - i >= diagonal;
  ir::Value* mask = Cast(ctx, op, ctx.ConstI64(keep, {h, w}), DType::kBool);
  ctx.SetOut(op, "Out", ctx.Add1(op, "where", {mask, x, ctx.ConstScalar(0.0, x->dtype())}));
}

// pixel_shuffle{upscale_factor r, data_format}: [N, C r r, H, W] ->
// [N, C, H r, W r] (NCHW); [N, H, W, C r r] -> [N, H r, W r, C] (NHWC).
void PixelShuffle(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  const int64_t r = op.attrs.Int("upscale_factor", 1);
  const std::string format = op.attrs.Str("data_format", "NCHW");
  if (x->rank() != 4) ctx.Invalid(op, "x must be 4-D, got {}", ShapeToString(x->shape()));
  if (format != "NCHW" && format != "NHWC")
    ctx.Unsupported(op, "data_format '{}' (NCHW and NHWC are)", format);
  const bool nchw = format == "NCHW";
  const Shape& s = x->shape();
  const int64_t n = s[0], ch = nchw ? s[1] : s[3], h = nchw ? s[2] : s[1], w = nchw ? s[3] : s[2];
  if (r < 1 || ch % (r * r) != 0)
    ctx.Invalid(op, "{} channels do not split into upscale_factor {} squared", ch, r);
  const int64_t c = ch / (r * r);
  ir::Value* v;
  if (nchw) {
    v = ctx.Reshape(op, x, {n, c, r, r, h, w});
    v = ctx.Add1(op, "transpose", {v}, {{"perm", std::vector<int64_t>{0, 1, 4, 2, 5, 3}}});
    v = ctx.Reshape(op, v, {n, c, h * r, w * r});
  } else {
    v = ctx.Reshape(op, x, {n, h, w, c, r, r});
    v = ctx.Add1(op, "transpose", {v}, {{"perm", std::vector<int64_t>{0, 1, 4, 2, 5, 3}}});
    v = ctx.Reshape(op, v, {n, h * r, w * r, c});
  }
  ctx.SetOut(op, "Out", v);
}

// roll{shifts, axis}: element i of an axis moves to (i + shift) mod dim;
// no axis rolls the flattened tensor. Each shift is two slices swapped.
void Roll(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  const std::vector<int64_t> shifts = IntsFrom(ctx, op, "shifts", "ShiftsTensor", "");
  std::vector<int64_t> axes = op.attrs.Ints("axis", {});
  const Shape shape = x->shape();
  ir::Value* v = x;
  if (axes.empty()) {
    if (shifts.size() != 1)
      ctx.Invalid(op, "without axis, shifts must hold one value, got {}", shifts.size());
    v = ctx.Reshape(op, x, {NumElements(shape)});
    axes = {0};
  } else if (axes.size() != shifts.size()) {
    ctx.Invalid(op, "shifts {} and axis {} differ in length", ShapeToString(shifts),
                ShapeToString(axes));
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    const int a = NormalizeAxis(axes[i], v->rank());
    if (a < 0) ctx.Invalid(op, "axis {} out of range for rank {}", axes[i], v->rank());
    const int64_t dim = v->shape()[static_cast<size_t>(a)];
    if (dim == 0) continue;
    const int64_t s = ((shifts[i] % dim) + dim) % dim;
    if (s == 0) continue;
    auto part = [&](int64_t b, int64_t e) {
      return ctx.Add1(op, "slice", {v},
                      {{"axes", std::vector<int64_t>{a}},
                       {"starts", std::vector<int64_t>{b}},
                       {"ends", std::vector<int64_t>{e}}});
    };
    v = ctx.Add1(op, "concat", {part(dim - s, dim), part(0, dim - s)},
                 {{"axis", static_cast<int64_t>(a)}});
  }
  ctx.SetOut(op, "Out", v->shape() == shape ? v : ctx.Reshape(op, v, shape));
}

// addmm{Alpha, Beta}: Beta Input + Alpha (X @ Y), X and Y matrices.
void Addmm(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* input = ctx.In(op, "Input");
  ir::Value* x = ctx.In(op, "X");
  ir::Value* y = ctx.In(op, "Y");
  if (x->rank() != 2 || y->rank() != 2 || x->shape()[1] != y->shape()[0])
    ctx.Invalid(op, "X and Y must be matrices that multiply, got {} and {}",
                ShapeToString(x->shape()), ShapeToString(y->shape()));
  const double alpha = op.attrs.Float("Alpha", 1.0), beta = op.attrs.Float("Beta", 1.0);
  ir::AttrMap a{{"transpose_a", false}, {"transpose_b", false}};
  if (alpha != 1.0) a.Set("alpha", alpha);
  ir::Value* prod = ctx.Add1(op, "matmul", {x, y}, a);
  ir::Value* in = input;
  if (beta != 1.0)
    in = ctx.Add1(op, "scale", {input},
                  {{"scale", beta}, {"bias", 0.0}, {"bias_after_scale", true}});
  ir::Value* out = ctx.Add1(op, "add", {in, prod});
  if (out->shape() != prod->shape())
    ctx.Invalid(op, "Input {} does not broadcast to the product {}", ShapeToString(input->shape()),
                ShapeToString(prod->shape()));
  ctx.SetOut(op, "Out", out);
}

// mv: the matrix X [M, K] times the vector Vec [K].
void Mv(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  ir::Value* vec = ctx.In(op, "Vec");
  if (x->rank() != 2 || vec->rank() != 1 || x->shape()[1] != vec->shape()[0])
    ctx.Invalid(op, "X must be [M, K] and Vec [K], got {} and {}", ShapeToString(x->shape()),
                ShapeToString(vec->shape()));
  ir::Value* out = ctx.Add1(op, "matmul", {x, ctx.Reshape(op, vec, {vec->shape()[0], 1})},
                            {{"transpose_a", false}, {"transpose_b", false}});
  ctx.SetOut(op, "Out", ctx.Reshape(op, out, {x->shape()[0]}));
}

// logit{eps}: log(x / (1 - x)), x clipped to [eps, 1 - eps] first where
// eps > 0 (Paddle's kernel; eps 0 leaves x as it is).
void Logit(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  const double eps = op.attrs.Float("eps", 0.0);
  if (eps > 0.0) x = ctx.Add1(op, "clip", {x}, {{"min", eps}, {"max", 1.0 - eps}});
  ir::Value* rest =
      ctx.Add1(op, "scale", {x}, {{"scale", -1.0}, {"bias", 1.0}, {"bias_after_scale", true}});
  ctx.SetOut(op, "Out", ctx.Add1(op, "log", {ctx.Add1(op, "div", {x, rest})}));
}

// scatter{overwrite}: x with rows Ids[i] replaced by Updates[i]
// (overwrite: a row given twice keeps the later one, as Paddle's kernel
// writes them in order), or set to the sum of every update given to them
// (not overwrite: the rows are zeroed first). The row indices, expanded
// over each row's elements, drive put_along_axis along dim 0; an index
// outside the rows is reported by it, a negative one counts from the end.
void Scatter(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  ir::Value* ids = ctx.In(op, "Ids");
  ir::Value* updates = ctx.In(op, "Updates");
  const Shape& xs = x->shape();
  Shape is = ids->shape();
  if (is.size() == 2 && is[1] == 1) is.pop_back();
  if (xs.empty() || is.size() != 1)
    ctx.Invalid(op, "Ids must be 1-D (or [N, 1]) and X at least 1-D, got {} and {}",
                ShapeToString(ids->shape()), ShapeToString(xs));
  Shape want = xs;
  want[0] = is[0];
  if (updates->shape() != want)
    ctx.Invalid(op, "Updates {} must be {} (a row of X per index)", ShapeToString(updates->shape()),
                ShapeToString(want));
  Shape column(xs.size(), 1);
  column[0] = is[0];
  ir::Value* index = ctx.Add1(op, "expand", {ctx.Reshape(op, ids, column)},
                              {{"shape", std::vector<int64_t>(want)}});
  auto put = [&](ir::Value* into, ir::Value* values, const char* reduce) {
    return ctx.Add1(op, "put_along_axis", {into, index, values},
                    {{"axis", int64_t{0}}, {"reduce", std::string(reduce)}});
  };
  updates = Cast(ctx, op, updates, x->dtype());
  if (op.attrs.Bool("overwrite", true)) {
    ctx.SetOut(op, "Out", put(x, updates, "assign"));
    return;
  }
  ir::Value* zeros = ctx.Add1(op, "expand", {ctx.ConstScalar(0.0, x->dtype())},
                              {{"shape", std::vector<int64_t>(want)}});
  ctx.SetOut(op, "Out", put(put(x, zeros, "assign"), updates, "add"));
}

const bool kRegistered = [] {
  using pir::IntArray;
  using pir::T;
  RegisterTranslator("tril_triu", TrilTriu, {"where", "cast"});
  // PIR names the side; the legacy op takes it as `lower`.
  RegisterPirOpCompat("tril", {"tril_triu", {T("X")}, {"Out"}, {}, {{"lower", true}}});
  RegisterPirOpCompat("triu", {"tril_triu", {T("X")}, {"Out"}, {}, {{"lower", false}}});
  RegisterTranslator("pixel_shuffle", PixelShuffle, {"reshape", "transpose"});
  RegisterPirOpCompat("pixel_shuffle", pir::Unary("pixel_shuffle"));
  RegisterTranslator("roll", Roll, {"slice", "concat", "reshape"});
  RegisterPirOpCompat("roll",
                      {"roll", {T("X"), IntArray("shifts", "ShiftsTensor", "")}, {"Out"}, {}, {}});
  RegisterTranslator("addmm", Addmm, {"matmul", "scale", "add"});
  RegisterPirOpCompat(
      "addmm",
      {"addmm", {T("Input"), T("X"), T("Y")}, {"Out"}, {{"alpha", "Alpha"}, {"beta", "Beta"}}, {}});
  RegisterTranslator("mv", Mv, {"matmul", "reshape"});
  RegisterPirOpCompat("mv", {"mv", {T("X"), T("Vec")}, {"Out"}, {}, {}});
  RegisterTranslator("logit", Logit, {"clip", "scale", "div", "log"});
  RegisterPirOpCompat("logit", pir::Unary("logit"));
  RegisterTranslator("scatter", Scatter, {"put_along_axis", "expand", "reshape", "cast"});
  RegisterPirOpCompat("scatter", {"scatter", {T("X"), T("Ids"), T("Updates")}, {"Out"}, {}, {}});
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
