#include "core/memory_cap.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "core/error.h"

namespace tiller {

size_t ParseByteSize(const std::string& text, const std::string& what) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  double scale = 0;
  for (const auto& [name, s] : {std::pair{"B", 1.0},
                                {"KB", 1e3},
                                {"MB", 1e6},
                                {"GB", 1e9},
                                {"TB", 1e12},
                                {"KIB", 1024.0},
                                {"MIB", 1048576.0},
                                {"GIB", 1073741824.0}}) {
    if (unit == name) scale = s;
  }
  // 2^63 bytes is past any machine; the bound also keeps the cast defined.
  if (!used || scale == 0 || !(value > 0) || !std::isfinite(value) || value * scale >= 9.2e18)
    Fail(ErrorKind::kInvalidArgument, "{} '{}' is not a size such as 64MB, 1.5GB or 512MiB", what,
         text);
  return static_cast<size_t>(value * scale);
}

size_t MemoryCapFromEnvironment() {
  const char* v = std::getenv("TILLER_MEMORY_CAP");
  if (!v || !*v) return 0;
  return ParseByteSize(v, "TILLER_MEMORY_CAP");
}

std::string MemoryCapOrigin(size_t cap) {
  const char* v = std::getenv("TILLER_MEMORY_CAP");
  if (v && *v && MemoryCapFromEnvironment() == cap) return fmt::format("TILLER_MEMORY_CAP={}", v);
  return "the device's capacity; TILLER_MEMORY_CAP sets a lower cap";
}

}  // namespace tiller
