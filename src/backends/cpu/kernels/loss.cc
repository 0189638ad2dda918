// Loss kernels, float32, forward only (ir/ops/loss.cc has the attributes).
//
// cross_entropy follows Paddle's CPU path for softmax_with_cross_entropy:
// the translator applies the softmax op first, then this takes -log of the
// probability with log(0) = -inf replaced by -1e20 (Paddle's "tolerable
// value"), so saturated rows give the same finite loss.
// The elementwise losses keep Paddle's expression order in float.
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

float Tolerable(float v) {
  if (v == std::numeric_limits<float>::infinity()) return 1e20f;
  if (v == -std::numeric_limits<float>::infinity()) return -1e20f;
  return v;
}

std::unique_ptr<Kernel> MakeCrossEntropy(const ir::Op& op) {
  // log_input: input 0 holds log-probabilities (log_softmax), read as they are.
  const CrossEntropySpec spec = ReadCrossEntropy(op);
  bool match = op.GetBool("match");
  if (match && (spec.log_input || spec.soft))
    Unsupported(op, "match with log_input or soft labels");
  return std::make_unique<LambdaKernel>([spec, match](const KernelArgs& args) {
    const float* p = static_cast<const float*>(args.inputs[0]);
    float* out = static_cast<float*>(args.outputs[0]);
    const int64_t n = spec.rows.n, inner = spec.rows.inner;
    ForEachCrossEntropyRow(spec, args.inputs[1], [&](int64_t r, int64_t base, int64_t lbl) {
      const float* pr = p + base;
      if (spec.soft) {
        const float* lr = static_cast<const float*>(args.inputs[1]) + base;
        float acc = 0;
        for (int64_t i = 0; i < n; ++i)
          acc +=
              lr[i * inner] * (spec.log_input ? pr[i * inner] : Tolerable(std::log(pr[i * inner])));
        out[r] = -acc;
      } else if (lbl == spec.ignore) {
        out[r] = 0;
      } else if (lbl < 0 || lbl >= n) {  // Paddle rejects it: a NaN row, and reported
        RecordIndexFault(args, lbl, n, 1);
        out[r] = std::numeric_limits<float>::quiet_NaN();
      } else {
        float v = pr[lbl * inner];
        out[r] = match ? v : spec.log_input ? -v : -Tolerable(std::log(v));
      }
    });
  });
}

// An elementwise loss over `count` same-shape float inputs: f(in, i) -> out[i].
template <typename F>
std::unique_ptr<Kernel> Elementwise(const ir::Op& op, F f) {
  int64_t n = NumElements(op.outputs[0]->shape());
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    ParallelRange(n, 8, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) f(args, i);
    });
  });
}

std::unique_ptr<Kernel> MakeSigmoidCE(const ir::Op& op) {
  int64_t n = NumElements(op.outputs[0]->shape());
  bool normalize = op.GetBool("normalize");
  int ignore = static_cast<int>(op.GetInt("ignore_index"));
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* label = static_cast<const float*>(args.inputs[1]);
    const float* pw = args.inputs.size() > 2 ? static_cast<const float*>(args.inputs[2]) : nullptr;
    float* out = static_cast<float*>(args.outputs[0]);
    ParallelRange(n, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        float v = x[i], l = label[i];
        if (static_cast<int>(l) == ignore) {
          out[i] = 0;
          continue;
        }
        if (pw) {
          // Paddle weights the whole softplus(-x) term by pos_weight, for
          // every label (not PyTorch's 1 + (w - 1) * label); kept as is.
          float m = v < 0 ? -v : 0.0f;
          float t2 = std::log(std::exp(-m) + std::exp(-v - m));
          out[i] = (1.0f - l) * v + pw[i] * (t2 + m);
        } else {
          float t1 = v > 0 ? v : 0;
          float t3 = std::log(1.0f + std::exp(-std::abs(v)));
          out[i] = t1 - v * l + t3;
        }
      }
    });
    if (!normalize) return;
    // Paddle counts labels farther than 1e-6 from ignore_index.
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) {
      float d = label[i] - static_cast<float>(ignore);
      if (d < -1e-6f || d > 1e-6f) ++count;
    }
    float norm = count > 0 ? static_cast<float>(count) : 1e-5f;
    for (int64_t i = 0; i < n; ++i) out[i] /= norm;
  });
}

std::unique_ptr<Kernel> MakeKLDiv(const ir::Op& op) {
  bool log_target = op.GetBool("log_target");
  return Elementwise(op, [log_target](const KernelArgs& a, int64_t i) {
    float x = static_cast<const float*>(a.inputs[0])[i];
    float t = static_cast<const float*>(a.inputs[1])[i];
    float& out = static_cast<float*>(a.outputs[0])[i];
    if (log_target)
      out = std::exp(t) * (t - x);
    else
      out = t <= 0 ? 0.0f : t * (std::log(t) - x);
  });
}

std::unique_ptr<Kernel> MakeBCE(const ir::Op& op) {
  return Elementwise(op, [](const KernelArgs& a, int64_t i) {
    float x = static_cast<const float*>(a.inputs[0])[i];
    float l = static_cast<const float*>(a.inputs[1])[i];
    float t1 = std::max(std::log(x), -100.0f);
    float t2 = std::max(std::log(1.0f - x), -100.0f);
    static_cast<float*>(a.outputs[0])[i] = (l - 1.0f) * t2 - l * t1;
  });
}

std::unique_ptr<Kernel> MakeHuber(const ir::Op& op) {
  float delta = static_cast<float>(op.GetFloat("delta"));
  return Elementwise(op, [delta](const KernelArgs& a, int64_t i) {
    float r = static_cast<const float*>(a.inputs[1])[i] - static_cast<const float*>(a.inputs[0])[i];
    float ar = std::abs(r);
    static_cast<float*>(a.outputs[0])[i] = ar <= delta ? 0.5f * r * r : delta * (ar - 0.5f * delta);
  });
}

std::unique_ptr<Kernel> MakeRankLoss(const ir::Op& op) {
  return Elementwise(op, [](const KernelArgs& a, int64_t i) {
    float label = static_cast<const float*>(a.inputs[0])[i];
    float d = static_cast<const float*>(a.inputs[1])[i] - static_cast<const float*>(a.inputs[2])[i];
    static_cast<float*>(a.outputs[0])[i] = std::log(1.0f + std::exp(d)) - label * d;
  });
}

const bool kRegistered = [] {
  const std::vector<DType> f32 = {DType::kF32};
  // Hard labels (int32/int64), then soft ones (float32 like prob); which one
  // an op has is its soft_label attribute, checked by the factory.
  RegisterKernel("cross_entropy", MakeCrossEntropy,
                 Signature("T, I -> T").Where("T", f32).Where("I", {DType::kI32, DType::kI64}));
  RegisterKernel("cross_entropy", MakeCrossEntropy, Signature("T, T -> T").Where("T", f32));
  RegisterKernel("sigmoid_cross_entropy", MakeSigmoidCE,
                 Signature("T, T, T? -> T").Where("T", f32));
  RegisterKernel("kldiv", MakeKLDiv, Signature("T, T -> T").Where("T", f32));
  RegisterKernel("bce", MakeBCE, Signature("T, T -> T").Where("T", f32));
  RegisterKernel("huber", MakeHuber, Signature("T, T -> T").Where("T", f32));
  RegisterKernel("rank_loss", MakeRankLoss, Signature("T, T, T -> T").Where("T", f32));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
