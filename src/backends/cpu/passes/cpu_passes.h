// The CPU backend's own rewrites: convolution algorithms, fusions and
// layouts that suit its kernels (oneDNN's Winograd and blocked-layout
// convolutions, Tiller's fused depthwise kernels). CpuBackend::AddPasses
// puts them at the end of the compile's rewrite pipeline, for inference,
// where every device of the compile suits them; the generic passes
// (src/passes/) know nothing of them.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "ir/graph.h"
#include "passes/pipeline.h"

namespace tiller::cpu {

// conv2d{3x3, stride 1, float32, constant filter, >= 32 channels} ->
// conv2d{algorithm = "winograd"} (backends/cpu/passes/conv_winograd.cc;
// after mixed precision and half_fallback, unless the compile's
// conv_winograd setting is off).
int ChooseWinogradConvs(ir::Graph& g);
// conv2d{1x1, NHWC, float32} -> conv2d{depthwise, NHWC, float32} ->
// conv2d_1x1_depthwise: the expanded tensor between them, when larger than
// min_expanded_bytes, never stored (backends/cpu/passes/fuse_depthwise.cc;
// after conv_winograd, whose 3 x 3 convolutions are never depthwise).
inline constexpr int64_t kMinExpandedBytes = int64_t{1} << 20;
int FusePointwiseDepthwise(ir::Graph& g, int64_t min_expanded_bytes = kMinExpandedBytes);
// conv2d{depthwise, NHWC, float32} -> conv2d{1x1, NHWC, float32}[+ residual]
// -> conv2d_depthwise_1x1: the depthwise result, when larger than
// min_depthwise_bytes, never stored (backends/cpu/passes/fuse_depthwise.cc;
// after FusePointwiseDepthwise).
int FuseDepthwisePointwise(ir::Graph& g, int64_t min_depthwise_bytes = kMinExpandedBytes);
// conv2d|pool2d{NHWC} chains with the elementwise ops and channel concats
// between them -> the same ops on [N, C / 8, H, W, 8] tensors
// (data_format NCHW8c), conversions at the chains' edges, where the chain's
// convolution work outweighs them (backends/cpu/passes/blocked_convs.cc;
// after the depthwise fusions, whose NHWC kernels keep their chains
// channel-last).
int BlockConvChains(ir::Graph& g);

// Appends the passes above to `pipeline` (CpuBackend::AddPasses).
void AddCpuPasses(passes::PassPipeline& pipeline, const std::vector<backend::DeviceCaps>& devices,
                  const backend::BackendPassSettings& settings);

}  // namespace tiller::cpu
