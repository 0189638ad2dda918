// CUDA layer_norm and embedding (their code: elementwise.cu) and the fused
// attention (attention.cu).
#include <fmt/format.h>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/kernels/kernels.h"
#include "core/error.h"
#include "ir/ops/attention_layout.h"
#include "ir/ops/op_helpers.h"

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
    part_ = ir::ReadTablePart(op, table[0]);
    row_bytes_ = table[1] * static_cast<int64_t>(DTypeSize(op.inputs[0]->dtype()));
    count_ = NumElements(op.inputs[1]->shape());
    ids64_ = op.inputs[1]->dtype() == DType::kI64;
  }
  size_t workspace_bytes() const override { return 2 * sizeof(int64_t); }
  void Run(const backend::KernelArgs& a) override {
    auto s = static_cast<cudaStream_t>(CudaStreamOf(a.stream));
    auto* fault = static_cast<int64_t*>(a.workspace);
    Check(cudaMemsetAsync(fault, 0, 2 * sizeof(int64_t), s), what_);
    LaunchEmbedding(a.inputs[0], row_bytes_, ids64_, a.inputs[1], a.outputs[0], count_, part_.vocab,
                    part_.begin, part_.rows, part_.padding_row, fault, s);
    Check(cudaGetLastError(), what_);
    int64_t host[2] = {0, 0};
    Check(cudaMemcpyAsync(host, fault, sizeof(host), cudaMemcpyDeviceToHost, s), what_);
    Check(cudaStreamSynchronize(s), what_);
    if (host[0]) backend::RecordIndexFault(a, host[1], part_.vocab, 1);
  }

 private:
  std::string what_;
  ir::TablePart part_;
  int64_t row_bytes_ = 0, count_ = 0;
  bool ids64_ = true;
};

// A block keeps its query row and scores in shared memory: 48 KiB, the
// default a kernel may take without opting in.
std::optional<std::string> AttentionFits(const ir::Op& op) {
  const size_t bytes = AttentionSharedBytes(ir::AttentionLayoutOf(op));
  if (bytes > 48 * 1024)
    return fmt::format("attention over {} keys: {} bytes of shared memory per block (48 KiB)",
                       op.inputs[1]->shape()[1], bytes);
  return std::nullopt;
}

std::unique_ptr<backend::Kernel> MakeAttention(const ir::Op& op, backend::Device&) {
  const ir::AttentionLayout g = ir::AttentionLayoutOf(op);
  return Launching(op, [=](const backend::KernelArgs& a, cudaStream_t s) {
    LaunchAttention(g, static_cast<const float*>(a.inputs[0]),
                    static_cast<const float*>(a.inputs[1]), static_cast<const float*>(a.inputs[2]),
                    g.has_mask ? static_cast<const float*>(a.inputs[3]) : nullptr,
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
