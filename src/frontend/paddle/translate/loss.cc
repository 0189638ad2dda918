// Paddle loss ops (forward, as in inference/eval programs): the
// cross-entropy family, sigmoid/binary cross entropy, KL divergence, huber,
// rank, CTC (warpctc) and identity_loss. Each maps onto one IR loss op from
// ir/ops/loss.cc plus, where Paddle reduces, the IR reductions.
#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"

namespace tiller::paddle {
namespace {

using pir::T;

ir::Value* ReduceAll(TranslateContext& ctx, const OpDesc& op, const char* type, ir::Value* x) {
  return ctx.Add1(op, type, {x}, {{"axes", std::vector<int64_t>{}}, {"keepdim", false}});
}

// Brings a hard label to logits' shape with dim `axis` = 1 (Paddle also
// accepts the label without that dim).
ir::Value* HardLabel(TranslateContext& ctx, const OpDesc& op, ir::Value* label, const Shape& logits,
                     int axis) {
  Shape want = logits;
  want[axis] = 1;
  if (label->shape() == want) return label;
  if (NumElements(label->shape()) != NumElements(want))
    ctx.Invalid(op, "label {} does not fit logits {} (expected {})", label->type.ToString(),
                ShapeToString(logits), ShapeToString(want));
  return ctx.Reshape(op, label, want);
}

// -log(prob) against the label; `match` gives the picked probability.
ir::Value* CrossEntropy(TranslateContext& ctx, const OpDesc& op, ir::Value* prob, ir::Value* label,
                        int axis, bool soft, int64_t ignore, bool match = false,
                        bool log_input = false) {
  if (!soft) label = HardLabel(ctx, op, label, prob->shape(), axis);
  return ctx.Add1(op, "cross_entropy", {prob, label},
                  {{"axis", int64_t{axis}},
                   {"soft_label", soft},
                   {"ignore_index", ignore},
                   {"match", match},
                   {"log_input", log_input}});
}

int Axis(TranslateContext& ctx, const OpDesc& op, const ir::Value* x, int64_t axis) {
  int a = NormalizeAxis(axis, x->rank());
  if (a < 0) ctx.Unsupported(op, "axis = {} out of range for rank {}", axis, x->rank());
  return a;
}

void SoftmaxWithCrossEntropy(TranslateContext& ctx, const OpDesc& op) {
  // numeric_stable_mode only selects a GPU algorithm; the CPU result is the
  // same. Paddle's CPU kernel takes the log of the softmax it outputs, whose
  // shifted logits it clips at -64: log_softmax does the same (each
  // sample's loss stops near 64), and its gradient is softmax - label with
  // no division by a probability that can underflow to 0 (Paddle's fused
  // gradient is the same expression).
  ir::Value* x = ctx.In(op, "Logits");
  int axis = Axis(ctx, op, x, op.attrs.Int("axis", -1));
  if (op.attrs.Bool("use_softmax", true)) {
    ir::Value* log_prob = ctx.Add1(op, "log_softmax", {x}, {{"axis", int64_t{axis}}});
    ctx.SetOut(op, "Softmax", ctx.Add1(op, "exp", {log_prob}));
    ctx.SetOut(op, "Loss",
               CrossEntropy(ctx, op, log_prob, ctx.In(op, "Label"), axis,
                            op.attrs.Bool("soft_label", false), op.attrs.Int("ignore_index", -100),
                            false, /*log_input=*/true));
    return;
  }
  ctx.SetOut(op, "Softmax", x);
  ctx.SetOut(op, "Loss",
             CrossEntropy(ctx, op, x, ctx.In(op, "Label"), axis, op.attrs.Bool("soft_label", false),
                          op.attrs.Int("ignore_index", -100)));
}

// cross_entropy / cross_entropy2 take probabilities over the last axis.
void CrossEntropyProb(TranslateContext& ctx, const OpDesc& op) {
  bool soft = op.type == "cross_entropy" && op.attrs.Bool("soft_label", false);
  ir::Value* x = ctx.In(op, "X");
  ir::Value* label = ctx.In(op, "Label");
  int axis = x->rank() - 1;
  int64_t ignore = op.attrs.Int("ignore_index", -100);
  ctx.SetOut(op, "Y", CrossEntropy(ctx, op, x, label, axis, soft, ignore));
  if (ctx.HasOut(op, "MatchX"))
    ctx.SetOut(op, "MatchX", CrossEntropy(ctx, op, x, label, axis, soft, ignore, true));
  // XShape only carries X's shape for the gradient; inference never reads it.
}

void SigmoidCrossEntropy(TranslateContext& ctx, const OpDesc& op) {
  std::vector<ir::Value*> in = {ctx.In(op, "X"), ctx.In(op, "Label")};
  if (ir::Value* w = ctx.InOpt(op, "pos_weight")) in.push_back(w);
  ctx.SetOut(op, "Out",
             ctx.Add1(op, "sigmoid_cross_entropy", in,
                      {{"normalize", op.attrs.Bool("normalize", false)},
                       {"ignore_index", op.attrs.Int("ignore_index", -100)}}));
}

void KLDiv(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  std::string reduction = op.attrs.Str("reduction", "mean");
  ir::Value* out = ctx.Add1(op, "kldiv", {x, ctx.In(op, "Target")},
                            {{"log_target", op.attrs.Bool("log_target", false)}});
  if (reduction == "none") {
  } else if (reduction == "sum") {
    out = ReduceAll(ctx, op, "reduce_sum", out);
  } else if (reduction == "mean") {
    out = ReduceAll(ctx, op, "reduce_mean", out);
  } else if (reduction == "batchmean") {
    out = ReduceAll(ctx, op, "reduce_sum", out);
    int64_t n = x->rank() > 0 ? x->shape()[0] : 1;
    if (n > 0)
      out = ctx.Add1(op, "div", {out, ctx.ConstScalar(static_cast<double>(n), DType::kF32)});
  } else {
    ctx.Unsupported(op, "reduction = '{}' (none, batchmean, mean, sum)", reduction);
  }
  ctx.SetOut(op, "Loss", out);
}

void IdentityLoss(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  int64_t r = op.attrs.Int("reduction", 1);
  ir::Value* out;
  if (r == 0)
    out = ReduceAll(ctx, op, "reduce_sum", x);
  else if (r == 1)
    out = ReduceAll(ctx, op, "reduce_mean", x);
  else if (r == 2)
    out = x;
  else
    ctx.Unsupported(op, "reduction = {} (0 sum, 1 mean, 2 none)", r);
  ctx.SetOut(op, "Out", out);
}

void Huber(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  ir::Value* y = ctx.In(op, "Y");
  ctx.SetOut(op, "Out", ctx.Add1(op, "huber", {x, y}, {{"delta", op.attrs.Float("delta", 1.0)}}));
  ctx.SetOut(op, "Residual", ctx.Add1(op, "sub", {y, x}));
}

void WarpCtc(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* logits = ctx.In(op, "Logits");
  ir::Value* tlen = ctx.InOpt(op, "LogitsLength");
  ir::Value* llen = ctx.InOpt(op, "LabelLength");
  if (!tlen || !llen || logits->rank() != 3)
    ctx.Unsupported(op,
                    "LoD (unpadded) input: Tiller needs Logits [T, B, C] with LogitsLength "
                    "and LabelLength");
  // norm_by_times scales only the gradient (WarpCTCGrad); the loss is unchanged.
  ir::Value* label = ctx.In(op, "Label");
  if (label->rank() == 3 && label->shape()[2] == 1)
    label = ctx.Reshape(op, label, {label->shape()[0], label->shape()[1]});
  // WarpCTCGrad is the gradient buffer for training; inference never reads it.
  ctx.SetOut(
      op, "Loss",
      ctx.Add1(op, "ctc_loss", {logits, label, tlen, llen}, {{"blank", op.attrs.Int("blank", 0)}}));
}

const bool kRegistered = [] {
  RegisterTranslator("softmax_with_cross_entropy", SoftmaxWithCrossEntropy,
                     {"log_softmax", "exp", "cross_entropy", "reshape"});
  RegisterPirOpCompat(
      "cross_entropy_with_softmax",
      {"softmax_with_cross_entropy", {T("Logits"), T("Label")}, {"Softmax", "Loss"}, {}, {}});
  RegisterTranslator("cross_entropy", CrossEntropyProb, {"cross_entropy", "reshape"});
  RegisterTranslator("cross_entropy2", CrossEntropyProb, {"cross_entropy", "reshape"});
  RegisterTranslator("sigmoid_cross_entropy_with_logits", SigmoidCrossEntropy,
                     {"sigmoid_cross_entropy"});
  RegisterPirOpCompat("sigmoid_cross_entropy_with_logits", {"sigmoid_cross_entropy_with_logits",
                                                            {T("X"), T("Label"), T("pos_weight")},
                                                            {"Out"},
                                                            {},
                                                            {}});
  RegisterTranslator("kldiv_loss", KLDiv, {"kldiv", "reduce_sum", "reduce_mean", "div"});
  RegisterPirOpCompat("kldiv_loss", {"kldiv_loss", {T("X"), T("Target")}, {"Loss"}, {}, {}});
  RegisterTranslator("bce_loss",
                     [](TranslateContext& c, const OpDesc& op) {
                       c.SetOut(op, "Out", c.Add1(op, "bce", {c.In(op, "X"), c.In(op, "Label")}));
                     },
                     {"bce"});
  RegisterPirOpCompat("bce_loss", {"bce_loss", {T("X"), T("Label")}, {"Out"}, {}, {}});
  RegisterTranslator("huber_loss", Huber, {"huber", "sub"});
  RegisterPirOpCompat("huber_loss", {"huber_loss", {T("X"), T("Y")}, {"Out", "Residual"}, {}, {}});
  RegisterTranslator(
      "rank_loss",
      [](TranslateContext& c, const OpDesc& op) {
        c.SetOut(op, "Out",
                 c.Add1(op, "rank_loss", {c.In(op, "Label"), c.In(op, "Left"), c.In(op, "Right")}));
      },
      {"rank_loss"});
  RegisterTranslator("warpctc", WarpCtc, {"ctc_loss", "reshape"});
  RegisterPirOpCompat("warpctc", {"warpctc",
                                  {T("Logits"), T("Label"), T("LogitsLength"), T("LabelLength")},
                                  {"Loss", "WarpCTCGrad"},
                                  {},
                                  {}});
  RegisterTranslator("identity_loss", IdentityLoss, {"reduce_sum", "reduce_mean"});
  RegisterPirOpCompat("identity_loss", {"identity_loss", {T("X")}, {"Out"}, {}, {}});
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
