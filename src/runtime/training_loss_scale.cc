// Loss scaling's rules (training_loss_scale.h).
#include "runtime/training_loss_scale.h"

#include <algorithm>
#include <cmath>

namespace tiller::runtime {

void LossScaling::EndWindow(bool overflow, const training::SessionOptions& options) {
  if (options.loss_scale.automatic)
    UpdateAutomatically(overflow, options);
  else if (options.loss_scale.dynamic)
    UpdateDynamically(overflow, options);
}

// Graphcore's automatic loss scaling, after an update window: every
// update_period updates, halve the scale when the counts at or above the
// edge (u) exceed threshold_upper_count_proportion of all (u / (u + l) >
// t), else double it. A skipped update (non-finite gradients) halves it
// at once and starts a new period.
void LossScaling::UpdateAutomatically(bool overflow, const training::SessionOptions& options) {
  auto scale_by = [&](double f) {
    const double next = scale * f;
    // The seed is float32: stay a normal, finite float32.
    if (std::isfinite(static_cast<float>(next)) && next >= std::ldexp(1.0, -126)) scale = next;
  };
  if (overflow) {
    ++skipped;
    scale_by(0.5);
    period_counts = {};
    period_updates = 0;
    return;
  }
  for (int i = 0; i < 3; ++i) period_counts[i] += last_counts[i];
  if (++period_updates < options.loss_scale.update_period) return;
  const double upper = period_counts[2];
  const double lower = period_counts[0] + period_counts[1];
  const double t = options.loss_scale.threshold_upper_count_proportion;
  scale_by(upper > lower * (t / (1 - t)) ? 0.5 : 2.0);
  period_counts = {};
  period_updates = 0;
}

// Paddle's update_loss_scaling rule, after an update window: a skipped
// update (overflow) counts towards lowering the scale, a clean one towards
// raising it.
void LossScaling::UpdateDynamically(bool overflow, const training::SessionOptions& options) {
  if (overflow) {
    ++skipped;
    good_updates = 0;
    if (++bad_updates == options.loss_scale.decr_every_n_nan_or_inf) {
      scale = std::max(1.0, scale * options.loss_scale.decr_ratio);
      bad_updates = 0;
    }
    return;
  }
  bad_updates = 0;
  if (++good_updates == options.loss_scale.incr_every_n_steps) {
    const double up = scale * options.loss_scale.incr_ratio;
    // The seed is float32: stay where it is finite.
    if (std::isfinite(static_cast<float>(up))) scale = up;
    good_updates = 0;
  }
}

bool AccumulatedGradientsFinite(const compile::CompiledStep& step) {
  for (const compile::Accumulator& a : step.accumulators) {
    if (compile::IsGradientHistogram(a) || !a.data.size()) continue;
    // float32 bits: an all-ones exponent is Inf or NaN.
    const uint32_t* v = a.data.as<uint32_t>();
    const size_t n = a.data.size() / sizeof(uint32_t);
    uint32_t any = 0;
    for (size_t i = 0; i < n; ++i) any |= (v[i] & 0x7f800000u) == 0x7f800000u;
    if (any) return false;
  }
  return true;
}

}  // namespace tiller::runtime
