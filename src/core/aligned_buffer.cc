#include "core/aligned_buffer.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <utility>

namespace tiller {
namespace {

// From this size on, a buffer is its own mapping: the heap would map it
// anyway (glibc's threshold is 128 KiB to 32 MiB), but without huge pages.
constexpr size_t kMapFrom = size_t{4} << 20;
constexpr size_t kHugePage = size_t{2} << 20;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

std::atomic<uint64_t> next_origin{1};

}  // namespace

uint64_t AlignedBuffer::NewOrigin() {
  return next_origin.fetch_add(1);
}

uint64_t AlignedBuffer::DerivedOrigin(std::string_view recipe, const std::vector<uint64_t>& parts) {
  for (uint64_t p : parts) {
    if (p == 0) return 0;
  }
  static std::mutex mu;
  static std::map<std::pair<std::string, std::vector<uint64_t>>, uint64_t> derived;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, added] = derived.try_emplace({std::string(recipe), parts}, 0);
  if (added) it->second = NewOrigin();
  return it->second;
}

void AlignedBuffer::Resize(size_t bytes) {
  Release();
  size_ = bytes;
  if (bytes == 0) return;
  // (AddressSanitizer checks heap blocks only: its builds keep every buffer there.)
  if (bytes >= kMapFrom && !kSanitized) {
    // Over-map by a huge page and trim, so the buffer starts on a 2 MiB
    // boundary and every whole 2 MiB of it can be one huge page.
    const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      size_ = 0;
      throw std::bad_alloc();
    }
    auto* base = static_cast<std::byte*>(p);
    const auto addr = reinterpret_cast<uintptr_t>(base);
    const size_t head = (kHugePage - addr % kHugePage) % kHugePage;
    if (head) munmap(base, head);
    const size_t tail = kHugePage - head;
    if (tail) munmap(base + head + rounded, tail);
    data_ = base + head;
    mapped_ = rounded;
    // Advice only: where THP is off the mapping stays on small pages.
    madvise(data_, rounded, MADV_HUGEPAGE);
    return;
  }
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  data_ = static_cast<std::byte*>(std::aligned_alloc(kAlignment, rounded));
  if (!data_) {
    size_ = 0;
    throw std::bad_alloc();
  }
  std::memset(data_, 0, rounded);
}

void AlignedBuffer::Release() noexcept {
  if (mapped_)
    munmap(data_, mapped_);
  else
    std::free(data_);
  data_ = nullptr;
  size_ = 0;
  mapped_ = 0;
  origin_ = 0;
}

}  // namespace tiller
