// The vectorized float math of kernel_utils.h (VExp ... RowExpSum,
// VGeluGrad), written once on simd::Vec and compiled once per instruction
// set: included by vector_math.cc (the build's own level) and by
// vector_math_avx512.cc (x86-64-v4), each copy in its namespace
// (TILLER_ISA_COPY, isa_copy.h); vector_math.cc picks one set at start-up.
// Nothing here may have external linkage outside that namespace (simd.h's
// inline functions are in a namespace of their instruction set too): a
// copy compiled for AVX-512 must never be what an AVX2 caller links to.
//
// The float formulas: exp: simd.h. erf/erfc: odd Taylor series below 0.5,
// else the Numerical Recipes erfc fit (relative error < 1.2e-7 everywhere),
// so erf and both gelu tails stay accurate. tanh: odd Taylor series below
// 0.55 (no cancellation), else 1 - 2/(exp(2x)+1).
#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cpu/kernels/isa_copy.h"
#include "backends/cpu/kernels/simd.h"
#include "core/half.h"

namespace tiller::cpu::TILLER_ISA_COPY {
namespace {

using simd::Set;
using simd::Vec;

// erfc(z) for z >= 0, given z*z as an exact sum hi + lo: erfc's relative
// error is about 2 z^2 times that of its exponent argument, so z*z must not
// be rounded (gelu passes x*x/2 so the rounding of x/sqrt(2) drops out too).
inline Vec ErfcPos(Vec z, Vec z2hi, Vec z2lo) {
  z = simd::Min(z, Set(10.0f));
  const Vec t = Set(1.0f) / simd::Fma(z, Set(0.5f), Set(1.0f));
  Vec p = Set(0.17087277f);
  for (float c : {-0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f, -0.18628806f, 0.09678418f,
                  0.37409196f, 1.00002368f, -1.26551223f})
    p = simd::Fma(p, t, Set(c));
  z2hi = simd::Min(z2hi, Set(100.0f));
  return t * simd::ExpSplit(simd::Zero() - z2hi, p - z2lo);
}
inline Vec ErfcPos(Vec z) {
  const Vec hi = z * z;
  return ErfcPos(z, hi, simd::Fms(z, z, hi));  // z*z - hi exactly
}

inline Vec Erf(Vec x) {
  const Vec ax = simd::Abs(x), x2 = x * x;
  Vec s = Set(1.0f / 9360.0f);
  for (float c : {-1.0f / 1320.0f, 1.0f / 216.0f, -1.0f / 42.0f, 1.0f / 10.0f, -1.0f / 3.0f, 1.0f})
    s = simd::Fma(s, x2, Set(c));
  const Vec small = s * x * Set(1.12837916709551257f);
  const Vec big = simd::WithSignOf(Set(1.0f) - ErfcPos(ax), x);
  return simd::Select(simd::Lt(ax, Set(0.5f)), small, big);
}

inline Vec Tanh(Vec x) {
  const Vec ax = simd::Abs(x), x2 = x * x;
  Vec s = Set(-929569.0f / 638512875.0f);
  for (float c : {21844.0f / 6081075.0f, -1382.0f / 155925.0f, 62.0f / 2835.0f, -17.0f / 315.0f,
                  2.0f / 15.0f, -1.0f / 3.0f})
    s = simd::Fma(s, x2, Set(c));
  const Vec small = simd::Fma(s * x2, x, x);
  const Vec e = simd::Exp(simd::Min(ax, Set(9.0f)) * Set(2.0f));
  const Vec big = simd::WithSignOf(Set(1.0f) - Set(2.0f) / (e + Set(1.0f)), x);
  return simd::Select(simd::Lt(ax, Set(0.55f)), small, big);
}

inline Vec Sigmoid(Vec x) {
  return Set(1.0f) / (Set(1.0f) + simd::Exp(simd::Zero() - x));
}

// 1 + erf(x / sqrt 2), which is erfc(-x / sqrt 2): 2 - erfc(|z|) for z >= 0,
// erfc(|z|) below, with no cancellation; z^2 = x^2 / 2 passed to erfc as an
// exact sum. gelu is x/2 times it, gelu' half of it plus x phi(x).
inline Vec OnePlusErfOverSqrt2(Vec x) {
  const Vec z = x * Set(0.70710678118654752f), x2 = x * x, half = Set(0.5f);
  const Vec e = ErfcPos(simd::Abs(z), x2 * half, simd::Fms(x, x, x2) * half);
  return simd::Select(simd::Ge(z, simd::Zero()), Set(2.0f) - e, e);
}

inline Vec Gelu(Vec x) {
  return x * Set(0.5f) * OnePlusErfOverSqrt2(x);
}

// 0.5 x (1 + tanh(u)) == x * sigmoid(2u): no cancellation for negative u.
inline Vec GeluTanh(Vec x) {
  const Vec u = simd::Fma(x * x * x, Set(0.044715f), x) * Set(0.79788456080286536f);
  return x * Sigmoid(u + u);
}

// gelu'(x) = Phi(x) + x phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2.
inline Vec GeluGrad(Vec x) {
  const Vec x2 = x * x;
  // exp(-x^2 / 2) from x^2 as an exact sum, as erfc's (no error growing with x^2).
  const Vec pdf =
      simd::ExpSplit(x2 * Set(-0.5f), simd::Fms(x, x, x2) * Set(-0.5f)) * Set(0.39894228040143268f);
  return simd::Fma(x, pdf, OnePlusErfOverSqrt2(x) * Set(0.5f));
}

// The tanh form y = x (1 + t) / 2, t = tanh(u), u = k (x + 0.044715 x^3):
// y' = (1 + t) / 2 + x (1 - t^2) k (1 + 3 * 0.044715 x^2) / 2, with
// (1 + t) / 2 = sigmoid(2u) and 1 - t^2 = 4 e / (1 + e)^2, e = exp(-2|u|):
// no cancellation where tanh saturates.
inline Vec GeluTanhGrad(Vec x) {
  const Vec k = Set(0.79788456080286536f), one = Set(1.0f);
  const Vec x2 = x * x;
  const Vec u = k * x * simd::Fma(x2, Set(0.044715f), one);
  const Vec e = simd::Exp(simd::Abs(u) * Set(-2.0f));
  const Vec inv = one / (one + e);
  const Vec s = simd::Select(simd::Lt(u, simd::Zero()), e * inv, inv);
  const Vec sech2 = Set(4.0f) * e * (inv * inv);
  const Vec du = k * simd::Fma(x2, Set(3 * 0.044715f), one);
  return simd::Fma(x * Set(0.5f) * sech2, du, s);
}

}  // namespace

#define TILLER_MAP(name, expr)                      \
  void name(const float* x, float* y, int64_t n) {  \
    simd::Map(x, y, n, [](Vec v) { return expr; }); \
  }
TILLER_MAP(VExp, simd::Exp(v))
TILLER_MAP(VTanh, Tanh(v))
TILLER_MAP(VSigmoid, Sigmoid(v))
TILLER_MAP(VErf, Erf(v))
TILLER_MAP(VGelu, Gelu(v))
TILLER_MAP(VGeluTanh, GeluTanh(v))
#undef TILLER_MAP

void VSwish(const float* x, float* y, int64_t n, float beta) {
  const Vec b = Set(beta);
  simd::Map(x, y, n, [b](Vec v) { return v * Sigmoid(v * b); });
}

float RowSum(const float* x, int64_t n) {
  constexpr int64_t L = simd::kLanes;
  Vec a0 = simd::Zero(), a1 = simd::Zero();
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    a0 = a0 + simd::Load(x + i);
    a1 = a1 + simd::Load(x + i + L);
  }
  for (; i + L <= n; i += L) a0 = a0 + simd::Load(x + i);
  if (i < n) a1 = a1 + simd::LoadPart(simd::Tail(n - i), x + i);
  return simd::ReduceAdd(a0 + a1);
}

