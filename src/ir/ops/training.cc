// Forward ops that only training programs use (translators emit them when
// TranslateOptions.training is set and the Paddle op has is_test = false).
//   batch_norm_train(x [N, C, *], scale [C], bias [C], mean [C], variance [C])
//     {epsilon = 1e-5, momentum = 0.9} -> y, mean_out, variance_out, saved_mean,
//     saved_inv_std. Statistics over every dim but 1, as Paddle's CPU kernel:
//     saved_mean = batch mean, saved_inv_std = 1 / sqrt(biased batch variance
//     + epsilon) (what Paddle stores in SavedVariance),
//     mean_out = mean * momentum + saved_mean * (1 - momentum), variance_out
//     likewise with the biased batch variance. A batch of one value per
//     channel (N * spatial = 1) gives y = x, zero saved statistics and
//     unchanged running ones, as Paddle.
//   dropout(x, step? int64 [1]){p = 0.5, mode = "upscale_in_train" |
//     "downgrade_in_infer", seed = 0} -> out, mask uint8 (x's shape). Keeps each
//     element with probability 1 - p: out = x * mask / (1 - p) (upscale; p = 1
//     gives zeros) or x * mask (downgrade). The mask is a pure function of
//     (seed, step, element index), so it is reproducible, independent of the
//     thread count, and changes when `step` does: a training session feeds
//     the step number (TranslateContext::StepCounter) and increments it each
//     step. Without `step` every run draws the same mask (step 0).
//     Translators always set all three (Paddle's dropout_implementation
//     defaults to downgrade_in_infer).
//   accumulate(acc, g) -> acc + g: a gradient accumulator's sum (the compile
//     driver adds one per trained value for gradient accumulation). Safe in
//     place (each element read before it is written), so the sum goes
//     straight into the accumulator's storage: micro-batches that run at
//     once (a pipeline) add into it in the order their device runs them.
//   gradient_histogram(x){edge, underflow} -> float64 [3]: how x's elements
//     fall for loss scaling (the driver adds one per gradient a half type
//     rounds, passes/gradient_statistics.cc): [0] nonzero with |x| <=
//     underflow (the half type rounds them to zero), [1] the rest below
//     edge (zeros included), [2] |x| >= edge, NaN or Inf. Counts are exact
//     below 2^53.
//
// Precision: batch statistics run in float32; dropout masks values as they
// are. Layout: batch_norm_train is channel-first (fixed); dropout is
// elementwise (its mask follows the element order, so another layout draws
// another, equally random, mask).
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferBatchNormTrain(InferContext& c) {
  const TensorType& x = c.input(0);
  if (x.shape.size() < 2) c.Fail("input rank must be >= 2, got {}", x.ToString());
  for (size_t i = 1; i < 5; ++i) {
    if (c.input(i).shape != Shape{x.shape[1]} || c.input(i).dtype != x.dtype)
      c.Fail("input {} is {}, expected {}[{}] (one value per channel)", i, c.input(i).ToString(),
             DTypeName(x.dtype), x.shape[1]);
  }
  double momentum = c.op().GetFloat("momentum");
  if (!(momentum >= 0.0 && momentum <= 1.0)) c.Fail("momentum {} is not in [0, 1]", momentum);
  c.AddOutput(x);
  for (int i = 0; i < 4; ++i) c.AddOutput(c.input(1));
}

void InferAccumulate(InferContext& c) {
  if (c.input(0).dtype != c.input(1).dtype || c.input(0).shape != c.input(1).shape)
    c.Fail("accumulator {} and gradient {} differ", c.input(0).ToString(), c.input(1).ToString());
  c.AddOutput(c.input(0));
}

void InferGradientHistogram(InferContext& c) {
  if (!IsFloat(c.input(0).dtype)) c.Fail("needs a float input, got {}", c.input(0).ToString());
  const double edge = c.op().GetFloat("edge"), underflow = c.op().GetFloat("underflow");
  if (!(underflow >= 0 && edge > underflow))
    c.Fail("needs 0 <= underflow < edge, got underflow {} and edge {}", underflow, edge);
  c.AddOutput({DType::kF64, {3}});
}

void InferDropout(InferContext& c) {
  const TensorType& x = c.input(0);
  if (c.has_input(1) && (c.input(1).dtype != DType::kI64 || NumElements(c.input(1).shape) != 1))
    c.Fail("step must be an int64 tensor of one element, got {}", c.input(1).ToString());
  double p = c.op().GetFloat("p");
  if (!(p >= 0.0 && p <= 1.0)) c.Fail("p = {} is not in [0, 1]", p);
  const std::string& mode = c.op().GetStr("mode");
  if (mode != "upscale_in_train" && mode != "downgrade_in_infer")
    c.Fail("mode '{}' is not upscale_in_train or downgrade_in_infer", mode);
  c.AddOutput(x);
  c.AddOutput({DType::kU8, x.shape});
}

const bool kRegistered = [] {
  // Not InPlaceSafe: the running statistics are copied into their state
  // after the run, so a step stopped by a non-finite loss leaves them as
  // they were.
  RegisterOpSchema(OpSchema{"batch_norm_train", 5, 5, InferBatchNormTrain}
                       .Attr("epsilon", 1e-5)
                       .Attr("momentum", 0.9)
                       .Precision(PrecisionRule::kAlwaysF32)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(OpSchema{"dropout", 1, 2, InferDropout}
                       .Attr("p", 0.5)
                       .Attr("mode", "upscale_in_train")
                       .Attr("seed", int64_t{0})
                       .Precision(PrecisionRule::kFollowsInput)
                       .Layout(LayoutRule::kAgnostic));
  RegisterOpSchema(OpSchema{"gradient_histogram", 1, 1, InferGradientHistogram}
                       .RequiredAttr("edge", AttrKind::kFloat)
                       .RequiredAttr("underflow", AttrKind::kFloat)
                       .Precision(PrecisionRule::kAlwaysF32)
                       .Layout(LayoutRule::kAgnostic));
  RegisterOpSchema(OpSchema{"accumulate", 2, 2, InferAccumulate}
                       .NoAttrs()
                       .Precision(PrecisionRule::kFollowsInput)
                       .Layout(LayoutRule::kAgnostic)
                       .InPlaceSafe());
  return true;
}();

}  // namespace
}  // namespace tiller::ir
