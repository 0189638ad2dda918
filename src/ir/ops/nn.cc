// Neural-network ops (more in nn_ext.cc).
//   softmax(x){axis}, log_softmax(x){axis}
//   layer_norm(x, scale?, bias?){axis, epsilon}: normalizes over dims [axis, rank)
//   batch_norm(x, scale, bias, mean, variance){epsilon}: inference form, channel dim 1
//   conv2d(x NCHW, w [O, C/groups, KH, KW], bias? [O]){strides[2], pads[4] = top,
//     bottom, left, right, dilations[2], groups}
//   pool2d(x NCHW){pooling_type "max"|"avg", ksize[2], strides[2], pads[4] as conv2d,
//     ceil_mode, exclusive (avg ignores padding), adaptive (ksize is the output size)}
//   embedding(table [V, D], ids int){padding_idx (-1: none)}: ids.shape + [D]
#include "ir/ops/op_helpers.h"
#include "ir/op_schema.h"

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
    c.Fail("channels {} do not match filter {} with groups {}", x.shape[1],
           ShapeToString(w.shape), groups);
  if (c.has_input(2) && NumElements(c.input(2).shape) != w.shape[0]) c.Fail("bias size mismatch");
  int64_t oh = WindowOutputSize(x.shape[2], w.shape[2], strides[0], pads[0], pads[1], dil[0], false);
  int64_t ow = WindowOutputSize(x.shape[3], w.shape[3], strides[1], pads[2], pads[3], dil[1], false);
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

}  // namespace
}  // namespace tiller::ir
