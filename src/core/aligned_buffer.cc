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
#include <vector>

namespace tiller {
namespace {

// From this size on, a buffer is its own mapping: the heap would map it
// anyway (glibc's threshold is 128 KiB to 32 MiB), but without huge pages.
// From 1 MiB (it was 4): BERT-Base's 48 weights of 768 x 768 (2.25 MiB)
// took 27,600 page faults of 4 KiB while loading, 4,500 on one huge page
// each and small pages for the rest.
constexpr size_t kMapFrom = size_t{1} << 20;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kPage = size_t{4} << 10;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

std::atomic<uint64_t> next_origin{1};

// Mappings of freed buffers, kept for the next Resize of about their size.
// A compile frees each loaded weight as soon as its kernel has packed it
// (compile/executable.cc) and then allocates the next weight's packed copy,
// of the same size for the many same-shaped weights of a transformer: a
// fresh mapping's pages cost a fault and a zeroing each, and on a VM the
// host's first touch of the memory, which made the first run of BERT-Base
// 0.2-0.8 s from one fresh process to the next (zeroing 440 MB of fresh
// pages took 0.07 s or 1.1 s; rewriting touched ones 0.055 s). The most
// recent kCacheBytes are kept (what is kept can add to the peak RSS:
// BERT-Base peaked at 524 MB keeping the first 64 MiB freed, 504 keeping
// the most recent 32, 513 keeping none), and ReleaseCachedMappings()
// (after each compile) gives them back.
constexpr size_t kCacheBytes = size_t{32} << 20;

struct MappingCache {
  std::mutex mu;
  std::vector<std::pair<std::byte*, size_t>> free;  // start, mapped bytes
  size_t bytes = 0;

  // A kept mapping of `rounded` bytes up to twice that, or null.
  std::pair<std::byte*, size_t> Take(size_t rounded) {
    std::lock_guard<std::mutex> lock(mu);
    size_t best = free.size();
    for (size_t i = 0; i < free.size(); ++i) {
      const size_t n = free[i].second;
      if (n >= rounded && n <= 2 * rounded && (best == free.size() || n < free[best].second))
        best = i;
    }
    if (best == free.size()) return {nullptr, 0};
    auto taken = free[best];
    free.erase(free.begin() + static_cast<std::ptrdiff_t>(best));
    bytes -= taken.second;
    return taken;
  }
  // Keeps the mapping, unmapping the oldest kept ones beyond the budget;
  // false: it is larger than the budget, unmap it.
  bool Put(std::byte* data, size_t mapped) {
    if (mapped > kCacheBytes) return false;
    std::lock_guard<std::mutex> lock(mu);
    while (bytes + mapped > kCacheBytes) {
      munmap(free.front().first, free.front().second);
      bytes -= free.front().second;
      free.erase(free.begin());
    }
    free.emplace_back(data, mapped);
    bytes += mapped;
    return true;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto [data, mapped] : free) munmap(data, mapped);
    free.clear();
    bytes = 0;
  }
};

MappingCache& Cache() {
  static auto* cache = new MappingCache();  // never destroyed: buffers may outlive statics
  return *cache;
}

}  // namespace

void AlignedBuffer::ReleaseCachedMappings() {
  Cache().Clear();
}

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
    // boundary and every whole 2 MiB of it can be one huge page (the rest
    // is small pages, so no huge page is half unused).
    const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
    if (auto [kept, mapped] = Cache().Take(rounded); kept) {
      data_ = kept;
      mapped_ = mapped;
      std::memset(data_, 0, bytes);  // the rest of the mapping is never read
      return;
    }
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
  if (mapped_) {
    if (!Cache().Put(data_, mapped_)) munmap(data_, mapped_);
  } else
    std::free(data_);
  data_ = nullptr;
  size_ = 0;
  mapped_ = 0;
  origin_ = 0;
}

}  // namespace tiller
