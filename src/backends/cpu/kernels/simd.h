// One float vector type for the CPU kernels' hand-vectorized loops, so each
// formula (exp, erfc, gelu', a row's sums) is written once and compiled for
// the widest instruction set the build targets (-march=native):
//   AVX-512F      16 lanes, k-register masks
//   AVX2 + FMA     8 lanes, masks as all-ones lanes (blend / maskload)
//   otherwise      1 lane, plain float arithmetic
// The operations keep the AVX-512 semantics everywhere (min/max return
// their second operand for NaN; Scale2 rounds once, with gradual underflow),
// so a value's result depends neither on the instruction set beyond the last
// ulp of a reduction's order nor on its position in a row.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>

#if defined(__AVX512F__) || defined(__AVX2__)
// gcc 12's AVX-512 headers trip -Wmaybe-uninitialized (GCC bug 105593) in
// every inlined _mm512_max_ps/_mm512_scalef_ps/_mm512_reduce_add_ps; the
// warning is in the header, so it is silenced for the header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

// Everything below lives in a namespace named after the instruction set it
// is compiled for (inline: callers write simd::Exp), so that a translation
// unit compiled for another level (vector_math_avx512.cc) defines other
// symbols: the linker never hands one level's copy of an inline function
// to another level's caller.
#if defined(__AVX512F__)
#define TILLER_SIMD_ISA avx512
#elif defined(__AVX2__) && defined(__FMA__)
#define TILLER_SIMD_ISA avx2
#else
#define TILLER_SIMD_ISA scalar
#endif

namespace tiller::cpu::simd {
inline namespace TILLER_SIMD_ISA {

#if defined(__AVX512F__)

inline constexpr int kLanes = 16;
struct Vec {
  __m512 v;
};
struct Mask {
  __mmask16 k;
};

inline Vec Set(float x) {
  return {_mm512_set1_ps(x)};
}
inline Vec Zero() {
  return {_mm512_setzero_ps()};
}
inline Vec Load(const float* p) {
  return {_mm512_loadu_ps(p)};
}
inline void Store(float* p, Vec a) {
  _mm512_storeu_ps(p, a.v);
}
// The lanes that hold elements when `left` remain (all from kLanes on, none
// for left <= 0, as in the AVX2 and scalar forms: callers may compute the
// mask of a second vector they then skip).
inline Mask Tail(int64_t left) {
  if (left <= 0) return {__mmask16(0)};
  return {left >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1)};
}
// Loads the lanes of `k`, zero elsewhere; never touches memory outside them.
inline Vec LoadPart(Mask k, const float* p) {
  return {_mm512_maskz_loadu_ps(k.k, p)};
}
inline void StorePart(float* p, Mask k, Vec a) {
  _mm512_mask_storeu_ps(p, k.k, a.v);
}
// Stores kLanes integral values within [-128, 127] as int8 (what a
// quantization writes after rounding and clipping).
inline void StoreInt8(int8_t* p, Vec a) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(a.v)));
}

