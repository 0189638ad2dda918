// Gradients of the loss ops (ir/ops/loss.cc). cross_entropy and
// sigmoid_cross_entropy use their gradient kernels (grad_ops.cc); the
// elementwise losses are a few IR ops each. Labels are data in every model
// Tiller trains, so only label gradients that are plain formulas exist; the
// others fail naming the op rather than returning a wrong zero.
#include "ir/grad.h"

namespace tiller::ir {
namespace {

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
  const AttrMap& a = c.op().attrs;
  if (a.Bool("match", false))
    Fail(ErrorKind::kUnimplemented, "cross_entropy ({}): gradient of match = true", c.op().name);
  Value* prob = c.input(0);
  Value* label = c.input(1);
  Value* g = c.out_grad();
  if (c.needs_grad(0)) {
    AttrMap ga{{"axis", a.Int("axis", -1)},
               {"soft_label", a.Bool("soft_label", false)},
               {"ignore_index", a.Int("ignore_index", -100)},
               {"log_input", a.Bool("log_input", false)}};
    c.SetInputGrad(0, c.Add("cross_entropy_grad", {prob, label, g}, ga));
  }
  if (c.needs_grad(1)) {  // soft labels only (hard ones are integers): -g log(prob)
    Value* log_prob = a.Bool("log_input", false) ? prob : c.Add("log", {prob});
    c.SetInputGrad(1, c.Add("neg", {c.Add("mul", {g, log_prob})}));
  }
}

void SigmoidCrossEntropyGrad(GradContext& c) {
  for (size_t i = 1; i < c.op().inputs.size(); ++i) {
    if (c.needs_grad(i)) NoLabelGrad(c, i);
  }
  std::vector<Value*> ins{c.input(0), c.input(1), c.out_grad()};
  if (c.input(2)) ins.push_back(c.input(2));
  AttrMap a{{"normalize", c.op().attrs.Bool("normalize", false)},
            {"ignore_index", c.op().attrs.Int("ignore_index", -100)}};
  c.SetInputGrad(0, c.Add("sigmoid_cross_entropy_grad", ins, a));
}

// kldiv: log_target ? exp(t) (t - x) : (t > 0 ? t (log t - x) : 0)
void KLDivGrad(GradContext& c) {
  Value* x = c.input(0);
  Value* t = c.input(1);
  Value* g = c.out_grad();
  bool log_target = c.op().attrs.Bool("log_target", false);
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
  double delta = c.op().attrs.Float("delta", 1.0);
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

const bool kRegistered = [] {
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
