// Unary elementwise kernels (activations and math) and the vectorized float
// math they share with softmax and the norms; gelu_grad, which shares gelu's.
//
// The float formulas are written once on simd::Vec (AVX-512, AVX2 or scalar
// lanes). exp: simd.h. erf/erfc: odd Taylor
// series below 0.5, else the Numerical Recipes erfc fit (relative error
// < 1.2e-7 everywhere), so erf and both gelu tails stay accurate. tanh: odd
// Taylor series below 0.55 (no cancellation), else 1 - 2/(exp(2x)+1).
#include <cmath>
#include <functional>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
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

namespace {

using F32Fn = std::function<void(const float*, float*, int64_t)>;

template <typename T, typename G>
void MapScalar(const T* x, T* y, int64_t n, G g) {
  for (int64_t i = 0; i < n; ++i) y[i] = g(x[i]);
}

// Ops that both the float32 and float64 paths compute with scalar formulas;
// `T` is the element type. Returns false if `op` is not one of them.
template <typename T>
bool ScalarFloatOp(const ir::Op& op, std::function<void(const T*, T*, int64_t)>* out) {
  auto set = [&](auto g) { *out = [g](const T* x, T* y, int64_t n) { MapScalar(x, y, n, g); }; };
  switch (op.opcode) {
    case ir::Opcode::relu:
      set([](T v) { return v > T(0) ? v : T(0); });
      break;
    case ir::Opcode::abs:
      set([](T v) { return std::abs(v); });
      break;
    case ir::Opcode::neg:
      set([](T v) { return -v; });
      break;
    case ir::Opcode::square:
      set([](T v) { return v * v; });
      break;
    case ir::Opcode::reciprocal:
      set([](T v) { return T(1) / v; });
      break;
    case ir::Opcode::sqrt:
      set([](T v) { return std::sqrt(v); });
      break;
    case ir::Opcode::rsqrt:
      set([](T v) { return T(1) / std::sqrt(v); });
      break;
    case ir::Opcode::log:
      set([](T v) { return std::log(v); });
      break;
    case ir::Opcode::log1p:
      set([](T v) { return std::log1p(v); });
      break;
    case ir::Opcode::sin:
      set([](T v) { return std::sin(v); });
      break;
    case ir::Opcode::cos:
      set([](T v) { return std::cos(v); });
      break;
    case ir::Opcode::floor:
      set([](T v) { return std::floor(v); });
      break;
    case ir::Opcode::ceil:
      set([](T v) { return std::ceil(v); });
      break;
    case ir::Opcode::round: {
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
      break;
    }
    case ir::Opcode::sign:
      set([](T v) { return T((v > T(0)) - (v < T(0))); });
      break;
    case ir::Opcode::exp:
      set([](T v) { return std::exp(v); });
      break;
    case ir::Opcode::tanh:
      set([](T v) { return std::tanh(v); });
      break;
    case ir::Opcode::erf:
      set([](T v) { return std::erf(v); });
      break;
    case ir::Opcode::sigmoid:
      set([](T v) { return T(1) / (T(1) + std::exp(-v)); });
      break;
    case ir::Opcode::silu:
      set([](T v) { return v / (T(1) + std::exp(-v)); });
      break;
    case ir::Opcode::swish: {
      T beta = T(op.GetFloat("beta"));
      set([beta](T v) { return v / (T(1) + std::exp(-beta * v)); });
      break;
    }
    case ir::Opcode::gelu: {
      if (op.GetBool("approximate")) {
        set([](T v) {
          T u = T(0.79788456080286536) * (v + T(0.044715) * v * v * v);
          return T(0.5) * v * (T(1) + std::tanh(u));
        });
      } else {
        set([](T v) { return T(0.5) * v * std::erfc(-v * T(0.70710678118654752)); });
      }
      break;
    }
    case ir::Opcode::leaky_relu: {
      T alpha = T(op.GetFloat("alpha"));
      set([alpha](T v) { return v > T(0) ? v : alpha * v; });
      break;
    }
    case ir::Opcode::elu: {
      T alpha = T(op.GetFloat("alpha"));
      set([alpha](T v) { return v > T(0) ? v : alpha * std::expm1(v); });
      break;
    }
    case ir::Opcode::hard_swish: {
      T offset = T(op.GetFloat("offset")), threshold = T(op.GetFloat("threshold"));
      T scale = T(op.GetFloat("scale"));
      set([=](T v) { return v * std::min(std::max(v + offset, T(0)), threshold) / scale; });
      break;
    }
    case ir::Opcode::hard_sigmoid: {
      T slope = T(op.GetFloat("slope")), offset = T(op.GetFloat("offset"));
      set([=](T v) { return std::min(std::max(slope * v + offset, T(0)), T(1)); });
      break;
    }
    case ir::Opcode::relu6: {
      T threshold = T(op.GetFloat("threshold"));
      set([=](T v) { return std::min(std::max(v, T(0)), threshold); });
      break;
    }
    case ir::Opcode::softplus: {
      T beta = T(op.GetFloat("beta")), threshold = T(op.GetFloat("threshold"));
      set([=](T v) { return v * beta > threshold ? v : std::log1p(std::exp(beta * v)) / beta; });
      break;
    }
    case ir::Opcode::pow_scalar: {
      double f = op.GetFloat("factor");
      if (f == 2.0)
        set([](T v) { return v * v; });
      else if (f == 1.0)
        set([](T v) { return v; });
      else if (f == 0.5)
        set([](T v) { return std::sqrt(v); });
      else
        set([f = T(f)](T v) { return std::pow(v, f); });
      break;
    }
    case ir::Opcode::scale: {
      T s = T(op.GetFloat("scale")), b = T(op.GetFloat("bias"));
      if (op.GetBool("bias_after_scale"))
        set([=](T v) { return v * s + b; });
      else
        set([=](T v) { return (v + b) * s; });
      break;
    }
    case ir::Opcode::clip: {
      T lo = T(op.GetFloat("min"));
      T hi = T(op.GetFloat("max"));
      // Paddle's order: below min gives min even when min > max; NaN passes.
      set([=](T v) { return v < lo ? lo : (v > hi ? hi : v); });
      break;
    }
    default:
      return false;
  }
  return true;
}

// float32: the transcendental hot spots go through the vector math above.
F32Fn MakeF32(const ir::Op& op) {
  switch (op.opcode) {
    case ir::Opcode::exp:
      return VExp;
    case ir::Opcode::tanh:
      return VTanh;
    case ir::Opcode::sigmoid:
      return VSigmoid;
    case ir::Opcode::erf:
      return VErf;
    case ir::Opcode::silu:
      return [](const float* x, float* y, int64_t n) { VSwish(x, y, n, 1.0f); };
    case ir::Opcode::swish: {
      float beta = static_cast<float>(op.GetFloat("beta"));
      return [beta](const float* x, float* y, int64_t n) { VSwish(x, y, n, beta); };
    }
    case ir::Opcode::gelu:
      return op.GetBool("approximate") ? F32Fn(VGeluTanh) : F32Fn(VGelu);
    default:
      break;
  }
  F32Fn fn;
  if (!ScalarFloatOp<float>(op, &fn)) Unsupported(op, "unknown unary op");
  return fn;
}

// Integer types support the ops that are exact on integers.
template <typename T>
std::function<void(const T*, T*, int64_t)> MakeInt(const ir::Op& op) {
  using Fn = std::function<void(const T*, T*, int64_t)>;
  auto wrap = [](auto g) -> Fn {
    return [g](const T* x, T* y, int64_t n) { MapScalar(x, y, n, g); };
  };
  switch (op.opcode) {
    case ir::Opcode::relu:
      return wrap([](T v) { return v > 0 ? v : T(0); });
    case ir::Opcode::abs:
      return wrap([](T v) { return v < 0 ? T(-v) : v; });
    case ir::Opcode::neg:
      return wrap([](T v) { return T(-v); });
    case ir::Opcode::square:
      return wrap([](T v) { return T(v * v); });
    case ir::Opcode::sign:
      return wrap([](T v) { return T((v > 0) - (v < 0)); });
    case ir::Opcode::pow_scalar: {
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
    case ir::Opcode::floor:
    case ir::Opcode::ceil:
    case ir::Opcode::round:
      return wrap([](T v) { return v; });
    case ir::Opcode::clip: {
      // Paddle casts float bounds to T, truncating toward zero.
      double lo = op.GetFloat("min"), hi = op.GetFloat("max");
      T l = lo <= double(std::numeric_limits<T>::lowest()) ? std::numeric_limits<T>::lowest()
                                                           : T(std::trunc(lo));
      T h = hi >= double(std::numeric_limits<T>::max()) ? std::numeric_limits<T>::max()
                                                        : T(std::trunc(hi));
      return wrap([=](T v) { return v < l ? l : (v > h ? h : v); });
    }
    default:
      break;
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
  int64_t cost = 8;
  switch (op.opcode) {
    case ir::Opcode::relu:
    case ir::Opcode::abs:
    case ir::Opcode::neg:
    case ir::Opcode::square:
    case ir::Opcode::scale:
    case ir::Opcode::clip:
    case ir::Opcode::relu6:
    case ir::Opcode::leaky_relu:
    case ir::Opcode::sign:
    case ir::Opcode::floor:
    case ir::Opcode::ceil:
      cost = 1;
      break;
    default:
      break;
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

// gelu'(x) in T's precision (the float64 path).
template <typename T>
T GeluDerivative(T x, bool approximate) {
  if (approximate) {  // as GeluTanhGrad
    const T k = T(0.79788456080286536), c = T(0.044715);
    const T u = k * (x + c * x * x * x), e = std::exp(T(-2) * std::abs(u)), inv = T(1) / (T(1) + e);
    const T s = u < T(0) ? e * inv : inv;
    return s + T(0.5) * x * T(4) * e * inv * inv * k * (T(1) + 3 * c * x * x);
  }
  return T(0.5) * std::erfc(-x * T(0.70710678118654752)) +
         x * std::exp(T(-0.5) * x * x) * T(0.39894228040143268);
}

void GeluGradF32(const float* x, const float* dy, float* dx, int64_t n, bool approximate) {
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
