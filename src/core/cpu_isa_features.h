// cpuid's feature bits for the levels of core/cpu_isa.h (Intel SDM vol. 2A,
// CPUID; AMD APM vol. 3), and the two probes that read them: the table is
// data, and the probes are defined in cpu_guard.cc, compiled for the x86-64
// baseline, so both cpu_isa.cc and the guard (which must not call code
// compiled for the build's level) use the same ones.
#pragma once

#include <cstdint>

#include "core/cpu_isa.h"

namespace tiller {

struct Feature {
  const char* name;
  unsigned leaf, subleaf;
  int reg;  // 0 eax, 1 ebx, 2 ecx, 3 edx
  int bit;
  IsaLevel level;  // the level that needs it
};

// cpuid's feature bits (Intel SDM vol. 2A, CPUID; AMD APM vol. 3).
inline constexpr Feature kFeatures[] = {
    {"sse3", 1, 0, 2, 0, IsaLevel::kX86_64_v2},
    {"ssse3", 1, 0, 2, 9, IsaLevel::kX86_64_v2},
    {"sse4.1", 1, 0, 2, 19, IsaLevel::kX86_64_v2},
    {"sse4.2", 1, 0, 2, 20, IsaLevel::kX86_64_v2},
    {"popcnt", 1, 0, 2, 23, IsaLevel::kX86_64_v2},
    {"avx", 1, 0, 2, 28, IsaLevel::kAvx2},
    {"fma", 1, 0, 2, 12, IsaLevel::kAvx2},
    {"f16c", 1, 0, 2, 29, IsaLevel::kAvx2},
    {"movbe", 1, 0, 2, 22, IsaLevel::kAvx2},
    {"avx2", 7, 0, 1, 5, IsaLevel::kAvx2},
    {"bmi1", 7, 0, 1, 3, IsaLevel::kAvx2},
    {"bmi2", 7, 0, 1, 8, IsaLevel::kAvx2},
    {"lzcnt", 0x80000001u, 0, 2, 5, IsaLevel::kAvx2},
    {"avx512f", 7, 0, 1, 16, IsaLevel::kAvx512},
    {"avx512dq", 7, 0, 1, 17, IsaLevel::kAvx512},
    {"avx512cd", 7, 0, 1, 28, IsaLevel::kAvx512},
    {"avx512bw", 7, 0, 1, 30, IsaLevel::kAvx512},
    {"avx512vl", 7, 0, 1, 31, IsaLevel::kAvx512},
    {"amx_tile", 7, 0, 3, 24, IsaLevel::kAmx},
    {"amx_bf16", 7, 0, 3, 22, IsaLevel::kAmx},
    {"amx_int8", 7, 0, 3, 25, IsaLevel::kAmx},
};
// Reported, but no level needs them.
inline constexpr Feature kExtras[] = {
    {"avx512_vnni", 7, 0, 2, 11, IsaLevel::kAvx512},
    {"avx512_bf16", 7, 1, 0, 5, IsaLevel::kAvx512},
    {"avx512_fp16", 7, 0, 3, 23, IsaLevel::kAvx512},
};

// The levels' names, by IsaLevel (IsaLevelName reads them; the guard, which
// may not call code compiled for the build's level, reads the data).
inline constexpr const char* kIsaLevelNames[] = {"x86-64", "x86-64-v2", "avx2", "avx512", "amx"};

// XCR0 bits each level needs the OS to save, by IsaLevel: none; none; SSE
// and AVX state; + opmask, ZMM_Hi256, Hi16_ZMM; + XTILECFG, XTILEDATA.
inline constexpr unsigned long long kXcr0ForLevel[] = {0, 0, 0x6, 0xe6, 0x600e6};

// Whether cpuid reports feature f on this CPU.
bool CpuHasFeature(const Feature& f);
// XCR0: which register states the OS saves across context switches (0
// without OSXSAVE). A level's instructions fault without theirs.
uint64_t OsSavedStates();

}  // namespace tiller
