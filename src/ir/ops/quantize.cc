// Linear quantization as Paddle's quantize_linear / dequantize_linear (what
// Paddle's post-training quantization and quantization-aware training write
// around each quantized matmul and convolution). `scale` is the abs-max range:
// one value (per tensor) or x.shape[quant_axis] values (per channel).
//   quantize_linear(x float32, scale float32){quant_axis = -1 (per tensor),
//     qmax = 127, round_type = 0}: q = (qmax * (1 / s)) * x rounded half to
//     even, clipped to [-qmax - 1, qmax]; round_type 1 clips x to [-s, s]
//     first and rounds half away from zero. The result is float32 holding
//     those integers (Paddle's), or with out_dtype = "int8" (the int8_matmul
//     pass; qmax <= 127) int8; a scale of at most 1e-30 reads as s + 1e-6.
//   dequantize_linear(x float32 | int8, scale float32){quant_axis = -1,
//     qmax = 127}: y = x * s / qmax, float32. Folded late (defer_fold) so
//     int8_matmul sees a dequantized int8 weight.
//   linear_int8(x int8 [..., K], w int8 [K, N], scale float32 [N], bias?
//     float32 [N]){activation = "" (as linear's), out_scale = 0}: y = (x . w)
//     * scale + bias, float32: the int32 sums of an int8 GEMM, rescaled per
//     column.
//   conv2d_int8(x int8, w int8 [O, C/groups, KH, KW], scale float32 [O],
//     bias? float32 [O], residual? (y's type)){conv2d's window, activation,
//     data_format, out_scale = 0}: y = conv(x, w) * scale[o] + bias[o] (+
//     residual, then the activation, as conv2d's), float32; the int8_conv
//     pass builds it.
//   Both with out_scale k > 0 (the fuse_requantize pass) write int8 instead:
//     y rounded as quantize_linear{qmax 127, out_dtype int8} with multiplier
//     k rounds it (half to even of k * y, saturated to [-128, 127]), for the
//     next int8 GEMM; conv2d_int8 then takes no residual.
// Precision: both run in float32 (a half input is cast up): the integers and
// the scale products are float32 arithmetic in Paddle. Layout: fixed
// (quant_axis = -1 means per tensor, not the last axis, so a layout pass may
// not renumber it as an axis); conv2d_int8 takes data_format as conv2d.
#include <cmath>

#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"

