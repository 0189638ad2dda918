// embedding_grad: scatter-add of dy rows into a [rows, D] table gradient;
// embedding_grad_add: the same into a copy of (or in place of) an
// accumulator. embedding_grad{row_begin} is the gradient of rows
// [row_begin, row_begin + rows) of a table (a part of a table split by
// rows): ids count in the whole table, and other parts' ids add nothing.
// Rows are split over threads by destination row range, so two threads
// never add into the same row and no atomics are needed.
#include <omp.h>

#include <cstring>

#include "backends/cpu/kernel.h"

namespace tiller::cpu {
namespace {

// out (already holding what the rows start from) += dy rows by id.
template <typename Id>
void ScatterAdd(const Id* ids, const float* dy, float* out, int64_t n, int64_t rows, int64_t d,
                int64_t padding_idx, int64_t row_begin) {
#pragma omp parallel
  {
#ifdef _OPENMP
    int nt = omp_get_num_threads(), t = omp_get_thread_num();
#else
    int nt = 1, t = 0;
#endif
    int64_t lo = rows * t / nt, hi = rows * (t + 1) / nt;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = static_cast<int64_t>(ids[i]), r = id - row_begin;
      if (r < lo || r >= hi || id == padding_idx) continue;  // out-of-range ids: no gradient
      float* dst = out + r * d;
      const float* src = dy + i * d;
      for (int64_t j = 0; j < d; ++j) dst[j] += src[j];
    }
  }
}

// embedding_grad(ids, dy): the output starts from zeros.
// embedding_grad_add(acc, ids, dy): from acc (in place: only the rows of
// the ids are touched).
std::unique_ptr<Kernel> MakeScatter(const ir::Op& op, bool into_acc) {
  const size_t first = into_acc ? 1 : 0;  // the ids' input
  const ir::Value* ids = op.inputs[first];
  int64_t n = NumElements(ids->shape());
  int64_t rows = op.outputs[0]->shape()[0], d = op.outputs[0]->shape()[1];
  int64_t pad = op.GetInt("padding_idx");
  const int64_t row_begin = into_acc ? 0 : op.GetInt("row_begin");
  const size_t bytes = static_cast<size_t>(rows * d) * sizeof(float);
  auto run = [=](const KernelArgs& a, auto id_type) {
    using Id = decltype(id_type);
    if (!into_acc)
      std::memset(a.outputs[0], 0, bytes);
    else if (a.outputs[0] != a.inputs[0])
      std::memcpy(a.outputs[0], a.inputs[0], bytes);
    ScatterAdd(static_cast<const Id*>(a.inputs[first]),
               static_cast<const float*>(a.inputs[first + 1]), static_cast<float*>(a.outputs[0]), n,
               rows, d, pad, row_begin);
  };
  if (ids->dtype() == DType::kI64)
    return std::make_unique<LambdaKernel>([=](const KernelArgs& a) { run(a, int64_t{}); });
  return std::make_unique<LambdaKernel>([=](const KernelArgs& a) { run(a, int32_t{}); });
}

std::unique_ptr<Kernel> MakeEmbeddingGrad(const ir::Op& op) {
  return MakeScatter(op, false);
}

std::unique_ptr<Kernel> MakeEmbeddingGradAdd(const ir::Op& op) {
  return MakeScatter(op, true);
}

TILLER_CPU_KERNEL(
    "embedding_grad", MakeEmbeddingGrad,
    Signature("I, T -> T").Where("I", {DType::kI32, DType::kI64}).Where("T", {DType::kF32}));
TILLER_CPU_KERNEL(
    "embedding_grad_add", MakeEmbeddingGradAdd,
    Signature("T, I, T -> T").Where("I", {DType::kI32, DType::kI64}).Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
