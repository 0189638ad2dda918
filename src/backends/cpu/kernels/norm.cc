// layer_norm, group_norm and inference batch_norm, float32.
//
// layer_norm rows are 128..4096 floats, so a row stays in L1 across its three
// sweeps (mean, then sum of squared deviations, then the affine write). The
// two-sweep variance avoids E[x^2] - mean^2 cancellation, and the second sweep
// also sums x - mean to correct the float mean (rows with a large offset).
#include "backends/cpu/kernels/isa_copy.h"
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu::TILLER_ISA_COPY {
namespace {

template <bool kScale, bool kBias>
void NormalizeRow(const float* x, float* y, int64_t n, float mean, float rstd, const float* scale,
                  const float* bias) {
  for (int64_t i = 0; i < n; ++i) {
    float v = (x[i] - mean) * rstd;
    if constexpr (kScale) v *= scale[i];
    if constexpr (kBias) v += bias[i];
    y[i] = v;
  }
}

struct RowStats {
  float mean, rstd;
};

// Mean and 1 / sqrt(variance + eps) of a row of n > 0 floats, two sweeps
// (see the file comment): layer_norm, its gradient and group_norm.
RowStats Stats(const float* x, int64_t n, float eps) {
  const float nf = static_cast<float>(n);
  float mean = RowSum(x, n) / nf;
  float sd;
  const float sq = RowSumSqDiff(x, n, mean, &sd);
  const float var = std::max(0.0f, (sq - sd * sd / nf) / nf);
  mean += sd / nf;
  return {mean, 1.0f / std::sqrt(var + eps)};
}

// layer_norm's (and its gradient's) rows: x's dims before `axis`, and the
// normalized size: the dims from it on.
void LayerNormRows(const ir::Op& op, int64_t* rows, int64_t* n) {
  const Shape& s = op.inputs[0]->shape();
  const int axis = NormalizeAxis(op.GetInt("axis"), static_cast<int>(s.size()));
  if (axis < 0) Unsupported(op, "axis out of range");
  *rows = 1;
  *n = 1;
  for (int d = 0; d < static_cast<int>(s.size()); ++d) (d < axis ? *rows : *n) *= s[d];
}

std::unique_ptr<Kernel> MakeLayerNorm(const ir::Op& op) {
  int64_t rows, n;
  LayerNormRows(op, &rows, &n);
  float eps = static_cast<float>(op.GetFloat("epsilon"));
  bool has_scale = op.input(1) != nullptr, has_bias = op.input(2) != nullptr;
  using RowFn = void (*)(const float*, float*, int64_t, float, float, const float*, const float*);
  RowFn row_fn = has_scale ? (has_bias ? NormalizeRow<true, true> : NormalizeRow<true, false>)
                           : (has_bias ? NormalizeRow<false, true> : NormalizeRow<false, false>);
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    if (n == 0) return;
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* scale = has_scale ? static_cast<const float*>(args.inputs[1]) : nullptr;
    const float* bias = has_bias ? static_cast<const float*>(args.inputs[2]) : nullptr;
    float* y = static_cast<float*>(args.outputs[0]);
    ParallelRange(
        rows, n * 4,
        [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) {
            const float* xr = x + r * n;
            const RowStats st = Stats(xr, n, eps);
            row_fn(xr, y + r * n, n, st.mean, st.rstd, scale, bias);
          }
        },
        1);
  });
}