namespace tiller::ir {
namespace {

// The channel count the scale must cover: 1 per tensor, else x's quant_axis
// dim.
void CheckScale(InferContext& c) {
  const TensorType& x = c.input(0);
  const TensorType& s = c.input(1);
  if (s.dtype != DType::kF32) c.Fail("scale must be float32, got {}", DTypeName(s.dtype));
  const int64_t axis = c.op().GetInt("quant_axis");
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (axis < -1 || axis >= rank)
    c.Fail("quant_axis {} out of range for input {} (-1: per tensor)", axis,
           ShapeToString(x.shape));
  const int64_t want = axis < 0 ? 1 : x.shape[axis];
  if (NumElements(s.shape) != want)
    c.Fail("scale {} must have {} value(s) ({}) for input {}", ShapeToString(s.shape), want,
           axis < 0 ? "per tensor" : "one per channel of quant_axis", ShapeToString(x.shape));
  if (c.op().GetInt("qmax") < 1) c.Fail("qmax must be >= 1, got {}", c.op().GetInt("qmax"));
}

void InferQuantize(InferContext& c) {
  if (c.input(0).dtype != DType::kF32)
    c.Fail("input must be float32, got {}", DTypeName(c.input(0).dtype));
  CheckScale(c);
  const int64_t round_type = c.op().GetInt("round_type");
  if (round_type != 0 && round_type != 1)
    c.Fail("round_type must be 0 (half to even) or 1 (half away from zero), got {}", round_type);
  const std::string& out = c.op().GetStr("out_dtype");
  if (out != "float32" && out != "int8") c.Fail("out_dtype '{}' is not float32 or int8", out);
  if (out == "int8" && c.op().GetInt("qmax") > 127)
    c.Fail("out_dtype int8 needs qmax <= 127, got {}", c.op().GetInt("qmax"));
  c.AddOutput({out == "int8" ? DType::kI8 : DType::kF32, c.input(0).shape});
}

void InferDequantize(InferContext& c) {
  const DType dt = c.input(0).dtype;
  if (dt != DType::kF32 && dt != DType::kI8)
    c.Fail("input must be float32 or int8, got {}", DTypeName(dt));
  CheckScale(c);
  c.AddOutput({DType::kF32, c.input(0).shape});
}

// float32, or int8 when out_scale (the requantization multiplier) is set.
DType ResultDType(InferContext& c) {
  const double k = c.op().GetFloat("out_scale");
  if (!(k >= 0.0) || !std::isfinite(k)) c.Fail("out_scale must be finite and >= 0, got {}", k);
  return k > 0.0 ? DType::kI8 : DType::kF32;
}

// An int8 GEMM's inputs 2 (scale) and 3 (bias, optional): float32 [n], one
// per output column or channel.
void CheckScaleAndBias(InferContext& c, int64_t n) {
  for (int i = 2; i < 4; ++i) {
    if (!c.has_input(i)) continue;
    const TensorType& v = c.input(i);
    if (v.dtype != DType::kF32 || v.shape != Shape{n})
      c.Fail("{} must be float32 [{}], got {} {}", i == 2 ? "scale" : "bias", n, DTypeName(v.dtype),
             ShapeToString(v.shape));
  }
}

void InferLinearInt8(InferContext& c) {
  const TensorType& x = c.input(0);
  const TensorType& w = c.input(1);
  if (x.dtype != DType::kI8 || w.dtype != DType::kI8)
    c.Fail("x and w must be int8, got {} and {}", DTypeName(x.dtype), DTypeName(w.dtype));
  if (x.shape.empty() || w.shape.size() != 2 || x.shape.back() != w.shape[0])
    c.Fail("bad shapes {} x {}", ShapeToString(x.shape), ShapeToString(w.shape));
  const int64_t n = w.shape[1];
  CheckScaleAndBias(c, n);
  Shape out = x.shape;
  out.back() = n;
  c.AddOutput({ResultDType(c), out});
}

void InferConv2dInt8(InferContext& c) {
  const Shape y_shape = ConvOutputShape(c);
  if (c.input(0).dtype != DType::kI8 || c.input(1).dtype != DType::kI8)
    c.Fail("x and w must be int8, got {} and {}", DTypeName(c.input(0).dtype),
           DTypeName(c.input(1).dtype));
  CheckScaleAndBias(c, c.input(1).shape[0]);
  const TensorType y{ResultDType(c), y_shape};
  if (c.has_input(4)) {
    if (!c.has_input(3)) c.Fail("a residual input needs a bias input");
    if (y.dtype != DType::kF32) c.Fail("a residual input needs a float32 result (out_scale 0)");
    if (c.input(4).dtype != y.dtype || c.input(4).shape != y.shape)
      c.Fail("residual {} is not the result's type {}", c.input(4).ToString(), y.ToString());
  }
  c.AddOutput(y);
}

const bool kRegistered = [] {
  RegisterOpSchema(OpSchema{"quantize_linear", 2, 2, InferQuantize}
                       .Attr("quant_axis", int64_t{-1})
                       .Attr("qmax", int64_t{127})
                       .Attr("round_type", int64_t{0})
                       .Attr("out_dtype", "float32")
                       .Precision(PrecisionRule::kAlwaysF32)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(OpSchema{"dequantize_linear", 2, 2, InferDequantize}
                       .Attr("quant_axis", int64_t{-1})
                       .Attr("qmax", int64_t{127})
                       .Precision(PrecisionRule::kAlwaysF32)
                       .Layout(LayoutRule::kFixed)
                       .DeferFold());
  RegisterOpSchema(OpSchema{"linear_int8", 3, 4, InferLinearInt8}
                       .Attr("activation", "")
                       .Attr("out_scale", 0.0)
                       .Precision(PrecisionRule::kAlwaysF32)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(WithConvWindowAttrs(OpSchema{"conv2d_int8", 3, 5, InferConv2dInt8})
                       .Attr("activation", "")
                       .Attr("out_scale", 0.0)
                       .Attr("data_format", "NCHW")
                       .Precision(PrecisionRule::kAlwaysF32)
                       .Layout(LayoutRule::kDataFormat)
                       .InPlaceInput(4));
  return true;
}();

}  // namespace
}  // namespace tiller::ir
