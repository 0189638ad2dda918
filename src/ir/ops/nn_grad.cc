// Gradients of softmax, log_softmax, layer_norm and embedding, plus the
// embedding_grad op (a scatter-add of rows) that the embedding rule needs.
//   embedding_grad(ids int, dy){rows, padding_idx}: [rows, D], row r = sum of
//   dy rows whose id is r; the padding row gets no gradient.
#include "ir/grad.h"
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

std::vector<int64_t> ShapeAttr(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

void InferEmbeddingGrad(InferContext& c) {
  const TensorType& ids = c.input(0);
  const TensorType& dy = c.input(1);
  if (!IsInteger(ids.dtype)) c.Fail("ids must be integers");
  if (dy.shape.size() != ids.shape.size() + 1) c.Fail("dy must have rank ids + 1");
  int64_t rows = c.attrs().Int("rows", 0);
  if (rows <= 0) c.Fail("rows must be positive");
  c.AddOutput({dy.dtype, {rows, dy.shape.back()}});
}
TILLER_REGISTER_OP_SCHEMA(OpSchema{"embedding_grad", 2, 2, InferEmbeddingGrad});

const bool kRegistered = [] {
  RegisterGrad("softmax", [](GradContext& c) {  // y (g - sum(g y))
    Value* y = c.output();
    Value* g = c.out_grad();
    ir::AttrMap sum{{"axes", std::vector<int64_t>{c.op().attrs.Int("axis", -1)}}, {"keepdim", true}};
    Value* dot = c.Add("reduce_sum", {c.Add("mul", {g, y})}, sum);
    c.SetInputGrad(0, c.Add("mul", {y, c.Add("sub", {g, dot})}));
  });
  RegisterGrad("log_softmax", [](GradContext& c) {  // g - exp(y) sum(g)
    Value* g = c.out_grad();
    ir::AttrMap sum{{"axes", std::vector<int64_t>{c.op().attrs.Int("axis", -1)}}, {"keepdim", true}};
    Value* total = c.Add("reduce_sum", {g}, sum);
    c.SetInputGrad(0, c.Add("sub", {g, c.Add("mul", {c.Add("exp", {c.output()}), total})}));
  });
  RegisterGrad("layer_norm", [](GradContext& c) {
    // xhat = (x - mean) * rstd over dims [axis, rank); y = xhat * scale + bias.
    // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
    Value* x = c.input(0);
    int rank = x->rank();
    int axis = NormalizeAxis(c.op().attrs.Int("axis", -1), rank);
    std::vector<int64_t> inner;
    for (int i = axis; i < rank; ++i) inner.push_back(i);
    Shape inner_shape(x->shape().begin() + axis, x->shape().end());
    ir::AttrMap mean{{"axes", inner}, {"keepdim", true}};
    Value* centered = c.Add("sub", {x, c.Add("reduce_mean", {x}, mean)});
    Value* var = c.Add("reduce_mean", {c.Add("square", {centered})}, mean);
    double eps = c.op().attrs.Float("epsilon", 1e-5);
    Value* rstd = c.Add("rsqrt", {c.Add("scale", {var}, {{"scale", 1.0}, {"bias", eps}})});
    Value* xhat = c.Add("mul", {centered, rstd});
    Value* g = c.out_grad();
    Value* scale = c.input(1);
    Value* dxhat = g;
    if (scale) dxhat = c.Add("mul", {g, c.Add("reshape", {scale}, {{"shape", ShapeAttr(inner_shape)}})});
    if (c.needs_grad(0)) {
      Value* m1 = c.Add("reduce_mean", {dxhat}, mean);
      Value* m2 = c.Add("reduce_mean", {c.Add("mul", {dxhat, xhat})}, mean);
      Value* inner_term = c.Add("sub", {c.Add("sub", {dxhat, m1}), c.Add("mul", {xhat, m2})});
      c.SetInputGrad(0, c.Add("mul", {rstd, inner_term}));
    }
    // scale and bias are flat [prod(normalized dims)]: sum over the outer dims.
    auto sum_outer = [&](Value* v, const Shape& to) {
      std::vector<int64_t> outer;
      for (int i = 0; i < axis; ++i) outer.push_back(i);
      if (!outer.empty()) v = c.Add("reduce_sum", {v}, {{"axes", outer}, {"keepdim", false}});
      return c.Add("reshape", {v}, {{"shape", ShapeAttr(to)}});
    };
    if (scale && c.needs_grad(1)) c.SetInputGrad(1, sum_outer(c.Add("mul", {g, xhat}), scale->shape()));
    if (c.input(2) && c.needs_grad(2)) c.SetInputGrad(2, sum_outer(g, c.input(2)->shape()));
  });
  RegisterGrad("embedding", [](GradContext& c) {
    Value* table = c.input(0);
    c.SetInputGrad(0, c.Add("embedding_grad", {c.input(1), c.out_grad()},
                            {{"rows", table->shape()[0]},
                             {"padding_idx", c.op().attrs.Int("padding_idx", -1)}}));
  });
  return true;
}();

}  // namespace
}  // namespace tiller::ir
