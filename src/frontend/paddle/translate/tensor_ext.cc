// Paddle tensor ops built from data movement (tile, expand v1, flip,
// meshgrid, unstack / unbind), search (top_k, argsort), one_hot and the random
// generators, each with the PIR spellings that map onto it.
#include <functional>
#include <string>

#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"

namespace tiller::paddle {
namespace {

// Seed of random ops whose `seed` attribute is 0 ("not fixed" in Paddle):
// a per-model default mixed with the op's position, so two unseeded ops draw
// different numbers while a model always draws the same ones.
constexpr uint64_t kDefaultSeed = 0x5eed7111e5ull;

// Repeats x `reps[i]` times along dim i (numpy tile): x is viewed as
// [1, d0, 1, d1, ...], broadcast to [r0, d0, r1, d1, ...] and viewed back.
ir::Value* TileValue(TranslateContext& ctx, const OpDesc& op, ir::Value* x,
                     std::vector<int64_t> reps) {
  Shape s = x->shape();
  for (int64_t r : reps) {
    if (r < 0) ctx.Invalid(op, "repeat count {} is negative", r);
  }
  while (s.size() < reps.size()) s.insert(s.begin(), 1);
  while (reps.size() < s.size()) reps.insert(reps.begin(), 1);
  Shape split, target, out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (reps[i] != 1) {
      split.push_back(1);
      target.push_back(reps[i]);
    }
    split.push_back(s[i]);
    target.push_back(s[i]);
    out.push_back(s[i] * reps[i]);
  }
  if (split == target) return ctx.Reshape(op, x, out);
  ir::Value* v = ctx.Add1(op, "expand", {ctx.Reshape(op, x, split)}, {{"shape", target}});
  return ctx.Reshape(op, v, out);
}

void Tile(TranslateContext& ctx, const OpDesc& op) {
  auto reps = IntsFrom(ctx, op, "repeat_times", "RepeatTimes", "repeat_times_tensor");
  ctx.SetOut(op, "Out", TileValue(ctx, op, ctx.In(op, "X"), reps));
}

// expand (v1): tile with one count per input dim.
void ExpandV1(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  auto times = IntsFrom(ctx, op, "expand_times", "ExpandTimes", "expand_times_tensor");
  if (static_cast<int>(times.size()) != x->rank())
    ctx.Invalid(op, "expand_times has {} entries, input rank is {}", times.size(), x->rank());
  ctx.SetOut(op, "Out", TileValue(ctx, op, x, times));
}

// flip: a slice with step -1 along each listed axis.
void Flip(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  std::vector<int64_t> axes = op.attrs.Ints("axis"), starts, ends, steps;
  for (int64_t a : axes) {
    int n = NormalizeAxis(a, x->rank());
    if (n < 0) ctx.Invalid(op, "axis {} out of range for rank {}", a, x->rank());
    starts.push_back(-1);
    ends.push_back(-x->shape()[n] - 1);  // one before element 0
    steps.push_back(-1);
  }
  if (axes.empty()) {
    ctx.SetOut(op, "Out", x);
    return;
  }
  ctx.SetOut(op, "Out",
             ctx.Add1(op, "slice", {x},
                      {{"axes", axes}, {"starts", starts}, {"ends", ends}, {"steps", steps}}));
}

// meshgrid: output i broadcasts input i (1-D) along dim i of the grid.
void Meshgrid(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> xs = ctx.Ins(op, "X");
  Shape grid;
  for (ir::Value* x : xs) {
    if (x->rank() > 1) ctx.Invalid(op, "input {} is not 1-D", ShapeToString(x->shape()));
    grid.push_back(x->rank() == 0 ? 1 : x->shape()[0]);
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    Shape s(xs.size(), 1);
    s[i] = grid[i];
    ir::Value* v = ctx.Reshape(op, xs[i], s);
    ctx.SetOut(op, "Out", ctx.Add1(op, "expand", {v}, {{"shape", std::vector<int64_t>(grid)}}), i);
  }
}

// unstack: split into size-1 pieces along `axis`, then drop that dim.
// unstack (slot Y) and unbind (slot Out): the pieces along axis, that dim
// dropped.
void Unstack(TranslateContext& ctx, const OpDesc& op, const char* slot) {
  ir::Value* x = ctx.In(op, "X");
  int64_t axis = op.attrs.Int("axis", 0);
  int n = NormalizeAxis(axis, x->rank());
  if (n < 0) ctx.Invalid(op, "axis {} out of range for rank {}", axis, x->rank());
  int64_t dim = x->shape()[n];
  int64_t num = op.attrs.Int("num", dim);
  if (num != dim) ctx.Invalid(op, "num = {} but dim {} is {}", num, axis, dim);
  Shape piece = x->shape();
  piece.erase(piece.begin() + n);
  if (dim == 1) {
    ctx.SetOut(op, slot, ctx.Reshape(op, x, piece));
    return;
  }
  ir::Op* s =
      ctx.AddOp(op, "split", {x},
                {{"axis", static_cast<int64_t>(n)}, {"sections", std::vector<int64_t>(dim, 1)}});
  for (int64_t i = 0; i < dim; ++i) ctx.SetOut(op, slot, ctx.Reshape(op, s->outputs[i], piece), i);
}

void OneHot(TranslateContext& ctx, const OpDesc& op, bool v2) {
  ir::Value* ids = ctx.In(op, "X");
  int64_t depth = op.attrs.Int("depth", -1);
  if (ir::Value* t = ctx.InOpt(op, "depth_tensor")) depth = ctx.ConstInt(op, t);
  if (depth < 0) ctx.Invalid(op, "depth = {} (must be >= 0)", depth);
  if (!v2) {
    // one_hot (v1) takes ids of shape [..., 1].
    if (ids->rank() == 0 || ids->shape().back() != 1)
      ctx.Invalid(op, "ids must end in a dim of 1, got {}", ShapeToString(ids->shape()));
    Shape s = ids->shape();
    s.pop_back();
    ids = ctx.Reshape(op, ids, s);
  }
  DType dt = DType::kF32;
  if (op.attrs.Has("dtype")) dt = PaddleAttrDType(ctx, op, "dtype");
  ctx.SetOut(op, "Out",
             ctx.Add1(op, "one_hot", {ids},
                      {{"depth", depth},
                       {"dtype", std::string(DTypeName(dt))},
                       {"allow_out_of_range", op.attrs.Bool("allow_out_of_range", false)}}));
}

// Whether output `slot` of `op` is read by a later op or fetched.
bool OutputUsed(TranslateContext& ctx, const OpDesc& op, const std::string& slot) {
  const auto& names = op.Outputs(slot);
  if (names.empty()) return false;
  const Program& prog = ctx.program();
  for (const std::string& f : prog.fetch_names) {
    if (f == names[0]) return true;
  }
  for (const OpDesc& other : prog.ops) {
    if (&other == &op) continue;
    for (const auto& [slot_name, args] : other.inputs) {
      for (const std::string& n : args) {
        if (n == names[0]) return true;
      }
    }
  }
  return false;
}

// Adds a top_k/argsort op with only the outputs the program reads (the
// values when neither is read, so the op stays well-formed).
void AddSortOp(TranslateContext& ctx, const OpDesc& op, const std::string& type, ir::AttrMap a) {
  bool values = OutputUsed(ctx, op, "Out"), indices = OutputUsed(ctx, op, "Indices");
  if (!indices) values = true;
  a.Set("values", values);
  a.Set("indices", indices);
  ir::Op* t = ctx.AddOp(op, type, {ctx.In(op, "X")}, std::move(a));
  if (values) ctx.SetOut(op, "Out", t->outputs[0]);
  if (indices) ctx.SetOut(op, "Indices", t->outputs[values ? 1 : 0]);
}

void TopK(TranslateContext& ctx, const OpDesc& op, bool v2) {
  ir::Value* x = ctx.In(op, "X");
  int64_t k = op.attrs.Int("k", 1);
  if (ir::Value* t = ctx.InOpt(op, "K")) k = ctx.ConstInt(op, t);
  int64_t axis = v2 ? op.attrs.Int("axis", -1) : -1;
  bool largest = v2 ? op.attrs.Bool("largest", true) : true;
  bool sorted = v2 ? op.attrs.Bool("sorted", true) : true;
  int rank = std::max(x->rank(), 1);
  if (NormalizeAxis(axis, rank) < 0)
    ctx.Invalid(op, "axis {} out of range for rank {}", axis, rank);
  int64_t dim = x->rank() == 0 ? 1 : x->shape()[NormalizeAxis(axis, rank)];
  if (k < 0 || k > dim) ctx.Invalid(op, "k = {} out of range for dim {}", k, dim);
  AddSortOp(ctx, op, "top_k", {{"k", k}, {"axis", axis}, {"largest", largest}, {"sorted", sorted}});
}

void Argsort(TranslateContext& ctx, const OpDesc& op) {
  // `stable` needs no handling: the kernel's sort is always stable.
  AddSortOp(
      ctx, op, "argsort",
      {{"axis", op.attrs.Int("axis", -1)}, {"descending", op.attrs.Bool("descending", false)}});
}

void Random(TranslateContext& ctx, const OpDesc& op, bool normal) {
  auto shape = IntsFrom(ctx, op, "shape", "ShapeTensor", "ShapeTensorList");
  DType dt = DType::kF32;
  if (op.attrs.Has("dtype")) dt = PaddleAttrDType(ctx, op, "dtype");
  if (dt != DType::kF32 && dt != DType::kF64)
    ctx.Unsupported(op, "dtype = {} (float32 and float64 are supported)", DTypeName(dt));
  int64_t seed = op.attrs.Int("seed", 0);
  if (seed == 0) {
    uint64_t base = ctx.random_seed() ? ctx.random_seed() : kDefaultSeed;
    seed = static_cast<int64_t>(base + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(op.index + 1));
  }
  ir::AttrMap a{{"shape", shape}, {"dtype", std::string(DTypeName(dt))}, {"seed", seed}};
  if (normal) {
    a.Set("mean", op.attrs.Float("mean", 0.0));
    a.Set("std", op.attrs.Float("std", 1.0));
  } else {
    if (op.attrs.Int("diag_num", 0) != 0)
      ctx.Unsupported(op, "diag_num = {} (only 0 is supported)", op.attrs.Int("diag_num", 0));
    double lo = op.attrs.Float("min", -1.0), hi = op.attrs.Float("max", 1.0);
    if (ir::Value* t = ctx.InOpt(op, "Min")) lo = ctx.ConstFloat(op, t);
    if (ir::Value* t = ctx.InOpt(op, "Max")) hi = ctx.ConstFloat(op, t);
    if (hi < lo) ctx.Invalid(op, "max {} < min {}", hi, lo);
    a.Set("min", lo);
    a.Set("max", hi);
  }
  ctx.SetOut(op, "Out", ctx.Add1(op, normal ? "random_normal" : "random_uniform", {}, a));
}

const bool kRegistered = [] {
  using pir::IntArray;
  using pir::Scalar;
  using pir::T;
  // Each translator with the PIR spellings that map onto it.
  RegisterTranslator("tile", Tile, {"expand", "reshape"});
  RegisterPirOpCompat("tile",
                      {"tile",
                       {T("X"), IntArray("repeat_times", "RepeatTimes", "repeat_times_tensor")},
                       {"Out"},
                       {},
                       {}});
  RegisterTranslator("expand", ExpandV1, {"expand", "reshape"});
  RegisterTranslator("flip", Flip, {"slice"});
  RegisterPirOpCompat("flip", pir::Unary("flip"));
  RegisterTranslator("meshgrid", Meshgrid, {"expand", "reshape"});
  RegisterPirOpCompat("meshgrid", {"meshgrid", {T("X")}, {"Out"}, {}, {}});
  RegisterTranslator("unstack", [](TranslateContext& c, const OpDesc& op) { Unstack(c, op, "Y"); },
                     {"split", "reshape"});
  RegisterPirOpCompat("unstack", {"unstack", {T("X")}, {"Y"}, {}, {}});
  RegisterTranslator("unbind", [](TranslateContext& c, const OpDesc& op) { Unstack(c, op, "Out"); },
                     {"split", "reshape"});
  RegisterPirOpCompat("unbind", {"unbind", {T("X")}, {"Out"}, {}, {}});
  RegisterTranslator("one_hot", [](TranslateContext& c, const OpDesc& op) { OneHot(c, op, false); },
                     {"one_hot", "reshape"});
  RegisterTranslator("one_hot_v2",
                     [](TranslateContext& c, const OpDesc& op) { OneHot(c, op, true); },
                     {"one_hot"});
  RegisterPirOpCompat("one_hot",
                      {"one_hot_v2", {T("X"), Scalar("depth", "depth_tensor")}, {"Out"}, {}, {}});
  RegisterTranslator("top_k", [](TranslateContext& c, const OpDesc& op) { TopK(c, op, false); },
                     {"top_k"});
  RegisterTranslator("top_k_v2", [](TranslateContext& c, const OpDesc& op) { TopK(c, op, true); },
                     {"top_k"});
  RegisterPirOpCompat("topk", {"top_k_v2", {T("X"), Scalar("k", "K")}, {"Out", "Indices"}, {}, {}});
  RegisterTranslator("argsort", Argsort, {"argsort"});
  RegisterPirOpCompat("argsort", {"argsort", {T("X")}, {"Out", "Indices"}, {}, {}});
  RegisterTranslator("gaussian_random",
                     [](TranslateContext& c, const OpDesc& op) { Random(c, op, true); },
                     {"random_normal"});
  RegisterPirOpCompat(
      "gaussian",
      {"gaussian_random", {IntArray("shape", "ShapeTensor", "ShapeTensorList")}, {"Out"}, {}, {}});
  RegisterTranslator("uniform_random",
                     [](TranslateContext& c, const OpDesc& op) { Random(c, op, false); },
                     {"random_uniform"});
  RegisterPirOpCompat("uniform", {"uniform_random",
                                  {IntArray("shape", "ShapeTensor", "ShapeTensorList"),
                                   Scalar("min", "Min"), Scalar("max", "Max")},
                                  {"Out"},
                                  {},
                                  {}});
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
