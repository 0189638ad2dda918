// pad_nd: constant / reflect / replicate / circular padding of any rank.
// Every output coordinate along a dim maps to one input coordinate (or to
// the constant, -1), so the maps are built per dim at creation and Run()
// walks output rows, gathering the innermost dim through its map.
#include "backends/cpu/kernels/kernel_utils.h"
#include "backends/cpu/kernels/pad_index.h"

namespace tiller::cpu {
namespace {

std::unique_ptr<Kernel> MakePadNd(const ir::Op& op) {
  const Shape& is = op.inputs[0]->shape();
  const Shape& os = op.outputs[0]->shape();
  const std::vector<int64_t>& pads = op.GetInts("pads");
  const std::string& mode = op.GetStr("mode");
  double value = op.GetFloat("value");
  int rank = static_cast<int>(is.size());
  std::vector<std::vector<int64_t>> maps(rank);
  std::vector<int64_t> in_strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * is[d + 1];
  for (int d = 0; d < rank; ++d) {
    for (int64_t o = 0; o < os[d]; ++o)
      maps[d].push_back(SourceIndex(o - pads[2 * d], is[d], mode));
  }
  std::unique_ptr<Kernel> k;
  DispatchDType<float, double, int32_t, int64_t>(InDType(op), [&](auto tag) {
    using T = decltype(tag);
    const T fill = static_cast<T>(value);
    k = std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      T* y = static_cast<T*>(args.outputs[0]);
      if (rank == 0) {
        y[0] = x[0];
        return;
      }
      const int64_t inner = os[rank - 1];
      const int64_t rows = inner == 0 ? 0 : NumElements(os) / inner;
      ParallelRange(
          rows, inner,
          [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
              // Decompose the row index into outer output coordinates.
              int64_t rem = r, base = 0;
              bool empty = false;
              for (int d = rank - 2; d >= 0; --d) {
                int64_t src = maps[d][rem % os[d]];
                rem /= os[d];
                if (src < 0) empty = true;
                base += src * in_strides[d];
              }
              T* yr = y + r * inner;
              const std::vector<int64_t>& m = maps[rank - 1];
              for (int64_t j = 0; j < inner; ++j)
                yr[j] = (empty || m[j] < 0) ? fill : x[base + m[j]];
            }
          },
          1);
    });
  });
  return k;
}

TILLER_CPU_KERNEL("pad_nd", MakePadNd,
                  Signature("T -> T").Where("T",
                                            {DType::kF32, DType::kF64, DType::kI32, DType::kI64}));

}  // namespace
}  // namespace tiller::cpu
