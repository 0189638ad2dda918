// Activation kernels beyond the vectorized hot spots of unary.cc: the
// inverse/hyperbolic trig, expm1 and log-base ops, the shrink/threshold family,
// celu, selu, mish, logsigmoid, softsign, brelu (hardtanh), and prelu (x and a
// broadcast alpha). float32 and float64 use scalar formulas written from
// Paddle's documented definitions; float32 math is done in float like
// Paddle's CPU kernels, so results agree to a few ulp.
#include <cmath>
#include <functional>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

template <typename T>
using UnaryFn = std::function<void(const T*, T*, int64_t)>;

// log(sigmoid(x)) = -softplus(-x), written so neither branch overflows:
// -(max(-x, 0) + log(exp(-max(-x, 0)) + exp(-x - max(-x, 0)))).
template <typename T>
T LogSigmoid(T v) {
  T m = std::max(-v, T(0));
  return -(m + std::log(std::exp(-m) + std::exp(-v - m)));
}

template <typename T>
UnaryFn<T> MakeFormula(const ir::Op& op) {
  auto wrap = [](auto g) -> UnaryFn<T> {
    return [g](const T* x, T* y, int64_t n) {
      for (int64_t i = 0; i < n; ++i) y[i] = g(x[i]);
    };
  };
  switch (op.opcode) {
    case ir::Opcode::acos:
      return wrap([](T v) { return std::acos(v); });
    case ir::Opcode::asin:
      return wrap([](T v) { return std::asin(v); });
    case ir::Opcode::atan:
      return wrap([](T v) { return std::atan(v); });
    case ir::Opcode::cosh:
      return wrap([](T v) { return std::cosh(v); });
    case ir::Opcode::sinh:
      return wrap([](T v) { return std::sinh(v); });
    case ir::Opcode::tan:
      return wrap([](T v) { return std::tan(v); });
    case ir::Opcode::asinh:
      return wrap([](T v) { return std::asinh(v); });
    case ir::Opcode::acosh:
      return wrap([](T v) { return std::acosh(v); });
    case ir::Opcode::atanh:
      return wrap([](T v) { return std::atanh(v); });
    case ir::Opcode::expm1:
      return wrap([](T v) { return std::expm1(v); });
    case ir::Opcode::log2:
      return wrap([](T v) { return std::log2(v); });
    case ir::Opcode::log10:
      return wrap([](T v) { return std::log10(v); });
    case ir::Opcode::softsign:
      return wrap([](T v) { return v / (T(1) + std::abs(v)); });
    case ir::Opcode::logsigmoid:
      return wrap([](T v) { return LogSigmoid(v); });
    case ir::Opcode::tanh_shrink:
      return wrap([](T v) { return v - std::tanh(v); });
    case ir::Opcode::mish: {
      // softplus switches to the identity above `threshold` (as Paddle's).
      T th = T(op.GetFloat("threshold"));
      return wrap([th](T v) {
        T sp = v > th ? v : std::log1p(std::exp(v));
        return v * std::tanh(sp);
      });
    }
    case ir::Opcode::celu: {
      T alpha = T(op.GetFloat("alpha"));
      return wrap([alpha](T v) {
        return std::max(v, T(0)) + std::min(T(0), alpha * (std::exp(v / alpha) - T(1)));
      });
    }
    case ir::Opcode::selu: {
      T scale = T(op.GetFloat("scale"));
      T alpha = T(op.GetFloat("alpha"));
      return wrap([=](T v) { return v > T(0) ? scale * v : scale * alpha * (std::exp(v) - T(1)); });
    }
    case ir::Opcode::hard_shrink: {
      T th = T(op.GetFloat("threshold"));
      return wrap([th](T v) { return (v < -th || v > th) ? v : T(0); });
    }
    case ir::Opcode::softshrink: {
      T l = T(op.GetFloat("lambda"));
      return wrap([l](T v) { return v > l ? v - l : (v < -l ? v + l : T(0)); });
    }
    case ir::Opcode::thresholded_relu: {
      T th = T(op.GetFloat("threshold")), value = T(op.GetFloat("value"));
      return wrap([=](T v) { return v > th ? v : value; });
    }
    case ir::Opcode::brelu: {
      T lo = T(op.GetFloat("t_min")), hi = T(op.GetFloat("t_max"));
      return wrap([=](T v) { return v <= lo ? lo : (v >= hi ? hi : v); });
    }
    default:
      break;
  }
  Unsupported(op, "unknown activation");
}

template <typename T>
std::unique_ptr<Kernel> WrapUnary(UnaryFn<T> fn, int64_t n) {
  return std::make_unique<LambdaKernel>([fn = std::move(fn), n](const KernelArgs& args) {
    const T* x = static_cast<const T*>(args.inputs[0]);
    T* y = static_cast<T*>(args.outputs[0]);
    ParallelRange(n, 8, [&](int64_t b, int64_t e) { fn(x + b, y + b, e - b); });
  });
}

std::unique_ptr<Kernel> MakeActivation(const ir::Op& op) {
  int64_t n = NumElements(op.outputs[0]->shape());
  switch (InDType(op)) {
    case DType::kF32:
      return WrapUnary<float>(MakeFormula<float>(op), n);
    case DType::kF64:
      return WrapUnary<double>(MakeFormula<double>(op), n);
    default:
      Unsupported(op, "dtype {} not supported", DTypeName(InDType(op)));
  }
}

// prelu: x > 0 ? x : alpha * x; alpha reaches each element through the
// broadcast plan (one value, one per channel, or one per element).
template <typename T>
std::unique_ptr<Kernel> PreluKernel(const ir::Op& op) {
  IterPlan p =
      MakeBroadcastPlan(op, op.outputs[0]->shape(), {op.inputs[0]->shape(), op.inputs[1]->shape()});
  return std::make_unique<LambdaKernel>([p](const KernelArgs& args) {
    const T* x = static_cast<const T*>(args.inputs[0]);
    const T* alpha = static_cast<const T*>(args.inputs[1]);
    T* out = static_cast<T*>(args.outputs[0]);
    const int64_t sa = p.inner_stride(1);
    ParallelRange(p.total, 1, [&](int64_t begin, int64_t end) {
      ForEachRun(p, begin, end, [&](int64_t o, const int64_t* off, int64_t len) {
        const T* xs = x + off[0];
        const T* as = alpha + off[1];
        T* z = out + o;
        for (int64_t i = 0; i < len; ++i) {
          T v = xs[i];
          z[i] = v > T(0) ? v : as[i * sa] * v;
        }
      });
    });
  });
}

std::unique_ptr<Kernel> MakePrelu(const ir::Op& op) {
  std::unique_ptr<Kernel> k;
  DispatchDType<float, double>(InDType(op), [&](auto tag) { k = PreluKernel<decltype(tag)>(op); });
  return k;
}

const bool kRegistered = [] {
  for (const char* name :
       {"acos",        "asin",  "atan",  "cosh", "sinh",        "tan",        "asinh",
        "acosh",       "atanh", "expm1", "log2", "log10",       "softsign",   "logsigmoid",
        "tanh_shrink", "mish",  "celu",  "selu", "hard_shrink", "softshrink", "thresholded_relu",
        "brelu"}) {
    RegisterKernel(name, MakeActivation,
                   Signature("T -> T").Where("T", {DType::kF32, DType::kF64}));
  }
  RegisterKernel("prelu", MakePrelu, Signature("T, T -> T").Where("T", {DType::kF32, DType::kF64}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
