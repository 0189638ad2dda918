// A 64-bit hash of a byte string, for telling a checkpoint's tensors from
// torn or bit-flipped copies (not for security: anyone can forge it). Eight
// bytes per step, so hashing a model's weights costs a fraction of writing
// them; every input bit reaches every output bit (the final mix).
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace tiller {

inline uint64_t ContentHash(std::span<const std::byte> bytes) {
  constexpr uint64_t kMul1 = 0x9E3779B97F4A7C15ULL, kMul2 = 0xC2B2AE3D27D4EB4FULL;
  auto rotl = [](uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  uint64_t h = 0x27D4EB2F165667C5ULL ^ (bytes.size() * kMul1);
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = rotl(h ^ (w * kMul2), 31) * kMul1;
  }
  uint64_t tail = 0;
  if (i < bytes.size()) std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  h = rotl(h ^ (tail * kMul2), 27) * kMul1;
  h ^= h >> 33;
  h *= kMul2;
  h ^= h >> 29;
  h *= kMul1;
  h ^= h >> 32;
  return h;
}

inline std::string ContentHashHex(std::span<const std::byte> bytes) {
  return fmt::format("{:016x}", ContentHash(bytes));
}

}  // namespace tiller
