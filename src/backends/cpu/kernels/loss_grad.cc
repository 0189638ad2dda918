// Gradient kernels of the losses whose gradient is not a few elementwise IR
// ops (float32; see ir/ops/grad_ops.cc):
//   cross_entropy_grad: -dloss / prob at a hard label (soft: -dloss * label /
//     prob), as Paddle's cross_entropy_grad; ignored rows get zeros and a
//     label outside [0, classes) a NaN row (the forward's NaN loss).
//   sigmoid_cross_entropy_grad: Paddle's CPU formulas term by term (with
//     and without pos_weight), then the same normalization as the forward.
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

std::unique_ptr<Kernel> MakeCrossEntropyGrad(const ir::Op& op) {
  // log_input: the gradient with respect to log-probabilities, which needs
  // no division (finite where a probability underflowed to 0).
  const CrossEntropySpec spec = ReadCrossEntropy(op);
  return std::make_unique<LambdaKernel>([spec](const KernelArgs& args) {
    const float* p = static_cast<const float*>(args.inputs[0]);
    const float* g = static_cast<const float*>(args.inputs[2]);
    float* dp = static_cast<float*>(args.outputs[0]);
    const int64_t n = spec.rows.n, inner = spec.rows.inner;
    const bool log_input = spec.log_input;
    ForEachCrossEntropyRow(spec, args.inputs[1], [&](int64_t r, int64_t base, int64_t lbl) {
      const float* pr = p + base;
      float* dr = dp + base;
      if (spec.soft) {
        const float* lr = static_cast<const float*>(args.inputs[1]) + base;
        for (int64_t i = 0; i < n; ++i)
          dr[i * inner] = log_input ? -g[r] * lr[i * inner] : -g[r] * lr[i * inner] / pr[i * inner];
        return;
      }
      bool bad = lbl != spec.ignore && (lbl < 0 || lbl >= n);
      float fill = bad ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
      for (int64_t i = 0; i < n; ++i) dr[i * inner] = fill;
      if (lbl != spec.ignore && !bad) dr[lbl * inner] = log_input ? -g[r] : -g[r] / pr[lbl * inner];
    });
  });
}

std::unique_ptr<Kernel> MakeSigmoidCEGrad(const ir::Op& op) {
  int64_t n = NumElements(op.outputs[0]->shape());
  bool normalize = op.GetBool("normalize");
  int ignore = static_cast<int>(op.GetInt("ignore_index"));
  bool has_pw = op.input(3) != nullptr;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* label = static_cast<const float*>(args.inputs[1]);
    const float* g = static_cast<const float*>(args.inputs[2]);
    const float* pw = has_pw ? static_cast<const float*>(args.inputs[3]) : nullptr;
    float* dx = static_cast<float*>(args.outputs[0]);
    float norm = 1.0f;
    if (normalize) {  // the forward's count: labels farther than 1e-6 from ignore_index
      int64_t count = 0;
      for (int64_t i = 0; i < n; ++i) {
        float d = label[i] - static_cast<float>(ignore);
        if (d < -1e-6f || d > 1e-6f) ++count;
      }
      norm = count > 0 ? static_cast<float>(count) : 1e-5f;
    }
    ParallelRange(n, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        float v = x[i], l = label[i], diff;
        if (static_cast<int>(l) == ignore) {
          dx[i] = 0.0f;
          continue;
        }
        if (pw) {  // (1 - l) - pw * sigmoid(-x), in Paddle's stable form
          float max_val = v < 0 ? -v : 0.0f;
          float term1 = v < 0 ? -1.0f : 0.0f;
          float down1 = std::exp(-max_val), down2 = std::exp(-v - max_val);
          float term2 = down1 * (-term1) + down2 * (-1.0f - term1);
          diff = pw[i] * (term2 / (down1 + down2) + term1) + (1.0f - l);
        } else {  // sigmoid(x) - l
          float e_x = std::exp(-std::abs(v));
          float up = -e_x * (v >= 0 ? 1.0f : -1.0f);
          diff = (v > 0 ? 1.0f : 0.0f) - l + up / (1.0f + e_x);
        }
        dx[i] = g[i] * diff / norm;
      }
    });
  });
}

// Hard labels, then soft ones, as the forward (cross_entropy in loss.cc).
TILLER_CPU_KERNEL(
    "cross_entropy_grad", MakeCrossEntropyGrad,
    Signature("T, I, T -> T").Where("T", {DType::kF32}).Where("I", {DType::kI32, DType::kI64}));
TILLER_CPU_KERNEL("cross_entropy_grad", MakeCrossEntropyGrad,
                  Signature("T, T, T -> T").Where("T", {DType::kF32}));
TILLER_CPU_KERNEL("sigmoid_cross_entropy_grad", MakeSigmoidCEGrad,
                  Signature("T, T, T, T? -> T").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
