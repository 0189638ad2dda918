// The vectorized float math of kernel_utils.h: this build's own copy
// (vector_math_impl.h at the build's level), and the choice, made once, of
// which copy runs: the AVX-512 one (vector_math_avx512.cc) where the CPU,
// under TILLER_MAX_ISA, has AVX-512 and the build's own level is below it;
// else the build's own (isa_copy.h decides for every per-ISA file).
#include "backends/cpu/kernels/vector_math_impl.h"
#include "backends/cpu/kernels/vector_math_table.h"

TILLER_VECTOR_MATH_TABLE(isa_base)

namespace tiller::cpu {
namespace {

const VectorMath& Chosen() {
  static const VectorMath& chosen =
      RunAvx512Copies() ? isa_avx512::kVectorMath : isa_base::kVectorMath;
  return chosen;
}

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
void FloatsToBF16(const float* x, uint16_t* y, int64_t n) {
  Chosen().floats_to_bf16(x, y, n);
}
void BF16ToFloats(const uint16_t* x, float* y, int64_t n) {
  Chosen().bf16_to_floats(x, y, n);
}
bool VectorInterleave3() {
  return Chosen().vector_interleave3;
}
void Interleave3(const uint32_t* r0, const uint32_t* r1, const uint32_t* r2, uint32_t* y,
                 int64_t n) {
  Chosen().interleave3(r0, r1, r2, y, n);
}

}  // namespace tiller::cpu
