// pad_nd_grad (float32): every output element adds its gradient to the input
// element pad_nd copied it from (pad_index.h); reflect, replicate and
// circular padding read some inputs several times, so those sums are the
// gradient. Outputs map to inputs many-to-one across every dim, so the
// scatter runs on one thread (pads are small layers).
#include "backends/cpu/kernels/kernel_utils.h"
#include "backends/cpu/kernels/pad_index.h"

namespace tiller::cpu {
namespace {

std::unique_ptr<Kernel> MakePadGrad(const ir::Op& op) {
  const Shape& os = op.inputs[0]->shape();
  const Shape& is = op.outputs[0]->shape();
  const std::vector<int64_t>& pads = op.GetInts("pads");
  const std::string& mode = op.GetStr("mode");
  int rank = static_cast<int>(is.size());
  if (rank > kMaxDims) Unsupported(op, "rank {} above {}", rank, kMaxDims);
  // Per dim, the input offset (in elements) each output coordinate reads, -1: none.
  std::vector<std::vector<int64_t>> maps(rank);
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    for (int64_t o = 0; o < os[d]; ++o) {
      int64_t src = SourceIndex(o - pads[2 * d], is[d], mode);
      maps[d].push_back(src < 0 ? -1 : src * stride);
    }
    stride *= is[d];
  }
  int64_t n_in = NumElements(is), n_out = NumElements(os);
  return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
    const float* dy = static_cast<const float*>(a.inputs[0]);
    float* dx = static_cast<float*>(a.outputs[0]);
    std::fill(dx, dx + n_in, 0.0f);
    std::array<int64_t, kMaxDims> idx{};
    for (int64_t i = 0; i < n_out; ++i) {
      int64_t off = 0;
      bool hit = true;
      for (int d = 0; d < rank && hit; ++d) {
        int64_t m = maps[d][idx[d]];
        hit = m >= 0;
        off += m;
      }
      if (hit) dx[off] += dy[i];
      for (int d = rank - 1; d >= 0; --d) {
        if (++idx[d] < os[d]) break;
        idx[d] = 0;
      }
    }
  });
}

TILLER_CPU_KERNEL("pad_nd_grad", MakePadGrad, Signature("T -> T").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
