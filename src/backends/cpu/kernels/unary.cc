// Unary elementwise kernels (activations and math) and gelu_grad. Their
// float32 formulas are the vectorized math of kernel_utils.h (VExp, VGelu,
// VGeluGrad, ...: vector_math_impl.h, one copy per instruction set).
#include <cmath>
#include <functional>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {

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

// ~x of an integer tensor (bool operands are logical_not's).
std::unique_ptr<Kernel> MakeBitwiseNot(const ir::Op& op) {
  const int64_t n = NumElements(op.outputs[0]->shape());
  std::unique_ptr<Kernel> k;
  DispatchDType<int8_t, uint8_t, int16_t, int32_t, int64_t>(InDType(op), [&](auto tag) {
    using T = decltype(tag);
    k = Wrap<T>([](const T* x, T* y, int64_t m) { MapScalar(x, y, m, [](T v) { return T(~v); }); },
                n, 1);
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
        VGeluGrad(x + b, dy + b, dx + b, e - b, approximate);
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
  RegisterKernel("bitwise_not", MakeBitwiseNot,
                 Signature("T -> T").Where("T", {kI8, kU8, kI16, kI32, kI64}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
