// Ops that only backward graphs use (gradient rules emit them; no frontend
// does). Each takes the attributes of the forward op it differentiates,
// declared once in op_helpers.h (defaults there), plus the shapes noted.
//   conv2d_grad_input(dy [N, O, OH, OW], w [O, C/groups, KH, KW]){conv2d's
//     window (strides, pads, dilations, groups), input_shape [4] (required)}
//     -> dx: d loss / d conv2d input
//   conv2d_grad_filter(x NCHW, dy){conv2d's window, filter_shape [4]
//     (required)} -> dw: d loss / d conv2d filter
//   pool2d_grad(x, y, dy){pool2d's attributes} -> dx. Max pooling sends each
//     output's gradient to the first input of its window equal to y (as
//     Paddle); avg spreads it over the window with the forward's divisor.
//   max_pool2d_with_index_grad(mask int32, dy){input_shape [4] (required)}
//     -> dx: adds each dy to the input position its mask names (mask < 0:
//     nowhere)
//   batch_norm_grad(x, scale, saved_mean, saved_inv_std, dy) {} -> dx,
//     dscale, dbias: the gradient of batch_norm_train (batch statistics),
//     channel dim 1
//   cross_entropy_grad(prob, label, dloss){cross_entropy's axis, soft_label,
//     ignore_index, log_input} -> dprob: hard labels -dloss / prob at the
//     label (0 for ignore_index rows), soft labels -dloss * label / prob;
//     with log_input, the gradient with respect to the log-probabilities:
//     -dloss at the label, -dloss * label
//   sigmoid_cross_entropy_grad(x, label, dloss, pos_weight?){normalize,
//     ignore_index} -> dx
//   gather_grad(index int, dy){axis = 0 (non-negative), dim (required)}: dx
//     of gather with x.shape[axis] = dim: dy scattered back, repeated
//     indices accumulating
//   slice_grad(dy){slice's axes/starts/ends/steps, input_shape (required)}:
//     dy written where slice read it, zeros elsewhere
//   interp_grad(dy){interp's attributes, input_shape (required)}: dy
//     scattered back through interp's taps and weights
//   pad_nd_grad(dy){pads, mode, input_shape (required)}: each dy element
//     added to the input element pad_nd copied it from
//     (reflect/replicate/circular)
//   softmax_grad(y, dy){axis = -1} -> dx = y (dy - sum(dy y)) along axis, y
//     softmax's output: one pass per row instead of four elementwise ops
//   gelu_grad(x, dy){approximate = false} -> dx = dy * gelu'(x): exact
//     Phi(x) + x phi(x) (Phi the normal CDF, phi its density); approximate:
//     the derivative of the tanh form. One pass instead of the nine
//     elementwise ops the formula takes.
//
// Precision: the convolution gradients are GEMMs (half inputs, float32
// accumulation). Gradients of norms, losses, softmax and gelu, and the scatter-adds that
// sum an unbounded number of contributions (gather_grad, interp_grad), run
// in float32. pool2d_grad, max_pool2d_with_index_grad, slice_grad and
// pad_nd_grad route each value to a bounded few places: they follow their
// input.
// Layout: cross_entropy_grad and softmax_grad name their axis,
// sigmoid_cross_entropy_grad and gelu_grad are elementwise; the rest hold shapes in dim order or
// are channel-first: fixed.
#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"

