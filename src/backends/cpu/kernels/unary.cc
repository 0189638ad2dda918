// Unary elementwise kernels (activations and math) and the vectorized float
// math they share with softmax and the norms; gelu_grad, which shares gelu's.
//
// exp: Cephes range reduction + degree-6 polynomial, 2^n applied with scalef
// (handles underflow to subnormals and overflow to inf). erf/erfc: odd Taylor
// series below 0.5, else the Numerical Recipes erfc fit (relative error
// < 1.2e-7 everywhere), so erf and both gelu tails stay accurate. tanh: odd
// Taylor series below 0.55 (no cancellation), else 1 - 2/(exp(2x)+1).
#include <cmath>
#include <functional>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

#if defined(__AVX512F__)
inline __m512 Set1(float v) {
  return _mm512_set1_ps(v);
}
inline __mmask16 TailMask(int64_t r) {
  return static_cast<__mmask16>((1u << r) - 1);
}

// erfc(z) for z >= 0, given z*z as an exact sum hi + lo: erfc's relative
// error is about 2 z^2 times that of its exponent argument, so z*z must not
// be rounded (gelu passes x*x/2 so the rounding of x/sqrt(2) drops out too).
inline __m512 Erfc512Pos(__m512 z, __m512 z2hi, __m512 z2lo) {
  z = _mm512_min_ps(z, Set1(10.0f));
  __m512 t = _mm512_div_ps(Set1(1.0f), _mm512_fmadd_ps(z, Set1(0.5f), Set1(1.0f)));
  __m512 p = Set1(0.17087277f);
  for (float c : {-0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f, -0.18628806f, 0.09678418f,
                  0.37409196f, 1.00002368f, -1.26551223f})
    p = _mm512_fmadd_ps(p, t, Set1(c));
  z2hi = _mm512_min_ps(z2hi, Set1(100.0f));
  return _mm512_mul_ps(
      t, Exp512Split(_mm512_sub_ps(_mm512_setzero_ps(), z2hi), _mm512_sub_ps(p, z2lo)));
}
inline __m512 Erfc512Pos(__m512 z) {
  __m512 hi = _mm512_mul_ps(z, z);
  return Erfc512Pos(z, hi, _mm512_fmsub_ps(z, z, hi));  // fmsub: z*z - hi exactly
}

inline __m512 Abs512(__m512 x) {
  return _mm512_abs_ps(x);
}

inline __m512 Erf512(__m512 x) {
  __m512 ax = Abs512(x);
  __m512 x2 = _mm512_mul_ps(x, x);
  __m512 s = Set1(1.0f / 9360.0f);
  for (float c : {-1.0f / 1320.0f, 1.0f / 216.0f, -1.0f / 42.0f, 1.0f / 10.0f, -1.0f / 3.0f, 1.0f})
    s = _mm512_fmadd_ps(s, x2, Set1(c));
  __m512 small = _mm512_mul_ps(_mm512_mul_ps(s, x), Set1(1.12837916709551257f));
  __m512 big = _mm512_sub_ps(Set1(1.0f), Erfc512Pos(ax));
  big = _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(big),
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u)))));
  __mmask16 is_small = _mm512_cmp_ps_mask(ax, Set1(0.5f), _CMP_LT_OQ);
  return _mm512_mask_mov_ps(big, is_small, small);
}

inline __m512 Tanh512(__m512 x) {
  __m512 ax = Abs512(x);
  __m512 x2 = _mm512_mul_ps(x, x);
  __m512 s = Set1(-929569.0f / 638512875.0f);
  for (float c : {21844.0f / 6081075.0f, -1382.0f / 155925.0f, 62.0f / 2835.0f, -17.0f / 315.0f,
                  2.0f / 15.0f, -1.0f / 3.0f})
    s = _mm512_fmadd_ps(s, x2, Set1(c));
  __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(s, x2), x, x);
  __m512 e = Exp512(_mm512_mul_ps(_mm512_min_ps(ax, Set1(9.0f)), Set1(2.0f)));
  __m512 big = _mm512_sub_ps(Set1(1.0f), _mm512_div_ps(Set1(2.0f), _mm512_add_ps(e, Set1(1.0f))));
  big = _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(big),
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u)))));
  return _mm512_mask_mov_ps(big, _mm512_cmp_ps_mask(ax, Set1(0.55f), _CMP_LT_OQ), small);
}