float RowMax(const float* x, int64_t n) {
  constexpr int64_t L = simd::kLanes;
  Vec m = Set(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + L <= n; i += L) m = simd::Max(m, simd::Load(x + i));
  if (i < n) {
    const simd::Mask k = simd::Tail(n - i);
    m = simd::Select(k, simd::Max(m, simd::LoadPart(k, x + i)), m);
  }
  return simd::ReduceMax(m);
}

float RowSumSqDiff(const float* x, int64_t n, float mean, float* sum_diff) {
  constexpr int64_t L = simd::kLanes;
  const Vec mu = Set(mean);
  Vec q0 = simd::Zero(), q1 = simd::Zero(), s0 = simd::Zero(), s1 = simd::Zero();
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    const Vec d0 = simd::Load(x + i) - mu, d1 = simd::Load(x + i + L) - mu;
    s0 = s0 + d0;
    s1 = s1 + d1;
    q0 = simd::Fma(d0, d0, q0);
    q1 = simd::Fma(d1, d1, q1);
  }
  for (; i + L <= n; i += L) {
    const Vec d = simd::Load(x + i) - mu;
    s0 = s0 + d;
    q0 = simd::Fma(d, d, q0);
  }
  if (i < n) {
    const simd::Mask k = simd::Tail(n - i);
    const Vec d = simd::ZeroUnless(k, simd::LoadPart(k, x + i) - mu);
    s1 = s1 + d;
    q1 = simd::Fma(d, d, q1);
  }
  *sum_diff = simd::ReduceAdd(s0 + s1);
  return simd::ReduceAdd(q0 + q1);
}

