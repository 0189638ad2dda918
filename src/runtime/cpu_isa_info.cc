// The public report of core/cpu_isa.h (tiller/backends.h).
#include <fmt/format.h>

#include "core/cpu_isa.h"
#include "tiller/backends.h"

namespace tiller {

CpuIsaInfo GetCpuIsaInfo() {
  const CpuIsaReport& r = CpuIsa();
  CpuIsaInfo info;
  info.cpu = r.cpu;
  info.detected = IsaLevelName(r.detected);
  info.features = r.features;
  info.compiled = IsaLevelName(r.compiled);
  info.cap = r.cap_text;
  info.chosen = IsaLevelName(r.chosen);
  info.why = r.why;
  info.error = r.error;
  info.libraries = LibraryIsas();
  return info;
}

std::string DescribeCpuIsa(const CpuIsaInfo& i) {
  std::string features;
  for (const std::string& f : i.features) features += (features.empty() ? "" : " ") + f;
  std::string text =
      fmt::format("CPU: {} ({}: {})\n", i.cpu.empty() ? "unknown" : i.cpu, i.detected, features);
  text += fmt::format("built for: {} (its own kernels)\n", i.compiled);
  text += fmt::format("TILLER_MAX_ISA: {}\n", i.cap.empty() ? "unset" : i.cap);
  text += fmt::format("chosen: {}\n", i.why);
  for (const auto& [name, isa] : i.libraries) text += fmt::format("{}: {}\n", name, isa);
  return text;
}

}  // namespace tiller
