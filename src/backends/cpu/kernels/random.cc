// Seeded random generators: random_normal and random_uniform. Each run
// draws the same numbers from the op's seed (see ir/ops/tensor_ops.cc).
#include <numbers>

#include "backends/cpu/kernels/kernel_utils.h"
#include "backends/cpu/kernels/random_bits.h"

namespace tiller::cpu {
namespace {

template <typename T>
void Store(T* out, int64_t i, double v) {
  if constexpr (std::is_same_v<T, float>) {
    out[i] = static_cast<float>(v);
  } else {
    out[i] = v;
  }
}

template <typename T>
std::unique_ptr<Kernel> Uniform(int64_t n, uint64_t seed, double lo, double hi) {
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    T* out = static_cast<T*>(args.outputs[0]);
    ParallelRange(n, 8, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        double v = lo + (hi - lo) * Unit(seed, static_cast<uint64_t>(i));
        // float rounding can reach `hi`; keep the interval half-open.
        if constexpr (std::is_same_v<T, float>) {
          float f = static_cast<float>(v);
          out[i] = f >= static_cast<float>(hi) && hi > lo
                       ? std::nextafter(f, static_cast<float>(lo))
                       : f;
        } else {
          out[i] = v;
        }
      }
    });
  });
}

// Box-Muller on pairs: elements 2j and 2j+1 share two uniforms.
template <typename T>
std::unique_ptr<Kernel> Normal(int64_t n, uint64_t seed, double mean, double std) {
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    T* out = static_cast<T*>(args.outputs[0]);
    ParallelRange(n, 32, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        uint64_t j = static_cast<uint64_t>(i) / 2;
        double u1 = 1.0 - Unit(seed, 2 * j), u2 = Unit(seed, 2 * j + 1);  // u1 in (0, 1]
        double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * std::numbers::pi * u2;
        Store(out, i, mean + std * r * (i % 2 == 0 ? std::cos(t) : std::sin(t)));
      }
    });
  });
}

std::unique_ptr<Kernel> MakeRandom(const ir::Op& op, bool normal) {
  int64_t n = NumElements(op.outputs[0]->shape());
  auto seed = static_cast<uint64_t>(op.GetInt("seed"));
  std::unique_ptr<Kernel> k;
  DispatchDType<float, double>(OutDType(op), [&](auto tag) {
    using T = decltype(tag);
    k = normal ? Normal<T>(n, seed, op.GetFloat("mean"), op.GetFloat("std"))
               : Uniform<T>(n, seed, op.GetFloat("min"), op.GetFloat("max"));
  });
  return k;
}

const bool kRegistered = [] {
  // No inputs: the output's dtype (the dtype attribute).
  RegisterKernel(
      "random_normal", [](const ir::Op& op) { return MakeRandom(op, true); },
      Signature(" -> T").Where("T", {DType::kF32, DType::kF64}));
  RegisterKernel(
      "random_uniform", [](const ir::Op& op) { return MakeRandom(op, false); },
      Signature(" -> T").Where("T", {DType::kF32, DType::kF64}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
