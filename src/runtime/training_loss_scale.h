// Loss scaling in a training session: one replica's scale and the rules that
// steer it after every update window, Paddle's update_loss_scaling
// (dynamic_loss_scaling) and Graphcore's automatic loss scaling (from the
// gradient statistics). Every replica sees the same all-reduced gradients,
// so each keeps its own copy of the rule's state and they stay equal without
// talking.
#pragma once

#include <array>
#include <cstdint>

#include "compile/driver.h"
#include "tiller/training.h"

namespace tiller::runtime {

struct LossScaling {
  double scale = 1.0;
  int good_updates = 0, bad_updates = 0;
  int64_t skipped = 0;
  // Gradient statistics of the last update, and automatic loss scaling's
  // sums over the current update period.
  std::array<double, 3> last_counts{}, period_counts{};
  int period_updates = 0;

  // After an update window (its update applied, or skipped on overflow):
  // steers the scale by the rule `options` choose; none: it stays.
  void EndWindow(bool overflow, const training::SessionOptions& options);

 private:
  void UpdateAutomatically(bool overflow, const training::SessionOptions& options);
  void UpdateDynamically(bool overflow, const training::SessionOptions& options);
};

// Whether every gradient `step` accumulated is finite (host memory: CPU
// devices); the gradient histogram is not a gradient.
bool AccumulatedGradientsFinite(const compile::CompiledStep& step);

}  // namespace tiller::runtime
