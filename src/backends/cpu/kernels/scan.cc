// cumsum and cumprod along one axis, and cumprod's gradient: the tensor is
// viewed as [outer, n, inner] and each of the outer*inner lines is
// scanned; lines are independent, so the outer loop runs in parallel.
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

// cumprod's input gradient, line by line, in scan order p (index j(p)):
// dx_p = L_p * R_p with L_p the product of x before p and R_p the sum of
// dy_q times x_(p+1) ... x_q over the outputs q that x_p is a factor of
// (q >= p; exclusive: q > p, and out_q's factors stop before q), so
//   R_last = dy_last (exclusive: 0),  R_p = dy_p (exclusive: dy_(p+1)) +
//   x_(p+1) R_(p+1).
// R runs backward into dx, L forward: no division, so zeros in x need no
// case of their own.
template <typename T>
void ScanProdGrad(const T* x, const T* dy, T* dx, int64_t outer, int64_t n, int64_t inner,
                  bool exclusive, bool reverse) {
#pragma omp parallel for if (outer * n * inner > 65536)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      auto at = [&](int64_t p) { return base + (reverse ? n - 1 - p : p) * inner; };
      T r = 0;
      for (int64_t p = n - 1; p >= 0; --p) {
        if (p + 1 < n) r *= x[at(p + 1)];
        if (exclusive)
          r += p + 1 < n ? dy[at(p + 1)] : T(0);
        else
          r += dy[at(p)];
        dx[at(p)] = r;
      }
      T l = 1;
      for (int64_t p = 0; p < n; ++p) {
        dx[at(p)] *= l;
        l *= x[at(p)];
      }
    }
  }
}

// The [outer, n, inner] view of x along the op's axis.
struct ScanShape {
  int64_t outer = 1, n = 1, inner = 1;
};
ScanShape ViewAlongAxis(const ir::Op& op) {
  const Shape& s = op.inputs[0]->shape();
  const int rank = static_cast<int>(s.size());
  const int axis = rank == 0 ? 0 : NormalizeAxis(op.GetInt("axis"), rank);
  ScanShape v;
  v.n = rank == 0 ? 1 : s[axis];
  for (int i = 0; i < axis; ++i) v.outer *= s[i];
  for (int i = axis + 1; i < rank; ++i) v.inner *= s[i];
  return v;
}

std::unique_ptr<Kernel> MakeCumprodGrad(const ir::Op& op) {
  const ScanShape v = ViewAlongAxis(op);
  const bool exclusive = op.GetBool("exclusive"), reverse = op.GetBool("reverse");
  auto make = [&](auto tag) -> std::unique_ptr<Kernel> {
    using T = decltype(tag);
    return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
      ScanProdGrad(static_cast<const T*>(a.inputs[0]), static_cast<const T*>(a.inputs[1]),
                   static_cast<T*>(a.outputs[0]), v.outer, v.n, v.inner, exclusive, reverse);
    });
  };
  if (op.inputs[0]->dtype() == DType::kF64) return make(double{});
  return make(float{});
}

std::unique_ptr<Kernel> MakeScan(const ir::Op& op) {
  const ir::Value* x = op.inputs[0];
  const ScanShape v = ViewAlongAxis(op);
  const int64_t outer = v.outer, n = v.n, inner = v.inner;
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
TILLER_CPU_KERNEL("cumprod_grad", MakeCumprodGrad,
                  Signature("T, T -> T").Where("T", {DType::kF32, DType::kF64}));

}  // namespace
}  // namespace tiller::cpu
