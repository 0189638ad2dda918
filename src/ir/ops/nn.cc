// Neural-network ops (more in nn_ext.cc).
//   softmax(x){axis}, log_softmax(x){axis}
//   layer_norm(x, scale?, bias?){axis, epsilon}: normalizes over dims [axis, rank)
//   batch_norm(x, scale, bias, mean, variance){epsilon}: inference form, channel dim 1
//   conv2d(x NCHW, w [O, C/groups, KH, KW], bias? [O]){strides[2], pads[4] = top,
//     bottom, left, right, dilations[2], groups}
//   pool2d(x NCHW){pooling_type "max"|"avg", ksize[2], strides[2], pads[4] as conv2d,
//     ceil_mode, exclusive (avg ignores padding), adaptive (ksize is the output size)}
//   embedding(table [V, D], ids int){padding_idx (-1: none)}: ids.shape + [D]
//
// Gradients of softmax, log_softmax, layer_norm, embedding, conv2d, pool2d,
// batch_norm (inference form, and batch_norm_train and dropout from
// training.cc), plus the embedding_grad op (a scatter-add of rows) that the
// embedding rule needs.
//   embedding_grad(ids int, dy){rows, padding_idx}: [rows, D], row r = sum of
//   dy rows whose id is r; the padding row gets no gradient.
#include "ir/grad.h"
#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"