float RowExpSum(const float* x, float* y, int64_t n, float shift) {
  constexpr int64_t L = simd::kLanes;
  const Vec sh = Set(shift);
  Vec acc = simd::Zero();
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const Vec e = simd::ExpOfShifted(simd::Load(x + i) - sh);
    simd::Store(y + i, e);
    acc = acc + e;
  }
  if (i < n) {
    const simd::Mask k = simd::Tail(n - i);
    const Vec e = simd::ZeroUnless(k, simd::ExpOfShifted(simd::LoadPart(k, x + i) - sh));
    simd::StorePart(y + i, k, e);
    acc = acc + e;
  }
  return simd::ReduceAdd(acc);
}

// dx = dy * gelu'(x), the exact or the tanh form.
void VGeluGrad(const float* x, const float* dy, float* dx, int64_t n, bool approximate) {
  auto run = [&](auto deriv) {
    int64_t i = 0;
    for (; i + simd::kLanes <= n; i += simd::kLanes)
      simd::Store(dx + i, simd::Load(dy + i) * deriv(simd::Load(x + i)));
    if (i < n) {
      const simd::Mask m = simd::Tail(n - i);
      simd::StorePart(dx + i, m, simd::LoadPart(m, dy + i) * deriv(simd::LoadPart(m, x + i)));
    }
  };
  if (approximate)
    run([](Vec v) { return GeluTanhGrad(v); });
  else
    run([](Vec v) { return GeluGrad(v); });
}

// float32 -> bfloat16, 16 (AVX2: 8) at a time, with FloatToBF16's bits (round to
// nearest even, NaN kept quiet; subnormals rounded, not flushed as the
// AVX512_BF16 instruction would), so weights converted at compile time
// (core/half.h) and activations cast here agree.
void FloatsToBF16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512i one = _mm512_set1_epi32(1), round = _mm512_set1_epi32(0x7fff);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  for (; i + 16 <= n; i += 16) {
    const __m512i v = _mm512_loadu_si512(x + i);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(v, abs_mask), inf);
    __m512i r = _mm512_add_epi32(
        v, _mm512_add_epi32(round, _mm512_and_si512(_mm512_srli_epi32(v, 16), one)));
    r = _mm512_mask_or_epi32(r, nan, v, _mm512_set1_epi32(0x400000));  // quiet NaN
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
  }
