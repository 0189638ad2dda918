// The public report of core/cpu_isa.h (tiller/backends.h).
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

}  // namespace tiller
