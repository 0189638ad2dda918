// The CPU backend's entries in the compile's rewrite pipeline
// (compile/compile_pipeline.cc calls Backend::AddPasses after the generic
// rewrites). All are inference rewrites of float32 convolutions, so they
// follow mixed precision and half_fallback, which decide which
// convolutions stay float32.
#include <algorithm>
#include <memory>
#include <string>

#include "backends/cpu/passes/cpu_passes.h"

namespace tiller::cpu {
namespace {

using passes::PassContext;
using passes::PassPipeline;

// An inference rewrite that is recorded only when it changed something.
PassPipeline::Options Inference(std::vector<std::string> after, bool on, const std::string& when) {
  PassPipeline::Options o = PassPipeline::After(
      std::move(after), [on](const PassContext& ctx) { return !ctx.training && on; });
  o.record_idle = false;
  o.when = "inference, optimize" + when;
  return o;
}

bool AllFuse(const std::vector<backend::DeviceCaps>& devices, const std::string& pass) {
  return std::all_of(devices.begin(), devices.end(),
                     [&pass](const backend::DeviceCaps& d) { return d.fuses(pass); });
}

}  // namespace

void AddCpuPasses(PassPipeline& p, const std::vector<backend::DeviceCaps>& devices,
                  const backend::BackendPassSettings& settings) {
  const bool optimize = settings.optimize;
  p.Add(std::make_unique<passes::FunctionPass>(
            "conv_winograd", "conv2d{3x3, stride 1, float32, >= 32 channels} -> conv2d{winograd}",
            ChooseWinogradConvs),
        Inference({"mixed_precision", "half_fallback"}, optimize && settings.conv_winograd,
                  ", conv_winograd"));
  // The fused kernels are Tiller's own CPU kernels: only where every device
  // of the compile runs them fast (CpuDevice::caps: AVX-512).
  const bool depthwise = optimize && AllFuse(devices, "fuse_pointwise_depthwise");
  p.Add(
      std::make_unique<passes::LambdaPass>(
          "fuse_pointwise_depthwise", "conv2d{1x1} -> conv2d{depthwise} -> conv2d_1x1_depthwise",
          [](ir::Graph& g, const PassContext&, std::string*) { return FusePointwiseDepthwise(g); }),
      Inference({"conv_winograd"}, depthwise, ", every device fuses it (AVX-512 CPUs)"));
  p.Add(
      std::make_unique<passes::LambdaPass>(
          "fuse_depthwise_pointwise", "conv2d{depthwise} -> conv2d{1x1} -> conv2d_depthwise_1x1",
          [](ir::Graph& g, const PassContext&, std::string*) { return FuseDepthwisePointwise(g); }),
      Inference({"fuse_pointwise_depthwise"}, depthwise, ", every device fuses it (AVX-512 CPUs)"));
  int block = settings.conv_channel_block;
  if (block < 0) {
    block = std::all_of(devices.begin(), devices.end(),
                        [](const backend::DeviceCaps& d) { return d.conv_channel_block == 8; })
                ? 8
                : 0;
  }
  p.Add(std::make_unique<passes::FunctionPass>(
            "blocked_convs", "conv2d|pool2d{NHWC} chains -> NCHW8c, conversions at the edges",
            BlockConvChains),
        Inference({"fuse_depthwise_pointwise"}, optimize && block == 8,
                  ", conv_channel_block 8, or -1 and every device's convolutions prefer nChw8c "
                  "(AVX2 CPUs)"));
}

}  // namespace tiller::cpu
