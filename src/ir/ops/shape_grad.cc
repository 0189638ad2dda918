// Gradients of data-movement ops and reductions.
#include <numeric>

#include "ir/grad.h"
#include "ir/ops/op_helpers.h"

namespace tiller::ir {
namespace {

std::vector<int64_t> ShapeAttr(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

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
    c.SetInputGrad(0, c.Add("reshape", {c.out_grad()}, {{"shape", ShapeAttr(c.input(0)->shape())}}));
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
  return true;
}();

}  // namespace
}  // namespace tiller::ir