namespace tiller::ir {
namespace {

void InferSoftmax(InferContext& c) {
  const TensorType& x = c.input(0);
  if (NormalizeAxis(c.attrs().Int("axis", -1), static_cast<int>(x.shape.size())) < 0)
    c.Fail("axis {} out of range for {}", c.attrs().Int("axis", -1), ShapeToString(x.shape));
  c.AddOutput(x);
}

void InferLayerNorm(InferContext& c) {
  const TensorType& x = c.input(0);
  int rank = static_cast<int>(x.shape.size());
  int axis = NormalizeAxis(c.attrs().Int("axis", -1), rank);
  if (axis < 0) c.Fail("begin axis out of range for {}", ShapeToString(x.shape));
  int64_t inner = 1;
  for (int i = axis; i < rank; ++i) inner *= x.shape[i];
  for (size_t i = 1; i < 3; ++i) {
    if (c.has_input(i) && NumElements(c.input(i).shape) != inner)
      c.Fail("scale/bias size {} != normalized size {}", NumElements(c.input(i).shape), inner);
  }
  c.AddOutput(x);
}

void InferBatchNorm(InferContext& c) {
  const TensorType& x = c.input(0);
  if (x.shape.size() < 2) c.Fail("input rank must be >= 2, got {}", ShapeToString(x.shape));
  for (size_t i = 1; i < 5; ++i) {
    if (NumElements(c.input(i).shape) != x.shape[1]) c.Fail("input {} size != channels", i);
  }
  c.AddOutput(x);
}

void InferConv2d(InferContext& c) {
  const TensorType& x = c.input(0);
  const TensorType& w = c.input(1);
  if (x.shape.size() != 4 || w.shape.size() != 4)
    c.Fail("needs 4-D input and filter, got {} and {}", ShapeToString(x.shape),
           ShapeToString(w.shape));
  auto strides = c.attrs().Ints("strides", {1, 1});
  auto pads = c.attrs().Ints("pads", {0, 0, 0, 0});
  auto dil = c.attrs().Ints("dilations", {1, 1});
  int64_t groups = c.attrs().Int("groups", 1);
  if (strides.size() != 2 || pads.size() != 4 || dil.size() != 2 || groups < 1)
    c.Fail("bad strides/pads/dilations/groups");
  if (x.shape[1] != w.shape[1] * groups || w.shape[0] % groups != 0)
    c.Fail("channels {} do not match filter {} with groups {}", x.shape[1], ShapeToString(w.shape),
           groups);
  if (c.has_input(2) && NumElements(c.input(2).shape) != w.shape[0]) c.Fail("bias size mismatch");
  int64_t oh =
      WindowOutputSize(x.shape[2], w.shape[2], strides[0], pads[0], pads[1], dil[0], false);
  int64_t ow =
      WindowOutputSize(x.shape[3], w.shape[3], strides[1], pads[2], pads[3], dil[1], false);
  if (oh <= 0 || ow <= 0) c.Fail("empty output for input {}", ShapeToString(x.shape));
  c.AddOutput({x.dtype, {x.shape[0], w.shape[0], oh, ow}});
}

void InferPool2d(InferContext& c) {
  const TensorType& x = c.input(0);
  if (x.shape.size() != 4) c.Fail("needs 4-D input, got {}", ShapeToString(x.shape));
  std::string type = c.attrs().Str("pooling_type", "max");
  if (type != "max" && type != "avg") c.Fail("pooling_type '{}' is not max or avg", type);
  auto k = c.attrs().Ints("ksize");
  if (k.size() != 2) c.Fail("ksize must have 2 values");
  if (c.attrs().Bool("adaptive", false)) {
    c.AddOutput({x.dtype, {x.shape[0], x.shape[1], k[0], k[1]}});
    return;
  }
  auto s = c.attrs().Ints("strides", {1, 1});
  auto p = c.attrs().Ints("pads", {0, 0, 0, 0});
  bool ceil = c.attrs().Bool("ceil_mode", false);
  if (s.size() != 2 || p.size() != 4) c.Fail("bad strides/pads");
  int64_t oh = WindowOutputSize(x.shape[2], k[0], s[0], p[0], p[1], 1, ceil);
  int64_t ow = WindowOutputSize(x.shape[3], k[1], s[1], p[2], p[3], 1, ceil);
  if (oh <= 0 || ow <= 0) c.Fail("empty output for input {}", ShapeToString(x.shape));
  c.AddOutput({x.dtype, {x.shape[0], x.shape[1], oh, ow}});
}

void InferEmbedding(InferContext& c) {
  const TensorType& table = c.input(0);
  const TensorType& ids = c.input(1);
  if (table.shape.size() != 2) c.Fail("table must be 2-D, got {}", ShapeToString(table.shape));
  if (ids.dtype != DType::kI64 && ids.dtype != DType::kI32)
    c.Fail("ids must be int32 or int64, got {}", DTypeName(ids.dtype));
  Shape out = ids.shape;
  out.push_back(table.shape[1]);
  c.AddOutput({table.dtype, out});
}

TILLER_REGISTER_OP_SCHEMA(OpSchema{"softmax", 1, 1, InferSoftmax});
TILLER_REGISTER_OP_SCHEMA(OpSchema{"log_softmax", 1, 1, InferSoftmax});
TILLER_REGISTER_OP_SCHEMA(OpSchema{"layer_norm", 1, 3, InferLayerNorm});
TILLER_REGISTER_OP_SCHEMA(OpSchema{"batch_norm", 5, 5, InferBatchNorm});
TILLER_REGISTER_OP_SCHEMA(OpSchema{"conv2d", 2, 3, InferConv2d});
TILLER_REGISTER_OP_SCHEMA(OpSchema{"pool2d", 1, 1, InferPool2d});
TILLER_REGISTER_OP_SCHEMA(OpSchema{"embedding", 2, 2, InferEmbedding});

// ---- Gradient rules ----------------------------------------------------

std::vector<int64_t> ShapeAttr(const Shape& s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

// Copies the listed attributes of the forward op (those it has).
AttrMap Pick(const Op& op, std::initializer_list<const char*> names) {
  AttrMap a;
  for (const char* n : names) {
    if (const Attribute* v = op.attrs.Find(n)) a.Set(n, *v);
  }
  return a;
}

void RejectFusedActivation(const GradContext& c) {
  if (c.op().attrs.Has("activation"))
    Fail(ErrorKind::kInternal, "{} ({}) with a fused activation reached autodiff", c.op().type,
         c.op().name);
}

// Sums `v` over every dim but the channel dim 1 into a [C] vector shaped like `to`.
Value* SumPerChannel(GradContext& c, Value* v, const Shape& to) {
  std::vector<int64_t> axes{0};
  for (int i = 2; i < v->rank(); ++i) axes.push_back(i);
  return c.Add("reshape", {c.Add("reduce_sum", {v}, {{"axes", axes}, {"keepdim", false}})},
               {{"shape", ShapeAttr(to)}});
}

// A [C] vector reshaped to broadcast along dim 1 of a rank-`rank` tensor.
Value* AlongChannels(GradContext& c, Value* v, int rank) {
  std::vector<int64_t> shape(rank, 1);
  shape[1] = NumElements(v->shape());
  return c.Add("reshape", {v}, {{"shape", shape}});
}

void Conv2dGrad(GradContext& c) {
  RejectFusedActivation(c);
  Value* x = c.input(0);
  Value* w = c.input(1);
  Value* g = c.out_grad();
  AttrMap win = Pick(c.op(), {"strides", "pads", "dilations", "groups"});
  if (c.needs_grad(0)) {
    AttrMap a = win;
    a.Set("input_shape", ShapeAttr(x->shape()));
    c.SetInputGrad(0, c.Add("conv2d_grad_input", {g, w}, a));
  }
  if (c.needs_grad(1)) {
    AttrMap a = win;
    a.Set("filter_shape", ShapeAttr(w->shape()));
    c.SetInputGrad(1, c.Add("conv2d_grad_filter", {x, g}, a));
  }
  if (c.input(2) && c.needs_grad(2)) c.SetInputGrad(2, SumPerChannel(c, g, c.input(2)->shape()));
}

// Inference batch_norm: fixed statistics, so y is affine in x per channel.
void BatchNormGrad(GradContext& c) {
  Value* x = c.input(0);
  Value* scale = c.input(1);
  Value* mean = c.input(3);
  Value* var = c.input(4);
  Value* g = c.out_grad();
  int rank = x->rank();
  double eps = c.op().attrs.Float("epsilon", 1e-5);
  Value* inv_std = c.Add("rsqrt", {c.Add("scale", {var}, {{"scale", 1.0}, {"bias", eps}})});
  Value* k = c.Add("mul", {scale, inv_std});  // d y / d x per channel
  if (c.needs_grad(0)) c.SetInputGrad(0, c.Add("mul", {g, AlongChannels(c, k, rank)}));
  Value* centered = c.Add("sub", {x, AlongChannels(c, mean, rank)});
  Value* g_centered = nullptr;  // sum g (x - mean) per channel
  if (c.needs_grad(1) || c.needs_grad(4))
    g_centered = SumPerChannel(c, c.Add("mul", {g, centered}), scale->shape());
  Value* g_sum = nullptr;
  if (c.needs_grad(2) || c.needs_grad(3)) g_sum = SumPerChannel(c, g, scale->shape());
  if (c.needs_grad(1)) c.SetInputGrad(1, c.Add("mul", {g_centered, inv_std}));
  if (c.needs_grad(2)) c.SetInputGrad(2, g_sum);
  if (c.needs_grad(3)) c.SetInputGrad(3, c.Add("neg", {c.Add("mul", {g_sum, k})}));
  if (c.needs_grad(4)) {  // d inv_std / d var = -inv_std^3 / 2
    Value* cube = c.Add("mul", {inv_std, c.Add("square", {inv_std})});
    Value* dv = c.Add("mul", {c.Add("mul", {g_centered, scale}), cube});
    c.SetInputGrad(4, c.Add("scale", {dv}, {{"scale", -0.5}, {"bias", 0.0}}));
  }
}

// batch_norm_train: statistics of the batch itself. The running statistics
// (outputs 1, 2) and the saved ones do not feed back into y: only y's
// gradient flows, and only into x, scale and bias.
void BatchNormTrainGrad(GradContext& c) {
  Value* g = c.out_grad(0);
  if (!g) return;
  Op* op = c.graph().AddOp("batch_norm_grad", {c.input(0), c.input(1), c.output(3), c.output(4), g},
                           {}, c.op().name + ".grad");
  for (size_t i = 0; i < 3; ++i) {
    if (c.needs_grad(i)) c.SetInputGrad(i, op->outputs[i]);
  }
}

void DropoutGrad(GradContext& c) {
  Value* g = c.out_grad(0);
  if (!g || !c.needs_grad(0)) return;
  Value* mask = c.Add("cast", {c.output(1)}, {{"dtype", std::string(DTypeName(g->dtype()))}});
  Value* dx = c.Add("mul", {g, mask});
  double p = c.op().attrs.Float("p", 0.5);
  if (c.op().attrs.Str("mode", "upscale_in_train") == "upscale_in_train" && p < 1.0)
    dx = c.Add("scale", {dx}, {{"scale", 1.0 / (1.0 - p)}, {"bias", 0.0}});
  c.SetInputGrad(0, dx);
}

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

const bool kRules = [] {
  RegisterGrad("softmax", [](GradContext& c) {  // y (g - sum(g y))
    Value* y = c.output();
    Value* g = c.out_grad();
    ir::AttrMap sum{{"axes", std::vector<int64_t>{c.op().attrs.Int("axis", -1)}},
                    {"keepdim", true}};
    Value* dot = c.Add("reduce_sum", {c.Add("mul", {g, y})}, sum);
    c.SetInputGrad(0, c.Add("mul", {y, c.Add("sub", {g, dot})}));
  });
  RegisterGrad("log_softmax", [](GradContext& c) {  // g - exp(y) sum(g)
    Value* g = c.out_grad();
    ir::AttrMap sum{{"axes", std::vector<int64_t>{c.op().attrs.Int("axis", -1)}},
                    {"keepdim", true}};
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
    if (scale)
      dxhat = c.Add("mul", {g, c.Add("reshape", {scale}, {{"shape", ShapeAttr(inner_shape)}})});
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
    if (scale && c.needs_grad(1))
      c.SetInputGrad(1, sum_outer(c.Add("mul", {g, xhat}), scale->shape()));
    if (c.input(2) && c.needs_grad(2)) c.SetInputGrad(2, sum_outer(g, c.input(2)->shape()));
  });
  RegisterGrad("embedding", [](GradContext& c) {
    Value* table = c.input(0);
    c.SetInputGrad(0, c.Add("embedding_grad", {c.input(1), c.out_grad()},
                            {{"rows", table->shape()[0]},
                             {"padding_idx", c.op().attrs.Int("padding_idx", -1)}}));
  });
  RegisterGrad("conv2d", Conv2dGrad);
  RegisterGrad("pool2d", [](GradContext& c) {
    c.SetInputGrad(0, c.Add("pool2d_grad", {c.input(0), c.output(), c.out_grad()}, c.op().attrs));
  });
  RegisterGrad("batch_norm", BatchNormGrad);
  RegisterGrad("batch_norm_train", BatchNormTrainGrad);
  RegisterGrad("dropout", DropoutGrad);
  return true;
}();

}  // namespace
}  // namespace tiller::ir
