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

// The descriptors and algorithm of a row-major [M, K] x [K, N] GEMM
// (operands transposed as ta / tb say), `batch` of them with the second
// operand shared when !y_batched.
std::shared_ptr<Plan> MakePlan(CudaDevice& dev, cudaDataType_t in_type, cudaDataType_t out_type,
                               int64_t M, int64_t K, int64_t N, bool ta, bool tb, int64_t batch,
                               bool y_batched, float alpha, const std::string& what) {
  Check(cudaSetDevice(dev.gpu()), what);
  cublasLtHandle_t handle = dev.blas();
  auto plan = std::make_shared<Plan>();
  plan->alpha = alpha;
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
    Fail(ErrorKind::kUnimplemented, "{}: cuBLASLt has no algorithm for [{}, {}] x [{}, {}]", what,
         M, K, K, N);
  plan->algo = result.algo;
  return plan;
}

// D = alpha op(X) op(Y) + beta C on `s`; C and D may be one buffer.
void RunPlan(const Plan& plan, CudaDevice& dev, const void* x, const void* y, const void* c,
             float beta, void* d, cudaStream_t s, const std::string& what) {
  CheckBlas(
      cublasLtMatmul(dev.blas(), plan.desc, &plan.alpha, y, plan.a, x, plan.b, &beta, c, plan.c, d,
                     plan.c, &plan.algo, dev.blas_workspace(), CudaDevice::kBlasWorkspaceBytes, s),
      what);
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
  std::shared_ptr<Plan> plan =
      MakePlan(dev, CudaType(op.inputs[0]->dtype()), CudaType(op.outputs[0]->dtype()), M, K, N, ta,
               tb, batch, y.size() > 2, static_cast<float>(op.GetFloat("alpha")), what);
  CudaDevice* d = &dev;
  return Launching(op, [plan, d, what](const backend::KernelArgs& a, cudaStream_t s) {
    RunPlan(*plan, *d, a.inputs[0], a.inputs[1], a.outputs[0], 0.f, a.outputs[0], s, what);
  });
}

std::optional<Activation> ActivationOf(const std::string& name) {
  if (name.empty()) return Activation::kNone;
  if (name == "relu") return Activation::kRelu;
  if (name == "tanh") return Activation::kTanh;
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_tanh") return Activation::kGeluTanh;
  if (name == "hard_swish") return Activation::kHardSwish;
  if (name == "hard_sigmoid") return Activation::kHardSigmoid;
  if (name == "relu6") return Activation::kRelu6;
  return std::nullopt;
}

std::optional<std::string> LinearAccepts(const ir::Op& op) {
  if (!ActivationOf(op.GetStr("activation")))
    return fmt::format("linear with activation '{}'", op.GetStr("activation"));
  return std::nullopt;
}

// linear: act(x W + b + r) for x [..., K], W [K, N]: the GEMM adds the
// residual r (its C operand, beta 1: in place when the memory plan gave
// the result r's storage), then one pass adds the bias and applies the
// activation.
std::unique_ptr<backend::Kernel> MakeLinear(const ir::Op& op, backend::Device& device) {
  CudaDevice& dev = DeviceOf(device);
  const std::string what = fmt::format("{}: cuBLASLt linear (op '{}')", dev.label(), op.name);
  const Shape& w = op.inputs[1]->shape();
  const int64_t K = w[0], N = w[1];
  const int64_t M = K ? NumElements(op.inputs[0]->shape()) / K : 0;
  const DType out = op.outputs[0]->dtype();
  std::shared_ptr<Plan> plan = MakePlan(dev, CudaType(op.inputs[0]->dtype()), CudaType(out), M, K,
                                        N, false, false, 1, false, 1.f, what);
  const Activation act = *ActivationOf(op.GetStr("activation"));
  const Elem out_elem = *ElemOf(out);
  const bool has_bias = op.inputs.size() > 2 && op.inputs[2];
  const bool has_residual = op.inputs.size() > 3 && op.inputs[3];
  const Elem bias_elem = has_bias ? *ElemOf(op.inputs[2]->dtype()) : Elem::kF32;
  CudaDevice* d = &dev;
  return Launching(op, [=](const backend::KernelArgs& a, cudaStream_t s) {
    const void* c = has_residual ? a.inputs[3] : a.outputs[0];
    RunPlan(*plan, *d, a.inputs[0], a.inputs[1], c, has_residual ? 1.f : 0.f, a.outputs[0], s,
            what);
    LaunchBiasActivation(out_elem, a.outputs[0], bias_elem, has_bias ? a.inputs[2] : nullptr, M, N,
                         act, s);
  });
}

const bool kRegistered = [] {
  const std::vector<DType> floats = {DType::kF32, DType::kF16, DType::kBF16};
  backend::RegisterKernel(kBackendName, "matmul", Signature("T, T -> T").Where("T", floats),
                          MakeMatmul, Accepts);
  backend::RegisterKernel(kBackendName, "matmul",
                          Signature("H, H -> float32").Where("H", {DType::kF16, DType::kBF16}),
                          MakeMatmul, Accepts);
  backend::RegisterKernel(kBackendName, "linear",
                          Signature("T, T, T?, T? -> T").Where("T", {DType::kF32}), MakeLinear,
                          LinearAccepts);
  backend::RegisterKernel(
      kBackendName, "linear",
      Signature("H, H, float32?, float32? -> float32").Where("H", {DType::kF16, DType::kBF16}),
      MakeLinear, LinearAccepts);
  backend::RegisterKernel(kBackendName, "linear",
                          Signature("H, H, float32? -> H").Where("H", {DType::kF16, DType::kBF16}),
                          MakeLinear, LinearAccepts);
  return true;
}();

}  // namespace
}  // namespace tiller::cuda
