// top_k and argsort. Both work on rows along `axis` (outer x inner layout:
// a row's elements are `inner` apart). Each thread sorts an index array in
// its slice of the workspace, so Run() never allocates.
//
// Order: NaN counts as larger than every number (numpy's choice); equal
// values keep their index order (a stable sort, in both directions). That
// is Paddle's order with stable=true; with stable=false Paddle's order of
// ties is unspecified, so any tie order is a correct answer.
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

template <typename T>
bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// Strict "a comes before b" for ascending (descending: `desc`), ties by index.
template <typename T>
struct Before {
  const T* row;
  int64_t stride;
  bool desc;
  bool operator()(int64_t a, int64_t b) const {
    T va = row[a * stride], vb = row[b * stride];
    bool na = IsNan(va), nb = IsNan(vb);
    if (na || nb) {
      if (na && nb) return a < b;
      return desc ? na : nb;  // NaN is the largest value
    }
    if (va != vb) return desc ? va > vb : va < vb;
    return a < b;
  }
};

// Shared body: for each row, order indices and write the first `k`.
template <typename T>
std::unique_ptr<Kernel> MakeRowSort(const ir::Op& op, int64_t k, bool desc, bool partial) {
  RowLayout l = AxisRows(op, op.inputs[0]->shape());
  int threads = omp_get_max_threads();
  size_t ws = static_cast<size_t>(threads) * static_cast<size_t>(l.n) * sizeof(int64_t);
  const int vi = op.GetBool("values") ? 0 : -1;
  const int ii = op.GetBool("indices") ? vi + 1 : -1;
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& args) {
        const T* x = static_cast<const T*>(args.inputs[0]);
        T* vals = vi < 0 ? nullptr : static_cast<T*>(args.outputs[vi]);
        auto* ids = ii < 0 ? nullptr : static_cast<int64_t*>(args.outputs[ii]);
        auto* scratch = static_cast<int64_t*>(args.workspace);
        const int64_t rows = l.outer * l.inner;
    // The team size is the one the workspace was sized for.
#pragma omp parallel for num_threads(threads) schedule(static) if (rows * l.n >= kParallelThreshold)
        for (int64_t r = 0; r < rows; ++r) {
          int64_t* idx = scratch + static_cast<int64_t>(omp_get_thread_num()) * l.n;
          int64_t o = r / l.inner, i = r % l.inner;
          const T* row = x + o * l.n * l.inner + i;
          for (int64_t j = 0; j < l.n; ++j) idx[j] = j;
          Before<T> less{row, l.inner, desc};
          if (partial && k < l.n) {
            std::partial_sort(idx, idx + k, idx + l.n, less);
          } else {
            std::sort(idx, idx + l.n, less);  // ties ordered by index: stable
          }
          int64_t base = o * k * l.inner + i;
          if (vals) {
            for (int64_t j = 0; j < k; ++j) vals[base + j * l.inner] = row[idx[j] * l.inner];
          }
          if (ids) {
            for (int64_t j = 0; j < k; ++j) ids[base + j * l.inner] = idx[j];
          }
        }
      },
      ws);
}

template <typename F>
std::unique_ptr<Kernel> DispatchSort(const ir::Op& op, F&& make) {
  std::unique_ptr<Kernel> k;
  DispatchDType<float, double, int32_t, int64_t, int16_t, int8_t, uint8_t>(
      InDType(op), [&](auto tag) { k = make(tag); });
  return k;
}

std::unique_ptr<Kernel> MakeTopK(const ir::Op& op) {
  int64_t k = op.GetInt("k");
  bool largest = op.GetBool("largest");
  return DispatchSort(
      op, [&](auto tag) { return MakeRowSort<decltype(tag)>(op, k, largest, /*partial=*/true); });
}

std::unique_ptr<Kernel> MakeArgsort(const ir::Op& op) {
  const Shape& s = op.inputs[0]->shape();
  int64_t n = s.empty() ? 1 : s[NormalizeAxis(op.GetInt("axis"), static_cast<int>(s.size()))];
  bool desc = op.GetBool("descending");
  return DispatchSort(
      op, [&](auto tag) { return MakeRowSort<decltype(tag)>(op, n, desc, /*partial=*/false); });
}

const bool kRegistered = [] {
  using enum DType;
  // Outputs: values (x's dtype) and/or int64 indices (the values / indices
  // attributes), in that order.
  const std::vector<DType> types = {kF32, kF64, kI32, kI64, kI16, kI8, kU8};
  for (const char* spec : {"T -> T, int64", "T -> T", "T -> int64"}) {
    RegisterKernel("top_k", MakeTopK, Signature(spec).Where("T", types));
    RegisterKernel("argsort", MakeArgsort, Signature(spec).Where("T", types));
  }
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
