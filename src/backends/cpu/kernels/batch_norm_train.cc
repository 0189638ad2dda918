// batch_norm_train and batch_norm_grad (float32, channel dim 1; see
// ir/ops/training.cc and grad_ops.cc). Threads split channels: every
// statistic is a per-channel reduction over the [N, S] values of that
// channel, read as N contiguous runs of S. Sums accumulate in double, so the
// statistics are at least as accurate as Paddle's float Eigen sums.
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

struct Layout {
  int64_t n, c, s;  // batch, channels, values per (batch, channel)
};

Layout ChannelLayout(const Shape& x) {
  int64_t s = 1;
  for (size_t d = 2; d < x.size(); ++d) s *= x[d];
  return {x[0], x[1], s};
}

std::unique_ptr<Kernel> MakeBatchNormTrain(const ir::Op& op) {
  Layout l = ChannelLayout(op.inputs[0]->shape());
  float eps = static_cast<float>(op.GetFloat("epsilon"));
  float momentum = static_cast<float>(op.GetFloat("momentum"));
  return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
    const float* x = static_cast<const float*>(a.inputs[0]);
    const float* scale = static_cast<const float*>(a.inputs[1]);
    const float* bias = static_cast<const float*>(a.inputs[2]);
    const float* mean = static_cast<const float*>(a.inputs[3]);
    const float* var = static_cast<const float*>(a.inputs[4]);
    float* y = static_cast<float*>(a.outputs[0]);
    float* mean_out = static_cast<float*>(a.outputs[1]);
    float* var_out = static_cast<float*>(a.outputs[2]);
    float* saved_mean = static_cast<float*>(a.outputs[3]);
    float* saved_inv_std = static_cast<float*>(a.outputs[4]);
    const int64_t count = l.n * l.s;
    if (count == 1) {  // Paddle skips normalization: y = x, statistics untouched
      std::memcpy(y, x, static_cast<size_t>(l.c) * sizeof(float));
      // (Should the statistics ever be updated in place, they are already
      // where they belong.)
      if (mean_out != mean) std::memcpy(mean_out, mean, static_cast<size_t>(l.c) * sizeof(float));
      if (var_out != var) std::memcpy(var_out, var, static_cast<size_t>(l.c) * sizeof(float));
      std::fill(saved_mean, saved_mean + l.c, 0.0f);
      std::fill(saved_inv_std, saved_inv_std + l.c, 0.0f);
      return;
    }
    ParallelRange(
        l.c, 3 * count,
        [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) {
            double sum = 0;
            for (int64_t n = 0; n < l.n; ++n) {
              const float* xr = x + (n * l.c + c) * l.s;
              for (int64_t i = 0; i < l.s; ++i) sum += xr[i];
            }
            const float m = static_cast<float>(sum / static_cast<double>(count));
            double sq = 0;
            for (int64_t n = 0; n < l.n; ++n) {
              const float* xr = x + (n * l.c + c) * l.s;
              for (int64_t i = 0; i < l.s; ++i) {
                double d = static_cast<double>(xr[i]) - m;
                sq += d * d;
              }
            }
            const float v = static_cast<float>(sq / static_cast<double>(count));
            const float inv_std = 1.0f / std::sqrt(v + eps);
            saved_mean[c] = m;
            saved_inv_std[c] = inv_std;
            mean_out[c] = mean[c] * momentum + m * (1.0f - momentum);
            var_out[c] = var[c] * momentum + v * (1.0f - momentum);
            // Paddle's form: y = x * (inv_std * scale) + (bias - mean * inv_std * scale).
            const float k = inv_std * scale[c], shift = bias[c] - m * k;
            for (int64_t n = 0; n < l.n; ++n) {
              const float* xr = x + (n * l.c + c) * l.s;
              float* yr = y + (n * l.c + c) * l.s;
              for (int64_t i = 0; i < l.s; ++i) yr[i] = xr[i] * k + shift;
            }
          }
        },
        1);
  });
}

// dbias = sum dy, dscale = sum dy * xhat, and with M = N * S values per channel
// dx = scale * inv_std / M * (M dy - dbias - xhat * dscale), xhat = (x - mean) * inv_std.
std::unique_ptr<Kernel> MakeBatchNormGrad(const ir::Op& op) {
  Layout l = ChannelLayout(op.inputs[0]->shape());
  return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
    const float* x = static_cast<const float*>(a.inputs[0]);
    const float* scale = static_cast<const float*>(a.inputs[1]);
    const float* mean = static_cast<const float*>(a.inputs[2]);
    const float* inv_std = static_cast<const float*>(a.inputs[3]);
    const float* dy = static_cast<const float*>(a.inputs[4]);
    float* dx = static_cast<float*>(a.outputs[0]);
    float* dscale = static_cast<float*>(a.outputs[1]);
    float* dbias = static_cast<float*>(a.outputs[2]);
    const int64_t count = l.n * l.s;
    if (count == 1) {  // the forward passed x through
      std::memcpy(dx, dy, static_cast<size_t>(l.c) * sizeof(float));
      std::fill(dscale, dscale + l.c, 0.0f);
      std::fill(dbias, dbias + l.c, 0.0f);
      return;
    }
    ParallelRange(
        l.c, 3 * count,
        [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) {
            const float m = mean[c], is = inv_std[c];
            double sum_dy = 0, sum_dy_xhat = 0;
            for (int64_t n = 0; n < l.n; ++n) {
              const float* xr = x + (n * l.c + c) * l.s;
              const float* gr = dy + (n * l.c + c) * l.s;
              for (int64_t i = 0; i < l.s; ++i) {
                sum_dy += gr[i];
                sum_dy_xhat += static_cast<double>((xr[i] - m) * is) * gr[i];
              }
            }
            dbias[c] = static_cast<float>(sum_dy);
            dscale[c] = static_cast<float>(sum_dy_xhat);
            const float k = scale[c] * is / static_cast<float>(count);
            const float mf = static_cast<float>(count), sdy = dbias[c], sdx = dscale[c];
            for (int64_t n = 0; n < l.n; ++n) {
              const float* xr = x + (n * l.c + c) * l.s;
              const float* gr = dy + (n * l.c + c) * l.s;
              float* dr = dx + (n * l.c + c) * l.s;
              for (int64_t i = 0; i < l.s; ++i)
                dr[i] = k * (gr[i] * mf - sdy - (xr[i] - m) * is * sdx);
            }
          }
        },
        1);
  });
}

TILLER_CPU_KERNEL("batch_norm_train", MakeBatchNormTrain,
                  Signature("T, T, T, T, T -> T, T, T, T, T").Where("T", {DType::kF32}));
TILLER_CPU_KERNEL("batch_norm_grad", MakeBatchNormGrad,
                  Signature("T, T, T, T, T -> T, T, T").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
