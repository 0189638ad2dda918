// Which copy of the per-ISA kernel files runs (isa_copy.h), decided once.
#include "backends/cpu/kernels/isa_copy.h"

#include "core/cpu_isa.h"

namespace tiller::cpu {

bool RunAvx512Copies() {
  static const bool run = [] {
    const CpuIsaReport& r = CpuIsa();
    const bool avx512 = r.compiled < IsaLevel::kAvx512 && r.chosen >= IsaLevel::kAvx512;
    // What the kernels written on simd.h run: the AVX-512 copies, or the
    // build's own level.
    RecordLibraryIsa("Tiller kernels",
                     avx512 ? "avx512 (the x86-64-v4 copies)"
                            : std::string(IsaLevelName(r.compiled)) + " (the build's own)");
    return avx512;
  }();
  return run;
}

// Decided while the library loads (the kernels' registrations ask), so
// that `tiller info` names it before any kernel ran.
namespace {
const bool kDecidedAtLoad = RunAvx512Copies();
}  // namespace

}  // namespace tiller::cpu
