// conv2d{3x3, stride 1, dilation 1, one group, float32, constant filter,
//   >= kMinChannels channels in and out}
//   ==>  conv2d{algorithm = "winograd"}
// Winograd's minimal filtering computes a 3 x 3 convolution's output tiles
// from transformed input tiles with 2.25x (F(2x2, 3x3)) to 4x (F(4x4, 3x3))
// fewer multiplications; oneDNN's AVX-512 kernels for it ran ResNet-50's
// 3 x 3 layers 1.2-2x faster than its direct kernels on a Zen 4 machine
// (2 threads, the reorders to and from its blocked layout included, warm
// or cold caches), and their results were within 2e-6 of the largest
// output (relative) of the direct ones. With few channels the transforms
// dominate: 32 in and out gained 1.07-1.34x (UNet's 32-channel layers
// 1.2x in the model), 16 broke even or lost, 3 (a first layer) ran 4x
// slower.
// Inference only (training keeps the direct kernels its gradients match);
// the CPU kernel falls back to the direct one where oneDNN has no Winograd
// kernel (CPUs without AVX-512).
#include "backends/cpu/passes/cpu_passes.h"
#include "ir/ops/op_helpers.h"
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::cpu {
namespace {

// The pattern helpers (passes/pattern_utils.h).
using namespace passes;  // NOLINT(google-build-using-namespace)

constexpr int64_t kMinChannels = 32;

bool Eligible(const ir::Op& conv) {
  const ir::Value* w = conv.inputs[1];
  const Shape& ws = w->shape();
  return conv.GetStr("algorithm") == "direct" && HasData(w) &&
         ir::WinogradFits(ws, ir::ReadConvWindow(conv), conv.inputs[0]->dtype(),
                          conv.outputs[0]->dtype()) &&
         ws[0] >= kMinChannels && ws[1] >= kMinChannels;
}

}  // namespace

int ChooseWinogradConvs(ir::Graph& g) {
  int rewrites = 0;
  for (ir::Op* conv : OpsOfType(g, ir::Opcode::conv2d)) {
    if (!Eligible(*conv)) continue;
    conv->attrs.Set("algorithm", std::string("winograd"));
    ++rewrites;
  }
  return rewrites;
}

}  // namespace tiller::cpu
