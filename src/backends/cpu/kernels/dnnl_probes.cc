// What this CPU's oneDNN can do (dnnl_context.h), probed once per process:
// the answers decide which GEMM and convolution kernels are registered
// (matmul.cc) and the devices' preferred channel block.
#include <mutex>
#include <optional>
#include <string>

#include "backends/cpu/dnnl_context.h"
#include "core/cpu_isa.h"

namespace tiller::cpu {
namespace {

const char* DnnlIsaName(dnnl::cpu_isa isa) {
  using dnnl::cpu_isa;
  switch (isa) {
    case cpu_isa::sse41:
      return "sse41";
    case cpu_isa::avx:
      return "avx";
    case cpu_isa::avx2:
      return "avx2";
    case cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case cpu_isa::avx512_core:
      return "avx512_core";
    case cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

// The most oneDNN may use at a level: avx512 is every AVX-512 kernel
// (VNNI and bfloat16 included) but not AMX's.
dnnl::cpu_isa DnnlCap(IsaLevel level) {
  switch (level) {
    case IsaLevel::kX86_64:
    case IsaLevel::kX86_64_v2:
      return dnnl::cpu_isa::sse41;
    case IsaLevel::kAvx2:
      return dnnl::cpu_isa::avx2;
    case IsaLevel::kAvx512:
      return dnnl::cpu_isa::avx512_core_bf16;
    case IsaLevel::kAmx:
      return dnnl::cpu_isa::all;
  }
  return dnnl::cpu_isa::all;
}

}  // namespace

void ApplyDnnlIsaCap() {
  static std::once_flag once;
  std::call_once(once, [] {
    const CpuIsaReport& r = CpuIsa();
    // No cap, or one this build refuses (CheckCpuIsa ends the work before
    // any kernel runs): oneDNN decides alone, as ONEDNN_MAX_CPU_ISA says.
    if (r.cap && r.error.empty() && dnnl::set_max_cpu_isa(DnnlCap(*r.cap)) != dnnl::status::success)
      RecordLibraryIsa("oneDNN cap", "not applied: oneDNN had run before");
    RecordLibraryIsa("oneDNN", DnnlIsaName(dnnl::get_effective_cpu_isa()));
  });
}

bool DnnlMultipliesBF16() {
  // oneDNN 2.6 multiplies bfloat16 with its AVX-512 kernels (natively with
  // AVX512_BF16 / AMX, emulated on plain AVX-512) and not with AVX2: asking
  // it for a bfloat16 GEMM is the one test that cannot disagree with it.
  static const bool yes = [] {
    ApplyDnnlIsaCap();
    try {
      using dnnl::memory;
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      const memory::desc a({16, 16}, memory::data_type::bf16, memory::format_tag::ab);
      const memory::desc c({16, 16}, memory::data_type::f32, memory::format_tag::ab);
      // Throws when no implementation takes these types here.
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, c), engine);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return yes;
}

bool DnnlMultipliesInt8Exactly() {
  // Without VNNI oneDNN 2.6 multiplies s8 x s8 through vpmaddubsw, whose
  // int16 pair sums saturate, and so halves convolution weights first
  // ("sa0.5" in its verbose log: odd weights lose their last bit) and lets
  // GEMM sums saturate: results off by up to 10% in this project's tests.
  // With AVX512_VNNI (vpdpbusd, int32 sums) they are exact.
  static const bool yes = [] {
    ApplyDnnlIsaCap();
    using dnnl::cpu_isa;
    switch (dnnl::get_effective_cpu_isa()) {
      case cpu_isa::avx512_core_vnni:
      case cpu_isa::avx512_core_bf16:
      case cpu_isa::avx512_core_amx:
        return true;
      default:
        return false;
    }
  }();
  return yes;
}

namespace {

// oneDNN's float32 3 x 3 convolution of `alg` from and to [N, C, H, W]
// (same padding, C channels out), activation layouts left to it; none
// where it has no kernel for this CPU.
std::optional<dnnl::convolution_forward::primitive_desc> ProbeConv3x3(dnnl::algorithm alg,
                                                                      const dnnl::memory::dims& x) {
  ApplyDnnlIsaCap();
  try {
    using dnnl::memory;
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    const auto f32 = memory::data_type::f32;
    const memory::desc xy(x, f32, memory::format_tag::any);
    const memory::desc w({x[1], x[1], 3, 3}, f32, memory::format_tag::any);
    const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, alg, xy, w, xy,
                                            {1, 1}, {1, 1}, {1, 1});
    return dnnl::convolution_forward::primitive_desc(d, engine);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

}  // namespace

bool DnnlRunsWinograd() {
  static const bool yes =
      ProbeConv3x3(dnnl::algorithm::convolution_winograd, {1, 32, 8, 8}).has_value();
  return yes;
}

int DnnlConvChannelBlock() {
  static const int block = [] {
    // A ResNet-like 3 x 3 layer.
    const dnnl::memory::dims x{8, 64, 28, 28};
    const auto pd = ProbeConv3x3(dnnl::algorithm::convolution_direct, x);
    const dnnl::memory::desc blocked(x, dnnl::memory::data_type::f32,
                                     dnnl::memory::format_tag::nChw8c);
    return pd && pd->src_desc() == blocked ? 8 : 0;
  }();
  return block;
}

}  // namespace tiller::cpu
