// Owning, 64-byte aligned byte buffer: weights, arenas and host tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

namespace tiller {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) { Resize(bytes); }
  AlignedBuffer(const AlignedBuffer& o) : AlignedBuffer(o.size_) {
    if (size_) std::memcpy(data_, o.data_, size_);
  }
  AlignedBuffer& operator=(const AlignedBuffer& o) {
    if (this != &o) {
      AlignedBuffer copy(o);
      Swap(copy);
    }
    return *this;
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept { Swap(o); }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    Swap(o);
    return *this;
  }
  ~AlignedBuffer() { Release(); }

  // Discards the contents; new bytes are zeroed so planned-but-unwritten
  // regions never leak stale data. Buffers of 1 MiB and more (weights,
  // arenas) are mapped from the kernel, zeroed by it as pages are first
  // touched, and on transparent huge pages where the system allows them on
  // request: loading BERT-Base's 420 MB of weights took ~100k page faults
  // of 4 KiB, most of the load time on a VM.
  // Freed mappings are kept, the most recent 32 MiB, for the next Resize of
  // about their size, where their pages are rewritten rather than faulted
  // in fresh (aligned_buffer.cc says why).
  void Resize(size_t bytes);
  // Unmaps the freed mappings kept for reuse: a compile calls it when it has
  // allocated what it needs, so an idle process holds none.
  static void ReleaseCachedMappings();
  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(data_);
  }
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data_);
  }

  // Names the contents of a loaded weight that never change, the same in
  // every copy read from its file (paddle::ParamSource), so a packed copy a
  // kernel made of it serves the kernels of other compiled steps and clones
  // (backends/cpu). 0 (the default, and for copies): no such promise.
  uint64_t origin() const { return origin_; }
  void set_origin(uint64_t origin) { origin_ = origin; }
  // A fresh origin, unique in the process.
  static uint64_t NewOrigin();
  // The origin of bytes a pass computes by `recipe` from buffers of origins
  // `parts` (a weight derived from loaded ones, such as merge_qkv's
  // concatenation): the same for the same recipe and parts, so every
  // compiled step and clone that derives it shares one packed copy. 0 when
  // a part has none.
  static uint64_t DerivedOrigin(std::string_view recipe, const std::vector<uint64_t>& parts);

 private:
  void Release() noexcept;
  void Swap(AlignedBuffer& o) {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(mapped_, o.mapped_);
    std::swap(origin_, o.origin_);
  }
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes of an mmap'd region (data_ is its start), 0 for the heap
  uint64_t origin_ = 0;
};

}  // namespace tiller
