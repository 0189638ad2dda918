// matmul on cuBLASLt: float32 (float32 math: TF32 only when asked, which no
// option does yet), and bfloat16 / float16 operands with float32
// accumulation and a half or float32 result (out_dtype), as the
// mixed-precision pass leaves them. Batched when both operands carry the
// same leading dims or the second is one matrix for all.
//
// Tiller's tensors are row-major and cuBLASLt's matrices column-major: a
// row-major C [M, N] is the column-major Cᵀ [N, M] = op(Y)ᵀ op(X)ᵀ, so the
// GEMM is asked with the operands swapped and no data moved.
#include <fmt/format.h>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/kernels/kernels.h"
#include "core/error.h"

namespace tiller::cuda {
namespace {

using backend::Signature;

cudaDataType_t CudaType(DType t) {
  switch (t) {
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kBF16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

// The descriptors and algorithm of one matmul, made once with the kernel.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  float alpha = 1.f;
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

cublasLtMatrixLayout_t Layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                              int32_t batch, int64_t stride, const std::string& what) {
  cublasLtMatrixLayout_t l = nullptr;
  CheckBlas(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows),
                                       static_cast<uint64_t>(cols), ld),
            what);
  if (batch > 1) {
    CheckBlas(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                               sizeof(batch)),
              what);
    CheckBlas(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &stride, sizeof(stride)),
              what);
  }
  return l;
}

std::optional<std::string> Accepts(const ir::Op& op) {
  if (!op.GetInts("perm_a").empty() || !op.GetInts("perm_b").empty() ||
      !op.GetInts("perm_out").empty())
    return std::string("matmul with fused permutations (perm_a / perm_b / perm_out)");
  const Shape &x = op.inputs[0]->shape(), &y = op.inputs[1]->shape();
  if (x.size() < 2 || y.size() < 2) return std::string("matmul of a vector");
  if (y.size() > 2 && !std::equal(x.begin(), x.end() - 2, y.begin(), y.end() - 2))
    return fmt::format("matmul with broadcast batch dims ({} x {})", ShapeToString(x),
                       ShapeToString(y));
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < x.size(); ++d) batch *= x[d];
  if (batch > INT32_MAX) return std::string("matmul batch over 2^31");
  return std::nullopt;
}

std::unique_ptr<backend::Kernel> MakeMatmul(const ir::Op& op, backend::Device& device) {
  CudaDevice& dev = DeviceOf(device);
  const std::string what = fmt::format("{}: cuBLASLt matmul (op '{}')", dev.label(), op.name);
  const Shape &x = op.inputs[0]->shape(), &y = op.inputs[1]->shape();
  const bool ta = op.GetBool("transpose_a"), tb = op.GetBool("transpose_b");
  const int64_t M = ta ? x[x.size() - 1] : x[x.size() - 2];
  const int64_t K = ta ? x[x.size() - 2] : x[x.size() - 1];
  const int64_t N = tb ? y[y.size() - 2] : y[y.size() - 1];
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < x.size(); ++d) batch *= x[d];
  const bool y_batched = y.size() > 2;
  const cudaDataType_t in_type = CudaType(op.inputs[0]->dtype());
  const cudaDataType_t out_type = CudaType(op.outputs[0]->dtype());

  Check(cudaSetDevice(dev.gpu()), what);
  cublasLtHandle_t handle = dev.blas();
  auto plan = std::make_shared<Plan>();
  plan->alpha = static_cast<float>(op.GetFloat("alpha"));
  CheckBlas(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), what);
  // Column-major: A is Y (transposed when transpose_b), B is X.
  const cublasOperation_t op_a = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  CheckBlas(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
      what);
  CheckBlas(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
      what);
  const auto b32 = static_cast<int32_t>(batch);
  plan->a = tb ? Layout(in_type, K, N, K, b32, y_batched ? K * N : 0, what)
               : Layout(in_type, N, K, N, b32, y_batched ? K * N : 0, what);
  plan->b =
      ta ? Layout(in_type, M, K, M, b32, M * K, what) : Layout(in_type, K, M, K, b32, M * K, what);
  plan->c = Layout(out_type, N, M, N, b32, M * N, what);

  cublasLtMatmulPreference_t pref = nullptr;
  CheckBlas(cublasLtMatmulPreferenceCreate(&pref), what);
  const uint64_t ws = CudaDevice::kBlasWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, plan->desc, plan->a, plan->b, plan->c, plan->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  CheckBlas(status, what + ": choosing the algorithm");
  if (found == 0)
    Fail(ErrorKind::kUnimplemented, "{}: cuBLASLt has no algorithm for [{}] x [{}] in {}", what,
         ShapeToString(x), ShapeToString(y), DTypeName(op.inputs[0]->dtype()));
  plan->algo = result.algo;

  void* workspace = dev.blas_workspace();
  return Launching(op, [plan, handle, workspace, what](const backend::KernelArgs& a,
                                                       cudaStream_t s) {
    const float beta = 0.f;
    CheckBlas(cublasLtMatmul(handle, plan->desc, &plan->alpha, a.inputs[1], plan->a, a.inputs[0],
                             plan->b, &beta, a.outputs[0], plan->c, a.outputs[0], plan->c,
                             &plan->algo, workspace, CudaDevice::kBlasWorkspaceBytes, s),
              what);
  });
}

const bool kRegistered = [] {
  const std::vector<DType> floats = {DType::kF32, DType::kF16, DType::kBF16};
  backend::RegisterKernel(kBackendName, "matmul", Signature("T, T -> T").Where("T", floats),
                          MakeMatmul, Accepts);
  backend::RegisterKernel(kBackendName, "matmul",
                          Signature("H, H -> float32").Where("H", {DType::kF16, DType::kBF16}),
                          MakeMatmul, Accepts);
  return true;
}();

}  // namespace
}  // namespace tiller::cuda