namespace tiller::ir {
namespace {

Shape FourDims(InferContext& c, const char* attr) {
  Shape s = c.op().GetInts(attr);
  if (s.size() != 4) c.Fail("{} must have 4 dims, got {}", attr, ShapeToString(s));
  for (int64_t d : s) {
    if (d <= 0) c.Fail("{} {} must be positive", attr, ShapeToString(s));
  }
  return s;
}

// The conv2d these gradients belong to must produce dy's shape.
void CheckConvShapes(InferContext& c, const Shape& x, const Shape& w, const Shape& dy) {
  ConvWindow win = ReadConvWindow(c.op());
  if (const std::string problem = win.Problem(); !problem.empty()) c.Fail("{}", problem);
  if (x[1] != w[1] * win.groups || w[0] % win.groups != 0)
    c.Fail("channels {} do not match filter {} with groups {}", x[1], ShapeToString(w), win.groups);
  const auto &s = win.strides, &p = win.pads, &d = win.dilations;
  int64_t oh = WindowOutputSize(x[2], w[2], s[0], p[0], p[1], d[0], false);
  int64_t ow = WindowOutputSize(x[3], w[3], s[1], p[2], p[3], d[1], false);
  Shape want{x[0], w[0], oh, ow};
  if (dy != want)
    c.Fail("dy {} is not the conv2d output {} of input {} and filter {}", ShapeToString(dy),
           ShapeToString(want), ShapeToString(x), ShapeToString(w));
}

void InferConvGradInput(InferContext& c) {
  const TensorType& dy = c.input(0);
  const TensorType& w = c.input(1);
  if (dy.shape.size() != 4 || w.shape.size() != 4 || dy.dtype != w.dtype)
    c.Fail("needs 4-D dy and filter of one dtype, got {} and {}", dy.ToString(), w.ToString());
  Shape x = FourDims(c, "input_shape");
  CheckConvShapes(c, x, w.shape, dy.shape);
  c.AddOutput({dy.dtype, x});
}

void InferConvGradFilter(InferContext& c) {
  const TensorType& x = c.input(0);
  const TensorType& dy = c.input(1);
  if (x.shape.size() != 4 || dy.shape.size() != 4 || dy.dtype != x.dtype)
    c.Fail("needs 4-D x and dy of one dtype, got {} and {}", x.ToString(), dy.ToString());
  Shape w = FourDims(c, "filter_shape");
  CheckConvShapes(c, x.shape, w, dy.shape);
  c.AddOutput({x.dtype, w});
}

void InferPoolGrad(InferContext& c) {
  const TensorType& x = c.input(0);
  if (x.shape.size() != 4) c.Fail("needs 4-D input, got {}", x.ToString());
  for (size_t i = 1; i < 3; ++i) {
    if (c.input(i).dtype != x.dtype || c.input(i).shape.size() != 4 ||
        c.input(i).shape[0] != x.shape[0] || c.input(i).shape[1] != x.shape[1])
      c.Fail("y/dy {} do not belong to input {}", c.input(i).ToString(), x.ToString());
  }
  if (c.input(1).shape != c.input(2).shape)
    c.Fail("y {} and dy {} differ", c.input(1).ToString(), c.input(2).ToString());
  const std::string& pooling = c.op().GetStr("pooling_type");
  if (pooling != "max" && pooling != "avg") c.Fail("pooling_type '{}' is not max or avg", pooling);
  if (c.op().GetInts("ksize").size() != 2) c.Fail("ksize must have 2 values");
  c.AddOutput(x);
}

void InferMaxPoolIndexGrad(InferContext& c) {
  const TensorType& mask = c.input(0);
  const TensorType& dy = c.input(1);
  if (mask.dtype != DType::kI32 || mask.shape != dy.shape || dy.shape.size() != 4)
    c.Fail("mask {} must be int32 of dy's 4-D shape {}", mask.ToString(), dy.ToString());
  Shape x = FourDims(c, "input_shape");
  if (x[0] != dy.shape[0] || x[1] != dy.shape[1])
    c.Fail("input_shape {} does not match dy {}", ShapeToString(x), dy.ToString());
  c.AddOutput({dy.dtype, x});
}

void InferBatchNormGrad(InferContext& c) {
  const TensorType& x = c.input(0);
  if (x.shape.size() < 2) c.Fail("input rank must be >= 2, got {}", x.ToString());
  for (size_t i = 1; i < 4; ++i) {
    if (c.input(i).shape != Shape{x.shape[1]} || c.input(i).dtype != x.dtype)
      c.Fail("input {} is {}, expected {}[{}]", i, c.input(i).ToString(), DTypeName(x.dtype),
             x.shape[1]);
  }
  if (c.input(4).shape != x.shape || c.input(4).dtype != x.dtype)
    c.Fail("dy {} must match x {}", c.input(4).ToString(), x.ToString());
  c.AddOutput(x);
  c.AddOutput(c.input(1));
  c.AddOutput(c.input(1));
}

// layer_norm_grad(x, dy, scale?) -> dx, dscale, dbias (flat [normalized size]).
void InferLayerNormGrad(InferContext& c) {
  const TensorType& x = c.input(0);
  const int rank = static_cast<int>(x.shape.size());
  const int axis = NormalizeAxis(c.op().GetInt("axis"), rank);
  if (axis < 0) c.Fail("begin axis out of range for {}", x.ToString());
  if (c.input(1).shape != x.shape || c.input(1).dtype != x.dtype)
    c.Fail("dy {} must match x {}", c.input(1).ToString(), x.ToString());
  int64_t inner = 1;
  for (int i = axis; i < rank; ++i) inner *= x.shape[i];
  if (c.has_input(2) && NumElements(c.input(2).shape) != inner)
    c.Fail("scale size {} != normalized size {}", NumElements(c.input(2).shape), inner);
  c.AddOutput(x);
  c.AddOutput({x.dtype, {inner}});
  c.AddOutput({x.dtype, {inner}});
}

void InferCrossEntropyGrad(InferContext& c) {
  const TensorType& prob = c.input(0);
  const TensorType& label = c.input(1);
  const TensorType& dloss = c.input(2);
  int rank = static_cast<int>(prob.shape.size());
  int axis = NormalizeAxis(c.op().GetInt("axis"), rank);
  if (axis < 0) c.Fail("axis out of range for {}", prob.ToString());
  Shape reduced = prob.shape;
  reduced[axis] = 1;
  if (dloss.shape != reduced || dloss.dtype != prob.dtype)
    c.Fail("dloss {} must be {}[{}]", dloss.ToString(), DTypeName(prob.dtype),
           ShapeToString(reduced));
  bool soft = c.op().GetBool("soft_label");
  if (soft ? label.shape != prob.shape : label.shape != reduced)
    c.Fail("label {} does not fit prob {} (soft_label {})", label.ToString(), prob.ToString(),
           soft);
  c.AddOutput(prob);
}

void InferSigmoidCEGrad(InferContext& c) {
  const TensorType& x = c.input(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    if (c.has_input(i) && (c.input(i).shape != x.shape || c.input(i).dtype != x.dtype))
      c.Fail("operand {} is {}, expected {}", i, c.input(i).ToString(), x.ToString());
  }
  c.AddOutput(x);
}

void InferGatherGrad(InferContext& c) {
  const TensorType& idx = c.input(0);
  const TensorType& dy = c.input(1);
  if (!IsInteger(idx.dtype)) c.Fail("index must be an integer tensor, got {}", idx.ToString());
  int64_t axis = c.op().GetInt("axis"), dim = c.op().GetInt("dim");
  int out_rank = static_cast<int>(dy.shape.size() - idx.shape.size()) + 1;
  if (axis < 0 || axis >= out_rank || dim < 0) c.Fail("bad axis {} / dim {}", axis, dim);
  for (size_t i = 0; i < idx.shape.size(); ++i) {
    if (dy.shape[axis + i] != idx.shape[i])
      c.Fail("dy {} does not hold index {} at axis {}", dy.ToString(), idx.ToString(), axis);
  }
  Shape out(dy.shape.begin(), dy.shape.begin() + axis);
  out.push_back(dim);
  out.insert(out.end(), dy.shape.begin() + axis + static_cast<int64_t>(idx.shape.size()),
             dy.shape.end());
  c.AddOutput({dy.dtype, out});
}

void InferSliceGrad(InferContext& c) {
  Shape in = c.op().GetInts("input_shape");
  SliceSpec spec;
  if (!ResolveSlice(in, c.op(), &spec))
    c.Fail("bad axes/starts/ends/steps for input {}", ShapeToString(in));
  if (spec.out != c.input(0).shape)
    c.Fail("dy {} is not the slice {} of {}", c.input(0).ToString(), ShapeToString(spec.out),
           ShapeToString(in));
  c.AddOutput({c.input(0).dtype, in});
}

void InferInterpGrad(InferContext& c) {
  const TensorType& dy = c.input(0);
  Shape in = c.op().GetInts("input_shape");
  const auto& size = c.op().GetInts("out_size");
  if (in.size() != dy.shape.size() || in.size() < 3 || size.size() != in.size() - 2 ||
      in[0] != dy.shape[0] || in[1] != dy.shape[1])
    c.Fail("dy {} does not fit input_shape {} / out_size", dy.ToString(), ShapeToString(in));
  for (size_t d = 0; d < size.size(); ++d) {
    if (dy.shape[2 + d] != size[d]) c.Fail("dy {} is not of out_size", dy.ToString());
  }
  c.AddOutput({dy.dtype, in});
}

void InferPadGrad(InferContext& c) {
  const TensorType& dy = c.input(0);
  Shape in = c.op().GetInts("input_shape");
  const auto& pads = c.op().GetInts("pads");
  if (in.size() != dy.shape.size() || pads.size() != 2 * in.size())
    c.Fail("dy {} does not fit input_shape {} and pads", dy.ToString(), ShapeToString(in));
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] + pads[2 * d] + pads[2 * d + 1] != dy.shape[d])
      c.Fail("dy {} is not input_shape {} padded", dy.ToString(), ShapeToString(in));
  }
  c.AddOutput({dy.dtype, in});
}
// softmax_grad(y, dy) -> dx; gelu_grad(x, dy) -> dx: operands of one type.
void InferSameTypeGrad(InferContext& c) {
  if (c.input(1).shape != c.input(0).shape || c.input(1).dtype != c.input(0).dtype)
    c.Fail("dy {} must match x {}", c.input(1).ToString(), c.input(0).ToString());
  c.AddOutput(c.input(0));
}

