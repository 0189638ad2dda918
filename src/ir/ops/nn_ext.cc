// More neural-network ops (channel-first layouts; translators transpose
// channel-last inputs) and their gradient rules. Attributes (defaults after =):
//   group_norm(x [N, C, *], scale? [C], bias? [C]){groups = 1, epsilon =
//     1e-5}: statistics over each group of C/groups channels and all spatial
//     positions
//   max_pool2d_with_index(x NCHW){ksize [2] (required), strides = [1, 1],
//     pads = [0, 0, 0, 0] (top, bottom, left, right), ceil_mode = false,
//     adaptive = false, with_mask = true} -> (out, mask int32: h * W + w of
//     the max; only when with_mask)
//   conv2d_transpose(x NCHW, w [C, O/groups, KH, KW], bias? [O]){conv2d's
//     window: strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1],
//     groups = 1; output_size [2] (required): the output H, W (>= the size
//     the window arithmetic gives, < that + stride), data_format = "NCHW" |
//     "NHWC" (as conv2d's)}
//   interp(x [N, C, spatial...] with 1..3 spatial dims){method "nearest" |
//     "linear" | "cubic", out_size [ndims], ratios [ndims] (source step per
//     output step; all three required), align_corners = false, align_mode =
//     1, data_format = "NCHW" | "NHWC" (4-D only; the channels_last
//     pass)}: Paddle's *_interp_v2 resampling (translators always set
//     align_corners, whose Paddle default is true)
//   pad_nd(x){pads [2 * rank] (required): before/after per dim, mode =
//     "constant" | "reflect" | "replicate" | "circular", value = 0}
//
// Precision: group_norm's variances run in float32; conv2d_transpose is a
// GEMM (half inputs, float32 accumulation); pooling, interpolation (a few
// weighted taps) and padding follow their input.
// Layout: conv2d_transpose and interp take data_format (the channels_last
// pass); the others are channel-first with no layout attribute, pad_nd's
// pads are per dim in order: fixed.
#include "ir/grad.h"
#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"

