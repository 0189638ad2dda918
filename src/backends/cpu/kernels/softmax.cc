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
// inner > 1 processes 16 columns at a time with vector registers holding the
// running max and sum, so no scratch is needed.
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
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

// Columns [j0, j0 + w) of one [n, inner] slab, w <= 16.
void SoftmaxColumns(const float* x, float* y, int64_t n, int64_t inner, int64_t w, bool log) {
#if defined(__AVX512F__)
  __mmask16 k = static_cast<__mmask16>((1u << w) - 1);
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < n; ++i) m = _mm512_max_ps(m, _mm512_maskz_loadu_ps(k, x + i * inner));
  __m512 s = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    __m512 e = _mm512_maskz_mov_ps(
        k, ExpOfShifted(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i * inner), m)));
    s = _mm512_add_ps(s, e);
    if (!log) _mm512_mask_storeu_ps(y + i * inner, k, e);
  }
  if (log) {
    alignas(64) float ls[16];
    _mm512_store_ps(ls, s);
    for (int j = 0; j < 16; ++j) ls[j] = j < w ? std::log(ls[j]) : 0.0f;
    __m512 lsv = _mm512_load_ps(ls);
    for (int64_t i = 0; i < n; ++i) {
      __m512 d = _mm512_max_ps(_mm512_set1_ps(kLogSoftmaxClip),
                               _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i * inner), m));
      _mm512_mask_storeu_ps(y + i * inner, k, _mm512_sub_ps(d, lsv));
    }
  } else {
    __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), s);
    for (int64_t i = 0; i < n; ++i)
      _mm512_mask_storeu_ps(y + i * inner, k,
                            _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i * inner), inv));
  }
#else
  for (int64_t j = 0; j < w; ++j) {
    float m = -std::numeric_limits<float>::infinity(), s = 0;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i * inner + j]);
    for (int64_t i = 0; i < n; ++i) s += std::exp(x[i * inner + j] - m);
    for (int64_t i = 0; i < n; ++i) {
      float d = x[i * inner + j] - m;
      if (log) d = std::max(d, kLogSoftmaxClip);
      y[i * inner + j] = log ? d - std::log(s) : std::exp(d) / s;
    }
  }
#endif
}

std::unique_ptr<Kernel> MakeSoftmax(const ir::Op& op) {
  const RowLayout rows = AxisRows(op, op.inputs[0]->shape());
  const int64_t outer = rows.outer, n = rows.n, inner = rows.inner;
  bool log = op.type == "log_softmax";
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
    int64_t blocks = (inner + 15) / 16;
    ParallelRange(
        outer * blocks, n * 16 * 8,
        [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            int64_t o = t / blocks, j = (t % blocks) * 16;
            int64_t off = o * n * inner + j;
            SoftmaxColumns(x + off, y + off, n, inner, std::min<int64_t>(16, inner - j), log);
          }
        },
        1);
  });
}

// dx = y (dy - sum(dy y)) along the axis, for one [n, inner] slab's column
// j (stride inner; a row when inner == 1, vectorized then).
void SoftmaxGradRow(const float* y, const float* dy, float* dx, int64_t n, int64_t inner) {
#if defined(__AVX512F__)
  if (inner == 1) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = LaneMask(n - i);
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, dy + i), _mm512_maskz_loadu_ps(k, y + i), acc);
    }
    const __m512 dot = _mm512_set1_ps(_mm512_reduce_add_ps(acc));
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = LaneMask(n - i);
      _mm512_mask_storeu_ps(dx + i, k,
                            _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i),
                                          _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dy + i), dot)));
    }
    return;
  }
#endif
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

const bool kRegistered = [] {
  RegisterKernel("softmax_grad", MakeSoftmaxGrad, Signature("T, T -> T").Where("T", {DType::kF32}));
  RegisterKernel("softmax", MakeSoftmax, Signature("T -> T").Where("T", {DType::kF32}));
  RegisterKernel("log_softmax", MakeSoftmax, Signature("T -> T").Where("T", {DType::kF32}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
