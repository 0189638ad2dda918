// stochastic_cast(x float32, step){dtype, seed} (ir/ops/training.cc): float32
// rounded to bfloat16 or float16 up with probability equal to the distance
// from the value below, in ulps. Element i's draw is Mix(Mix(seed, step), i)
// (random_bits.h), so results do not depend on how threads split the work.
#include "backends/cpu/kernels/kernel_utils.h"
#include "backends/cpu/kernels/random_bits.h"

namespace tiller::cpu {
namespace {

// bfloat16 is float32's upper half: adding 16 random bits below the cut
// carries into it with probability (low 16 bits) / 2^16, exactly the
// distance to the value below in ulps. Magnitude-wise, so negative values
// round away from zero with that probability too.
uint16_t StochasticBF16(float x, uint64_t bits) {
  const auto u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffU) > 0x7f800000U) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  if ((u & 0x7fffffffU) == 0x7f800000U) return static_cast<uint16_t>(u >> 16);          // Inf
  return static_cast<uint16_t>((u + static_cast<uint32_t>(bits >> 48)) >> 16);
}

// float16: the magnitude truncated to float16 (down), the next float16 above
// it (up; past the largest finite value the step continues, so a value
// beyond it may round to Inf), and a 24-bit uniform draw.
uint16_t StochasticHalf(float x, uint64_t bits) {
  if (!std::isfinite(x)) return FloatToHalf(x);
  const float a = std::fabs(x);
  uint16_t down = FloatToHalf(a);
  if (HalfToFloat(down) > a) --down;
  const double lo = HalfToFloat(down);
  const double hi = down == 0x7bff ? 65536.0 : HalfToFloat(static_cast<uint16_t>(down + 1));
  const double p = (a - lo) / (hi - lo);
  const double draw = static_cast<double>(bits >> 40) * 0x1.0p-24;
  const uint16_t mag = draw < p ? static_cast<uint16_t>(down + 1) : down;
  return static_cast<uint16_t>(mag | (std::signbit(x) ? 0x8000 : 0));
}

std::unique_ptr<Kernel> MakeStochasticCast(const ir::Op& op) {
  const int64_t n = NumElements(op.inputs[0]->shape());
  const auto seed = static_cast<uint64_t>(op.GetInt("seed"));
  const bool bf16 = op.outputs[0]->dtype() == DType::kBF16;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const auto step = static_cast<uint64_t>(*static_cast<const int64_t*>(args.inputs[1]));
    auto* y = static_cast<uint16_t*>(args.outputs[0]);
    const uint64_t stream = Mix(seed, step);
    ParallelRange(n, 8, [&](int64_t b, int64_t e) {
      if (bf16) {
        for (int64_t i = b; i < e; ++i) y[i] = StochasticBF16(x[i], Mix(stream, i));
      } else {
        for (int64_t i = b; i < e; ++i) y[i] = StochasticHalf(x[i], Mix(stream, i));
      }
    });
  });
}

TILLER_CPU_KERNEL(
    "stochastic_cast", MakeStochasticCast,
    Signature("T, int64 -> U").Where("T", {DType::kF32}).Where("U", {DType::kBF16, DType::kF16}));

}  // namespace
}  // namespace tiller::cpu