inline __m512 Sigmoid512(__m512 x) {
  __m512 e = Exp512(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_div_ps(Set1(1.0f), _mm512_add_ps(Set1(1.0f), e));
}

// 1 + erf(x / sqrt 2), which is erfc(-x / sqrt 2): 2 - erfc(|z|) for z >= 0,
// erfc(|z|) below, with no cancellation; z^2 = x^2 / 2 passed to erfc as an
// exact sum. gelu is x/2 times it, gelu' half of it plus x phi(x).
inline __m512 OnePlusErfOverSqrt2(__m512 x) {
  __m512 z = _mm512_mul_ps(x, Set1(0.70710678118654752f));
  __m512 x2 = _mm512_mul_ps(x, x);
  __m512 half = Set1(0.5f);
  __m512 e = Erfc512Pos(Abs512(z), _mm512_mul_ps(x2, half),
                        _mm512_mul_ps(_mm512_fmsub_ps(x, x, x2), half));
  return _mm512_mask_sub_ps(e, _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_GE_OQ), Set1(2.0f),
                            e);
}

inline __m512 Gelu512(__m512 x) {
  return _mm512_mul_ps(_mm512_mul_ps(x, Set1(0.5f)), OnePlusErfOverSqrt2(x));
}

// 0.5 x (1 + tanh(u)) == x * sigmoid(2u): no cancellation for negative u.
inline __m512 GeluTanh512(__m512 x) {
  __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
  __m512 u = _mm512_mul_ps(_mm512_fmadd_ps(x3, Set1(0.044715f), x), Set1(0.79788456080286536f));
  return _mm512_mul_ps(x, Sigmoid512(_mm512_add_ps(u, u)));
}

// gelu'(x) = Phi(x) + x phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2.
inline __m512 GeluGrad512(__m512 x) {
  __m512 x2 = _mm512_mul_ps(x, x);
  __m512 half = Set1(0.5f);
  // exp(-x^2 / 2) from x^2 as an exact sum, as erfc's (no error growing with x^2).
  __m512 pdf = _mm512_mul_ps(Exp512Split(_mm512_mul_ps(x2, Set1(-0.5f)),
                                         _mm512_mul_ps(_mm512_fmsub_ps(x, x, x2), Set1(-0.5f))),
                             Set1(0.39894228040143268f));
  return _mm512_fmadd_ps(x, pdf, _mm512_mul_ps(OnePlusErfOverSqrt2(x), half));
}

// The tanh form y = x (1 + t) / 2, t = tanh(u), u = k (x + 0.044715 x^3):
// y' = (1 + t) / 2 + x (1 - t^2) k (1 + 3 * 0.044715 x^2) / 2, with
// (1 + t) / 2 = sigmoid(2u) and 1 - t^2 = 4 e / (1 + e)^2, e = exp(-2|u|):
// no cancellation where tanh saturates.
inline __m512 GeluTanhGrad512(__m512 x) {
  const __m512 k = Set1(0.79788456080286536f), one = Set1(1.0f);
  __m512 x2 = _mm512_mul_ps(x, x);
  __m512 u = _mm512_mul_ps(_mm512_mul_ps(k, x), _mm512_fmadd_ps(x2, Set1(0.044715f), one));
  __m512 e = Exp512(_mm512_mul_ps(Abs512(u), Set1(-2.0f)));
  __m512 inv = _mm512_div_ps(one, _mm512_add_ps(one, e));
  __m512 s =
      _mm512_mask_mul_ps(inv, _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_LT_OQ), e, inv);
  __m512 sech2 = _mm512_mul_ps(_mm512_mul_ps(Set1(4.0f), e), _mm512_mul_ps(inv, inv));
  __m512 du = _mm512_mul_ps(k, _mm512_fmadd_ps(x2, Set1(3 * 0.044715f), one));
  return _mm512_fmadd_ps(_mm512_mul_ps(_mm512_mul_ps(x, Set1(0.5f)), sech2), du, s);
}

