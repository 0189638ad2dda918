// dropout (training form, float32; see ir/ops/training.cc). Element i is
// kept when its uniform draw u(seed', i) >= p, Paddle's test on its own
// draws, with seed' = Mix(seed, step): each step is a fresh counter-based
// stream, so masks differ between steps and repeat for the same seed and step.
#include "backends/cpu/kernels/kernel_utils.h"
#include "backends/cpu/kernels/random_bits.h"

namespace tiller::cpu {
namespace {

std::unique_ptr<Kernel> MakeDropout(const ir::Op& op) {
  int64_t n = NumElements(op.inputs[0]->shape());
  double p = op.GetFloat("p");
  bool upscale = op.GetStr("mode") == "upscale_in_train";
  auto seed = static_cast<uint64_t>(op.GetInt("seed"));
  bool has_step = op.input(1) != nullptr;
  // Paddle divides kept values by the float 1 - p; p = 1 drops everything.
  float keep_div = upscale && p < 1.0 ? 1.0f - static_cast<float>(p) : 1.0f;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
    const float* x = static_cast<const float*>(a.inputs[0]);
    float* out = static_cast<float*>(a.outputs[0]);
    uint8_t* mask = static_cast<uint8_t*>(a.outputs[1]);
    uint64_t step = has_step ? static_cast<uint64_t>(*static_cast<const int64_t*>(a.inputs[1])) : 0;
    uint64_t stream = Mix(seed, step);
    ParallelRange(n, 8, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        bool keep = p < 1.0 && Unit(stream, static_cast<uint64_t>(i)) >= p;
        mask[i] = keep ? 1 : 0;
        out[i] = keep ? x[i] / keep_div : 0.0f;
      }
    });
  });
}

TILLER_CPU_KERNEL("dropout", MakeDropout,
                  Signature("T, int64? -> T, uint8").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