constexpr auto kF32 = PrecisionRule::kAlwaysF32;
constexpr auto kFollows = PrecisionRule::kFollowsInput;
constexpr auto kFixed = LayoutRule::kFixed;

const bool kRegistered = [] {
  RegisterOpSchema(WithConvWindowAttrs(OpSchema{"conv2d_grad_input", 2, 2, InferConvGradInput})
                       .RequiredAttr("input_shape", AttrKind::kInts)
                       .Precision(PrecisionRule::kHalfSafe)
                       .Layout(kFixed));
  RegisterOpSchema(WithConvWindowAttrs(OpSchema{"conv2d_grad_filter", 2, 2, InferConvGradFilter})
                       .RequiredAttr("filter_shape", AttrKind::kInts)
                       .Precision(PrecisionRule::kHalfSafe)
                       .Layout(kFixed));
  RegisterOpSchema(WithPool2dAttrs(OpSchema{"pool2d_grad", 3, 3, InferPoolGrad})
                       .Precision(kFollows)
                       .Layout(kFixed));
  RegisterOpSchema(OpSchema{"max_pool2d_with_index_grad", 2, 2, InferMaxPoolIndexGrad}
                       .RequiredAttr("input_shape", AttrKind::kInts)
                       .Precision(kFollows)
                       .Layout(kFixed));
  RegisterOpSchema(
      OpSchema{"batch_norm_grad", 5, 5, InferBatchNormGrad}.NoAttrs().Precision(kF32).Layout(
          kFixed));
  RegisterOpSchema(OpSchema{"layer_norm_grad", 2, 3, InferLayerNormGrad}
                       .RequiredAttr("axis", AttrKind::kInt)
                       .RequiredAttr("epsilon", AttrKind::kFloat)
                       .Precision(kF32)
                       .Layout(kFixed));
  RegisterOpSchema(OpSchema{"softmax_grad", 2, 2, InferSameTypeGrad}
                       .Attr("axis", int64_t{-1})
                       .Precision(kF32)
                       .Layout(LayoutRule::kAxisAttrs, {"axis"}));
  RegisterOpSchema(OpSchema{"gelu_grad", 2, 2, InferSameTypeGrad}
                       .Attr("approximate", false)
                       .Precision(kF32)
                       .Layout(LayoutRule::kAgnostic));
  RegisterOpSchema(
      WithCrossEntropyAttrs(OpSchema{"cross_entropy_grad", 3, 3, InferCrossEntropyGrad})
          .Precision(kF32)
          .Layout(LayoutRule::kAxisAttrs, {"axis"}));
  RegisterOpSchema(
      WithSigmoidCrossEntropyAttrs(OpSchema{"sigmoid_cross_entropy_grad", 3, 4, InferSigmoidCEGrad})
          .Precision(kF32)
          .Layout(LayoutRule::kAgnostic));
  RegisterOpSchema(OpSchema{"gather_grad", 2, 2, InferGatherGrad}
                       .Attr("axis", int64_t{0})
                       .RequiredAttr("dim", AttrKind::kInt)
                       .Precision(kF32)
                       .Layout(kFixed));
  RegisterOpSchema(WithSliceAttrs(OpSchema{"slice_grad", 1, 1, InferSliceGrad})
                       .RequiredAttr("input_shape", AttrKind::kInts)
                       .Precision(kFollows)
                       .Layout(kFixed));
  RegisterOpSchema(WithInterpAttrs(OpSchema{"interp_grad", 1, 1, InferInterpGrad})
                       .RequiredAttr("input_shape", AttrKind::kInts)
                       .Precision(kF32)
                       .Layout(kFixed));
  RegisterOpSchema(WithPadAttrs(OpSchema{"pad_nd_grad", 1, 1, InferPadGrad})
                       .RequiredAttr("input_shape", AttrKind::kInts)
                       .Precision(kFollows)
                       .Layout(kFixed));
  return true;
}();

}  // namespace
}  // namespace tiller::ir
