// Gradients of data-movement ops, reductions and cumsum (scan.cc).
#include <numeric>

#include "ir/grad.h"
#include "ir/ops/op_helpers.h"

namespace tiller::ir {
namespace {

std::vector<int64_t> ShapeAttr(const Shape& s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

// Gradient of a reduction's output, broadcast back over the input's shape.
Value* Unreduce(GradContext& c, Value* g) {
  const Shape& in = c.input(0)->shape();
  std::vector<int> axes;
  ResolveAxes(c.op().attrs.Ints("axes"), static_cast<int>(in.size()), &axes);
  Value* kept = c.Add("reshape", {g}, {{"shape", ShapeAttr(ReducedShape(in, axes, true))}});
  return c.Add("expand", {kept}, {{"shape", ShapeAttr(in)}});
}

const bool kRegistered = [] {
  RegisterGrad("reshape", [](GradContext& c) {
    c.SetInputGrad(0,
                   c.Add("reshape", {c.out_grad()}, {{"shape", ShapeAttr(c.input(0)->shape())}}));
  });
  RegisterGrad("transpose", [](GradContext& c) {
    auto perm = c.op().attrs.Ints("perm");
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      inverse[NormalizeAxis(perm[i], static_cast<int>(perm.size()))] = static_cast<int64_t>(i);
    }
    c.SetInputGrad(0, c.Add("transpose", {c.out_grad()}, {{"perm", inverse}}));
  });
  RegisterGrad("expand", [](GradContext& c) {
    c.SetInputGrad(0, c.ReduceTo(c.out_grad(), c.input(0)->shape()));
  });
  RegisterGrad("reduce_sum", [](GradContext& c) { c.SetInputGrad(0, Unreduce(c, c.out_grad())); });
  RegisterGrad("reduce_mean", [](GradContext& c) {
    double n = static_cast<double>(NumElements(c.input(0)->shape())) /
               static_cast<double>(std::max<int64_t>(1, NumElements(c.output()->shape())));
    Value* g = c.Add("scale", {c.out_grad()}, {{"scale", 1.0 / n}, {"bias", 0.0}});
    c.SetInputGrad(0, Unreduce(c, g));
  });
  RegisterGrad("concat", [](GradContext& c) {
    int rank = c.output()->rank();
    int64_t axis = NormalizeAxis(c.op().attrs.Int("axis", 0), rank);
    std::vector<int64_t> sections;
    for (const Value* in : c.op().inputs) sections.push_back(in->shape()[axis]);
    Op* split = c.graph().AddOp("split", {c.out_grad()}, {{"axis", axis}, {"sections", sections}},
                                c.op().name + ".grad");
    for (size_t i = 0; i < split->outputs.size(); ++i) c.SetInputGrad(i, split->outputs[i]);
  });
  RegisterGrad("split", [](GradContext& c) {
    // Outputs nobody differentiated contribute zeros.
    std::vector<Value*> parts;
    for (size_t i = 0; i < c.op().outputs.size(); ++i) {
      Value* g = c.out_grad(i);
      if (!g) {
        Value* zero = c.Constant(0.0, c.output(i)->dtype());
        g = c.Add("expand", {zero}, {{"shape", ShapeAttr(c.output(i)->shape())}});
      }
      parts.push_back(g);
    }
    c.SetInputGrad(0, c.Add("concat", parts, {{"axis", c.op().attrs.Int("axis", 0)}}));
  });
  RegisterGrad("slice", [](GradContext& c) {
    AttrMap a;
    for (const char* n : {"axes", "starts", "ends", "steps"}) {
      if (const Attribute* v = c.op().attrs.Find(n)) a.Set(n, *v);
    }
    a.Set("input_shape", ShapeAttr(c.input(0)->shape()));
    c.SetInputGrad(0, c.Add("slice_grad", {c.out_grad()}, a));
  });
  RegisterGrad("gather", [](GradContext& c) {
    const Shape& x = c.input(0)->shape();
    int64_t axis = NormalizeAxis(c.op().attrs.Int("axis", 0), static_cast<int>(x.size()));
    c.SetInputGrad(
        0, c.Add("gather_grad", {c.input(1), c.out_grad()}, {{"axis", axis}, {"dim", x[axis]}}));
  });
  // max/min: every input equal to the result gets the gradient (ties
  // included), as Paddle's reduce_max/min gradients.
  for (const char* op : {"reduce_max", "reduce_min"}) {
    RegisterGrad(op, [](GradContext& c) {
      Value* x = c.input(0);
      Value* hit = c.Add("equal", {x, Unreduce(c, c.output())});
      Value* mask = c.Add("cast", {hit}, {{"dtype", std::string(DTypeName(x->dtype()))}});
      c.SetInputGrad(0, c.Add("mul", {Unreduce(c, c.out_grad()), mask}));
    });
  }
  // cumsum's adjoint sums the other way: a cumsum with `reverse` flipped.
  RegisterGrad("cumsum", [](GradContext& c) {
    AttrMap a = c.op().attrs;
    a.Set("reverse", !c.op().attrs.Bool("reverse", false));
    c.SetInputGrad(0, c.Add("cumsum", {c.out_grad()}, a));
  });
  RegisterGrad("reduce_prod", [](GradContext& c) {  // g prod / x (Paddle's; undefined at x = 0)
    Value* ratio = c.Add("div", {Unreduce(c, c.output()), c.input(0)});
    c.SetInputGrad(0, c.Add("mul", {Unreduce(c, c.out_grad()), ratio}));
  });
  return true;
}();

}  // namespace
}  // namespace tiller::ir
