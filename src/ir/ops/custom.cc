// Ops whose work happens outside Tiller's own math, and debugging ops.
//   custom(inputs... (nullptr for absent)) {custom_type: Paddle op type,
//     custom_out_dtypes / custom_out_ranks / custom_out_dims: the output
//     types the library's infer returned at translation (TillerCustomDType
//     values, ranks, all dims concatenated), plus the Paddle op's own
//     attributes}: runs a loaded custom-op library (include/tiller/custom_op.h).
//   print(x) {message, summarize, print_tensor_name, print_tensor_type,
//     print_tensor_shape, first_n, var_name}: x unchanged; logs x to stderr
//     on every run.
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferCustom(InferContext& c) {
  std::vector<int64_t> dtypes = c.attrs().Ints("custom_out_dtypes");
  std::vector<int64_t> ranks = c.attrs().Ints("custom_out_ranks");
  std::vector<int64_t> dims = c.attrs().Ints("custom_out_dims");
  if (dtypes.empty() || dtypes.size() != ranks.size()) c.Fail("output types missing");
  // Same values as TillerCustomDType (the ABI).
  static const DType kAbi[] = {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool};
  size_t pos = 0;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    if (dtypes[i] < 0 || dtypes[i] >= 5 || ranks[i] < 0 || pos + ranks[i] > dims.size())
      c.Fail("bad output type {}", i);
    Shape s(dims.begin() + pos, dims.begin() + pos + ranks[i]);
    pos += ranks[i];
    for (int64_t d : s) {
      if (d < 0) c.Fail("output {} has a negative dim", i);
    }
    c.AddOutput({kAbi[dtypes[i]], s});
  }
}

const bool kRegistered = [] {
  RegisterOpSchema({"custom", 0, 1 << 20, InferCustom});
  RegisterOpSchema({"print", 1, 1, [](InferContext& c) { c.AddOutput(c.input(0)); }});
  return true;
}();

}  // namespace
}  // namespace tiller::ir