inline Vec operator+(Vec a, Vec b) {
  return {_mm512_add_ps(a.v, b.v)};
}
inline Vec operator-(Vec a, Vec b) {
  return {_mm512_sub_ps(a.v, b.v)};
}
inline Vec operator*(Vec a, Vec b) {
  return {_mm512_mul_ps(a.v, b.v)};
}
inline Vec operator/(Vec a, Vec b) {
  return {_mm512_div_ps(a.v, b.v)};
}
inline Vec Fma(Vec a, Vec b, Vec c) {
  return {_mm512_fmadd_ps(a.v, b.v, c.v)};
}  // a b + c
inline Vec Fms(Vec a, Vec b, Vec c) {
  return {_mm512_fmsub_ps(a.v, b.v, c.v)};
}  // a b - c
inline Vec Fnma(Vec a, Vec b, Vec c) {
  return {_mm512_fnmadd_ps(a.v, b.v, c.v)};
}  // c - a b
inline Vec Min(Vec a, Vec b) {
  return {_mm512_min_ps(a.v, b.v)};
}
inline Vec Max(Vec a, Vec b) {
  return {_mm512_max_ps(a.v, b.v)};
}
inline Vec Abs(Vec a) {
  return {_mm512_abs_ps(a.v)};
}
// |mag| with the sign bit of `from` or-ed in (mag >= 0: copysign).
inline Vec WithSignOf(Vec mag, Vec from) {
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  return {_mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(mag.v), _mm512_and_si512(_mm512_castps_si512(from.v), sign)))};
}
inline Mask Lt(Vec a, Vec b) {
  return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ)};
}
inline Mask Ge(Vec a, Vec b) {
  return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_GE_OQ)};
}
inline Mask operator~(Mask a) {
  return {static_cast<__mmask16>(~a.k)};
}
inline Vec Select(Mask k, Vec yes, Vec no) {
  return {_mm512_mask_mov_ps(no.v, k.k, yes.v)};
}
inline Vec ZeroUnless(Mask k, Vec a) {
  return {_mm512_maskz_mov_ps(k.k, a.v)};
}
inline Vec RoundNearest(Vec a) {
  return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
// p * 2^n for integral n, |n| <= 250, rounded once (subnormal or inf results
// as a product rounds them).
inline Vec Scale2(Vec p, Vec n) {
  return {_mm512_scalef_ps(p.v, n.v)};
}
inline float ReduceAdd(Vec a) {
  return _mm512_reduce_add_ps(a.v);
}
inline float ReduceMax(Vec a) {
  return _mm512_reduce_max_ps(a.v);
}

#elif defined(__AVX2__) && defined(__FMA__)

inline constexpr int kLanes = 8;
struct Vec {
  __m256 v;
};
struct Mask {
  __m256 m;  // all-ones lanes are set
};

inline Vec Set(float x) {
  return {_mm256_set1_ps(x)};
}
inline Vec Zero() {
  return {_mm256_setzero_ps()};
}
inline Vec Load(const float* p) {
  return {_mm256_loadu_ps(p)};
}
inline void Store(float* p, Vec a) {
  _mm256_storeu_ps(p, a.v);
}
inline Mask Tail(int64_t left) {
  const int l = left >= 8 ? 8 : static_cast<int>(left);
  return {_mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_set1_epi32(l), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)))};
}
inline Vec LoadPart(Mask k, const float* p) {
  return {_mm256_maskload_ps(p, _mm256_castps_si256(k.m))};
}
inline void StorePart(float* p, Mask k, Vec a) {
  _mm256_maskstore_ps(p, _mm256_castps_si256(k.m), a.v);
}
inline void StoreInt8(int8_t* p, Vec a) {
  // In range already: the saturating packs only narrow.
  const __m256i q = _mm256_cvtps_epi32(a.v);
  const __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi16(q16, q16));
}

