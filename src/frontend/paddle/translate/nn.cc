// Paddle neural-network ops: normalization, softmax, dropout, conv, pool,
// embedding lookup, each with the PIR spellings that map onto it.
#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"

namespace tiller::paddle {
namespace {

bool IsNhwc(const OpDesc& op, const char* attr) {
  std::string f = op.attrs.Str(attr, "NCHW");
  return f == "NHWC";
}

ir::Value* ToNchw(TranslateContext& ctx, const OpDesc& op, ir::Value* x) {
  return ctx.Add1(op, "transpose", {x}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
}
ir::Value* ToNhwc(TranslateContext& ctx, const OpDesc& op, ir::Value* x) {
  return ctx.Add1(op, "transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
}

void LayerNorm(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  std::vector<ir::Value*> ins{x, ctx.InOpt(op, "Scale"), ctx.InOpt(op, "Bias")};
  while (!ins.empty() && !ins.back()) ins.pop_back();
  ir::AttrMap a{{"axis", op.attrs.Int("begin_norm_axis", 1)},
                {"epsilon", op.attrs.Float("epsilon", 1e-5)}};
  ctx.SetOut(op, "Y", ctx.Add1(op, "layer_norm", ins, a));
}

void Softmax(TranslateContext& ctx, const OpDesc& op, const char* ir_type) {
  ir::AttrMap a{{"axis", op.attrs.Int("axis", -1)}};
  ctx.SetOut(op, "Out", ctx.Add1(op, ir_type, {ctx.In(op, "X")}, a));
}

// Seed of a random training op: Paddle's own when fix_seed pins it (or a
// constant Seed operand), else one derived from the `random_seed` option (or
// a fixed default) and the op's position, so two dropouts draw differently.
int64_t DropoutSeed(TranslateContext& ctx, const OpDesc& op) {
  if (ir::Value* t = ctx.InOpt(op, "Seed")) return ctx.ConstInt(op, t);
  int64_t seed = op.attrs.Int("seed", 0);
  if (op.attrs.Bool("fix_seed", false) && seed != 0) return seed;
  constexpr uint64_t kDefaultSeed = 0xd50b0e7a11ull;
  uint64_t base = ctx.random_seed() ? ctx.random_seed() : kDefaultSeed;
  return static_cast<int64_t>(base + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(op.index + 1));
}

// Inference: "upscale_in_train" is the identity; the older
// "downgrade_in_infer" scales by the keep probability. Training (is_test =
// false): the dropout op draws a mask per step (ir/ops/training.cc).
void Dropout(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  std::string impl = op.attrs.Str("dropout_implementation", "downgrade_in_infer");
  double p = op.attrs.Float("dropout_prob", 0.5);
  if (ir::Value* t = ctx.InOpt(op, "DropoutProbTensor")) p = ctx.ConstFloat(op, t);
  if (ctx.training() && !op.attrs.Bool("is_test", false)) {
    if (impl != "upscale_in_train" && impl != "downgrade_in_infer")
      ctx.Unsupported(op, "dropout_implementation = \"{}\"", impl);
    if (!(p >= 0.0 && p <= 1.0)) ctx.Invalid(op, "dropout_prob = {} is not in [0, 1]", p);
    if (p == 0.0) {  // keeps everything; Mask (all ones) only feeds Paddle's own backward
      ctx.SetOut(op, "Out", x);
      return;
    }
    ir::Op* d = ctx.AddOp(op, "dropout", {x, ctx.StepCounter()},
                          {{"p", p}, {"mode", impl}, {"seed", DropoutSeed(ctx, op)}});
    ctx.SetOut(op, "Out", d->outputs[0]);
    ctx.SetOut(op, "Mask", d->outputs[1]);
    return;
  }
  // is_test = false outside training still runs as inference, as Paddle
  // Inference does (its passes mark every op is_test).
  if (impl == "upscale_in_train" || p == 0.0) {
    ctx.SetOut(op, "Out", x);
  } else if (impl == "downgrade_in_infer") {
    ctx.SetOut(op, "Out", ctx.Add1(op, "scale", {x}, {{"scale", 1.0 - p}, {"bias", 0.0}}));
  } else {
    ctx.Unsupported(op, "dropout_implementation = \"{}\"", impl);
  }
}

void Conv2d(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "Input");
  ir::Value* w = ctx.In(op, "Filter");
  bool nhwc = IsNhwc(op, "data_format");
  if (x->rank() != 4) ctx.Invalid(op, "input must be 4-D, got {}", ShapeToString(x->shape()));
  if (w->rank() != 4)
    ctx.Invalid(op, "filter must be 4-D [out, in / groups, kh, kw], got {}",
                ShapeToString(w->shape()));
  if (nhwc) x = ToNchw(ctx, op, x);
  auto strides = op.attrs.Ints("strides", {1, 1});
  auto dil = op.attrs.Ints("dilations", {1, 1});
  // Paddle resets dilations to 1 under padding_algorithm SAME.
  if (op.attrs.Str("padding_algorithm", "EXPLICIT") == "SAME") dil = {1, 1};
  Shape k{w->shape()[2], w->shape()[3]};
  auto pads = WindowPads(ctx, op, x->shape(), k, strides, dil);
  std::vector<ir::Value*> ins{x, w};
  if (ir::Value* b = ctx.InOpt(op, "Bias")) ins.push_back(b);
  ir::Value* y = ctx.Add1(op, "conv2d", ins,
                          {{"strides", strides},
                           {"pads", pads},
                           {"dilations", dil},
                           {"groups", op.attrs.Int("groups", 1)}});
  ctx.SetOut(op, "Output", nhwc ? ToNhwc(ctx, op, y) : y);
}

void BatchNorm(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  // Channel-last inputs of any rank >= 3 (NLC, NHWC, NDHWC) move the channel
  // to dim 1 and back; for rank 2 the channel is dim 1 already.
  int r = x->rank();
  bool nhwc = IsNhwc(op, "data_layout") && r > 2;
  std::vector<int64_t> to_first{0, r - 1}, to_last{0};
  for (int i = 1; i < r - 1; ++i) to_first.push_back(i);
  for (int i = 2; i < r; ++i) to_last.push_back(i);
  to_last.push_back(1);
  if (nhwc) x = ctx.Add1(op, "transpose", {x}, {{"perm", to_first}});
  std::vector<ir::Value*> ins{x, ctx.In(op, "Scale"), ctx.In(op, "Bias"), ctx.In(op, "Mean"),
                              ctx.In(op, "Variance")};
  double eps = op.attrs.Float("epsilon", 1e-5);
  // Paddle's CPU kernel uses batch statistics unless is_test (without
  // trainable_statistics) or use_global_stats asks for the running ones.
  // Inference takes every op as is_test, as Paddle Inference does (its
  // is_test pass), so there only trainable_statistics asks for batch
  // statistics. IpuCompiledProgram sets it on the is_test = false ops of an
  // inference program it saves: Paddle's IPU build ran those with batch
  // statistics (PopART's training-mode batch norm), as Paddle's executor.
  bool is_test = !ctx.training() || op.attrs.Bool("is_test", false);
  bool test_mode = is_test && !op.attrs.Bool("trainable_statistics", false);
  ir::Value* y;
  if (!test_mode && !op.attrs.Bool("use_global_stats", false)) {
    double momentum = op.attrs.Float("momentum", 0.9);
    if (ir::Value* t = ctx.InOpt(op, "MomentumTensor")) momentum = ctx.ConstFloat(op, t);
    ir::Op* bn = ctx.AddOp(op, "batch_norm_train", ins, {{"epsilon", eps}, {"momentum", momentum}});
    y = bn->outputs[0];
    // MeanOut/VarianceOut usually name the same variables as Mean/Variance:
    // rebinding them is the running-statistics update (in inference only
    // later readers of those variables in the program see it, as in Paddle).
    ctx.SetOut(op, "MeanOut", bn->outputs[1]);
    ctx.SetOut(op, "VarianceOut", bn->outputs[2]);
    ctx.SetOut(op, "SavedMean", bn->outputs[3]);
    ctx.SetOut(op, "SavedVariance", bn->outputs[4]);
  } else {
    y = ctx.Add1(op, "batch_norm", ins, {{"epsilon", eps}});
  }
  ctx.SetOut(op, "Y", nhwc ? ctx.Add1(op, "transpose", {y}, {{"perm", to_last}}) : y);
}

void Pool2d(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  if (x->rank() != 4) ctx.Invalid(op, "input must be 4-D, got {}", ShapeToString(x->shape()));
  bool nhwc = IsNhwc(op, "data_format");
  if (nhwc) x = ToNchw(ctx, op, x);
  auto ksize = op.attrs.Ints("ksize");
  bool adaptive = op.attrs.Bool("adaptive", false);
  bool global = op.attrs.Bool("global_pooling", false);
  if (ksize.size() != 2) ctx.Unsupported(op, "ksize with {} values", ksize.size());
  std::string type = op.attrs.Str("pooling_type", "max");
  // Paddle's CPU kernel does not pool adaptive bins for max here (it slides
  // ksize windows with stride 1 over the adaptive output size); models use
  // max_pool2d_with_index for adaptive max pooling.
  if (adaptive && !global && type == "max")
    ctx.Unsupported(op, "adaptive = true with pooling_type = \"max\"");
  if (type != "max" && type != "avg") ctx.Unsupported(op, "pooling_type = \"{}\"", type);
  ir::AttrMap a{{"pooling_type", type}, {"exclusive", op.attrs.Bool("exclusive", true)}};
  if (global) {
    a.Set("ksize", std::vector<int64_t>{1, 1});
    a.Set("adaptive", true);
  } else if (adaptive) {
    a.Set("ksize", ksize);
    a.Set("adaptive", true);
  } else {
    auto strides = op.attrs.Ints("strides", {1, 1});
    a.Set("ksize", ksize);
    a.Set("strides", strides);
    a.Set("pads", WindowPads(ctx, op, x->shape(), ksize, strides, {1, 1}));
    a.Set("ceil_mode", op.attrs.Bool("ceil_mode", false));
  }
  ir::Value* y = ctx.Add1(op, "pool2d", {x}, a);
  ctx.SetOut(op, "Out", nhwc ? ToNhwc(ctx, op, y) : y);
}

void Embedding(TranslateContext& ctx, const OpDesc& op, bool squeeze_last) {
  ir::Value* ids = ctx.In(op, "Ids");
  if (squeeze_last) {
    // lookup_table (v1) takes ids of shape [..., 1].
    if (ids->rank() == 0 || ids->shape().back() != 1)
      ctx.Invalid(op, "ids must end in a dim of 1, got {}", ShapeToString(ids->shape()));
    Shape s = ids->shape();
    s.pop_back();
    ids = ctx.Reshape(op, ids, s);
  }
  ctx.SetOut(
      op, "Out",
      ctx.Add1(op, "embedding", {ctx.In(op, "W"), ids},
               {{"padding_idx", op.attrs.Int("padding_idx", -1)},
                // The table's gradient as rows. Legacy is_sparse makes it a
                // SelectedRows variable, whose rows Paddle copies from every
                // lookup, the padding id's too; PIR's sparse keeps Paddle's
                // dense gradient (zero at the padding row), which Tiller
                // still computes as rows.
                {"sparse", op.attrs.Bool("is_sparse", false) || op.attrs.Bool("sparse", false)},
                {"padding_grad", op.attrs.Bool("is_sparse", false)}}));
}

const bool kRegistered = [] {
  using pir::IntArray;
  using pir::Scalar;
  using pir::T;
  // Each translator with the PIR spellings that map onto it.
  RegisterTranslator("layer_norm", LayerNorm, {"layer_norm"});
  RegisterPirOpCompat(
      "layer_norm",
      {"layer_norm", {T("X"), T("Scale"), T("Bias")}, {"Y", "Mean", "Variance"}, {}, {}});
  RegisterTranslator("softmax",
                     [](TranslateContext& c, const OpDesc& op) { Softmax(c, op, "softmax"); },
                     {"softmax"});
  RegisterPirOpCompat("softmax", pir::Unary("softmax"));
  RegisterTranslator("log_softmax",
                     [](TranslateContext& c, const OpDesc& op) { Softmax(c, op, "log_softmax"); },
                     {"log_softmax"});
  RegisterPirOpCompat("log_softmax", pir::Unary("log_softmax"));
  RegisterTranslator("dropout", Dropout, {"scale", "dropout"});
  RegisterPirOpCompat("dropout", {"dropout",
                                  {T("X"), T("Seed"), Scalar("dropout_prob", "DropoutProbTensor")},
                                  {"Out", "Mask"},
                                  {{"mode", "dropout_implementation"}},
                                  {}});
  auto conv = [](const char* legacy) -> PirOpCompat {
    return {legacy, {T("Input"), T("Filter")}, {"Output"}, {}, {}};
  };
  RegisterTranslator("conv2d", Conv2d, {"conv2d", "transpose"});
  RegisterPirOpCompat("conv2d", conv("conv2d"));
  RegisterTranslator("depthwise_conv2d", Conv2d, {"conv2d", "transpose"});
  RegisterPirOpCompat("depthwise_conv2d", conv("depthwise_conv2d"));
  // Mapped, with no translator: translation reports it as unsupported.
  RegisterPirOpCompat("conv3d", conv("conv3d"));
  RegisterTranslator("batch_norm", BatchNorm, {"batch_norm", "batch_norm_train", "transpose"});
  const PirOpCompat batch_norm = {
      "batch_norm",
      {T("X"), T("Mean"), T("Variance"), T("Scale"), T("Bias")},
      {"Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"},
      {{"data_format", "data_layout"}},
      {}};
  RegisterPirOpCompat("batch_norm", batch_norm);
  RegisterPirOpCompat("batch_norm_", batch_norm);
  RegisterTranslator("pool2d", Pool2d, {"pool2d", "transpose"});
  RegisterPirOpCompat(
      "pool2d",
      {"pool2d", {T("X"), IntArray("ksize", "KSizeTensor", "KSizeTensorList")}, {"Out"}, {}, {}});
  RegisterTranslator("lookup_table_v2",
                     [](TranslateContext& c, const OpDesc& op) { Embedding(c, op, false); },
                     {"embedding"});
  RegisterPirOpCompat("embedding", {"lookup_table_v2", {T("Ids"), T("W")}, {"Out"}, {}, {}});
  RegisterTranslator("lookup_table",
                     [](TranslateContext& c, const OpDesc& op) { Embedding(c, op, true); },
                     {"embedding", "reshape"});
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
