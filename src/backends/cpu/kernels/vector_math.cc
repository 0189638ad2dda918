// The vectorized float math of kernel_utils.h: this build's own copy
// (vector_math_impl.h at the build's level), and the choice, made once, of
// which copy runs: the AVX-512 one (vector_math_avx512.cc) where the CPU,
// under TILLER_MAX_ISA, has AVX-512 and the build's own level is below it;
// else the build's own. The choice is recorded for `tiller info`.
#define TILLER_VECTOR_MATH_NS isa_base
#include "backends/cpu/kernels/vector_math_impl.h"
#include "backends/cpu/kernels/vector_math_table.h"
#include "core/cpu_isa.h"

TILLER_VECTOR_MATH_TABLE(isa_base, simd::kIsaName)

namespace tiller::cpu {
namespace {

const VectorMath& Chosen() {
  static const VectorMath& chosen = [&]() -> const VectorMath& {
    const CpuIsaReport& r = CpuIsa();
    const VectorMath& t = r.compiled < IsaLevel::kAvx512 && r.chosen >= IsaLevel::kAvx512
                              ? isa_avx512::kVectorMath
                              : isa_base::kVectorMath;
    RecordLibraryIsa("Tiller vector math", t.isa);
    return t;
  }();
  return chosen;
}

// Chosen while the library loads, so that the report (`tiller info`) names
// it before any kernel ran. (Both tables are constant: no order to fear.)
const bool kChosenAtLoad = (Chosen(), true);

}  // namespace

void VExp(const float* x, float* y, int64_t n) {
  Chosen().exp(x, y, n);
}
void VTanh(const float* x, float* y, int64_t n) {
  Chosen().tanh(x, y, n);
}
void VSigmoid(const float* x, float* y, int64_t n) {
  Chosen().sigmoid(x, y, n);
}
void VErf(const float* x, float* y, int64_t n) {
  Chosen().erf(x, y, n);
}
void VGelu(const float* x, float* y, int64_t n) {
  Chosen().gelu(x, y, n);
}
void VGeluTanh(const float* x, float* y, int64_t n) {
  Chosen().gelu_tanh(x, y, n);
}
void VSwish(const float* x, float* y, int64_t n, float beta) {
  Chosen().swish(x, y, n, beta);
}
float RowSum(const float* x, int64_t n) {
  return Chosen().row_sum(x, n);
}
float RowMax(const float* x, int64_t n) {
  return Chosen().row_max(x, n);
}
float RowSumSqDiff(const float* x, int64_t n, float mean, float* sum_diff) {
  return Chosen().row_sum_sq_diff(x, n, mean, sum_diff);
}
float RowExpSum(const float* x, float* y, int64_t n, float shift) {
  return Chosen().row_exp_sum(x, y, n, shift);
}
void VGeluGrad(const float* x, const float* dy, float* dx, int64_t n, bool approximate) {
  Chosen().gelu_grad(x, dy, dx, n, approximate);
}

}  // namespace tiller::cpu
