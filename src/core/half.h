// IEEE binary16 (float16) and bfloat16 values stored as their raw 16 bits,
// and their conversions from and to float32. Float to half rounds to
// nearest even (as hardware conversions and numpy do); NaN stays NaN, a
// float beyond the half range becomes infinity. Kernels and the
// mixed-precision pass (which converts weights once, at compile time) share
// these, so a weight converted ahead of time has the bits a cast kernel
// would give it.
#pragma once

#include <bit>
#include <cstdint>

namespace tiller {

inline float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal half: value is man * 2^-24, exact in float
    float f = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -f : f;
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t FloatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00 : 0x7c00);
  if (ax >= 0x47800000u) return sign | 0x7c00;  // >= 65536: overflow
  if (ax < 0x38800000u) {                       // below the smallest normal half
    // Adding 0.5 makes the FPU round the mantissa to a multiple of 2^-24.
    float r = std::bit_cast<float>(ax) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(r) - 0x3f000000u);
  }
  uint32_t odd = (ax >> 13) & 1;
  ax += 0xc8000fffu + odd;  // rebias exponent (-112 << 23) and round to nearest even
  return sign | static_cast<uint16_t>(ax >> 13);
}

inline float BF16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t FloatToBF16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace tiller
