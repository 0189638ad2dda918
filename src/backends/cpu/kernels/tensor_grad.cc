// Gradient kernels of data-movement ops (see ir/ops/grad_ops.cc):
// gather_grad scatter-adds dy back along the gathered axis; slice_grad writes
// dy where the slice read and zeros elsewhere. Threads own disjoint output
// elements, so neither needs atomics.
#include "backends/cpu/kernels/kernel_utils.h"
#include "ir/ops/op_helpers.h"

namespace tiller::cpu {
namespace {

template <typename Id>
void ScatterAlong(const Id* idx, const float* dy, float* out, int64_t outer, int64_t nidx,
                  int64_t dim, int64_t inner) {
  ParallelRange(outer * inner, nidx + dim, [&](int64_t b, int64_t e) {
    for (int64_t pos = b; pos < e;) {
      const int64_t o = pos / inner, j0 = pos % inner, j1 = std::min(inner, j0 + (e - pos));
      for (int64_t r = 0; r < dim; ++r) {
        float* dst = out + (o * dim + r) * inner;
        std::fill(dst + j0, dst + j1, 0.0f);
      }
      for (int64_t k = 0; k < nidx; ++k) {
        int64_t r = static_cast<int64_t>(idx[k]);
        if (r < 0) r += dim;              // Paddle's gather accepts negative indices
        if (r < 0 || r >= dim) continue;  // the forward rejects them; no gradient
        float* dst = out + (o * dim + r) * inner;
        const float* src = dy + (o * nidx + k) * inner;
        for (int64_t j = j0; j < j1; ++j) dst[j] += src[j];
      }
      pos += j1 - j0;
    }
  });
}

std::unique_ptr<Kernel> MakeGatherGrad(const ir::Op& op) {
  const Shape& out = op.outputs[0]->shape();
  int64_t axis = op.GetInt("axis");
  int64_t outer = 1, inner = 1, dim = out[axis];
  for (int64_t d = 0; d < axis; ++d) outer *= out[d];
  for (size_t d = axis + 1; d < out.size(); ++d) inner *= out[d];
  int64_t nidx = NumElements(op.inputs[0]->shape());
  DType idt = InDType(op, 0);
  return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
    const float* dy = static_cast<const float*>(a.inputs[1]);
    float* o = static_cast<float*>(a.outputs[0]);
    if (idt == DType::kI64)
      ScatterAlong(static_cast<const int64_t*>(a.inputs[0]), dy, o, outer, nidx, dim, inner);
    else
      ScatterAlong(static_cast<const int32_t*>(a.inputs[0]), dy, o, outer, nidx, dim, inner);
  });
}

std::unique_ptr<Kernel> MakeSliceGrad(const ir::Op& op) {
  Shape in = op.GetInts("input_shape");
  ir::SliceSpec spec;
  if (!ir::ResolveSlice(in, op, &spec)) Unsupported(op, "bad slice attributes");
  int rank = static_cast<int>(in.size());
  if (rank > kMaxDims) Unsupported(op, "rank {} above {}", rank, kMaxDims);
  std::array<int64_t, kMaxDims> dims{}, stride{};  // per dy dim: count, output step
  int64_t base = 0, s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    dims[d] = spec.out[d];
    stride[d] = spec.step[d] * s;
    base += spec.start[d] * s;
    s *= in[d];
  }
  int64_t n_in = NumElements(in), n_dy = NumElements(spec.out);
  return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
    const float* dy = static_cast<const float*>(a.inputs[0]);
    float* out = static_cast<float*>(a.outputs[0]);
    std::fill(out, out + n_in, 0.0f);
    if (n_dy == 0) return;
    std::array<int64_t, kMaxDims> idx{};
    int64_t off = base;
    for (int64_t i = 0; i < n_dy; ++i) {
      out[off] = dy[i];
      for (int d = rank - 1; d >= 0; --d) {
        off += stride[d];
        if (++idx[d] < dims[d]) break;
        off -= stride[d] * dims[d];
        idx[d] = 0;
      }
    }
  });
}

TILLER_CPU_KERNEL(
    "gather_grad", MakeGatherGrad,
    Signature("I, T -> T").Where("I", {DType::kI32, DType::kI64}).Where("T", {DType::kF32}));
TILLER_CPU_KERNEL("slice_grad", MakeSliceGrad, Signature("T -> T").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