namespace tiller::ir {
namespace {

void InferGroupNorm(InferContext& c) {
  const TensorType& x = c.input(0);
  if (x.shape.size() < 2) c.Fail("input rank must be >= 2, got {}", ShapeToString(x.shape));
  int64_t groups = c.op().GetInt("groups");
  if (groups < 1 || x.shape[1] % groups != 0)
    c.Fail("channels {} not divisible by groups {}", x.shape[1], groups);
  for (size_t i = 1; i < 3; ++i) {
    if (c.has_input(i) && NumElements(c.input(i).shape) != x.shape[1])
      c.Fail("scale/bias size {} != channels {}", NumElements(c.input(i).shape), x.shape[1]);
  }
  c.AddOutput(x);
}

void InferMaxPoolWithIndex(InferContext& c) {
  const TensorType& x = c.input(0);
  const Op& op = c.op();
  if (x.shape.size() != 4) c.Fail("needs 4-D input, got {}", ShapeToString(x.shape));
  if (const std::string p = PoolWindowProblem(op); !p.empty()) c.Fail("{}", p);
  const auto& k = op.GetInts("ksize");
  Shape out{x.shape[0], x.shape[1], k[0], k[1]};
  if (!op.GetBool("adaptive")) {
    const auto& s = op.GetInts("strides");
    const auto& p = op.GetInts("pads");
    bool ceil = op.GetBool("ceil_mode");
    out[2] = WindowOutputSize(x.shape[2], k[0], s[0], p[0], p[1], 1, ceil);
    out[3] = WindowOutputSize(x.shape[3], k[1], s[1], p[2], p[3], 1, ceil);
  }
  if (out[2] <= 0 || out[3] <= 0) c.Fail("empty output for input {}", ShapeToString(x.shape));
  c.AddOutput({x.dtype, out});
  if (op.GetBool("with_mask")) c.AddOutput({DType::kI32, out});
}

void InferConvTranspose(InferContext& c) {
  const bool last = ChannelsLast(c);
  const TensorType& w = c.input(1);
  if (c.input(0).shape.size() != 4 || w.shape.size() != 4)
    c.Fail("needs 4-D input and filter, got {} and {}", ShapeToString(c.input(0).shape),
           ShapeToString(w.shape));
  const TensorType x{c.input(0).dtype, AsNchw(c.input(0).shape, last)};
  ConvWindow win = ReadConvWindow(c.op());
  const auto& size = c.op().GetInts("output_size");
  if (const std::string problem = win.Problem(); !problem.empty()) c.Fail("{}", problem);
  if (size.size() != 2) c.Fail("output_size {} must be 2 values", ShapeToString(size));
  if (x.shape[1] != w.shape[0] || w.shape[0] % win.groups != 0)
    c.Fail("channels {} do not match filter {} with groups {}", x.shape[1], ShapeToString(w.shape),
           win.groups);
  int64_t oc = w.shape[1] * win.groups;
  if (c.has_input(2) && NumElements(c.input(2).shape) != oc) c.Fail("bias size mismatch");
  const auto &strides = win.strides, &pads = win.pads, &dil = win.dilations;
  for (int d = 0; d < 2; ++d) {
    int64_t base = (x.shape[2 + d] - 1) * strides[d] - pads[2 * d] - pads[2 * d + 1] +
                   dil[d] * (w.shape[2 + d] - 1) + 1;
    if (base <= 0 || size[d] < base || size[d] >= base + std::max<int64_t>(strides[d], 1))
      c.Fail("output size {} not in [{}, {}) for dim {}", size[d], base, base + strides[d], d);
  }
  c.AddOutput({x.dtype, FromNchw({x.shape[0], oc, size[0], size[1]}, last)});
}

void InferInterp(InferContext& c) {
  const bool last = ChannelsLast(c);
  if (last && c.input(0).shape.size() != 4)
    c.Fail("data_format NHWC needs a 4-D input, got {}", ShapeToString(c.input(0).shape));
  const TensorType x{c.input(0).dtype, AsNchw(c.input(0).shape, last)};
  const auto& size = c.op().GetInts("out_size");
  const auto& ratios = c.op().GetFloats("ratios");
  if (x.shape.size() < 3 || x.shape.size() > 5 || size.size() != x.shape.size() - 2 ||
      ratios.size() != size.size())
    c.Fail("input {} needs 1-3 spatial dims matching out_size/ratios", ShapeToString(x.shape));
  const std::string& m = c.op().GetStr("method");
  if (m != "nearest" && m != "linear" && m != "cubic") c.Fail("unknown method '{}'", m);
  Shape out{x.shape[0], x.shape[1]};
  for (int64_t s : size) {
    if (s <= 0) c.Fail("output size {} must be positive", s);
    out.push_back(s);
  }
  c.AddOutput({x.dtype, FromNchw(out, last)});
}

void InferPadNd(InferContext& c) {
  const TensorType& x = c.input(0);
  const auto& pads = c.op().GetInts("pads");
  if (pads.size() != 2 * x.shape.size()) c.Fail("pads needs {} values", 2 * x.shape.size());
  const std::string& mode = c.op().GetStr("mode");
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular")
    c.Fail("unknown mode '{}'", mode);
  Shape out = x.shape;
  for (size_t d = 0; d < out.size(); ++d) {
    int64_t b = pads[2 * d], e = pads[2 * d + 1];
    if (mode == "reflect" && (b >= x.shape[d] || e >= x.shape[d]))
      c.Fail("reflect pads {}, {} must be < dim {}", b, e, x.shape[d]);
    if (mode != "constant" && (b < 0 || e < 0 || ((b > 0 || e > 0) && x.shape[d] == 0)))
      c.Fail("pads {}, {} invalid for dim {} in mode {}", b, e, x.shape[d], mode);
    if (mode == "circular" && (b > x.shape[d] || e > x.shape[d]))
      c.Fail("circular pads {}, {} exceed dim {}", b, e, x.shape[d]);
    out[d] += b + e;
    if (out[d] < 0) c.Fail("negative output dim");
  }
  c.AddOutput({x.dtype, out});
}

constexpr auto kFollows = PrecisionRule::kFollowsInput;
constexpr auto kFixed = LayoutRule::kFixed;

const bool kSchemas = [] {
  RegisterOpSchema(OpSchema{"group_norm", 1, 3, InferGroupNorm}
                       .Attr("groups", int64_t{1})
                       .Attr("epsilon", 1e-5)
                       .Precision(PrecisionRule::kAlwaysF32)
                       .Layout(kFixed));
  RegisterOpSchema(
      WithPoolWindowAttrs(OpSchema{"max_pool2d_with_index", 1, 1, InferMaxPoolWithIndex})
          .Attr("with_mask", true)
          .Precision(kFollows)
          .Layout(kFixed));
  RegisterOpSchema(WithConvWindowAttrs(OpSchema{"conv2d_transpose", 2, 3, InferConvTranspose})
                       .RequiredAttr("output_size", AttrKind::kInts)
                       .Attr("data_format", "NCHW")
                       .Precision(PrecisionRule::kHalfSafe)
                       .Layout(LayoutRule::kDataFormat));
  RegisterOpSchema(WithInterpAttrs(OpSchema{"interp", 1, 1, InferInterp})
                       .Attr("data_format", "NCHW")
                       .Precision(kFollows)
                       .Layout(LayoutRule::kDataFormat));
  RegisterOpSchema(WithPadAttrs(OpSchema{"pad_nd", 1, 1, InferPadNd})
                       .Attr("value", 0.0)
                       .Precision(kFollows)
                       .Layout(kFixed));
  return true;
}();

// ---- Gradient rules ----------------------------------------------------

// Statistics over groups of C/groups channels and all spatial positions: in
// the [N, groups, M] view the rule is layer_norm's over the last dim.
void GroupNormGrad(GradContext& c) {
  Value* x = c.input(0);
  Value* scale = c.input(1);
  Value* g = c.out_grad();
  const Shape& xs = x->shape();
  int64_t groups = c.op().GetInt("groups");
  Shape grouped{xs[0], groups, NumElements(xs) / (xs[0] * groups)};
  AttrMap last{{"axes", std::vector<int64_t>{2}}, {"keepdim", true}};
  Value* xg = c.Reshape(x, grouped);
  Value* centered = c.Add("sub", {xg, c.Add("reduce_mean", {xg}, last)});
  Value* var = c.Add("reduce_mean", {c.Add("square", {centered})}, last);
  double eps = c.op().GetFloat("epsilon");
  Value* rstd = c.Add("rsqrt", {c.Add("scale", {var}, {{"scale", 1.0}, {"bias", eps}})});
  Value* xhat = c.Add("mul", {centered, rstd});  // [N, groups, M]
  Shape per_channel(xs.size(), 1);
  per_channel[1] = xs[1];
  if (c.needs_grad(0)) {
    Value* dxhat = scale ? c.Add("mul", {g, c.Reshape(scale, per_channel)}) : g;
    Value* d = c.Reshape(dxhat, grouped);
    Value* m1 = c.Add("reduce_mean", {d}, last);
    Value* m2 = c.Add("reduce_mean", {c.Add("mul", {d, xhat})}, last);
    Value* inner = c.Add("sub", {c.Add("sub", {d, m1}), c.Add("mul", {xhat, m2})});
    c.SetInputGrad(0, c.Reshape(c.Add("mul", {rstd, inner}), xs));
  }
  if (scale && c.needs_grad(1))
    c.SetInputGrad(1, c.SumPerChannel(c.Add("mul", {g, c.Reshape(xhat, xs)}), scale->shape()));
  if (c.input(2) && c.needs_grad(2)) c.SetInputGrad(2, c.SumPerChannel(g, c.input(2)->shape()));
}

// conv2d_transpose(x, w) is the adjoint of conv2d(., w) with the same window:
// dx = conv2d(dy, w) and dw is conv2d's filter gradient with input dy and
// output gradient x.
void ConvTransposeGrad(GradContext& c) {
  if (c.op().GetStr("data_format") != "NCHW")  // channels_last: inference graphs only
    Fail(ErrorKind::kInternal, "{} ({}) in {} reached autodiff", c.op().type, c.op().name,
         c.op().GetStr("data_format"));
  Value* x = c.input(0);
  Value* w = c.input(1);
  Value* g = c.out_grad();
  AttrMap win = ConvWindowAttrMap(c.op());
  if (c.needs_grad(0)) c.SetInputGrad(0, c.Add("conv2d", {g, w}, win));
  // Transposed: the filter gradient correlates dy (as input) with x.
  SetConvFilterAndBiasGrads(c, win, g, x, g);
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
  const std::string& mode = c.op().GetStr("mode");
  std::vector<int64_t> pads = c.op().GetInts("pads");
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
  if (c.op().GetStr("data_format") != "NCHW")  // channels_last: inference graphs only
    Fail(ErrorKind::kInternal, "{} ({}) in {} reached autodiff", c.op().type, c.op().name,
         c.op().GetStr("data_format"));
  AttrMap a = c.op().attrs;
  a.Erase("data_format");
  a.Set("input_shape", ShapeAttr(c.input(0)->shape()));
  c.SetInputGrad(0, c.Add("interp_grad", {c.out_grad()}, a));
}

const bool kRules = [] {
  RegisterGrad("group_norm", GroupNormGrad);
  RegisterGrad("conv2d_transpose", ConvTransposeGrad);
  RegisterGrad("max_pool2d_with_index", MaxPoolWithIndexGrad);
  RegisterGrad("pad_nd", PadGrad);
  RegisterGrad("interp", InterpGrad);
  return true;
}();

}  // namespace
}  // namespace tiller::ir
