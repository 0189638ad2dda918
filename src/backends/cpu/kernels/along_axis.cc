// take_along_axis and put_along_axis (ir/ops/along_axis.cc), values
// float32|float64|int32|int64, indices int32|int64. Both see x as [outer, n, inner] around the axis
// and indices as [outer, m, inner]. A negative index counts from the end; one outside
// [-n, n) is reported (backend::IndexFault) and left out: never read or
// written.
#include <cstring>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

struct AlongShape {
  int64_t outer, n, m, inner;
};

AlongShape ReadAlong(const ir::Op& op) {
  const RowLayout x = AxisRows(op, op.inputs[0]->shape());
  const RowLayout i = AxisRows(op, op.inputs[1]->shape());
  return {x.outer, x.n, i.n, x.inner};
}

// The index at position p of `indices` (int32 or int64) along an axis of
// n: non-negative, or -1 (reported) when outside [-n, n).
template <typename I>
int64_t IndexAt(const KernelArgs& a, const I* indices, int64_t p, int64_t n) {
  int64_t k = static_cast<int64_t>(indices[p]);
  if (k < 0) k += n;
  if (k < 0 || k >= n) {
    RecordIndexFault(a, static_cast<int64_t>(indices[p]), n, 1);
    return -1;
  }
  return k;
}

template <typename T, typename I>
void Take(const KernelArgs& a, const AlongShape& s) {
  const auto* x = static_cast<const T*>(a.inputs[0]);
  const auto* idx = static_cast<const I*>(a.inputs[1]);
  auto* out = static_cast<T*>(a.outputs[0]);
  ParallelRange(
      s.outer * s.m, s.inner,
      [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const int64_t o = r / s.m;
          for (int64_t in = 0; in < s.inner; ++in) {
            const int64_t p = r * s.inner + in;
            const int64_t k = IndexAt(a, idx, p, s.n);
            out[p] = k < 0 ? T{} : x[(o * s.n + k) * s.inner + in];
          }
        }
      },
      1);
}

enum class Reduce { kAssign, kAdd, kMul };

// Rows of `outer` are independent (each writes only its own x row), so
// they run in parallel; within one, positions go in order.
template <typename T, typename I>
void Put(const KernelArgs& a, const AlongShape& s, Reduce reduce) {
  const auto* idx = static_cast<const I*>(a.inputs[1]);
  const auto* values = static_cast<const T*>(a.inputs[2]);
  auto* out = static_cast<T*>(a.outputs[0]);
  if (out != a.inputs[0])
    std::memcpy(out, a.inputs[0], static_cast<size_t>(s.outer * s.n * s.inner) * sizeof(T));
  ParallelRange(
      s.outer, s.m * s.inner,
      [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          for (int64_t j = 0; j < s.m; ++j) {
            for (int64_t in = 0; in < s.inner; ++in) {
              const int64_t p = (o * s.m + j) * s.inner + in;
              const int64_t k = IndexAt(a, idx, p, s.n);
              if (k < 0) continue;
              T& dst = out[(o * s.n + k) * s.inner + in];
              if (reduce == Reduce::kAssign)
                dst = values[p];
              else if (reduce == Reduce::kAdd)
                dst += values[p];
              else
                dst *= values[p];
            }
          }
        }
      },
      1);
}

// f(T{}, I{}) for the values' type `t` and the indices' type `i` (the
// types the kernels register).
template <typename F>
void WithTypes(DType t, DType i, F&& f) {
  DispatchDType<float, double, int32_t, int64_t>(t, [&](auto value) {
    DispatchDType<int32_t, int64_t>(i, [&](auto index) { f(value, index); });
  });
}

std::unique_ptr<Kernel> MakeTake(const ir::Op& op) {
  const AlongShape s = ReadAlong(op);
  const DType t = op.inputs[0]->dtype(), i = op.inputs[1]->dtype();
  return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
    WithTypes(t, i, [&](auto v, auto x) { Take<decltype(v), decltype(x)>(a, s); });
  });
}

std::unique_ptr<Kernel> MakePut(const ir::Op& op) {
  const AlongShape s = ReadAlong(op);
  const DType t = op.inputs[0]->dtype(), i = op.inputs[1]->dtype();
  const std::string& name = op.GetStr("reduce");
  const Reduce r = name == "add" ? Reduce::kAdd : name == "mul" ? Reduce::kMul : Reduce::kAssign;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
    WithTypes(t, i, [&](auto v, auto x) { Put<decltype(v), decltype(x)>(a, s, r); });
  });
}

const bool kRegistered = [] {
  const std::vector<DType> types = {DType::kF32, DType::kF64, DType::kI32, DType::kI64};
  const std::vector<DType> ids = {DType::kI32, DType::kI64};
  RegisterKernel("take_along_axis", MakeTake,
                 Signature("T, I -> T").Where("T", types).Where("I", ids));
  RegisterKernel("put_along_axis", MakePut,
                 Signature("T, I, T -> T").Where("T", types).Where("I", ids));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
