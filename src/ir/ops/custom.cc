// Ops whose work happens outside Tiller's own math, and debugging ops.
//   custom(inputs... (nullptr for absent)) {custom_type: string, required:
//     the Paddle op type; custom_out_dtypes / custom_out_ranks: ints,
//     required; custom_out_dims: ints = []: the output types the library's
//     infer returned at translation (TillerCustomDType values, ranks, all
//     dims concatenated), plus the Paddle op's own attributes, which the
//     schema leaves open}: runs a loaded custom-op library
//     (include/tiller/custom_op.h).
//   print(x) {message: string = "", summarize: int = 20 (-1: all),
//     print_tensor_name / print_tensor_type / print_tensor_shape: bool =
//     true, first_n: int = -1 (-1: every run), var_name: string = "" ("":
//     x's value name)}: x unchanged; logs x to stderr on every run. Its
//     gradient passes through (it prints the forward value only).
// Precision: custom runs in float32 (the custom-op ABI has no half types,
// and the library fixed its output types at translation); print follows its
// input. Layout: fixed for both (the library reads dims in order; print logs
// the shape and the leading values).
#include "ir/grad.h"
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferCustom(InferContext& c) {
  const std::vector<int64_t>& dtypes = c.op().GetInts("custom_out_dtypes");
  const std::vector<int64_t>& ranks = c.op().GetInts("custom_out_ranks");
  const std::vector<int64_t>& dims = c.op().GetInts("custom_out_dims");
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
  RegisterOpSchema(OpSchema{"custom", 0, 1 << 20, InferCustom}
                       .OpenAttrs()
                       .RequiredAttr("custom_type", AttrKind::kString)
                       .RequiredAttr("custom_out_dtypes", AttrKind::kInts)
                       .RequiredAttr("custom_out_ranks", AttrKind::kInts)
                       .Attr("custom_out_dims", std::vector<int64_t>{})
                       .Precision(PrecisionRule::kAlwaysF32)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(OpSchema{"print", 1, 1, [](InferContext& c) { c.AddOutput(c.input(0)); }}
                       .Attr("message", "")
                       .Attr("summarize", int64_t{20})
                       .Attr("print_tensor_name", true)
                       .Attr("print_tensor_type", true)
                       .Attr("print_tensor_shape", true)
                       .Attr("first_n", int64_t{-1})
                       .Attr("var_name", "")
                       .Precision(PrecisionRule::kFollowsInput)
                       .Layout(LayoutRule::kFixed));
  RegisterGrad("print", [](GradContext& c) {
    if (c.needs_grad(0)) c.SetInputGrad(0, c.out_grad());
  });
  return true;
}();

}  // namespace
}  // namespace tiller::ir
