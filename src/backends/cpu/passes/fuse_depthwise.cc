// fuse_pointwise_depthwise:
// conv2d{NHWC, 1 x 1, stride 1, no padding, one group, bias}(x, w1, b1)
//   [activation] -> conv2d{NHWC, depthwise (groups = channels), bias}(., w2, b2)
//   [activation]
//   ==>  conv2d_1x1_depthwise(x, w1, b1, w2, b2){the depthwise window,
//        pointwise_activation, activation}
//   [-> conv2d{NHWC, 1 x 1, ...}(., w3, b3[, r]) [activation]
//   ==>  conv2d_1x1_depthwise_1x1(x, w1, b1, w2, b2, w3, b3[, r]){the
//        window, pointwise_activation, depthwise_activation, activation}]
// fuse_depthwise_pointwise:
// conv2d{NHWC, depthwise, bias}(x, w2, b2) [activation] -> conv2d{NHWC,
//   1 x 1, stride 1, no padding, one group, bias}(., w3, b3[, r])
//   [activation]
//   ==>  conv2d_depthwise_1x1(x, w2, b2, w3, b3[, r]){the depthwise window,
//        depthwise_activation, activation}
// MobileNet's inverted residual blocks expand their input with a pointwise
// convolution and filter the result depthwise. At high resolution the
// expanded tensor passes the caches (112 x 112 x 64 floats is 3.2 MB per
// image), and writing it and reading it back is most of both convolutions'
// time: oneDNN's 1 x 1 kernel expanding 16 channels to 64 ran at a third of
// the machine's FMA rate. The fused kernel expands a few rows at a time into
// a ring the depthwise window reads from the L2.
// Where the pointwise convolution has many input channels it is a GEMM
// oneDNN runs near the FMA rate and the expanded tensor is small (14 x 14 or
// 7 x 7 pixels): only pointwise inputs of at most kMaxInputChannels
// channels are fused. And where the expanded tensor fits the L2 caches
// anyway, oneDNN's two kernels were as fast or faster (MobileNetV3-Large at
// batch 1: its 56 x 56 x 72 and 28 x 28 x 120 tensors, 0.9 and 0.4 MB, ran
// 0-20% slower fused, while its 112 x 112 x 64, 3.2 MB, ran 1.3x faster):
// only expanded tensors of more than min_expanded_bytes are fused (1 MiB
// by default, kMinExpandedBytes in pass.h). Both
// bounds come from MobileNetV3-Large's blocks on a Zen 4 machine (2 threads,
// 1 MiB of L2 per core).
// A projection (1 x 1, any width, with fuse_conv_add's residual or not)
// reading the depthwise result alone joins them, conv2d_1x1_depthwise_1x1,
// when that result too is past the bound: its rows go from the depthwise
// window to the projection through the core's caches.
// The depthwise convolution reading a pointwise one's result is the same
// story the other way round (MobileNetV1's separable blocks; the first
// block of MobileNetV2 and V3, 112 x 112 x 16-32 at 224 pixels): its result
// never leaves the core's caches before the projection reads it, and a
// residual (fuse_conv_add's) is added as the projection writes. Run after
// fuse_pointwise_depthwise, which takes the depthwise convolutions of
// expand-filter-project blocks first (their expanded tensor is the larger),
// and for results past min_depthwise_bytes (1 MiB by default, as there).
// Float32 only (after mixed precision: bfloat16 convolutions stay oneDNN's),
// constant filters and biases; the second convolution must be the first's
// result's only reader.
#include "backends/cpu/passes/cpu_passes.h"
#include "ir/ops/op_helpers.h"
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::cpu {
namespace {

// The pattern helpers (passes/pattern_utils.h).
using namespace passes;  // NOLINT(google-build-using-namespace)

constexpr int64_t kMaxInputChannels = 64;

bool AllOnes(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
}

// A float32 NHWC conv2d with a constant filter and bias, no residual
// (unless `residual_ok`), an activation the fused kernels apply, and the
// direct algorithm.
bool Plain(const ir::Op& conv, bool residual_ok = false) {
  if (!conv.is(ir::Opcode::conv2d) || conv.GetStr("data_format") != "NHWC" ||
      (conv.inputs.size() != 3 && !(residual_ok && conv.inputs.size() == 4)) ||
      conv.GetStr("algorithm") != "direct" || !HasData(conv.inputs[1]) ||
      !HasData(conv.inputs[2]) || !ir::PointwiseDepthwiseActivation(conv.GetStr("activation")) ||
      !AllOnes(conv.GetInts("dilations")))
    return false;
  for (const ir::Value* v : conv.inputs) {
    if (v->dtype() != DType::kF32) return false;
  }
  return conv.outputs[0]->dtype() == DType::kF32;
}

// A 1 x 1 convolution of stride 1 without padding (of at most
// kMaxInputChannels input channels when `narrow`).
bool Pointwise(const ir::Op& conv, bool narrow, bool residual_ok = false) {
  if (!Plain(conv, residual_ok)) return false;
  const Shape& w = conv.inputs[1]->shape();
  const auto& pads = conv.GetInts("pads");
  return conv.GetInt("groups") == 1 && w[2] == 1 && w[3] == 1 &&
         (!narrow || w[1] <= kMaxInputChannels) && AllOnes(conv.GetInts("strides")) &&
         std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
}

bool Depthwise(const ir::Op& conv, int64_t channels) {
  const Shape& w = conv.inputs[1]->shape();
  return Plain(conv) && conv.GetInt("groups") == channels && w[0] == channels && w[1] == 1;
}

}  // namespace

int FusePointwiseDepthwise(ir::Graph& g, int64_t min_expanded_bytes) {
  int rewrites = 0;
  for (ir::Op* pw : OpsOfType(g, ir::Opcode::conv2d)) {
    if (!Pointwise(*pw, true)) continue;
    ir::Op* dw = SoleUser(g, pw->outputs[0]);
    if (!dw || dw->inputs[0] != pw->outputs[0] || dw->placement != pw->placement ||
        !Depthwise(*dw, pw->inputs[1]->shape()[0]) ||
        static_cast<int64_t>(pw->outputs[0]->bytes()) <= min_expanded_bytes)
      continue;
    ir::AttrMap attrs;
    attrs.Set("strides", dw->GetInts("strides"));
    attrs.Set("pads", dw->GetInts("pads"));
    attrs.Set("pointwise_activation", pw->GetStr("activation"));
    std::vector<ir::Value*> ins{pw->inputs[0], pw->inputs[1], pw->inputs[2], dw->inputs[1],
                                dw->inputs[2]};
    // The block's projection too, when it reads the depthwise result alone
    // (no squeeze-excitation between) and that result is past the bound.
    ir::Op* project = SoleUser(g, dw->outputs[0]);
    if (project && project->inputs[0] == dw->outputs[0] && project->placement == dw->placement &&
        Pointwise(*project, false, true) &&
        static_cast<int64_t>(dw->outputs[0]->bytes()) > min_expanded_bytes) {
      attrs.Set("depthwise_activation", dw->GetStr("activation"));
      attrs.Set("activation", project->GetStr("activation"));
      for (size_t i = 1; i < project->inputs.size(); ++i) ins.push_back(project->inputs[i]);
      ReplaceResult(g, project, "conv2d_1x1_depthwise_1x1", std::move(ins), std::move(attrs),
                    project->name);
    } else {
      attrs.Set("activation", dw->GetStr("activation"));
      ReplaceResult(g, dw, "conv2d_1x1_depthwise", std::move(ins), std::move(attrs), dw->name);
    }
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

int FuseDepthwisePointwise(ir::Graph& g, int64_t min_depthwise_bytes) {
  int rewrites = 0;
  for (ir::Op* dw : OpsOfType(g, ir::Opcode::conv2d)) {
    if (!Depthwise(*dw, dw->inputs[1]->shape()[0]) ||
        static_cast<int64_t>(dw->outputs[0]->bytes()) <= min_depthwise_bytes)
      continue;
    ir::Op* pw = SoleUser(g, dw->outputs[0]);
    if (!pw || pw->inputs[0] != dw->outputs[0] || pw->placement != dw->placement ||
        !Pointwise(*pw, false, true))
      continue;
    ir::AttrMap attrs;
    attrs.Set("strides", dw->GetInts("strides"));
    attrs.Set("pads", dw->GetInts("pads"));
    attrs.Set("depthwise_activation", dw->GetStr("activation"));
    attrs.Set("activation", pw->GetStr("activation"));
    std::vector<ir::Value*> ins{dw->inputs[0], dw->inputs[1], dw->inputs[2], pw->inputs[1],
                                pw->inputs[2]};
    if (pw->inputs.size() == 4) ins.push_back(pw->inputs[3]);
    ReplaceResult(g, pw, "conv2d_depthwise_1x1", std::move(ins), std::move(attrs), pw->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::cpu