// Applies f to 16 floats at a time; the tail goes through a masked load/store.
template <typename F>
inline void Map512(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
  if (i < n) {
    __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));
  }
}
#define TILLER_MAP(name, expr512, scalar)              \
  void name(const float* x, float* y, int64_t n) {     \
    Map512(x, y, n, [](__m512 v) { return expr512; }); \
  }
#else
#define TILLER_MAP(name, expr512, scalar)          \
  void name(const float* x, float* y, int64_t n) { \
    for (int64_t i = 0; i < n; ++i) {              \
      float v = x[i];                              \
      y[i] = (scalar);                             \
    }                                              \
  }
#endif

}  // namespace

TILLER_MAP(VExp, Exp512(v), std::exp(v))
TILLER_MAP(VTanh, Tanh512(v), std::tanh(v))
TILLER_MAP(VSigmoid, Sigmoid512(v), 1.0f / (1.0f + std::exp(-v)))
TILLER_MAP(VErf, Erf512(v), std::erf(v))
TILLER_MAP(VGelu, Gelu512(v), 0.5f * v * std::erfc(-v * 0.70710678118654752f))
TILLER_MAP(VGeluTanh, GeluTanh512(v),
           v / (1.0f + std::exp(-2.0f * 0.79788456080286536f * (v + 0.044715f * v * v * v))))
#undef TILLER_MAP

void VSwish(const float* x, float* y, int64_t n, float beta) {
#if defined(__AVX512F__)
  __m512 b = Set1(beta);
  Map512(x, y, n, [b](__m512 v) { return _mm512_mul_ps(v, Sigmoid512(_mm512_mul_ps(v, b))); });
#else
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-beta * x[i]));
#endif
}

float RowSum(const float* x, int64_t n) {
#if defined(__AVX512F__)
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
  if (i < n) a1 = _mm512_add_ps(a1, _mm512_maskz_loadu_ps(TailMask(n - i), x + i));
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
#else
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += x[i + j];
  float s = 0;
  for (; i < n; ++i) s += x[i];
  for (float a : acc) s += a;
  return s;
#endif
}

float RowMax(const float* x, int64_t n) {
#if defined(__AVX512F__)
  __m512 m = Set1(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
  if (i < n)
    m = _mm512_mask_max_ps(m, TailMask(n - i), m, _mm512_maskz_loadu_ps(TailMask(n - i), x + i));
  return _mm512_reduce_max_ps(m);
#else
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
#endif
}

float RowSumSqDiff(const float* x, int64_t n, float mean, float* sum_diff) {
#if defined(__AVX512F__)
  __m512 mu = Set1(mean), q0 = _mm512_setzero_ps(), q1 = _mm512_setzero_ps();
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + i), mu);
    __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), mu);
    s0 = _mm512_add_ps(s0, d0);
    s1 = _mm512_add_ps(s1, d1);
    q0 = _mm512_fmadd_ps(d0, d0, q0);
    q1 = _mm512_fmadd_ps(d1, d1, q1);
  }
  for (; i + 16 <= n; i += 16) {
    __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i), mu);
    s0 = _mm512_add_ps(s0, d);
    q0 = _mm512_fmadd_ps(d, d, q0);
  }
  if (i < n) {
    __mmask16 k = TailMask(n - i);
    __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + i), mu);
    s1 = _mm512_add_ps(s1, d);
    q1 = _mm512_fmadd_ps(d, d, q1);
  }
  *sum_diff = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
  return _mm512_reduce_add_ps(_mm512_add_ps(q0, q1));
#else
  float s = 0, q = 0;
  for (int64_t i = 0; i < n; ++i) {
    s += x[i] - mean;
    q += (x[i] - mean) * (x[i] - mean);
  }
  *sum_diff = s;
  return q;
