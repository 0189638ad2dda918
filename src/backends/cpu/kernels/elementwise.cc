// Binary elementwise kernels with numpy broadcasting: arithmetic (atan2
// too), comparisons, logic and the bitwise ops of integers. The broadcast
// plan (kernel_utils.h) merges dims at creation, so the common cases (same
// shape, scalar, bias row over [M, N], column over [M, 1]) reach the inner
// loops below as long contiguous runs, which gcc vectorizes for each
// functor.
//
// Integer semantics never trap: x / 0 and x % 0 give 0 (Paddle raises, but a
// kernel cannot fail mid-run), INT_MIN / -1 wraps. mod and floor_div round
// toward negative infinity like Python and Paddle's remainder/floor_divide.
#include <cmath>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

// The inner run: each operand's innermost stride is 0 (broadcast) or 1.
template <typename T, typename R, typename F>
void BinaryRuns(const IterPlan& p, const T* a, const T* b, R* out, F f) {
  const int64_t sa = p.inner_stride(0), sb = p.inner_stride(1);
  ParallelRange(p.total, 1, [&](int64_t begin, int64_t end) {
    ForEachRun(p, begin, end, [&](int64_t o, const int64_t* off, int64_t n) {
      const T* x = a + off[0];
      const T* y = b + off[1];
      R* z = out + o;
      if (sa == 1 && sb == 1) {
        for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
      } else if (sa == 1) {
        const T s = y[0];
        for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], s);
      } else if (sb == 1) {
        const T s = x[0];
        for (int64_t i = 0; i < n; ++i) z[i] = f(s, y[i]);
      } else {
        std::fill(z, z + n, f(x[0], y[0]));
      }
    });
  });
}

template <typename T, typename R, typename F>
std::unique_ptr<Kernel> BinaryKernel(const ir::Op& op, F f) {
  IterPlan p =
      MakeBroadcastPlan(op, op.outputs[0]->shape(), {op.inputs[0]->shape(), op.inputs[1]->shape()});
  return std::make_unique<LambdaKernel>([p, f](const KernelArgs& args) {
    if (p.total == 0) return;
    BinaryRuns(p, static_cast<const T*>(args.inputs[0]), static_cast<const T*>(args.inputs[1]),
               static_cast<R*>(args.outputs[0]), f);
  });
}

template <typename T>
T IntDiv(T a, T b) {
  using U = std::make_unsigned_t<T>;
  if (b == 0) return 0;
  if (b == T(-1)) return static_cast<T>(U(0) - static_cast<U>(a));
  return a / b;
}

template <typename T>
T Mod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  } else {
    if (b == 0 || b == T(-1)) return 0;
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
  }
}

template <typename T>
T FloorDiv(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::floor(a / b);
  } else {
    if (b == 0) return 0;
    if (b == T(-1)) return IntDiv(a, b);
    T q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? T(q - 1) : q;
  }
}

template <typename T>
T Pow(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(a, b);
  } else {
    return static_cast<T>(std::llround(std::pow(static_cast<double>(a), static_cast<double>(b))));
  }
}

template <typename T>
std::unique_ptr<Kernel> MakeArith(const ir::Op& op) {
  switch (op.opcode) {
    case ir::Opcode::add:
      return BinaryKernel<T, T>(op, [](T a, T b) { return T(a + b); });
    case ir::Opcode::sub:
      return BinaryKernel<T, T>(op, [](T a, T b) { return T(a - b); });
    case ir::Opcode::mul:
      return BinaryKernel<T, T>(op, [](T a, T b) { return T(a * b); });
    case ir::Opcode::max:
      return BinaryKernel<T, T>(op, [](T a, T b) { return a > b ? a : b; });
    case ir::Opcode::min:
      return BinaryKernel<T, T>(op, [](T a, T b) { return a < b ? a : b; });
    case ir::Opcode::mod:
      return BinaryKernel<T, T>(op, [](T a, T b) { return Mod(a, b); });
    case ir::Opcode::floor_div:
      return BinaryKernel<T, T>(op, [](T a, T b) { return FloorDiv(a, b); });
    case ir::Opcode::pow:
      return BinaryKernel<T, T>(op, [](T a, T b) { return Pow(a, b); });
    case ir::Opcode::div: {
      if constexpr (std::is_floating_point_v<T>) {
        return BinaryKernel<T, T>(op, [](T a, T b) { return a / b; });
      } else {
        return BinaryKernel<T, T>(op, [](T a, T b) { return IntDiv(a, b); });
      }
    }
    default:
      break;
  }
  Unsupported(op, "unknown binary op");
}

// atan2(a, b): the angle of the point (b, a), signed zeros and infinities
// as std::atan2 (Paddle's kernel calls it too).
std::unique_ptr<Kernel> MakeAtan2(const ir::Op& op) {
  std::unique_ptr<Kernel> k;
  DispatchDType<float, double>(InDType(op), [&](auto tag) {
    using T = decltype(tag);
    k = BinaryKernel<T, T>(op, [](T a, T b) { return std::atan2(a, b); });
  });
  return k;
}

