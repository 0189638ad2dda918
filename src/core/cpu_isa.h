// The x86-64 instruction-set levels of this CPU and of this build, and the
// cap TILLER_MAX_ISA puts on them (like oneDNN's ONEDNN_MAX_CPU_ISA).
//
// Levels, each including the ones before it:
//   x86-64     SSE2 (every x86-64 CPU)
//   x86-64-v2  + SSE3, SSSE3, SSE4.1, SSE4.2, POPCNT
//   avx2       + AVX, AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE (x86-64-v3)
//   avx512     + AVX-512 F, BW, CD, DQ, VL (x86-64-v4)
//   amx        + AMX tiles with bfloat16 and int8 (Sapphire Rapids)
// A level counts only where the OS saves its registers (XCR0).
//
// This build's own kernels are compiled for one level (the -march of the
// build: `compiled`), and oneDNN picks its own at run time. A cap at or
// above `compiled` is passed to oneDNN (backends/cpu/dnnl_probes.cc); one
// below it cannot be honoured by this build, and is refused rather than
// ignored (CheckCpuIsa).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tiller {

enum class IsaLevel { kX86_64 = 0, kX86_64_v2, kAvx2, kAvx512, kAmx };

// "x86-64", "x86-64-v2", "avx2", "avx512", "amx".
const char* IsaLevelName(IsaLevel level);
// A level by its name, or by x86-64-v3 / x86-64-v4 for avx2 / avx512;
// nullopt for anything else.
std::optional<IsaLevel> ParseIsaLevel(std::string_view name);
// The values TILLER_MAX_ISA takes, for messages.
const char* IsaLevelChoices();

struct CpuIsaReport {
  std::string cpu;                        // cpuid's brand string
  IsaLevel detected = IsaLevel::kX86_64;  // this CPU's (and OS's) highest level
  std::vector<std::string> features;      // the features found, cpuid's names
  IsaLevel compiled = IsaLevel::kX86_64;  // what this build's own code needs
  std::optional<IsaLevel> cap;            // TILLER_MAX_ISA, when set to a level
  std::string cap_text;                   // TILLER_MAX_ISA as given ("" unset)
  IsaLevel chosen = IsaLevel::kX86_64;    // min(detected, cap)
  std::string why;                        // one line: how `chosen` was decided
  std::string error;                      // why this process cannot run as asked; "" when it can
};

// This process's report, computed once (TILLER_MAX_ISA is read then). Never
// throws: it is first asked for while the library loads.
const CpuIsaReport& CpuIsa();
// The report for a cap (nullptr: TILLER_MAX_ISA unset) on this CPU, for
// tests and for CpuIsa().
CpuIsaReport ComputeCpuIsaReport(const char* cap);
// Throws tiller::Error (invalid argument) with CpuIsa().error when it is
// set; called where work starts (a CPU device is created, the Python
// module or the CLI starts).
void CheckCpuIsa();

// A library's own choice (oneDNN's ISA after the cap), recorded by the
// backend that uses it, for the report.
void RecordLibraryIsa(const std::string& library, const std::string& isa);
std::vector<std::pair<std::string, std::string>> LibraryIsas();

}  // namespace tiller
