// Gradients of the binary elementwise ops. Operands broadcast, so each input
// gradient is summed back to the operand's shape (GradContext::ReduceTo).
#include "ir/grad.h"

namespace tiller::ir {
namespace {

void SetBoth(GradContext& c, Value* ga, Value* gb) {
  if (c.needs_grad(0)) c.SetInputGrad(0, c.ReduceTo(ga, c.input(0)->shape()));
  if (c.needs_grad(1)) c.SetInputGrad(1, c.ReduceTo(gb, c.input(1)->shape()));
}

// 1.0 where `cond` holds, else 0.0, in the gradient's dtype.
Value* Mask(GradContext& c, Value* cond) {
  return c.Add("cast", {cond}, {{"dtype", std::string(DTypeName(c.out_grad()->dtype()))}});
}

TILLER_REGISTER_GRAD("add", [](GradContext& c) { SetBoth(c, c.out_grad(), c.out_grad()); });
TILLER_REGISTER_GRAD("sub", [](GradContext& c) {
  SetBoth(c, c.out_grad(), c.needs_grad(1) ? c.Add("neg", {c.out_grad()}) : nullptr);
});
TILLER_REGISTER_GRAD("mul", [](GradContext& c) {
  Value* g = c.out_grad();
  SetBoth(c, c.needs_grad(0) ? c.Add("mul", {g, c.input(1)}) : nullptr,
          c.needs_grad(1) ? c.Add("mul", {g, c.input(0)}) : nullptr);
});
// d(a/b) = g/b, -g*a/b^2 = -(g*out)/b
TILLER_REGISTER_GRAD("div", [](GradContext& c) {
  Value* g = c.out_grad();
  Value* ga = c.needs_grad(0) ? c.Add("div", {g, c.input(1)}) : nullptr;
  Value* gb = c.needs_grad(1)
                  ? c.Add("neg", {c.Add("div", {c.Add("mul", {g, c.output()}), c.input(1)})})
                  : nullptr;
  SetBoth(c, ga, gb);
});
// The gradient goes to the operand that was selected (ties: the first, as Paddle).
void MinMax(GradContext& c, const char* pick_a) {
  Value* g = c.out_grad();
  Value* a_wins = Mask(c, c.Add(pick_a, {c.input(0), c.input(1)}));
  Value* ga = c.Add("mul", {g, a_wins});
  SetBoth(c, ga, c.needs_grad(1) ? c.Add("sub", {g, ga}) : nullptr);
}
TILLER_REGISTER_GRAD("max", [](GradContext& c) { MinMax(c, "greater_equal"); });
TILLER_REGISTER_GRAD("min", [](GradContext& c) { MinMax(c, "less_equal"); });

}  // namespace
}  // namespace tiller::ir
