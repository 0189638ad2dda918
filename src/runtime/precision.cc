#include "runtime/precision.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "compile/half_fallback.h"
#include "core/cpu_isa.h"
#include "core/error.h"
#include "runtime/notes.h"
#include "tiller/option_groups.h"

namespace tiller::runtime {

bool CpuHasBF16Arithmetic() {
  // AVX512_BF16 (Zen 4, Cooper Lake and later Xeons) or AMX-BF16 (Sapphire
  // Rapids), as core/cpu_isa.h found them; both are above what
  // TILLER_MAX_ISA=avx2 allows.
  const CpuIsaReport& r = CpuIsa();
  if (r.chosen < IsaLevel::kAvx512) return false;
  for (const std::string& f : r.features)
    if (f == "avx512_bf16" || f == "amx_bf16") return true;
  return false;
}

compile::Precision ParsePrecision(const std::string& name, const std::string& option) {
  using compile::Precision;
  if (name == "float32" || name == "fp32") return Precision::kFloat32;
  if (name == "bfloat16" || name == "bf16") return Precision::kBFloat16;
  if (name == "float16" || name == "fp16") return Precision::kFloat16;
  ValidatePrecisionName(name, option);  // throws for any other name
  return CpuHasBF16Arithmetic() ? Precision::kBFloat16 : Precision::kFloat16;  // "half"
}

const HalfSpeed& MeasuredBF16Speed() {
  static const HalfSpeed speed = [] {
    // The CPU device's own measurement (its kernels, one thread).
    std::unique_ptr<backend::Device> cpu =
        backend::FindBackend("cpu")->CreateDevice(0, {.threads = 1});
    HalfSpeed s;
    s.float32_gflops = cpu->GemmGflops(DType::kF32);
    s.half_gflops = cpu->GemmGflops(DType::kBF16);
    return s;
  }();
  return speed;
}

std::string SlowHalfPrecisionMessage(compile::Precision p, bool bf16_instructions, bool bf16_gemm,
                                     const std::function<const HalfSpeed&()>& bf16_speed) {
  if (p == compile::Precision::kFloat16) {
    std::string message =
        "float16 on this CPU is stored as float16 and computed in float32 (oneDNN has no CPU "
        "float16 GEMM): float16's rounding without its speed";
    if (bf16_instructions) {
      const HalfSpeed& bf16 = bf16_speed();
      if (bf16.half_gflops > bf16.float32_gflops)
        message += fmt::format(
            "; bfloat16 is the fast half type here (measured {:.0f} vs {:.0f} "
            "GFLOP/s for float32 on one thread)",
            bf16.half_gflops, bf16.float32_gflops);
    }
    return message;
  }
  if (p != compile::Precision::kBFloat16) return "";
  if (!bf16_instructions)
    return bf16_gemm
               ? "this CPU has no AVX512_BF16 or AMX-BF16: oneDNN emulates bfloat16, which can "
                 "be slower than float32"
               : "this CPU has no AVX512_BF16 or AMX-BF16 and oneDNN no bfloat16 GEMM for it: "
                 "bfloat16 is stored as such and computed in float32, bfloat16's rounding "
                 "without its speed";
  // The instructions are there, but not every CPU runs them faster than
  // float32 (measured on an Intel Xeon with AVX512_BF16 and no AMX exposed:
  // bfloat16 GEMMs at 0.7x float32; on AMD Zen 4, 2x).
  const HalfSpeed& bf16 = bf16_speed();
  if (bf16.half_gflops >= bf16.float32_gflops) return "";
  return fmt::format(
      "bfloat16 multiplies slower than float32 on this CPU (measured now, a 128x768x3072 "
      "matmul on one thread: bfloat16 {:.0f} GFLOP/s, float32 {:.0f}): bfloat16's rounding "
      "without its speed; float32 is faster here",
      bf16.half_gflops, bf16.float32_gflops);
}

void ReportSlowHalfPrecisionOnce(compile::Precision p) {
  static std::mutex mu;
  static std::set<compile::Precision> reported;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (reported.count(p)) return;
  }
  const std::string message = SlowHalfPrecisionMessage(
      p, CpuHasBF16Arithmetic(),
      compile::BackendMultipliesIn(*backend::FindBackend("cpu"), DType::kBF16), MeasuredBF16Speed);
  std::lock_guard<std::mutex> lock(mu);
  if (reported.insert(p).second && !message.empty() && IsMainProcess())
    std::fprintf(stderr, "tiller: %s\n", message.c_str());
}

}  // namespace tiller::runtime