#endif
}

float RowExpSum(const float* x, float* y, int64_t n, float shift) {
#if defined(__AVX512F__)
  __m512 sh = Set1(shift), acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 e = ExpOfShifted(_mm512_sub_ps(_mm512_loadu_ps(x + i), sh));
    _mm512_storeu_ps(y + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    __mmask16 k = TailMask(n - i);
    __m512 e =
        _mm512_maskz_mov_ps(k, ExpOfShifted(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), sh)));
    _mm512_mask_storeu_ps(y + i, k, e);
    acc = _mm512_add_ps(acc, e);
  }
  return _mm512_reduce_add_ps(acc);
#else
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += (y[i] = std::exp(x[i] - shift));
  return s;
#endif
}

namespace {

using F32Fn = std::function<void(const float*, float*, int64_t)>;

template <typename T, typename G>
void MapScalar(const T* x, T* y, int64_t n, G g) {
  for (int64_t i = 0; i < n; ++i) y[i] = g(x[i]);
}

// Ops that both the float32 and float64 paths compute with scalar formulas;
// `T` is the element type. Returns false if `type` is not one of them.
template <typename T>
bool ScalarFloatOp(const ir::Op& op, std::function<void(const T*, T*, int64_t)>* out) {
  const std::string& t = op.type;
  auto set = [&](auto g) { *out = [g](const T* x, T* y, int64_t n) { MapScalar(x, y, n, g); }; };
  if (t == "relu")
    set([](T v) { return v > T(0) ? v : T(0); });
  else if (t == "abs")
    set([](T v) { return std::abs(v); });
  else if (t == "neg")
    set([](T v) { return -v; });
  else if (t == "square")
    set([](T v) { return v * v; });
  else if (t == "reciprocal")
    set([](T v) { return T(1) / v; });
  else if (t == "sqrt")
    set([](T v) { return std::sqrt(v); });
  else if (t == "rsqrt")
    set([](T v) { return T(1) / std::sqrt(v); });
  else if (t == "log")
    set([](T v) { return std::log(v); });
  else if (t == "log1p")
    set([](T v) { return std::log1p(v); });
  else if (t == "sin")
    set([](T v) { return std::sin(v); });
  else if (t == "cos")
    set([](T v) { return std::cos(v); });
  else if (t == "floor")
    set([](T v) { return std::floor(v); });
  else if (t == "ceil")
    set([](T v) { return std::ceil(v); });
  else if (t == "round") {
    // Ties to even, as Paddle 3 (2.5 -> 2; std::nearbyint in the default
    // rounding mode). decimals > 0 rounds x * 10^d and divides back;
    // decimals < 0 divides by 10^-d first, then multiplies.
    int64_t d = op.GetInt("decimals");
    T p = T(std::pow(10.0, static_cast<double>(d < 0 ? -d : d)));
    if (d == 0)
      set([](T v) { return std::nearbyint(v); });
    else if (d > 0)
      set([p](T v) { return std::nearbyint(v * p) / p; });
    else
      set([p](T v) { return std::nearbyint(v / p) * p; });
  } else if (t == "sign")
    set([](T v) { return T((v > T(0)) - (v < T(0))); });
  else if (t == "exp")
    set([](T v) { return std::exp(v); });
  else if (t == "tanh")
    set([](T v) { return std::tanh(v); });
  else if (t == "erf")
    set([](T v) { return std::erf(v); });
  else if (t == "sigmoid")
    set([](T v) { return T(1) / (T(1) + std::exp(-v)); });
  else if (t == "silu")
    set([](T v) { return v / (T(1) + std::exp(-v)); });
  else if (t == "swish") {
    T beta = T(op.GetFloat("beta"));
    set([beta](T v) { return v / (T(1) + std::exp(-beta * v)); });
  } else if (t == "gelu") {
    if (op.GetBool("approximate")) {
      set([](T v) {
        T u = T(0.79788456080286536) * (v + T(0.044715) * v * v * v);
        return T(0.5) * v * (T(1) + std::tanh(u));
      });
    } else {
      set([](T v) { return T(0.5) * v * std::erfc(-v * T(0.70710678118654752)); });
    }
  } else if (t == "leaky_relu") {
    T alpha = T(op.GetFloat("alpha"));
    set([alpha](T v) { return v > T(0) ? v : alpha * v; });
  } else if (t == "elu") {
    T alpha = T(op.GetFloat("alpha"));
    set([alpha](T v) { return v > T(0) ? v : alpha * std::expm1(v); });
  } else if (t == "hard_swish") {
    T offset = T(op.GetFloat("offset")), threshold = T(op.GetFloat("threshold"));
    T scale = T(op.GetFloat("scale"));
    set([=](T v) { return v * std::min(std::max(v + offset, T(0)), threshold) / scale; });
  } else if (t == "hard_sigmoid") {
    T slope = T(op.GetFloat("slope")), offset = T(op.GetFloat("offset"));
    set([=](T v) { return std::min(std::max(slope * v + offset, T(0)), T(1)); });
  } else if (t == "relu6") {
    T threshold = T(op.GetFloat("threshold"));
    set([=](T v) { return std::min(std::max(v, T(0)), threshold); });
  } else if (t == "softplus") {
    T beta = T(op.GetFloat("beta")), threshold = T(op.GetFloat("threshold"));
    set([=](T v) { return v * beta > threshold ? v : std::log1p(std::exp(beta * v)) / beta; });
  } else if (t == "pow_scalar") {
    double f = op.GetFloat("factor");
    if (f == 2.0)
      set([](T v) { return v * v; });
    else if (f == 1.0)
      set([](T v) { return v; });
    else if (f == 0.5)
      set([](T v) { return std::sqrt(v); });
    else
      set([f = T(f)](T v) { return std::pow(v, f); });
  } else if (t == "scale") {
    T s = T(op.GetFloat("scale")), b = T(op.GetFloat("bias"));
    if (op.GetBool("bias_after_scale"))
      set([=](T v) { return v * s + b; });
    else
      set([=](T v) { return (v + b) * s; });
  } else if (t == "clip") {
    T lo = T(op.GetFloat("min"));
    T hi = T(op.GetFloat("max"));
    // Paddle's order: below min gives min even when min > max; NaN passes.
    set([=](T v) { return v < lo ? lo : (v > hi ? hi : v); });
  } else {
    return false;
  }
  return true;
}

// float32: the transcendental hot spots go through the vector math above.
F32Fn MakeF32(const ir::Op& op) {
  const std::string& t = op.type;
  if (t == "exp") return VExp;
  if (t == "tanh") return VTanh;
  if (t == "sigmoid") return VSigmoid;
  if (t == "erf") return VErf;
  if (t == "silu") return [](const float* x, float* y, int64_t n) { VSwish(x, y, n, 1.0f); };
  if (t == "swish") {
    float beta = static_cast<float>(op.GetFloat("beta"));
    return [beta](const float* x, float* y, int64_t n) { VSwish(x, y, n, beta); };
  }
  if (t == "gelu") return op.GetBool("approximate") ? F32Fn(VGeluTanh) : F32Fn(VGelu);
  F32Fn fn;
  if (!ScalarFloatOp<float>(op, &fn)) Unsupported(op, "unknown unary op");
  return fn;
}

// Integer types support the ops that are exact on integers.
template <typename T>
std::function<void(const T*, T*, int64_t)> MakeInt(const ir::Op& op) {
  const std::string& t = op.type;
  using Fn = std::function<void(const T*, T*, int64_t)>;
  auto wrap = [](auto g) -> Fn {
    return [g](const T* x, T* y, int64_t n) { MapScalar(x, y, n, g); };
  };
  if (t == "relu") return wrap([](T v) { return v > 0 ? v : T(0); });
  if (t == "abs") return wrap([](T v) { return v < 0 ? T(-v) : v; });
  if (t == "neg") return wrap([](T v) { return T(-v); });
  if (t == "square") return wrap([](T v) { return T(v * v); });
  if (t == "sign") return wrap([](T v) { return T((v > 0) - (v < 0)); });
  if (t == "pow_scalar") {
    // Paddle casts the factor to the integer type first (pow(x, 2.5) is
    // x * x) and multiplies; wraps on overflow like Paddle's integer product.
    double f = op.GetFloat("factor");
    if (f <= -1.0) Unsupported(op, "integer pow with negative factor {}", f);
    auto k = static_cast<uint64_t>(std::trunc(f));
    return wrap([k](T v) {
      using U = std::make_unsigned_t<T>;
      U r = 1, b = static_cast<U>(v);
      for (uint64_t e = k; e; e >>= 1, b *= b) {
        if (e & 1) r *= b;
      }
      return static_cast<T>(r);
    });
  }
  // Integers are already whole: Paddle's integer floor/ceil/round copy.
  if (t == "floor" || t == "ceil" || t == "round") return wrap([](T v) { return v; });
  if (t == "clip") {
    // Paddle casts float bounds to T, truncating toward zero.
    double lo = op.GetFloat("min"), hi = op.GetFloat("max");
    T l = lo <= double(std::numeric_limits<T>::lowest()) ? std::numeric_limits<T>::lowest()
                                                         : T(std::trunc(lo));
    T h = hi >= double(std::numeric_limits<T>::max()) ? std::numeric_limits<T>::max()
                                                      : T(std::trunc(hi));
    return wrap([=](T v) { return v < l ? l : (v > h ? h : v); });
  }
  Unsupported(op, "dtype {} not supported", DTypeName(InDType(op)));
}

template <typename T>
std::unique_ptr<Kernel> Wrap(std::function<void(const T*, T*, int64_t)> fn, int64_t n,
                             int64_t cost) {
  return std::make_unique<LambdaKernel>([fn = std::move(fn), n, cost](const KernelArgs& args) {
    const T* x = static_cast<const T*>(args.inputs[0]);
    T* y = static_cast<T*>(args.outputs[0]);
    ParallelRange(n, cost, [&](int64_t b, int64_t e) { fn(x + b, y + b, e - b); });
  });
}

std::unique_ptr<Kernel> MakeUnary(const ir::Op& op) {
  int64_t n = NumElements(op.outputs[0]->shape());
  // Transcendentals cost ~10x a load/store; splitting them earlier pays off.
  static const char* const kCheap[] = {"relu",  "abs",        "neg",  "square", "scale", "clip",
                                       "relu6", "leaky_relu", "sign", "floor",  "ceil"};
  int64_t cost = 8;
  for (const char* c : kCheap) {
    if (op.type == c) cost = 1;
  }
  switch (InDType(op)) {
    case DType::kF32:
      return Wrap<float>(MakeF32(op), n, cost);
    case DType::kF64: {
      std::function<void(const double*, double*, int64_t)> fn;
      if (!ScalarFloatOp<double>(op, &fn)) Unsupported(op, "unknown unary op");
      return Wrap<double>(std::move(fn), n, cost);
    }
    case DType::kI32:
      return Wrap<int32_t>(MakeInt<int32_t>(op), n, 1);
    case DType::kI64:
      return Wrap<int64_t>(MakeInt<int64_t>(op), n, 1);
    default:
      Unsupported(op, "dtype {} not supported", DTypeName(InDType(op)));
  }
}

std::unique_ptr<Kernel> MakeLogicalNot(const ir::Op& op) {
  int64_t n = NumElements(op.outputs[0]->shape());
  std::unique_ptr<Kernel> k;
  DispatchDType<bool, float, double, int8_t, uint8_t, int32_t, int64_t>(InDType(op), [&](auto tag) {
    using T = std::conditional_t<std::is_same_v<decltype(tag), bool>, uint8_t, decltype(tag)>;
    k = std::make_unique<LambdaKernel>([n](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      uint8_t* y = static_cast<uint8_t*>(args.outputs[0]);
      ParallelRange(n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) y[i] = x[i] == T(0);
      });
    });
  });
  return k;
}