// One row of layer_norm_grad: xhat = (x - mean) rstd, dxhat = dy scale;
// dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)); the row's
// dy xhat and dy are added into its block's dscale / dbias sums (ds, db).
// Vectorized, the two row means are sums per vector lane, then of the lanes.
template <bool kScale>
void LayerNormGradRow(const float* x, const float* g, const float* scale, float* dx, float* ds,
                      float* db, int64_t n, float mean, float rstd) {
  const float inv_n = 1.0f / static_cast<float>(n);
  using simd::Vec;
  const Vec mu = simd::Set(mean), rs = simd::Set(rstd);
  Vec a1 = simd::Zero(), a2 = simd::Zero();
  for (int64_t i = 0; i < n; i += simd::kLanes) {
    const simd::Mask k = simd::Tail(n - i);
    const Vec gv = simd::LoadPart(k, g + i);
    const Vec xh = (simd::LoadPart(k, x + i) - mu) * rs;
    const Vec dxh = kScale ? gv * simd::LoadPart(k, scale + i) : gv;
    a1 = a1 + dxh;
    a2 = simd::Fma(dxh, xh, a2);
    simd::StorePart(ds + i, k, simd::Fma(gv, xh, simd::LoadPart(k, ds + i)));
    simd::StorePart(db + i, k, gv + simd::LoadPart(k, db + i));
  }
  const Vec m1 = simd::Set(simd::ReduceAdd(a1) * inv_n);
  const Vec m2 = simd::Set(simd::ReduceAdd(a2) * inv_n);
  for (int64_t i = 0; i < n; i += simd::kLanes) {
    const simd::Mask k = simd::Tail(n - i);
    const Vec gv = simd::LoadPart(k, g + i);
    const Vec xh = (simd::LoadPart(k, x + i) - mu) * rs;
    const Vec dxh = kScale ? gv * simd::LoadPart(k, scale + i) : gv;
    simd::StorePart(dx + i, k, rs * simd::Fnma(xh, m2, dxh - m1));
  }
}

// layer_norm_grad(x, dy, scale?) -> dx, dscale, dbias. The row statistics
// are computed again as layer_norm computes them. dscale and dbias are sums
// over rows: each block of kGradRows rows sums into its own slice of the
// workspace and the slices are added in block order, so the result does not
// depend on the thread count.
constexpr int64_t kGradRows = 32;

std::unique_ptr<Kernel> MakeLayerNormGrad(const ir::Op& op) {
  int64_t rows, n;
  LayerNormRows(op, &rows, &n);
  const float eps = static_cast<float>(op.GetFloat("epsilon"));
  const bool has_scale = op.input(2) != nullptr;
  const int64_t blocks = (rows + kGradRows - 1) / kGradRows;
  const size_t ws = static_cast<size_t>(blocks) * 2 * static_cast<size_t>(n) * sizeof(float);
  auto* row_fn = has_scale ? LayerNormGradRow<true> : LayerNormGradRow<false>;
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& args) {
        const float* x = static_cast<const float*>(args.inputs[0]);
        const float* dy = static_cast<const float*>(args.inputs[1]);
        const float* scale = has_scale ? static_cast<const float*>(args.inputs[2]) : nullptr;
        float* dx = static_cast<float*>(args.outputs[0]);
        float* dscale = static_cast<float*>(args.outputs[1]);
        float* dbias = static_cast<float*>(args.outputs[2]);
        float* part = static_cast<float*>(args.workspace);
        ParallelRange(
            blocks, kGradRows * n * 4,
            [&](int64_t b0, int64_t b1) {
              for (int64_t b = b0; b < b1; ++b) {
                float* ds = part + b * 2 * n;
                float* db = ds + n;
                std::fill(ds, ds + 2 * n, 0.0f);
                for (int64_t r = b * kGradRows; r < std::min(rows, (b + 1) * kGradRows); ++r) {
                  const auto [mean, rstd] = Stats(x + r * n, n, eps);
                  row_fn(x + r * n, dy + r * n, scale, dx + r * n, ds, db, n, mean, rstd);
                }
              }
            },
            1);
        ParallelRange(n, blocks * 2, [&](int64_t c0, int64_t c1) {
          for (int64_t i = c0; i < c1; ++i) {
            float ss = 0.0f, sb = 0.0f;
            for (int64_t b = 0; b < blocks; ++b) {
              ss += part[b * 2 * n + i];
              sb += part[b * 2 * n + n + i];
            }
            dscale[i] = ss;
            dbias[i] = sb;
          }
        });
      },
      ws);
}

