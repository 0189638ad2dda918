// Gradients of matmul and linear. With C = op(A) op(B) (op = optional
// transpose of the last two dims):
//   no transposes: dA = dC B^T,        dB = A^T dC
//   A transposed:  dA = B dC^T,        dB = A dC
//   B transposed:  dA = dC B,          dB = dC^T A
//   both:          dA = B^T dC^T,      dB = dC^T A^T
// Broadcast batch dims are summed back by ReduceTo.
#include "ir/grad.h"

namespace tiller::ir {
namespace {

Value* Mm(GradContext& c, Value* a, Value* b, bool ta, bool tb) {
  return c.Add("matmul", {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}});
}

void MatmulGrad(GradContext& c) {
  Value* a = c.input(0);
  Value* b = c.input(1);
  Value* g = c.out_grad();
  double alpha = c.op().attrs.Float("alpha", 1.0);
  if (alpha != 1.0) g = c.Add("scale", {g}, {{"scale", alpha}, {"bias", 0.0}});
  bool ta = c.op().attrs.Bool("transpose_a", false), tb = c.op().attrs.Bool("transpose_b", false);
  if (c.needs_grad(0)) {
    Value* da = !ta ? (!tb ? Mm(c, g, b, false, true) : Mm(c, g, b, false, false))
                    : (!tb ? Mm(c, b, g, false, true) : Mm(c, b, g, true, true));
    c.SetInputGrad(0, c.ReduceTo(da, a->shape()));
  }
  if (c.needs_grad(1)) {
    Value* db = !tb ? (!ta ? Mm(c, a, g, true, false) : Mm(c, a, g, false, false))
                    : (!ta ? Mm(c, g, a, true, false) : Mm(c, g, a, true, true));
    c.SetInputGrad(1, c.ReduceTo(db, b->shape()));
  }
}

// linear(x[..., K], W[K, N], b[N]): the rows of x are independent samples.
void LinearGrad(GradContext& c) {
  if (c.op().attrs.Has("activation"))
    Fail(ErrorKind::kInternal, "linear ({}) with a fused activation reached autodiff", c.op().name);
  Value* x = c.input(0);
  Value* w = c.input(1);
  Value* g = c.out_grad();
  int64_t k = w->shape()[0], n = w->shape()[1];
  int64_t m = NumElements(x->shape()) / k;
  Value* g2 = c.Add("reshape", {g}, {{"shape", std::vector<int64_t>{m, n}}});
  if (c.needs_grad(0)) c.SetInputGrad(0, Mm(c, g, w, false, true));
  if (c.needs_grad(1)) {
    Value* x2 = c.Add("reshape", {x}, {{"shape", std::vector<int64_t>{m, k}}});
    c.SetInputGrad(1, Mm(c, x2, g2, true, false));
  }
  if (c.input(2) && c.needs_grad(2)) {
    Value* db = c.Add("reduce_sum", {g2}, {{"axes", std::vector<int64_t>{0}}, {"keepdim", false}});
    c.SetInputGrad(2, c.ReduceTo(db, c.input(2)->shape()));
  }
}

TILLER_REGISTER_GRAD("matmul", MatmulGrad);
TILLER_REGISTER_GRAD("linear", LinearGrad);

}  // namespace
}  // namespace tiller::ir
