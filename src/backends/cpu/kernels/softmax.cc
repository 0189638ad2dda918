// softmax and log_softmax over any axis, and softmax's gradient, float32.
//
// log_softmax clips x - max at -64 as Paddle's CPU kernels do (ValueClip in
// phi's SoftmaxFunctor): a log-probability never falls below about -64, so
// a confidently wrong sample's cross entropy stops near 64 and its gradient
// (softmax - label, with softmax = exp(log_softmax)) is exp(-64) rather than
// 0 for the other classes, as in Paddle. softmax does not clip: Paddle's
// floor of exp(-64) = 1.6e-28 is invisible in a probability, and exact
// zeros keep masked attention positions out of the backward pass (and of
// the gradient statistics of loss scaling).
//
// The input is viewed as [outer, n, inner] around the axis. inner == 1 (the
// usual last axis) runs per row: max, exp and sum in one sweep writing
// exp(x - max) to the output, then a scale (softmax) or a subtraction
// (log_softmax). Rows fit in L1, so the row is read from memory once.
// inner > 1 processes a vector's width of columns at a time with vector registers holding the
// running max and sum, so no scratch is needed.
#include "backends/cpu/kernels/isa_copy.h"
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu::TILLER_ISA_COPY {
namespace {

constexpr float kLogSoftmaxClip = -64.0f;  // lowest x - max of log_softmax

void SoftmaxRow(const float* x, float* y, int64_t n, bool log) {
  float m = RowMax(x, n);
  if (log) {
    // log_softmax = (x - max) - log(sum exp(x - max)); y holds exp meanwhile.
    // x - max is exact near the max, so small results keep their precision.
    float ls = std::log(RowExpSum(x, y, n, m));
    for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i] - m, kLogSoftmaxClip) - ls;
  } else {
    float s = RowExpSum(x, y, n, m);
    float inv = 1.0f / s;
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// Columns [j0, j0 + w) of one [n, inner] slab, w <= simd::kLanes.
void SoftmaxColumns(const float* x, float* y, int64_t n, int64_t inner, int64_t w, bool log) {
  using simd::Vec;
  constexpr int L = simd::kLanes;
  const simd::Mask k = simd::Tail(w);
  Vec m = simd::Set(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < n; ++i) m = simd::Max(m, simd::LoadPart(k, x + i * inner));
  Vec s = simd::Zero();
  for (int64_t i = 0; i < n; ++i) {
    const Vec e = simd::ZeroUnless(k, simd::ExpOfShifted(simd::LoadPart(k, x + i * inner) - m));
    s = s + e;
    if (!log) simd::StorePart(y + i * inner, k, e);
  }
  if (log) {
    float ls[L];
    simd::Store(ls, s);
    for (int j = 0; j < L; ++j) ls[j] = j < w ? std::log(ls[j]) : 0.0f;
    const Vec lsv = simd::Load(ls);
    for (int64_t i = 0; i < n; ++i) {
      const Vec d = simd::Max(simd::Set(kLogSoftmaxClip), simd::LoadPart(k, x + i * inner) - m);
      simd::StorePart(y + i * inner, k, d - lsv);
    }
  } else {
    const Vec inv = simd::Set(1.0f) / s;
    for (int64_t i = 0; i < n; ++i)
      simd::StorePart(y + i * inner, k, simd::LoadPart(k, y + i * inner) * inv);
  }
}

std::unique_ptr<Kernel> MakeSoftmax(const ir::Op& op) {
  const RowLayout rows = AxisRows(op, op.inputs[0]->shape());
  const int64_t outer = rows.outer, n = rows.n, inner = rows.inner;
  bool log = op.is(ir::Opcode::log_softmax);
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    float* y = static_cast<float*>(args.outputs[0]);
    if (n == 0) return;
    if (inner == 1) {
      ParallelRange(
          outer, n * 8,
          [&](int64_t b, int64_t e) {
            for (int64_t o = b; o < e; ++o) SoftmaxRow(x + o * n, y + o * n, n, log);
          },
          1);
      return;
    }
    constexpr int64_t L = simd::kLanes;
    const int64_t blocks = (inner + L - 1) / L;
    ParallelRange(
        outer * blocks, n * L * 8,
        [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            const int64_t o = t / blocks, j = (t % blocks) * L;
            const int64_t off = o * n * inner + j;
            SoftmaxColumns(x + off, y + off, n, inner, std::min(L, inner - j), log);
          }
        },
        1);
  });
}

// dx = y (dy - sum(dy y)) along the axis, for one [n, inner] slab's column
// j (stride inner; a row when inner == 1, vectorized then).
void SoftmaxGradRow(const float* y, const float* dy, float* dx, int64_t n, int64_t inner) {
  if (inner == 1) {
    using simd::Vec;
    Vec acc = simd::Zero();
    for (int64_t i = 0; i < n; i += simd::kLanes) {
      const simd::Mask k = simd::Tail(n - i);
      acc = simd::Fma(simd::LoadPart(k, dy + i), simd::LoadPart(k, y + i), acc);
    }
    const Vec dot = simd::Set(simd::ReduceAdd(acc));
    for (int64_t i = 0; i < n; i += simd::kLanes) {
      const simd::Mask k = simd::Tail(n - i);
      simd::StorePart(dx + i, k, simd::LoadPart(k, y + i) * (simd::LoadPart(k, dy + i) - dot));
    }
    return;
  }
  float dot = 0.0f;
  for (int64_t i = 0; i < n; ++i) dot += dy[i * inner] * y[i * inner];
  for (int64_t i = 0; i < n; ++i) dx[i * inner] = y[i * inner] * (dy[i * inner] - dot);
}

std::unique_ptr<Kernel> MakeSoftmaxGrad(const ir::Op& op) {
  const RowLayout rows = AxisRows(op, op.inputs[0]->shape());
  const int64_t outer = rows.outer, n = rows.n, inner = rows.inner;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* y = static_cast<const float*>(args.inputs[0]);
    const float* dy = static_cast<const float*>(args.inputs[1]);
    float* dx = static_cast<float*>(args.outputs[0]);
    if (n == 0) return;
    ParallelRange(
        outer * inner, n * 4,
        [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            const int64_t off = (t / inner) * n * inner + t % inner;
            SoftmaxGradRow(y + off, dy + off, dx + off, n, inner);
          }
        },
        1);
  });
}

const bool kRegistered = TILLER_ISA_COPY_RUNS && [] {
  RegisterKernel("softmax_grad", MakeSoftmaxGrad, Signature("T, T -> T").Where("T", {DType::kF32}));
  RegisterKernel("softmax", MakeSoftmax, Signature("T -> T").Where("T", {DType::kF32}));
  RegisterKernel("log_softmax", MakeSoftmax, Signature("T -> T").Where("T", {DType::kF32}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu::TILLER_ISA_COPY
