// cumsum along one axis: the tensor is viewed as [outer, n, inner] and each
// of the outer*inner lines is scanned; lines are independent, so the outer
// loop runs in parallel.
#include <cstdint>

#include "backends/cpu/kernel.h"
#include "core/error.h"

namespace tiller::cpu {
namespace {

template <typename T>
void Scan(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse) {
#pragma omp parallel for if (outer * n * inner > 65536)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* xl = x + o * n * inner + i;
      T* yl = y + o * n * inner + i;
      T acc = 0;
      for (int64_t k = 0; k < n; ++k) {
        int64_t j = reverse ? n - 1 - k : k;
        T v = xl[j * inner];
        if (exclusive) {
          yl[j * inner] = acc;
          acc += v;
        } else {
          acc += v;
          yl[j * inner] = acc;
        }
      }
    }
  }
}

std::unique_ptr<Kernel> MakeCumsum(const ir::Op& op) {
  const ir::Value* x = op.inputs[0];
  const Shape& s = x->shape();
  int rank = static_cast<int>(s.size());
  int axis = rank == 0 ? 0 : NormalizeAxis(op.GetInt("axis"), rank);
  int64_t outer = 1, inner = 1, n = rank == 0 ? 1 : s[axis];
  for (int i = 0; i < axis; ++i) outer *= s[i];
  for (int i = axis + 1; i < rank; ++i) inner *= s[i];
  bool exclusive = op.GetBool("exclusive"), reverse = op.GetBool("reverse");
  auto make = [&](auto tag) -> std::unique_ptr<Kernel> {
    using T = decltype(tag);
    return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
      Scan(static_cast<const T*>(a.inputs[0]), static_cast<T*>(a.outputs[0]), outer, n, inner,
           exclusive, reverse);
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
      Fail(ErrorKind::kUnimplemented, "cumsum ({}): dtype {} not supported", op.name,
           DTypeName(x->dtype()));
  }
}

TILLER_CPU_KERNEL("cumsum", MakeCumsum,
                  Signature("T -> T").Where("T",
                                            {DType::kF32, DType::kF64, DType::kI32, DType::kI64}));

}  // namespace
}  // namespace tiller::cpu
