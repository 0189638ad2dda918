#include "runtime/precision.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdio>
#include <mutex>
#include <set>

#include "core/error.h"

namespace tiller::runtime {

bool CpuHasBF16Arithmetic() {
#if defined(__x86_64__)
  // CPUID leaf 7: subleaf 1 EAX bit 5 is AVX512_BF16 (Zen 4, Cooper Lake
  // and later Xeons); subleaf 0 EDX bit 22 is AMX-BF16 (Sapphire Rapids).
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5))) return true;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22));
#else
  return false;
#endif
}

compile::Precision ParsePrecision(const std::string& name, const std::string& option) {
  using compile::Precision;
  if (name == "float32" || name == "fp32") return Precision::kFloat32;
  if (name == "bfloat16" || name == "bf16") return Precision::kBFloat16;
  if (name == "float16" || name == "fp16") return Precision::kFloat16;
  if (name == "half") return CpuHasBF16Arithmetic() ? Precision::kBFloat16 : Precision::kFloat16;
  Fail(ErrorKind::kInvalidArgument,
       "{}: precision '{}' is not one of 'float32', 'bfloat16', 'float16' or 'half' (bfloat16 "
       "where the CPU multiplies it, else float16)",
       option, name);
}

void ReportSlowHalfPrecisionOnce(compile::Precision p) {
  std::string message;
  if (p == compile::Precision::kFloat16)
    message = std::string(
                  "float16 on this CPU is stored as float16 and computed in float32 (oneDNN has "
                  "no CPU float16 GEMM): float16's rounding without its speed") +
              (CpuHasBF16Arithmetic() ? "; bfloat16 is the fast half type here" : "");
  else if (p == compile::Precision::kBFloat16 && !CpuHasBF16Arithmetic())
    message =
        "this CPU has no AVX512_BF16 or AMX-BF16: oneDNN emulates bfloat16, which can be slower "
        "than float32";
  if (message.empty()) return;
  static std::mutex mu;
  static std::set<compile::Precision> reported;
  std::lock_guard<std::mutex> lock(mu);
  if (reported.insert(p).second) std::fprintf(stderr, "tiller: %s\n", message.c_str());
}

}  // namespace tiller::runtime
