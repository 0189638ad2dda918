// ctc_loss: the CTC negative log-likelihood per sequence (Paddle's warpctc
// forward). Logits [T, B, C] are unnormalized; each time step gets a
// log-softmax over C, then the usual alpha recursion over the label with
// blanks interleaved (2L + 1 states) runs in log space. Accumulation is in
// double (warp-ctc keeps float); results agree to float rounding. A sequence
// whose label cannot fit its frames has probability 0: loss +inf. A class id
// outside [0, C) or a length outside [0, T] / [0, L] is reported (an index
// fault naming the input) with a NaN loss, as Paddle refuses such input.
// Batches run in parallel, each on its own slice of the workspace.
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

double LogAdd(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

int64_t ReadInt(const void* p, DType t, int64_t i) {
  return t == DType::kI64 ? static_cast<const int64_t*>(p)[i] : static_cast<const int32_t*>(p)[i];
}

std::unique_ptr<Kernel> MakeCtc(const ir::Op& op) {
  const Shape& s = op.inputs[0]->shape();
  int64_t T = s[0], B = s[1], C = s[2], L = op.inputs[1]->shape()[1];
  int64_t S = 2 * L + 1;
  int64_t blank = op.GetInt("blank");
  DType label_t = InDType(op, 1);
  DType tlen_t = op.input(2) ? InDType(op, 2) : DType::kI64;
  DType llen_t = op.input(3) ? InDType(op, 3) : DType::kI64;
  int64_t per_batch = 2 * S + C + S;  // two alpha rows, log-probs, extended label
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& args) {
        const float* x = static_cast<const float*>(args.inputs[0]);
        const void* label = args.inputs[1];
        const void* tlen = args.inputs.size() > 2 ? args.inputs[2] : nullptr;
        const void* llen = args.inputs.size() > 3 ? args.inputs[3] : nullptr;
        float* loss = static_cast<float*>(args.outputs[0]);
        double* ws = static_cast<double*>(args.workspace);
        ParallelRange(
            B, T * S * 4 + T * C * 4,
            [&](int64_t b0, int64_t b1) {
              for (int64_t b = b0; b < b1; ++b) {
                double* prev = ws + b * per_batch;
                double* cur = prev + S;
                double* lp = cur + S;
                double* ext = lp + C;  // extended label as doubles (exact for class ids)
                int64_t tb = tlen ? ReadInt(tlen, tlen_t, b) : T;
                int64_t lb = llen ? ReadInt(llen, llen_t, b) : L;
                if (tb < 0 || tb > T || lb < 0 || lb > L) {
                  if (tb < 0 || tb > T)
                    RecordIndexFault(args, tb, T + 1, 2);
                  else
                    RecordIndexFault(args, lb, L + 1, 3);
                  loss[b] = std::numeric_limits<float>::quiet_NaN();
                  continue;
                }
                int64_t sb = 2 * lb + 1;
                bool bad = false;
                for (int64_t k = 0; k < sb; ++k) {
                  int64_t c = k % 2 == 0 ? blank : ReadInt(label, label_t, b * L + k / 2);
                  if (c < 0 || c >= C) {
                    RecordIndexFault(args, c, C, 1);
                    bad = true;
                  }
                  ext[k] = static_cast<double>(c);
                }
                if (bad || tb == 0) {
                  loss[b] = bad ? std::numeric_limits<float>::quiet_NaN() : INFINITY;
                  continue;
                }
                for (int64_t t = 0; t < tb; ++t) {
                  const float* xt = x + (t * B + b) * C;
                  double m = -INFINITY, sum = 0;
                  for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(xt[c]));
                  for (int64_t c = 0; c < C; ++c) sum += std::exp(xt[c] - m);
                  double lse = m + std::log(sum);
                  for (int64_t c = 0; c < C; ++c) lp[c] = xt[c] - lse;
                  for (int64_t k = 0; k < sb; ++k) {
                    double v;
                    if (t == 0) {
                      v = k < 2 ? 0.0 : -INFINITY;
                    } else {
                      v = prev[k];
                      if (k >= 1) v = LogAdd(v, prev[k - 1]);
                      if (k >= 2 && ext[k] != static_cast<double>(blank) && ext[k] != ext[k - 2])
                        v = LogAdd(v, prev[k - 2]);
                    }
                    cur[k] = v == -INFINITY ? v : v + lp[static_cast<int64_t>(ext[k])];
                  }
                  std::swap(prev, cur);
                }
                double ll = prev[sb - 1];
                if (sb >= 2) ll = LogAdd(ll, prev[sb - 2]);
                loss[b] = static_cast<float>(-ll);
              }
            },
            1);
      },
      static_cast<size_t>(B * per_batch) * sizeof(double));
}

const bool kRegistered = [] {
  // Label and lengths are int32 or int64, each independently.
  const std::vector<DType> index = {DType::kI32, DType::kI64};
  RegisterKernel("ctc_loss", MakeCtc,
                 Signature("T, I, J?, K? -> T")
                     .Where("T", {DType::kF32})
                     .Where("I", index)
                     .Where("J", index)
                     .Where("K", index));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
