// CUDA layer_norm and embedding (their code: elementwise.cu) and the fused
// attention (attention.cu).
#include <fmt/format.h>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/kernels/kernels.h"
#include "core/error.h"

namespace tiller::cuda {
namespace {

using backend::Signature;

std::unique_ptr<backend::Kernel> MakeLayerNorm(const ir::Op& op, backend::Device&) {
  const Shape& shape = op.inputs[0]->shape();
  const int rank = static_cast<int>(shape.size());
  int axis = static_cast<int>(op.GetInt("axis"));
  if (axis < 0) axis += rank;
  int64_t cols = 1;
  for (int d = axis; d < rank; ++d) cols *= shape[d];
  const int64_t rows = cols ? NumElements(shape) / cols : 0;
  const auto eps = static_cast<float>(op.GetFloat("epsilon"));
  return Launching(op, [=](const backend::KernelArgs& a, cudaStream_t s) {
    LaunchLayerNorm(static_cast<const float*>(a.inputs[0]),
                    static_cast<const float*>(a.inputs.size() > 1 ? a.inputs[1] : nullptr),
                    static_cast<const float*>(a.inputs.size() > 2 ? a.inputs[2] : nullptr),
                    static_cast<float*>(a.outputs[0]), rows, cols, eps, s);
  });
}

// Out-of-range ids are found on the GPU; the kernel's run reads the flag
// back (16 bytes, one wait on the stream) so the step fails naming the op
// and the id, as on the CPU.
class EmbeddingKernel : public backend::Kernel {
 public:
  EmbeddingKernel(const ir::Op& op)
      : what_(fmt::format("cuda kernel embedding (op '{}')", op.name)) {
    const Shape& table = op.inputs[0]->shape();
    vocab_ = table[0];
    row_bytes_ = table[1] * static_cast<int64_t>(DTypeSize(op.inputs[0]->dtype()));
    count_ = NumElements(op.inputs[1]->shape());
    padding_idx_ = op.GetInt("padding_idx");
    if (padding_idx_ < -1) padding_idx_ += vocab_;  // Paddle's negative index, from the end
    ids64_ = op.inputs[1]->dtype() == DType::kI64;
  }
  size_t workspace_bytes() const override { return 2 * sizeof(int64_t); }
  void Run(const backend::KernelArgs& a) override {
    auto s = static_cast<cudaStream_t>(CudaStreamOf(a.stream));
    auto* fault = static_cast<int64_t*>(a.workspace);
    Check(cudaMemsetAsync(fault, 0, 2 * sizeof(int64_t), s), what_);
    LaunchEmbedding(a.inputs[0], row_bytes_, ids64_, a.inputs[1], a.outputs[0], count_, vocab_,
                    padding_idx_, fault, s);
    Check(cudaGetLastError(), what_);
    int64_t host[2] = {0, 0};
    Check(cudaMemcpyAsync(host, fault, sizeof(host), cudaMemcpyDeviceToHost, s), what_);
    Check(cudaStreamSynchronize(s), what_);
    if (host[0]) backend::RecordIndexFault(a, host[1], vocab_, 1);
  }

 private:
  std::string what_;
  int64_t vocab_ = 0, row_bytes_ = 0, count_ = 0, padding_idx_ = -1;
  bool ids64_ = true;
};

AttentionGeometry GeometryOf(const ir::Op& op) {
  AttentionGeometry g;
  const Shape &q = op.inputs[0]->shape(), &k = op.inputs[1]->shape(), &v = op.inputs[2]->shape();
  g.batch = q[0];
  g.sq = q[1];
  g.sk = k[1];
  g.heads = op.GetInt("heads");
  g.q_ld = q[2];
  g.k_ld = k[2];
  g.v_ld = v[2];
  const std::vector<int64_t>& offsets = op.GetInts("offsets");
  if (offsets.empty()) {
    g.d = q[2] / g.heads;
    g.dv = v[2] / g.heads;
  } else {
    g.d = g.dv = op.GetInt("head_dim");
    g.q_off = offsets[0];
    g.k_off = offsets[1];
    g.v_off = offsets[2];
  }
  g.alpha = static_cast<float>(op.GetFloat("alpha"));
  if (op.inputs.size() > 3 && op.inputs[3]) {
    Shape m = op.inputs[3]->shape();
    m.insert(m.begin(), 4 - m.size(), 1);
    int64_t stride = 1;
    int64_t strides[4];
    for (int d = 3; d >= 0; --d) {
      strides[d] = m[d] == 1 ? 0 : stride;
      stride *= m[d];
    }
    g.mb = strides[0];
    g.mh = strides[1];
    g.mq = strides[2];
    g.mk = strides[3];
  }
  return g;
}

// A block keeps its query row and scores in shared memory: 48 KiB, the
// default a kernel may take without opting in.
std::optional<std::string> AttentionFits(const ir::Op& op) {
  const size_t bytes = AttentionSharedBytes(GeometryOf(op));
  if (bytes > 48 * 1024)
    return fmt::format("attention over {} keys: {} bytes of shared memory per block (48 KiB)",
                       op.inputs[1]->shape()[1], bytes);
  return std::nullopt;
}

std::unique_ptr<backend::Kernel> MakeAttention(const ir::Op& op, backend::Device&) {
  const AttentionGeometry g = GeometryOf(op);
  const bool has_mask = op.inputs.size() > 3 && op.inputs[3];
  return Launching(op, [=](const backend::KernelArgs& a, cudaStream_t s) {
    LaunchAttention(g, static_cast<const float*>(a.inputs[0]),
                    static_cast<const float*>(a.inputs[1]), static_cast<const float*>(a.inputs[2]),
                    has_mask ? static_cast<const float*>(a.inputs[3]) : nullptr,
                    static_cast<float*>(a.outputs[0]), s);
  });
}

const bool kRegistered = [] {
  backend::RegisterKernel(kBackendName, "attention",
                          Signature("T, T, T, T? -> T").Where("T", {DType::kF32}), MakeAttention,
                          AttentionFits);
  backend::RegisterKernel(kBackendName, "layer_norm",
                          Signature("T, T?, T? -> T").Where("T", {DType::kF32}), MakeLayerNorm);
  backend::RegisterKernel(
      kBackendName, "embedding",
      Signature("T, I -> T")
          .Where("T", {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32})
          .Where("I", {DType::kI32, DType::kI64}),
      [](const ir::Op& op, backend::Device&) -> std::unique_ptr<backend::Kernel> {
        return std::make_unique<EmbeddingKernel>(op);
      });
  return true;
}();

}  // namespace
}  // namespace tiller::cuda
