#include "core/memory_cap.h"

#include <malloc.h>
#include <unistd.h>

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

std::string FormatBytes(double bytes) {
  if (bytes >= 1e12) return fmt::format("{:.1f} TB", bytes / 1e12);
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.1f} MB", bytes / 1e6);
  if (bytes >= 1e3) return fmt::format("{:.1f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
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

size_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}

size_t HostMemoryCap() {
  const size_t cap = MemoryCapFromEnvironment();
  return cap ? cap : PhysicalMemoryBytes();
}

namespace {

size_t HeapInUse() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// The outermost scope of this thread, whose baseline and cap hold.
thread_local const HostMemoryScope* active_scope = nullptr;

}  // namespace

HostMemoryScope::HostMemoryScope(std::string what) {
  if (active_scope) return;
  what_ = std::move(what);
  cap_ = HostMemoryCap();
  baseline_ = HeapInUse();
  outermost_ = true;
  active_scope = this;
}

HostMemoryScope::~HostMemoryScope() {
  if (outermost_) active_scope = nullptr;
}

void CheckHostMemory(const std::string& stage, size_t about_to_allocate) {
  const HostMemoryScope* s = active_scope;
  if (!s || !s->cap_) return;
  const size_t now = HeapInUse();
  const size_t grown = now > s->baseline_ ? now - s->baseline_ : 0;
  if (grown <= s->cap_ && about_to_allocate <= s->cap_ - grown) return;
  const double cap = static_cast<double>(s->cap_);
  Fail(ErrorKind::kResourceExhausted,
       "{}building the program took {} of host memory{} while {}: more than the memory cap "
       "of {} ({})",
       s->what_.empty() ? "" : s->what_ + ": ", FormatBytes(static_cast<double>(grown)),
       about_to_allocate
           ? fmt::format(" and needs {} more", FormatBytes(static_cast<double>(about_to_allocate)))
           : "",
       stage, FormatBytes(cap), MemoryCapOrigin(s->cap_));
}

}  // namespace tiller