#elif defined(__AVX2__)
  // The same bits, 8 at a time.
  const __m256i one = _mm256_set1_epi32(1), round = _mm256_set1_epi32(0x7fff);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x400000);
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, abs_mask), inf);
    __m256i r = _mm256_add_epi32(
        v, _mm256_add_epi32(round, _mm256_and_si256(_mm256_srli_epi32(v, 16), one)));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(v, quiet), nan);
    // packus works within 128-bit halves: the 4 results of each half land
    // in its low 64 bits, gathered by the permute.
    const __m256i packed = _mm256_packus_epi32(_mm256_srli_epi32(r, 16), _mm256_setzero_si256());
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
  }
#endif
  for (; i < n; ++i) y[i] = FloatToBF16(x[i]);
}

void BF16ToFloats(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m512i v =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    _mm512_storeu_si512(y + i, _mm512_slli_epi32(v, 16));
  }
#elif defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    const __m256i v =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_slli_epi32(v, 16));
  }
#endif
  for (; i < n; ++i) y[i] = BF16ToFloat(x[i]);
}

// y[3 j + i] = row i's element j, j < n: three rows of 4-byte elements
// interleaved. On AVX-512, 16 columns at a time: each of the three output
// vectors built from the rows' vectors by two two-source permutes (the
// tiled transpose moved these one element at a time, 3x slower than
// oneDNN's reorder: 0.5 of MobileNetV3's 21 ms at batch 8). Elsewhere one at
// a time (kVectorInterleave3 false: callers prefer their tiled transpose).
#if defined(__AVX512F__)
inline constexpr bool kVectorInterleave3 = true;
// Output vector k, lane e holds element g = 16 k + e of the interleaved
// run: column g / 3 of row g % 3. The first permute takes rows 0 and 1
// (index column, or 16 + column), the second row 2 (16 + column) and
// keeps the first's lanes (e).
struct Interleave3Index {
  alignas(64) int32_t first[3][16];
  alignas(64) int32_t second[3][16];
};
constexpr Interleave3Index MakeInterleave3Index() {
  Interleave3Index x{};
  for (int k = 0; k < 3; ++k) {
    for (int e = 0; e < 16; ++e) {
      const int g = 16 * k + e, col = g / 3, row = g % 3;  // col in [0, 16)
      x.first[k][e] = row == 0 ? col : row == 1 ? 16 + col : 0;
      x.second[k][e] = row == 2 ? 16 + col : e;
    }
  }
  return x;
}
inline constexpr Interleave3Index kInterleave3Index = MakeInterleave3Index();
#else
inline constexpr bool kVectorInterleave3 = false;
#endif

void Interleave3(const uint32_t* r0, const uint32_t* r1, const uint32_t* r2, uint32_t* y,
                 int64_t n) {
  int64_t j = 0;
#if defined(__AVX512F__)
  __m512i i1[3], i2[3];
  for (int k = 0; k < 3; ++k) {
    i1[k] = _mm512_load_si512(kInterleave3Index.first[k]);
    i2[k] = _mm512_load_si512(kInterleave3Index.second[k]);
  }
  for (; j + 16 <= n; j += 16) {
    const __m512i v0 = _mm512_loadu_si512(r0 + j);
    const __m512i v1 = _mm512_loadu_si512(r1 + j);
    const __m512i v2 = _mm512_loadu_si512(r2 + j);
    for (int64_t k = 0; k < 3; ++k) {
      const __m512i two = _mm512_permutex2var_epi32(v0, i1[k], v1);
      _mm512_storeu_si512(y + 3 * j + 16 * k, _mm512_permutex2var_epi32(two, i2[k], v2));
    }
  }
#endif
  for (; j < n; ++j) {
    y[3 * j] = r0[j];
    y[3 * j + 1] = r1[j];
    y[3 * j + 2] = r2[j];
  }
}

}  // namespace tiller::cpu::TILLER_ISA_COPY
