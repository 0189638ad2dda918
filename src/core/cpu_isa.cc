#include "core/cpu_isa.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "core/cpu_isa_features.h"
#include "core/error.h"

namespace tiller {
namespace {

// The level this translation unit is compiled for: the build's -march,
// which every object of the build shares (CMakeLists.txt).
constexpr IsaLevel CompiledLevel() {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512CD__) && \
    defined(__AVX512DQ__) && defined(__AVX512VL__)
  return IsaLevel::kAvx512;
#elif defined(__AVX2__) && defined(__FMA__)
  return IsaLevel::kAvx2;
#elif defined(__SSE4_2__) && defined(__POPCNT__)
  return IsaLevel::kX86_64_v2;
#else
  return IsaLevel::kX86_64;
#endif
}

bool OsSaves(IsaLevel level, uint64_t xcr0) {
  const unsigned long long need = kXcr0ForLevel[static_cast<int>(level)];
  return (xcr0 & need) == need;
}

std::string Brand() {
  std::string brand;
#if defined(__x86_64__)
  unsigned r[4];
  for (unsigned leaf = 0x80000002u; leaf <= 0x80000004u; ++leaf) {
    if (!__get_cpuid(leaf, &r[0], &r[1], &r[2], &r[3])) return brand;
    brand.append(reinterpret_cast<const char*>(r), sizeof r);
  }
  brand.resize(brand.find('\0') == std::string::npos ? brand.size() : brand.find('\0'));
  const size_t first = brand.find_first_not_of(' '), last = brand.find_last_not_of(' ');
  brand = first == std::string::npos ? "" : brand.substr(first, last - first + 1);
#endif
  return brand;
}

std::mutex libraries_mu;
std::vector<std::pair<std::string, std::string>>& Libraries() {
  static std::vector<std::pair<std::string, std::string>> libraries;
  return libraries;
}

}  // namespace

// Constant-initialized: cpu_guard.cc reads it before any other code of the
// library runs.
extern const int kCompiledIsaLevel = static_cast<int>(CompiledLevel());

const char* IsaLevelName(IsaLevel level) {
  return kIsaLevelNames[static_cast<int>(level)];
}

std::optional<IsaLevel> ParseIsaLevel(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kIsaLevelNames)); ++i)
    if (name == kIsaLevelNames[i]) return static_cast<IsaLevel>(i);
  if (name == "x86-64-v3") return IsaLevel::kAvx2;
  if (name == "x86-64-v4") return IsaLevel::kAvx512;
  return std::nullopt;
}

const char* IsaLevelChoices() {
  return "x86-64, x86-64-v2, avx2 (= x86-64-v3), avx512 (= x86-64-v4), amx, or native (no cap)";
}

CpuIsaReport ComputeCpuIsaReport(const char* cap) {
  CpuIsaReport r;
  r.cpu = Brand();
  const uint64_t xcr0 = OsSavedStates();
  // The highest level all of whose features are present and saved.
  bool complete[5] = {true, true, true, true, true};
  for (const Feature& f : kFeatures) {
    const bool has = CpuHasFeature(f);
    if (has) r.features.push_back(f.name);
    for (int l = static_cast<int>(f.level); l < 5; ++l) complete[l] &= has;
  }
  for (const Feature& f : kExtras)
    if (CpuHasFeature(f)) r.features.push_back(f.name);
  for (int l = 1; l < 5; ++l)
    if (complete[l] && OsSaves(static_cast<IsaLevel>(l), xcr0))
      r.detected = static_cast<IsaLevel>(l);
    else
      break;
  r.compiled = CompiledLevel();
  r.chosen = r.detected;
  r.why = fmt::format("{}: this CPU's highest level", IsaLevelName(r.detected));
  if (cap && *cap && std::string_view(cap) != "native") {
    r.cap_text = cap;
    r.cap = ParseIsaLevel(cap);
    if (!r.cap) {
      r.error = fmt::format("TILLER_MAX_ISA='{}' is not a level: use {}", cap, IsaLevelChoices());
      return r;
    }
    if (*r.cap < r.detected) {
      r.chosen = *r.cap;
      r.why = fmt::format("{}: capped by TILLER_MAX_ISA={} (this CPU: {})", IsaLevelName(r.chosen),
                          cap, IsaLevelName(r.detected));
    } else {
      r.why += fmt::format(" (TILLER_MAX_ISA={} does not lower it)", cap);
    }
  } else if (cap && *cap) {
    r.cap_text = cap;
  }
  if (r.chosen < r.compiled) {
    r.error =
        r.cap && *r.cap < r.compiled
            ? fmt::format(
                  "TILLER_MAX_ISA={} is below {}, the level this build's own kernels are "
                  "compiled for (-march of the build machine): this build cannot run below it",
                  r.cap_text, IsaLevelName(r.compiled))
            : fmt::format(
                  "this build's own kernels are compiled for {} (-march of the build machine) and "
                  "this CPU is {}: they would stop on an illegal instruction",
                  IsaLevelName(r.compiled), IsaLevelName(r.detected));
  }
  return r;
}

const CpuIsaReport& CpuIsa() {
  static const CpuIsaReport report = ComputeCpuIsaReport(std::getenv("TILLER_MAX_ISA"));
  return report;
}

void CheckCpuIsa() {
  const CpuIsaReport& r = CpuIsa();
  if (!r.error.empty()) throw Error(ErrorKind::kInvalidArgument, r.error);
}

void RecordLibraryIsa(const std::string& library, const std::string& isa) {
  std::lock_guard<std::mutex> lock(libraries_mu);
  auto& all = Libraries();
  for (auto& [name, value] : all)
    if (name == library) {
      value = isa;
      return;
    }
  all.emplace_back(library, isa);
}

std::vector<std::pair<std::string, std::string>> LibraryIsas() {
  std::lock_guard<std::mutex> lock(libraries_mu);
  return Libraries();
}

}  // namespace tiller
