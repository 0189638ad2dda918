// Loss ops (forward, as Paddle computes them in inference/eval programs) and
// their gradient rules. Attributes (defaults after =):
//   cross_entropy(prob, label) {axis = -1, soft_label = false, ignore_index =
//     -100, match = false, log_input = false}:
//     -log(prob) picked by a hard label (0 where ignored) or summed against
//     a soft label, with log(0) read as -1e20 (Paddle's "tolerable value").
//     The output has prob's shape with dim `axis` = 1; hard labels are
//     int32/int64 of that shape, soft labels are float of prob's shape.
//     match = true outputs the picked probability instead (cross_entropy2's
//     MatchX). log_input = true takes log-probabilities (log_softmax) and
//     uses them as they are: training translates softmax_with_cross_entropy
//     that way, so the gradient (softmax - onehot) stays finite where a
//     probability underflows. Ops have one output each: softmax is the
//     softmax op.
//   sigmoid_cross_entropy(x, label, pos_weight?) {normalize = false,
//     ignore_index = -100}
//   kldiv(x, target) {log_target = false}: elementwise; reductions are
//     separate ops
//   bce(x, label) {}; huber(x, y){delta = 1} (the residual y - x is a sub op)
//   rank_loss(label, left, right) {}
//   ctc_loss(logits [T, B, C], label [B, L] int, logits_length? [B],
//            label_length? [B]) {blank = 0} -> loss [B, 1]
// cross_entropy and sigmoid_cross_entropy differentiate through their
// gradient kernels (grad_ops.cc); the elementwise losses are a few IR ops
// each. Labels are data in every model Tiller trains, so only label
// gradients that are plain formulas exist; the others fail naming the op
// rather than returning a wrong zero.
//
// Precision: losses take logs and exponentials and sum: float32.
// Layout: cross_entropy names its class axis; the elementwise losses take
// same-shaped operands (any layout they share); ctc_loss reads [T, B, C]:
// fixed.
#include "ir/grad.h"
#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"