template <typename T>
std::unique_ptr<Kernel> MakeBitwiseT(const ir::Op& op) {
  switch (op.opcode) {
    case ir::Opcode::bitwise_and:
      return BinaryKernel<T, T>(op, [](T a, T b) { return T(a & b); });
    case ir::Opcode::bitwise_or:
      return BinaryKernel<T, T>(op, [](T a, T b) { return T(a | b); });
    case ir::Opcode::bitwise_xor:
      return BinaryKernel<T, T>(op, [](T a, T b) { return T(a ^ b); });
    default:
      break;
  }
  Unsupported(op, "unknown bitwise op");
}

std::unique_ptr<Kernel> MakeBitwise(const ir::Op& op) {
  std::unique_ptr<Kernel> k;
  DispatchDType<int8_t, uint8_t, int16_t, int32_t, int64_t>(
      InDType(op), [&](auto tag) { k = MakeBitwiseT<decltype(tag)>(op); });
  return k;
}

std::unique_ptr<Kernel> MakeArithmetic(const ir::Op& op) {
  std::unique_ptr<Kernel> k;
  DispatchDType<float, double, int32_t, int64_t>(
      InDType(op), [&](auto tag) { k = MakeArith<decltype(tag)>(op); });
  return k;
}

template <typename T>
std::unique_ptr<Kernel> MakeCompareT(const ir::Op& op) {
  using R = uint8_t;  // bool storage
  switch (op.opcode) {
    case ir::Opcode::equal:
      return BinaryKernel<T, R>(op, [](T a, T b) { return R(a == b); });
    case ir::Opcode::not_equal:
      return BinaryKernel<T, R>(op, [](T a, T b) { return R(a != b); });
    case ir::Opcode::less:
      return BinaryKernel<T, R>(op, [](T a, T b) { return R(a < b); });
    case ir::Opcode::less_equal:
      return BinaryKernel<T, R>(op, [](T a, T b) { return R(a <= b); });
    case ir::Opcode::greater:
      return BinaryKernel<T, R>(op, [](T a, T b) { return R(a > b); });
    case ir::Opcode::greater_equal:
      return BinaryKernel<T, R>(op, [](T a, T b) { return R(a >= b); });
    default:
      break;
  }
  Unsupported(op, "unknown comparison");
}

std::unique_ptr<Kernel> MakeCompare(const ir::Op& op) {
  DType dt = InDType(op);
  if (dt == DType::kBool) {  // equal / not_equal only (their signatures)
    bool eq = op.is(ir::Opcode::equal);
    // Any nonzero byte is true, so compare truth values rather than bytes.
    if (eq)
      return BinaryKernel<uint8_t, uint8_t>(
          op, [](uint8_t a, uint8_t b) { return uint8_t((a != 0) == (b != 0)); });
    return BinaryKernel<uint8_t, uint8_t>(
        op, [](uint8_t a, uint8_t b) { return uint8_t((a != 0) != (b != 0)); });
  }
  std::unique_ptr<Kernel> k;
  DispatchDType<float, double, int8_t, uint8_t, int16_t, int32_t, int64_t>(
      dt, [&](auto tag) { k = MakeCompareT<decltype(tag)>(op); });
  return k;
}

template <typename T>
std::unique_ptr<Kernel> MakeLogicT(const ir::Op& op) {
  using R = uint8_t;
  if (op.is(ir::Opcode::logical_and))
    return BinaryKernel<T, R>(op, [](T a, T b) { return R((a != T(0)) & (b != T(0))); });
  if (op.is(ir::Opcode::logical_or))
    return BinaryKernel<T, R>(op, [](T a, T b) { return R((a != T(0)) | (b != T(0))); });
  return BinaryKernel<T, R>(op, [](T a, T b) { return R((a != T(0)) ^ (b != T(0))); });
}

std::unique_ptr<Kernel> MakeLogic(const ir::Op& op) {
  std::unique_ptr<Kernel> k;
  DType dt = InDType(op);
  if (dt == DType::kBool) return MakeLogicT<uint8_t>(op);
  DispatchDType<float, int32_t, int64_t>(dt, [&](auto tag) { k = MakeLogicT<decltype(tag)>(op); });
  return k;
}

const bool kRegistered = [] {
  using enum DType;
  for (const char* n : {"add", "sub", "mul", "div", "max", "min", "pow", "mod", "floor_div"})
    RegisterKernel(n, MakeArithmetic, Signature("T, T -> T").Where("T", {kF32, kF64, kI32, kI64}));
  for (const char* n : {"equal", "not_equal"})
    RegisterKernel(
        n, MakeCompare,
        Signature("T, T -> bool").Where("T", {kF32, kF64, kI8, kU8, kI16, kI32, kI64, kBool}));
  for (const char* n : {"less", "less_equal", "greater", "greater_equal"})
    RegisterKernel(n, MakeCompare,
                   Signature("T, T -> bool").Where("T", {kF32, kF64, kI8, kU8, kI16, kI32, kI64}));
  for (const char* n : {"logical_and", "logical_or", "logical_xor"})
    RegisterKernel(n, MakeLogic, Signature("T, T -> bool").Where("T", {kBool, kF32, kI32, kI64}));
  RegisterKernel("atan2", MakeAtan2, Signature("T, T -> T").Where("T", {kF32, kF64}));
  // bool operands are the logical ops' (the translator's choice).
  for (const char* n : {"bitwise_and", "bitwise_or", "bitwise_xor"})
    RegisterKernel(n, MakeBitwise, Signature("T, T -> T").Where("T", {kI8, kU8, kI16, kI32, kI64}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
