// The loss-scaling ops of Paddle AMP programs (ir/ops/training.cc):
// any_non_finite scans gradients for NaN / Inf, update_loss_scaling steps
// the dynamic scale with Paddle's rule.
#include <atomic>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

// An element is NaN or Inf exactly when its exponent bits are all ones: a
// bit test the compiler vectorizes, for each float layout.
template <typename Bits, Bits kExponent>
bool AnyNonFiniteBits(const void* data, int64_t n) {
  std::atomic<bool> found{false};
  ParallelRange(n, 1, [&](int64_t b, int64_t e) {
    const Bits* x = static_cast<const Bits*>(data);
    Bits hit = 0;
    for (int64_t i = b; i < e; ++i) hit |= static_cast<Bits>((x[i] & kExponent) == kExponent);
    if (hit) found.store(true, std::memory_order_relaxed);
  });
  return found.load();
}

std::unique_ptr<Kernel> MakeAnyNonFinite(const ir::Op& op) {
  std::vector<int64_t> sizes;
  for (const ir::Value* in : op.inputs) sizes.push_back(NumElements(in->shape()));
  bool (*scan)(const void*, int64_t) = nullptr;
  switch (InDType(op)) {
    case DType::kF32:
      scan = AnyNonFiniteBits<uint32_t, 0x7f800000U>;
      break;
    case DType::kBF16:
      scan = AnyNonFiniteBits<uint16_t, 0x7f80U>;
      break;
    case DType::kF16:
      scan = AnyNonFiniteBits<uint16_t, 0x7c00U>;
      break;
    default:
      Unsupported(op, "dtype {}", DTypeName(InDType(op)));
  }
  return std::make_unique<LambdaKernel>([sizes = std::move(sizes), scan](const KernelArgs& args) {
    bool found = false;
    for (size_t i = 0; i < sizes.size() && !found; ++i) found = scan(args.inputs[i], sizes[i]);
    *static_cast<bool*>(args.outputs[0]) = found;
  });
}

// Paddle's phi Update (amp_kernel_impl.h) step by step, in float32 as its
// kernel computes the new scale.
std::unique_ptr<Kernel> MakeUpdateLossScaling(const ir::Op& op) {
  const auto incr_every = static_cast<int32_t>(op.GetInt("incr_every_n_steps"));
  const auto decr_every = static_cast<int32_t>(op.GetInt("decr_every_n_nan_or_inf"));
  const auto incr_ratio = static_cast<float>(op.GetFloat("incr_ratio"));
  const auto decr_ratio = static_cast<float>(op.GetFloat("decr_ratio"));
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const bool found = *static_cast<const bool*>(args.inputs[0]);
    const float prev = *static_cast<const float*>(args.inputs[1]);
    int32_t good = *static_cast<const int32_t*>(args.inputs[2]);
    int32_t bad = *static_cast<const int32_t*>(args.inputs[3]);
    float scale = prev;
    if (found) {
      good = 0;
      if (++bad == decr_every) {
        scale = std::max(prev * decr_ratio, 1.0F);
        bad = 0;
      }
    } else {
      bad = 0;
      if (++good == incr_every) {
        const float up = prev * incr_ratio;
        scale = std::isfinite(up) ? up : prev;
        good = 0;
      }
    }
    *static_cast<float*>(args.outputs[0]) = scale;
    *static_cast<int32_t*>(args.outputs[1]) = good;
    *static_cast<int32_t*>(args.outputs[2]) = bad;
  });
}

TILLER_CPU_KERNEL("any_non_finite", MakeAnyNonFinite,
                  Signature("T... -> bool").Where("T", {DType::kF32, DType::kBF16, DType::kF16}));
TILLER_CPU_KERNEL("update_loss_scaling", MakeUpdateLossScaling,
                  Signature("bool, T, int32, int32 -> T, int32, int32").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