namespace tiller::ir {
namespace {

void InferCrossEntropy(InferContext& c) {
  const TensorType& x = c.input(0);
  const TensorType& label = c.input(1);
  int rank = static_cast<int>(x.shape.size());
  int axis = NormalizeAxis(c.op().GetInt("axis"), rank);
  if (axis < 0) c.Fail("axis out of range for {}", ShapeToString(x.shape));
  if (x.dtype != DType::kF32) c.Fail("prob must be float32, got {}", DTypeName(x.dtype));
  Shape reduced = x.shape;
  reduced[axis] = 1;
  if (c.op().GetBool("soft_label")) {
    if (label.shape != x.shape || label.dtype != x.dtype)
      c.Fail("soft label {} must match prob {}", label.ToString(), x.ToString());
  } else {
    if (label.shape != reduced || (label.dtype != DType::kI64 && label.dtype != DType::kI32))
      c.Fail("hard label {} must be int32/int64 of shape {}", label.ToString(),
             ShapeToString(reduced));
  }
  c.AddOutput({x.dtype, reduced});
}

// Elementwise losses: every operand has the first one's shape and dtype.
void InferSameShape(InferContext& c) {
  const TensorType& x = c.input(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    if (c.input(i).shape != x.shape || c.input(i).dtype != x.dtype)
      c.Fail("operand {} is {}, expected {}", i, c.input(i).ToString(), x.ToString());
  }
  c.AddOutput(x);
}

void InferCtc(InferContext& c) {
  const TensorType& logits = c.input(0);
  const TensorType& label = c.input(1);
  if (logits.shape.size() != 3 || logits.dtype != DType::kF32)
    c.Fail("logits must be float32 [T, B, C], got {}", logits.ToString());
  if (label.shape.size() != 2 || label.shape[0] != logits.shape[1])
    c.Fail("label must be [B, L] with B = {}, got {}", logits.shape[1], label.ToString());
  for (size_t i = 2; i < 4; ++i) {
    if (c.has_input(i) && NumElements(c.input(i).shape) != logits.shape[1])
      c.Fail("length operand {} must have B = {} entries, got {}", i, logits.shape[1],
             c.input(i).ToString());
  }
  int64_t blank = c.op().GetInt("blank");
  if (blank < 0 || blank >= logits.shape[2])
    c.Fail("blank {} out of range for {} classes", blank, logits.shape[2]);
  c.AddOutput({logits.dtype, {logits.shape[1], 1}});
}

constexpr auto kF32 = PrecisionRule::kAlwaysF32;
constexpr auto kAgnostic = LayoutRule::kAgnostic;

const bool kSchemas = [] {
  RegisterOpSchema(WithCrossEntropyAttrs(OpSchema{"cross_entropy", 2, 2, InferCrossEntropy})
                       .Attr("match", false)
                       .Precision(kF32)
                       .Layout(LayoutRule::kAxisAttrs, {"axis"}));
  RegisterOpSchema(
      WithSigmoidCrossEntropyAttrs(OpSchema{"sigmoid_cross_entropy", 2, 3, InferSameShape})
          .Precision(kF32)
          .Layout(kAgnostic));
  RegisterOpSchema(OpSchema{"kldiv", 2, 2, InferSameShape}
                       .Attr("log_target", false)
                       .Precision(kF32)
                       .Layout(kAgnostic));
  RegisterOpSchema(
      OpSchema{"bce", 2, 2, InferSameShape}.NoAttrs().Precision(kF32).Layout(kAgnostic));
  RegisterOpSchema(
      OpSchema{"huber", 2, 2, InferSameShape}.Attr("delta", 1.0).Precision(kF32).Layout(kAgnostic));
  RegisterOpSchema(
      OpSchema{"rank_loss", 3, 3, InferSameShape}.NoAttrs().Precision(kF32).Layout(kAgnostic));
  RegisterOpSchema(OpSchema{"ctc_loss", 2, 4, InferCtc}
                       .Attr("blank", int64_t{0})
                       .Precision(kF32)
                       .Layout(LayoutRule::kFixed));
  return true;
}();

// ---- Gradient rules ----------------------------------------------------

[[noreturn]] void NoLabelGrad(const GradContext& c, size_t i) {
  Fail(ErrorKind::kUnimplemented, "{} ({}): gradient of input {} (a label) is not implemented",
       c.op().type, c.op().name, i);
}

Value* Scaled(GradContext& c, Value* x, double scale, double bias = 0.0) {
  return c.Add("scale", {x}, {{"scale", scale}, {"bias", bias}, {"bias_after_scale", true}});
}

Value* Zero(GradContext& c) {
  return c.Constant(0.0, c.out_grad()->dtype());
}

void CrossEntropyGrad(GradContext& c) {
  const Op& op = c.op();
  if (op.GetBool("match"))
    Fail(ErrorKind::kUnimplemented, "cross_entropy ({}): gradient of match = true", c.op().name);
  Value* prob = c.input(0);
  Value* label = c.input(1);
  Value* g = c.out_grad();
  if (c.needs_grad(0)) {
    AttrMap ga{{"axis", op.GetInt("axis")},
               {"soft_label", op.GetBool("soft_label")},
               {"ignore_index", op.GetInt("ignore_index")},
               {"log_input", op.GetBool("log_input")}};
    c.SetInputGrad(0, c.Add("cross_entropy_grad", {prob, label, g}, ga));
  }
  if (c.needs_grad(1)) {  // soft labels only (hard ones are integers): -g log(prob)
    Value* log_prob = op.GetBool("log_input") ? prob : c.Add("log", {prob});
    c.SetInputGrad(1, c.Add("neg", {c.Add("mul", {g, log_prob})}));
  }
}

void SigmoidCrossEntropyGrad(GradContext& c) {
  for (size_t i = 1; i < c.op().inputs.size(); ++i) {
    if (c.needs_grad(i)) NoLabelGrad(c, i);
  }
  std::vector<Value*> ins{c.input(0), c.input(1), c.out_grad()};
  if (c.input(2)) ins.push_back(c.input(2));
  AttrMap a{{"normalize", c.op().GetBool("normalize")},
            {"ignore_index", c.op().GetInt("ignore_index")}};
  c.SetInputGrad(0, c.Add("sigmoid_cross_entropy_grad", ins, a));
}

// kldiv: log_target ? exp(t) (t - x) : (t > 0 ? t (log t - x) : 0)
void KLDivGrad(GradContext& c) {
  Value* x = c.input(0);
  Value* t = c.input(1);
  Value* g = c.out_grad();
  bool log_target = c.op().GetBool("log_target");
  Value* positive = log_target ? nullptr : c.Add("greater", {t, Zero(c)});
  if (c.needs_grad(0)) {
    Value* w = log_target ? c.Add("exp", {t}) : t;
    Value* dx = c.Add("neg", {c.Add("mul", {g, w})});
    if (!log_target) dx = c.Add("where", {positive, dx, Zero(c)});
    c.SetInputGrad(0, dx);
  }
  if (c.needs_grad(1)) {
    Value* dt;
    if (log_target) {  // exp(t) (t - x + 1)
      dt = c.Add("mul", {c.Add("exp", {t}), Scaled(c, c.Add("sub", {t, x}), 1.0, 1.0)});
    } else {  // log t + 1 - x where t > 0
      dt = c.Add("where",
                 {positive, Scaled(c, c.Add("sub", {c.Add("log", {t}), x}), 1.0, 1.0), Zero(c)});
    }
    c.SetInputGrad(1, c.Add("mul", {g, dt}));
  }
}

// bce = (l - 1) max(log(1 - x), -100) - l max(log x, -100).
// dx = g (x - l) / max(x (1 - x), 1e-12), Paddle's form.
void BCEGrad(GradContext& c) {
  Value* x = c.input(0);
  Value* l = c.input(1);
  Value* g = c.out_grad();
  DType dt = x->dtype();
  if (c.needs_grad(0)) {
    Value* denom =
        c.Add("max", {c.Add("mul", {x, Scaled(c, x, -1.0, 1.0)}), c.Constant(1e-12, dt)});
    c.SetInputGrad(0, c.Add("div", {c.Add("mul", {g, c.Add("sub", {x, l})}), denom}));
  }
  if (c.needs_grad(1)) {  // max(log(1 - x), -100) - max(log x, -100)
    Value* floor = c.Constant(-100.0, dt);
    Value* t1 = c.Add("max", {c.Add("log", {x}), floor});
    Value* t2 = c.Add("max", {c.Add("log", {Scaled(c, x, -1.0, 1.0)}), floor});
    c.SetInputGrad(1, c.Add("mul", {g, c.Add("sub", {t2, t1})}));
  }
}

// huber(x, y) on r = y - x: d/dr = clip(r, -delta, delta).
void HuberGrad(GradContext& c) {
  double delta = c.op().GetFloat("delta");
  Value* r = c.Add("sub", {c.input(1), c.input(0)});
  Value* dr = c.Add("mul", {c.out_grad(), c.Add("clip", {r}, {{"min", -delta}, {"max", delta}})});
  if (c.needs_grad(0)) c.SetInputGrad(0, c.Add("neg", {dr}));
  if (c.needs_grad(1)) c.SetInputGrad(1, dr);
}

// rank_loss(label, left, right) = log(1 + exp(d)) - label d, d = left - right.
void RankLossGrad(GradContext& c) {
  Value* g = c.out_grad();
  Value* d = c.Add("sub", {c.input(1), c.input(2)});
  Value* dd = c.Add("mul", {g, c.Add("sub", {c.Add("sigmoid", {d}), c.input(0)})});
  if (c.needs_grad(0)) c.SetInputGrad(0, c.Add("neg", {c.Add("mul", {g, d})}));
  if (c.needs_grad(1)) c.SetInputGrad(1, dd);
  if (c.needs_grad(2)) c.SetInputGrad(2, c.Add("neg", {dd}));
}

const bool kRules = [] {
  RegisterGrad("cross_entropy", CrossEntropyGrad);
  RegisterGrad("sigmoid_cross_entropy", SigmoidCrossEntropyGrad);
  RegisterGrad("kldiv", KLDivGrad);
  RegisterGrad("bce", BCEGrad);
  RegisterGrad("huber", HuberGrad);
  RegisterGrad("rank_loss", RankLossGrad);
  return true;
}();

}  // namespace
}  // namespace tiller::ir