// y = x * a[c] + b[c] with a = scale / sqrt(var + eps), b = bias - mean * a,
// computed once per run into the workspace.
std::unique_ptr<Kernel> MakeBatchNorm(const ir::Op& op) {
  const Shape& s = op.inputs[0]->shape();
  int64_t batch = s[0], channels = s[1], inner = 1;
  for (size_t d = 2; d < s.size(); ++d) inner *= s[d];
  float eps = static_cast<float>(op.GetFloat("epsilon"));
  size_t ws = 2 * static_cast<size_t>(channels) * sizeof(float);
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& args) {
        const float* x = static_cast<const float*>(args.inputs[0]);
        const float* scale = static_cast<const float*>(args.inputs[1]);
        const float* bias = static_cast<const float*>(args.inputs[2]);
        const float* mean = static_cast<const float*>(args.inputs[3]);
        const float* var = static_cast<const float*>(args.inputs[4]);
        float* y = static_cast<float*>(args.outputs[0]);
        float* a = static_cast<float*>(args.workspace);
        float* b = a + channels;
        for (int64_t c = 0; c < channels; ++c) {
          a[c] = scale[c] / std::sqrt(var[c] + eps);
          b[c] = bias[c] - mean[c] * a[c];
        }
        if (inner == 1) {
          ParallelRange(
              batch, channels,
              [&](int64_t lo, int64_t hi) {
                for (int64_t n = lo; n < hi; ++n) {
                  const float* xr = x + n * channels;
                  float* yr = y + n * channels;
                  for (int64_t c = 0; c < channels; ++c) yr[c] = xr[c] * a[c] + b[c];
                }
              },
              1);
          return;
        }
        ParallelRange(
            batch * channels, inner,
            [&](int64_t lo, int64_t hi) {
              for (int64_t t = lo; t < hi; ++t) {
                const float ac = a[t % channels], bc = b[t % channels];
                const float* xr = x + t * inner;
                float* yr = y + t * inner;
                for (int64_t i = 0; i < inner; ++i) yr[i] = xr[i] * ac + bc;
              }
            },
            1);
      },
      ws);
}

// A group of channels is one contiguous [C / groups * inner] block, so its
// statistics use the same corrected two-sweep row reductions as layer_norm.
std::unique_ptr<Kernel> MakeGroupNorm(const ir::Op& op) {
  const Shape& s = op.inputs[0]->shape();
  int64_t batch = s[0], channels = s[1], inner = 1;
  for (size_t d = 2; d < s.size(); ++d) inner *= s[d];
  int64_t groups = op.GetInt("groups");
  int64_t cpg = channels / groups, n = cpg * inner;
  float eps = static_cast<float>(op.GetFloat("epsilon"));
  bool has_scale = op.input(1) != nullptr, has_bias = op.input(2) != nullptr;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    if (n == 0) return;
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* scale = has_scale ? static_cast<const float*>(args.inputs[1]) : nullptr;
    const float* bias = has_bias ? static_cast<const float*>(args.inputs[2]) : nullptr;
    float* y = static_cast<float*>(args.outputs[0]);
    ParallelRange(
        batch * groups, n * 4,
        [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) {
            const float* xr = x + r * n;
            float* yr = y + r * n;
            const auto [mean, rstd] = Stats(xr, n, eps);
            for (int64_t c = 0; c < cpg; ++c) {
              int64_t ch = (r % groups) * cpg + c;
              float a = rstd * (has_scale ? scale[ch] : 1.0f);
              float bb = (has_bias ? bias[ch] : 0.0f) - mean * a;
              for (int64_t i = 0; i < inner; ++i) yr[c * inner + i] = xr[c * inner + i] * a + bb;
            }
          }
        },
        1);
  });
}

const bool kRegistered = TILLER_ISA_COPY_RUNS && [] {
  // Scale and bias (optional for the first two) have x's dtype.
  RegisterKernel("group_norm", MakeGroupNorm,
                 Signature("T, T?, T? -> T").Where("T", {DType::kF32}));
  RegisterKernel("layer_norm", MakeLayerNorm,
                 Signature("T, T?, T? -> T").Where("T", {DType::kF32}));
  RegisterKernel("layer_norm_grad", MakeLayerNormGrad,
                 Signature("T, T, T? -> T, T, T").Where("T", {DType::kF32}));
  RegisterKernel("batch_norm", MakeBatchNorm,
                 Signature("T, T, T, T, T -> T").Where("T", {DType::kF32}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu::TILLER_ISA_COPY
