// one_hot(ids) -> rows of zeros with a 1 at each id; ids int32 or int64, the
// output (its dtype attribute) float32, float64, int32 or int64.
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

// An id outside [0, depth) gives an all-zero row, and unless
// allow_out_of_range it is reported (backend::IndexFault), as Paddle raises.
template <typename I, typename O>
std::unique_ptr<Kernel> OneHot(int64_t count, int64_t depth, bool allow_out_of_range) {
  return std::make_unique<LambdaKernel>([count, depth, allow_out_of_range](const KernelArgs& args) {
    const I* ids = static_cast<const I*>(args.inputs[0]);
    O* out = static_cast<O*>(args.outputs[0]);
    ParallelRange(count, depth, [&](int64_t b, int64_t e) {
      std::fill(out + b * depth, out + e * depth, O(0));
      for (int64_t i = b; i < e; ++i) {
        int64_t id = static_cast<int64_t>(ids[i]);
        if (id >= 0 && id < depth)
          out[i * depth + id] = O(1);
        else if (!allow_out_of_range)
          RecordIndexFault(args, id, depth, 0);
      }
    });
  });
}

std::unique_ptr<Kernel> MakeOneHot(const ir::Op& op) {
  int64_t depth = op.GetInt("depth");
  int64_t count = NumElements(op.inputs[0]->shape());
  const bool allow = op.GetBool("allow_out_of_range");
  std::unique_ptr<Kernel> k;
  DispatchDType<int32_t, int64_t>(InDType(op), [&](auto it) {
    DispatchDType<float, double, int32_t, int64_t>(OutDType(op), [&](auto ot) {
      k = OneHot<decltype(it), decltype(ot)>(count, depth, allow);
    });
  });
  return k;
}

const bool kRegistered = [] {
  using enum DType;
  RegisterKernel("one_hot", MakeOneHot,
                 Signature("T -> O").Where("T", {kI32, kI64}).Where("O", {kF32, kF64, kI32, kI64}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