// gelu'(x) in T's precision (the float64 path and non-AVX-512 builds).
template <typename T>
T GeluDerivative(T x, bool approximate) {
  if (approximate) {  // as GeluTanhGrad512
    const T k = T(0.79788456080286536), c = T(0.044715);
    const T u = k * (x + c * x * x * x), e = std::exp(T(-2) * std::abs(u)), inv = T(1) / (T(1) + e);
    const T s = u < T(0) ? e * inv : inv;
    return s + T(0.5) * x * T(4) * e * inv * inv * k * (T(1) + 3 * c * x * x);
  }
  return T(0.5) * std::erfc(-x * T(0.70710678118654752)) +
         x * std::exp(T(-0.5) * x * x) * T(0.39894228040143268);
}

void GeluGradF32(const float* x, const float* dy, float* dx, int64_t n, bool approximate) {
#if defined(__AVX512F__)
  auto run = [&](auto deriv) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(dx + i,
                       _mm512_mul_ps(_mm512_loadu_ps(dy + i), deriv(_mm512_loadu_ps(x + i))));
    if (i < n) {
      __mmask16 m = TailMask(n - i);
      _mm512_mask_storeu_ps(
          dx + i, m,
          _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dy + i), deriv(_mm512_maskz_loadu_ps(m, x + i))));
    }
  };
  if (approximate)
    run([](__m512 v) { return GeluTanhGrad512(v); });
  else
    run([](__m512 v) { return GeluGrad512(v); });
