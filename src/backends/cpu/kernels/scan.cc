// cumsum and cumprod along one axis: the tensor is viewed as [outer, n,
// inner] and each of the outer*inner lines is scanned; lines are
// independent, so the outer loop runs in parallel.
#include <cstdint>
#include <type_traits>

#include "backends/cpu/kernel.h"
#include "core/error.h"

namespace tiller::cpu {
namespace {

// a * b or a + b; integers wrap around (in unsigned arithmetic, where
// overflow is defined), as Paddle's kernels do on the hardware.
template <typename T, bool prod>
T Step(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(prod ? U(U(a) * U(b)) : U(U(a) + U(b)));
  } else {
    return prod ? a * b : a + b;
  }
}

// prod: running products (the running value starts at 1), else sums.
template <typename T, bool prod>
void Scan(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse) {
#pragma omp parallel for if (outer * n * inner > 65536)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* xl = x + o * n * inner + i;
      T* yl = y + o * n * inner + i;
      T acc = prod ? T(1) : T(0);
      for (int64_t k = 0; k < n; ++k) {
        int64_t j = reverse ? n - 1 - k : k;
        T v = xl[j * inner];
        if (exclusive) yl[j * inner] = acc;
        acc = Step<T, prod>(acc, v);
        if (!exclusive) yl[j * inner] = acc;
      }
    }
  }
}

std::unique_ptr<Kernel> MakeScan(const ir::Op& op) {
  const ir::Value* x = op.inputs[0];
  const Shape& s = x->shape();
  int rank = static_cast<int>(s.size());
  int axis = rank == 0 ? 0 : NormalizeAxis(op.GetInt("axis"), rank);
  int64_t outer = 1, inner = 1, n = rank == 0 ? 1 : s[axis];
  for (int i = 0; i < axis; ++i) outer *= s[i];
  for (int i = axis + 1; i < rank; ++i) inner *= s[i];
  bool exclusive = op.GetBool("exclusive"), reverse = op.GetBool("reverse");
  const bool prod = op.is(ir::Opcode::cumprod);
  auto make = [&](auto tag) -> std::unique_ptr<Kernel> {
    using T = decltype(tag);
    return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
      const auto* x = static_cast<const T*>(a.inputs[0]);
      auto* y = static_cast<T*>(a.outputs[0]);
      if (prod)
        Scan<T, true>(x, y, outer, n, inner, exclusive, reverse);
      else
        Scan<T, false>(x, y, outer, n, inner, exclusive, reverse);
    });
  };
  switch (x->dtype()) {
    case DType::kF32:
      return make(float{});
    case DType::kF64:
      return make(double{});
    case DType::kI32:
      return make(int32_t{});
    case DType::kI64:
      return make(int64_t{});
    default:
      Fail(ErrorKind::kUnimplemented, "{} ({}): dtype {} not supported", op.type, op.name,
           DTypeName(x->dtype()));
  }
}

TILLER_CPU_KERNEL("cumsum", MakeScan,
                  Signature("T -> T").Where("T",
                                            {DType::kF32, DType::kF64, DType::kI32, DType::kI64}));
TILLER_CPU_KERNEL("cumprod", MakeScan,
                  Signature("T -> T").Where("T",
                                            {DType::kF32, DType::kF64, DType::kI32, DType::kI64}));

}  // namespace
}  // namespace tiller::cpu
