// The precision names of the public options and what this CPU multiplies.
//   Config::SetPrecision / EnableMkldnnBfloat16, SetIpuConfig(ipu_enable_fp16),
//   the training options enable_fp16 + half_dtype  ->  compile::Precision
#pragma once

#include <functional>
#include <string>

#include "compile/options.h"

namespace tiller::runtime {

// Whether this CPU multiplies bfloat16 natively (AVX512_BF16 or AMX-BF16).
bool CpuHasBF16Arithmetic();

// "float32" (fp32), "bfloat16" (bf16), "float16" (fp16), or "half": the
// default half type, bfloat16 where the CPU multiplies it natively, else
// float16 (stored as float16, computed in float32). Anything else is
// kInvalidArgument naming `option` and the choices.
compile::Precision ParsePrecision(const std::string& name, const std::string& option);

// The bfloat16 and float32 GEMM rates of this CPU, as a one-thread CPU
// device measures them (backend::Device::GemmGflops: a 128x768x3072 matmul
// as the mixed-precision pass compiles it, about 50 ms on first use), once
// per process. half_gflops is 0 where the CPU backend has no bfloat16 GEMM.
struct HalfSpeed {
  double half_gflops = 0, float32_gflops = 0;
};
const HalfSpeed& MeasuredBF16Speed();

// A half type this CPU cannot multiply fast (float16 anywhere: oneDNN 2.6
// has no CPU float16 GEMM; bfloat16 without AVX512_BF16 / AMX-BF16: oneDNN
// emulates it (AVX-512) or has no GEMM for it (AVX2: computed in float32); bfloat16 measured slower
// than float32, as on Intel CPUs with AVX512_BF16 but no AMX) is reported on stderr, once per
// process and type, so a run is never silently slow.
void ReportSlowHalfPrecisionOnce(compile::Precision p);
// What ReportSlowHalfPrecisionOnce says ("" for nothing), given whether the
// CPU has bfloat16 instructions, whether the CPU backend has a bfloat16 GEMM
// (compile::BackendMultipliesIn) and, called only when needed, its measured
// bfloat16 speed.
std::string SlowHalfPrecisionMessage(compile::Precision p, bool bf16_instructions, bool bf16_gemm,
                                     const std::function<const HalfSpeed&()>& bf16_speed);

}  // namespace tiller::runtime