#else
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * GeluDerivative(x[i], approximate);
#endif
}

// gelu_grad(x, dy){approximate} -> dy * gelu'(x).
std::unique_ptr<Kernel> MakeGeluGrad(const ir::Op& op) {
  const int64_t n = NumElements(op.outputs[0]->shape());
  const bool approximate = op.GetBool("approximate");
  if (InDType(op) == DType::kF32) {
    return std::make_unique<LambdaKernel>([n, approximate](const KernelArgs& args) {
      const auto* x = static_cast<const float*>(args.inputs[0]);
      const auto* dy = static_cast<const float*>(args.inputs[1]);
      auto* dx = static_cast<float*>(args.outputs[0]);
      ParallelRange(n, 8, [&](int64_t b, int64_t e) {
        GeluGradF32(x + b, dy + b, dx + b, e - b, approximate);
      });
    });
  }
  return std::make_unique<LambdaKernel>([n, approximate](const KernelArgs& args) {
    const auto* x = static_cast<const double*>(args.inputs[0]);
    const auto* dy = static_cast<const double*>(args.inputs[1]);
    auto* dx = static_cast<double*>(args.outputs[0]);
    ParallelRange(n, 8, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dx[i] = dy[i] * GeluDerivative(x[i], approximate);
    });
  });
}

const bool kRegistered = [] {
  using enum DType;
  RegisterKernel("gelu_grad", MakeGeluGrad, Signature("T, T -> T").Where("T", {kF32, kF64}));
  // Float only: the ops MakeInt does not define.
  for (const char* name :
       {"gelu",         "tanh",       "sigmoid",  "exp",   "log",        "sqrt",  "rsqrt",
        "erf",          "reciprocal", "silu",     "swish", "leaky_relu", "elu",   "hard_swish",
        "hard_sigmoid", "relu6",      "softplus", "sin",   "cos",        "log1p", "scale"}) {
    RegisterKernel(name, MakeUnary, Signature("T -> T").Where("T", {kF32, kF64}));
  }
  // Exact on integers (MakeInt).
  for (const char* name :
       {"relu", "abs", "neg", "square", "sign", "pow_scalar", "floor", "ceil", "round", "clip"}) {
    RegisterKernel(name, MakeUnary, Signature("T -> T").Where("T", {kF32, kF64, kI32, kI64}));
  }
  RegisterKernel("logical_not", MakeLogicalNot,
                 Signature("T -> bool").Where("T", {kBool, kF32, kF64, kI8, kU8, kI32, kI64}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
