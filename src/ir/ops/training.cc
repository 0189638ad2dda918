// Forward ops of training programs (translators emit them when
// TranslateOptions.training is set and the Paddle op has is_test = false;
// batch_norm_train also for inference when the op asks for batch statistics
// with trainable_statistics).
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
//   any_non_finite(x0, x1, ...) -> bool [1]: whether any element of any
//     input is NaN or +-Inf (Paddle's check_finite_and_unscale's
//     FoundInfinite). Float inputs of one dtype.
//   update_loss_scaling(found bool [1], scale f32 [1], good i32 [1],
//     bad i32 [1]){incr_every_n_steps, decr_every_n_nan_or_inf, incr_ratio,
//     decr_ratio} -> scale, good, bad: Paddle AMP's dynamic loss-scaling rule
//     for programs that carry it. found: good = 0, ++bad, and when bad
//     reaches decr_every_n_nan_or_inf the scale becomes max(scale *
//     decr_ratio, 1) and bad 0; else bad = 0, ++good, and when good reaches
//     incr_every_n_steps the scale becomes scale * incr_ratio (unless that
//     is not finite) and good 0. Same float32 arithmetic as Paddle's kernel.
//   stochastic_cast(x float32, step int64 [1]){dtype = "bfloat16" |
//     "float16", seed} -> x rounded to dtype stochastically (the IPU option
//     enable_stochastic_rounding): up to the next representable value with
//     probability (x - down) / (up - down), else down, so the rounding is
//     unbiased on average. The draws are a pure function of (seed, step,
//     element index): reproducible, thread-count independent, fresh each
//     step. NaN stays NaN, Inf stays Inf; a value past the largest finite
//     one may round to Inf.
//
// Precision: batch statistics run in float32; dropout masks values as they
// are. Layout: batch_norm_train is channel-first (fixed); dropout is
// elementwise (its mask follows the element order, so another layout draws
// another, equally random, mask).
#include <cmath>

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

void InferAnyNonFinite(InferContext& c) {
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!IsFloat(c.input(i).dtype) || c.input(i).dtype != c.input(0).dtype)
      c.Fail("input {} is {}, expected a float tensor of input 0's dtype ({})", i,
             c.input(i).ToString(), DTypeName(c.input(0).dtype));
  }
  c.AddOutput({DType::kBool, {1}});
}

void InferUpdateLossScaling(InferContext& c) {
  const TensorType want[] = {
      {DType::kBool, {1}}, {DType::kF32, {1}}, {DType::kI32, {1}}, {DType::kI32, {1}}};
  const char* names[] = {"found", "scale", "good", "bad"};
  for (size_t i = 0; i < 4; ++i) {
    if (c.input(i).dtype != want[i].dtype || NumElements(c.input(i).shape) != 1)
      c.Fail("{} is {}, expected {}", names[i], c.input(i).ToString(), want[i].ToString());
  }
  for (const char* n : {"incr_every_n_steps", "decr_every_n_nan_or_inf"}) {
    if (c.op().GetInt(n) < 1) c.Fail("{} must be >= 1, got {}", n, c.op().GetInt(n));
  }
  for (const char* n : {"incr_ratio", "decr_ratio"}) {
    const double r = c.op().GetFloat(n);
    if (!(r > 0 && std::isfinite(r))) c.Fail("{} must be a positive finite number, got {}", n, r);
  }
  for (size_t i = 1; i < 4; ++i) c.AddOutput(c.input(i));
}

void InferStochasticCast(InferContext& c) {
  if (c.input(0).dtype != DType::kF32) c.Fail("x must be float32, got {}", c.input(0).ToString());
  if (c.input(1).dtype != DType::kI64 || NumElements(c.input(1).shape) != 1)
    c.Fail("step must be an int64 tensor of one element, got {}", c.input(1).ToString());
  const std::string& name = c.op().GetStr("dtype");
  DType to;
  if (!ParseDType(name, &to) || (to != DType::kBF16 && to != DType::kF16))
    c.Fail("dtype '{}' is not bfloat16 or float16", name);
  c.AddOutput({to, c.input(0).shape});
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
  RegisterOpSchema(OpSchema{"any_non_finite", 1, 1 << 20, InferAnyNonFinite}
                       .NoAttrs()
                       .Precision(PrecisionRule::kFollowsInput)
                       .Layout(LayoutRule::kAgnostic));
  RegisterOpSchema(OpSchema{"update_loss_scaling", 4, 4, InferUpdateLossScaling}
                       .RequiredAttr("incr_every_n_steps", AttrKind::kInt)
                       .RequiredAttr("decr_every_n_nan_or_inf", AttrKind::kInt)
                       .RequiredAttr("incr_ratio", AttrKind::kFloat)
                       .RequiredAttr("decr_ratio", AttrKind::kFloat)
                       .Precision(PrecisionRule::kAlwaysF32)
                       .Layout(LayoutRule::kAgnostic));
  RegisterOpSchema(OpSchema{"stochastic_cast", 2, 2, InferStochasticCast}
                       .RequiredAttr("dtype", AttrKind::kString)
                       .Attr("seed", int64_t{0})
                       .Precision(PrecisionRule::kFollowsInput)
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
