// Owning, 64-byte aligned byte buffer: weights, arenas and host tensors.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

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
  ~AlignedBuffer() { std::free(data_); }

  // Discards the contents; new bytes are zeroed so planned-but-unwritten
  // regions never leak stale data.
  void Resize(size_t bytes) {
    std::free(data_);
    data_ = nullptr;
    size_ = bytes;
    if (bytes == 0) return;
    size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    data_ = static_cast<std::byte*>(std::aligned_alloc(kAlignment, rounded));
    if (!data_) throw std::bad_alloc();
    std::memset(data_, 0, rounded);
  }
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

 private:
  void Swap(AlignedBuffer& o) {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tiller
