// The precision names of the public options and what this CPU multiplies.
//   Config::SetPrecision / EnableMkldnnBfloat16, SetIpuConfig(ipu_enable_fp16),
//   the training options enable_fp16 + half_dtype  ->  compile::Precision
#pragma once

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

// A half type this CPU cannot multiply fast (float16 anywhere: oneDNN 2.6
// has no CPU float16 GEMM; bfloat16 without AVX512_BF16 / AMX-BF16: oneDNN
// emulates it) is reported on stderr, once per process and type, so a run
// is never silently slow.
void ReportSlowHalfPrecisionOnce(compile::Precision p);

}  // namespace tiller::runtime
