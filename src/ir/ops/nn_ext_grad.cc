// Gradients of the ops in nn_ext.cc: group_norm, conv2d_transpose,
// max_pool2d_with_index, pad_nd and interp.
#include "ir/grad.h"

namespace tiller::ir {
namespace {

std::vector<int64_t> ShapeAttr(const Shape& s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

Value* Reshape(GradContext& c, Value* v, const Shape& s) {
  return c.Add("reshape", {v}, {{"shape", ShapeAttr(s)}});
}

// Sums over every dim but the channel dim 1, into `to`'s shape.
Value* SumPerChannel(GradContext& c, Value* v, const Shape& to) {
  std::vector<int64_t> axes{0};
  for (int i = 2; i < v->rank(); ++i) axes.push_back(i);
  return Reshape(c, c.Add("reduce_sum", {v}, {{"axes", axes}, {"keepdim", false}}), to);
}

// Statistics over groups of C/groups channels and all spatial positions: in
// the [N, groups, M] view the rule is layer_norm's over the last dim.
void GroupNormGrad(GradContext& c) {
  Value* x = c.input(0);
  Value* scale = c.input(1);
  Value* g = c.out_grad();
  const Shape& xs = x->shape();
  int64_t groups = c.op().attrs.Int("groups", 1);
  Shape grouped{xs[0], groups, NumElements(xs) / (xs[0] * groups)};
  AttrMap last{{"axes", std::vector<int64_t>{2}}, {"keepdim", true}};
  Value* xg = Reshape(c, x, grouped);
  Value* centered = c.Add("sub", {xg, c.Add("reduce_mean", {xg}, last)});
  Value* var = c.Add("reduce_mean", {c.Add("square", {centered})}, last);
  double eps = c.op().attrs.Float("epsilon", 1e-5);
  Value* rstd = c.Add("rsqrt", {c.Add("scale", {var}, {{"scale", 1.0}, {"bias", eps}})});
  Value* xhat = c.Add("mul", {centered, rstd});  // [N, groups, M]
  Shape per_channel(xs.size(), 1);
  per_channel[1] = xs[1];
  if (c.needs_grad(0)) {
    Value* dxhat = scale ? c.Add("mul", {g, Reshape(c, scale, per_channel)}) : g;
    Value* d = Reshape(c, dxhat, grouped);
    Value* m1 = c.Add("reduce_mean", {d}, last);
    Value* m2 = c.Add("reduce_mean", {c.Add("mul", {d, xhat})}, last);
    Value* inner = c.Add("sub", {c.Add("sub", {d, m1}), c.Add("mul", {xhat, m2})});
    c.SetInputGrad(0, Reshape(c, c.Add("mul", {rstd, inner}), xs));
  }
  if (scale && c.needs_grad(1))
    c.SetInputGrad(1, SumPerChannel(c, c.Add("mul", {g, Reshape(c, xhat, xs)}), scale->shape()));
  if (c.input(2) && c.needs_grad(2)) c.SetInputGrad(2, SumPerChannel(c, g, c.input(2)->shape()));
}

// conv2d_transpose(x, w) is the adjoint of conv2d(., w) with the same window:
// dx = conv2d(dy, w) and dw is conv2d's filter gradient with input dy and
// output gradient x.
void ConvTransposeGrad(GradContext& c) {
  Value* x = c.input(0);
  Value* w = c.input(1);
  Value* g = c.out_grad();
  AttrMap win;
  for (const char* n : {"strides", "pads", "dilations", "groups"}) {
    if (const Attribute* v = c.op().attrs.Find(n)) win.Set(n, *v);
  }
  if (c.needs_grad(0)) c.SetInputGrad(0, c.Add("conv2d", {g, w}, win));
  if (c.needs_grad(1)) {
    AttrMap a = win;
    a.Set("filter_shape", ShapeAttr(w->shape()));
    c.SetInputGrad(1, c.Add("conv2d_grad_filter", {g, x}, a));
  }
  if (c.input(2) && c.needs_grad(2)) c.SetInputGrad(2, SumPerChannel(c, g, c.input(2)->shape()));
}

void MaxPoolWithIndexGrad(GradContext& c) {
  Value* g = c.out_grad(0);
  if (!g) return;
  Value* mask = c.op().outputs.size() > 1 ? c.output(1) : nullptr;
  if (!mask) {  // the forward dropped its mask: pool again to get it
    AttrMap a = c.op().attrs;
    a.Set("with_mask", true);
    mask = c.graph()
               .AddOp("max_pool2d_with_index", {c.input(0)}, a, c.op().name + ".grad")
               ->outputs[1];
  }
  c.SetInputGrad(0, c.Add("max_pool2d_with_index_grad", {mask, g},
                          {{"input_shape", ShapeAttr(c.input(0)->shape())}}));
}

// Constant padding's adjoint crops what it added and pads with zeros what
// it cropped (negative pads): pad_nd with negated pads. The other modes read
// some inputs several times: pad_nd_grad sums those reads.
void PadGrad(GradContext& c) {
  std::string mode = c.op().attrs.Str("mode", "constant");
  std::vector<int64_t> pads = c.op().attrs.Ints("pads");
  if (mode != "constant") {
    c.SetInputGrad(
        0,
        c.Add("pad_nd_grad", {c.out_grad()},
              {{"pads", pads}, {"mode", mode}, {"input_shape", ShapeAttr(c.input(0)->shape())}}));
    return;
  }
  for (int64_t& p : pads) p = -p;
  c.SetInputGrad(0, c.Add("pad_nd", {c.out_grad()},
                          {{"pads", pads}, {"mode", std::string("constant")}, {"value", 0.0}}));
}

// interp is linear in x: its gradient scatters dy back through the same taps.
void InterpGrad(GradContext& c) {
  AttrMap a = c.op().attrs;
  a.Set("input_shape", ShapeAttr(c.input(0)->shape()));
  c.SetInputGrad(0, c.Add("interp_grad", {c.out_grad()}, a));
}

const bool kRegistered = [] {
  RegisterGrad("group_norm", GroupNormGrad);
  RegisterGrad("conv2d_transpose", ConvTransposeGrad);
  RegisterGrad("max_pool2d_with_index", MaxPoolWithIndexGrad);
  RegisterGrad("pad_nd", PadGrad);
  RegisterGrad("interp", InterpGrad);
  return true;
}();

}  // namespace
}  // namespace tiller::ir
