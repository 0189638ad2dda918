// The counter-based generator of the random kernels (random.cc, dropout.cc):
// element i's bits are a hash of (seed, i), so the numbers do not depend on
// how the work is split between threads.
#pragma once

#include <cstdint>

namespace tiller::cpu {

// splitmix64's finalizer over seed + (i + 1) * golden ratio.
inline uint64_t Mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// Uniform in [0, 1) with 53 random bits.
inline double Unit(uint64_t seed, uint64_t i) {
  return static_cast<double>(Mix(seed, i) >> 11) * 0x1.0p-53;
}

}  // namespace tiller::cpu
