#include "runtime/precision.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>

#include "compile/executable.h"
#include "compile/half_fallback.h"
#include "core/error.h"
#include "ir/graph.h"
#include "passes/pass.h"
#include "runtime/notes.h"
#include "tiller/option_groups.h"

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
  ValidatePrecisionName(name, option);  // throws for any other name
  return CpuHasBF16Arithmetic() ? Precision::kBFloat16 : Precision::kFloat16;  // "half"
}

namespace {

// GFLOP/s of y = x W in `half` (bfloat16 operands, float32 accumulation,
// as the mixed-precision pass compiles it) or float32 (kF32), x [128, 768]
// and W [768, 3072] (BERT-Base's feed-forward GEMM at 128 tokens), one
// thread, best of three runs after a warm-up: about 50 ms in all.
double MatmulRate(DType half) {
  constexpr int64_t M = 128, K = 768, N = 3072;
  auto g = std::make_unique<ir::Graph>();
  ir::Value* x = g->AddInput("x", {DType::kF32, {M, K}});
  auto weights = std::make_shared<AlignedBuffer>(K * N * sizeof(float));
  float* w = weights->as<float>();
  for (int64_t i = 0; i < K * N; ++i) w[i] = static_cast<float>(i % 7) * 0.01f - 0.03f;
  ir::Value* wv = g->AddData("w", {DType::kF32, {K, N}}, ir::ValueKind::kParam, weights);
  g->AddOutput("y", g->Add1("matmul", {x, wv}, {}, "probe"));
  if (half != DType::kF32) passes::ConvertToMixedPrecision(*g, {half, true}, nullptr);
  auto exe = compile::Executable::Build(std::move(g), compile::CompileOptions::Cpu(1));
  float* in = static_cast<float*>(exe->inputs()[0].data);
  for (int64_t i = 0; i < M * K; ++i) in[i] = static_cast<float>(i % 5) * 0.1f;
  exe->Run();
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    exe->Run();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * M * K * N / best / 1e9;
}

}  // namespace

const HalfSpeed& MeasuredBF16Speed() {
  static const HalfSpeed speed = [] {
    HalfSpeed s;
    s.float32_gflops = MatmulRate(DType::kF32);
    s.half_gflops = MatmulRate(DType::kBF16);
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