inline Vec operator+(Vec a, Vec b) {
  return {_mm256_add_ps(a.v, b.v)};
}
inline Vec operator-(Vec a, Vec b) {
  return {_mm256_sub_ps(a.v, b.v)};
}
inline Vec operator*(Vec a, Vec b) {
  return {_mm256_mul_ps(a.v, b.v)};
}
inline Vec operator/(Vec a, Vec b) {
  return {_mm256_div_ps(a.v, b.v)};
}
inline Vec Fma(Vec a, Vec b, Vec c) {
  return {_mm256_fmadd_ps(a.v, b.v, c.v)};
}
inline Vec Fms(Vec a, Vec b, Vec c) {
  return {_mm256_fmsub_ps(a.v, b.v, c.v)};
}
inline Vec Fnma(Vec a, Vec b, Vec c) {
  return {_mm256_fnmadd_ps(a.v, b.v, c.v)};
}
inline Vec Min(Vec a, Vec b) {
  return {_mm256_min_ps(a.v, b.v)};
}
inline Vec Max(Vec a, Vec b) {
  return {_mm256_max_ps(a.v, b.v)};
}
inline Vec Abs(Vec a) {
  return {_mm256_andnot_ps(_mm256_set1_ps(-0.0f), a.v)};
}
inline Vec WithSignOf(Vec mag, Vec from) {
  return {_mm256_or_ps(mag.v, _mm256_and_ps(from.v, _mm256_set1_ps(-0.0f)))};
}
inline Mask Lt(Vec a, Vec b) {
  return {_mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ)};
}
inline Mask Ge(Vec a, Vec b) {
  return {_mm256_cmp_ps(a.v, b.v, _CMP_GE_OQ)};
}
inline Mask operator~(Mask a) {
  return {_mm256_xor_ps(a.m, _mm256_castsi256_ps(_mm256_set1_epi32(-1)))};
}
inline Vec Select(Mask k, Vec yes, Vec no) {
  return {_mm256_blendv_ps(no.v, yes.v, k.m)};
}
inline Vec ZeroUnless(Mask k, Vec a) {
  return {_mm256_and_ps(k.m, a.v)};
}
inline Vec RoundNearest(Vec a) {
  return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
// AVX2 has no scalef: 2^n is split into two powers of two that are normal
// floats (|n / 2| <= 125), so p * 2^n1 is exact for the p the callers pass
// (normal, near 1) and the second product rounds once, as scalef does.
inline Vec Scale2(Vec p, Vec n) {
  const __m256i ni = _mm256_cvtps_epi32(n.v);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return {_mm256_mul_ps(_mm256_mul_ps(p.v, f1), f2)};
}
inline float ReduceAdd(Vec a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float ReduceMax(Vec a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

#else

inline constexpr int kLanes = 1;
struct Vec {
  float v;
};
struct Mask {
  bool k;
};

inline Vec Set(float x) {
  return {x};
}
inline Vec Zero() {
  return {0.0f};
}
inline Vec Load(const float* p) {
  return {*p};
}
inline void Store(float* p, Vec a) {
  *p = a.v;
}
inline Mask Tail(int64_t left) {
  return {left > 0};
}
inline Vec LoadPart(Mask k, const float* p) {
  return {k.k ? *p : 0.0f};
}
inline void StorePart(float* p, Mask k, Vec a) {
  if (k.k) *p = a.v;
}
inline void StoreInt8(int8_t* p, Vec a) {
  *p = static_cast<int8_t>(a.v);
}
inline Vec operator+(Vec a, Vec b) {
  return {a.v + b.v};
}
inline Vec operator-(Vec a, Vec b) {
  return {a.v - b.v};
}
inline Vec operator*(Vec a, Vec b) {
  return {a.v * b.v};
}
inline Vec operator/(Vec a, Vec b) {
  return {a.v / b.v};
}
inline Vec Fma(Vec a, Vec b, Vec c) {
  return {std::fma(a.v, b.v, c.v)};
}
inline Vec Fms(Vec a, Vec b, Vec c) {
  return {std::fma(a.v, b.v, -c.v)};
}
inline Vec Fnma(Vec a, Vec b, Vec c) {
  return {std::fma(-a.v, b.v, c.v)};
}
inline Vec Min(Vec a, Vec b) {
  return {a.v < b.v ? a.v : b.v};
}
inline Vec Max(Vec a, Vec b) {
  return {a.v > b.v ? a.v : b.v};
}
inline Vec Abs(Vec a) {
  return {std::fabs(a.v)};
}
inline Vec WithSignOf(Vec mag, Vec from) {
  return {std::copysign(mag.v, from.v)};
}
inline Mask Lt(Vec a, Vec b) {
  return {a.v < b.v};
}
inline Mask Ge(Vec a, Vec b) {
  return {a.v >= b.v};
}
inline Mask operator~(Mask a) {
  return {!a.k};
}
inline Vec Select(Mask k, Vec yes, Vec no) {
  return k.k ? yes : no;
}
inline Vec ZeroUnless(Mask k, Vec a) {
  return {k.k ? a.v : 0.0f};
}
inline Vec RoundNearest(Vec a) {
  return {std::nearbyint(a.v)};
}
inline Vec Scale2(Vec p, Vec n) {
  return {std::ldexp(p.v, static_cast<int>(n.v))};
}
inline float ReduceAdd(Vec a) {
  return a.v;
}
inline float ReduceMax(Vec a) {
  return a.v;
}

#endif

// ---- Functions on vectors, the same formulas for every width ---------------

// exp: Cephes range reduction + degree-6 polynomial (about 1 ulp); Scale2
// applies 2^n and handles underflow to subnormals and overflow to inf.
// exp(hi + lo) with lo a small correction to hi: erfc passes -z*z split
// exactly, keeping the range reduction accurate for large arguments.
inline Vec ExpSplit(Vec hi, Vec lo) {
  // Beyond these bounds the result is 0 or inf anyway. Min/Max return their
  // second operand for NaN, so NaN propagates.
  hi = Max(Set(-104.0f), Min(Set(88.8f), hi));
  const Vec n = RoundNearest((hi + lo) * Set(1.44269504088896341f));
  Vec r = Fnma(n, Set(0.693359375f), hi) + lo;
  r = Fnma(n, Set(-2.12194440e-4f), r);
  Vec p = Set(1.9875691500e-4f);
  for (float c :
       {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    p = Fma(p, r, Set(c));
  p = Fma(p, r * r, r + Set(1.0f));
  return Scale2(p, n);
}
inline Vec Exp(Vec x) {
  return ExpSplit(x, Zero());
}

// exp(d) for d <= 0 (a value minus its row's max: softmax), with 0 where
// exp(d) < 1.6e-38 (d < -87), so no lane computes a subnormal: Intel cores
// take a microcode assist per subnormal result, and attention rows whose
// masked scores sit 10^4 below the max made softmax 10x slower (measured on
// BERT-Base). What is dropped is below 1.6e-38 absolute, invisible next to a
// row sum >= 1. NaN stays NaN (Max returns its second operand for NaN).
inline Vec ExpOfShifted(Vec d) {
  const Vec lo = Set(-87.0f);
  return ZeroUnless(~Lt(d, lo), Exp(Max(lo, d)));
}

// Applies f to every element of x[0, n), writing y (which may be x); the
// tail goes through a partial load/store with the same f.
template <typename F>
inline void Map(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Store(y + i, f(Load(x + i)));
  if (i < n) {
    const Mask m = Tail(n - i);
    StorePart(y + i, m, f(LoadPart(m, x + i)));
  }
}

}  // namespace TILLER_SIMD_ISA
}  // namespace tiller::cpu::simd
