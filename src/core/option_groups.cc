// include/tiller/option_groups.h: each group's checks, in one place for
// every option set that holds the group.
#include "tiller/option_groups.h"

#include <cmath>

#include "core/error.h"

namespace tiller {

void CollectiveSettings::Validate() const {
  if (all_reduce_bucket_bytes < 0)
    Fail(ErrorKind::kInvalidArgument,
         "option 'all_reduce_bucket_bytes' must be >= 0 (0: one message per gradient), got {}",
         all_reduce_bucket_bytes);
  if (shard_min_elements < 0)
    Fail(ErrorKind::kInvalidArgument,
         "option 'location_optimizer.min_elements_for_replicated_tensor_sharding' must be >= 0, "
         "got {}",
         shard_min_elements);
}

void StageSplitSettings::Validate() const {
  if (stages_per_device < 1)
    Fail(ErrorKind::kInvalidArgument, "option 'stages_per_device' must be >= 1, got {}",
         stages_per_device);
}

void AccumulationSettings::Validate() const {
  if (factor < 1)
    Fail(ErrorKind::kInvalidArgument, "accumulation_factor must be >= 1, got {}", factor);
  if (factor > 1 && !enabled)
    Fail(ErrorKind::kInvalidArgument,
         "accumulation_factor {} needs gradient accumulation on "
         "(enable_gradient_accumulation=True)",
         factor);
}

void PipelineSettings::Validate() const {
  if (in_flight < 0)
    Fail(ErrorKind::kInvalidArgument, "pipeline_in_flight must be >= 0, got {}", in_flight);
  if (in_flight > 0 && !(enabled && schedule == Schedule::kOneFOneB))
    Fail(ErrorKind::kInvalidArgument,
         "pipeline_in_flight {} sets the micro-batches in flight of a 1F1B pipeline: it needs "
         "enable_pipelining and pipeline_schedule '1f1b' (fill_drain keeps the whole window in "
         "flight)",
         in_flight);
}

RecomputeSettings RecomputeSettings::FromAutoRecomputation(int64_t mode) {
  if (mode < 0 || mode > 4 || mode == 2)
    Fail(ErrorKind::kInvalidArgument,
         "auto_recomputation {}: 0 none, 1 standard, 3 pipeline or 4 all (2, norm only, is not "
         "implemented)",
         mode);
  return {.enabled = mode != 0, .all = mode >= 3};
}

void ValidatePrecisionName(const std::string& name, const std::string& option) {
  for (const char* known : {"float32", "fp32", "bfloat16", "bf16", "float16", "fp16", "half"})
    if (name == known) return;
  Fail(ErrorKind::kInvalidArgument,
       "{}: precision '{}' is not one of 'float32', 'bfloat16', 'float16' or 'half' (bfloat16 "
       "where the CPU multiplies it, else float16)",
       option, name);
}

void PrecisionSettings::Validate(const std::string& option) const {
  ValidatePrecisionName(compute, option);
  for (int k = 0; k < 3; ++k) {
    if (accl_types[k] != "FLOAT" && accl_types[k] != "FLOAT16")
      Fail(ErrorKind::kInvalidArgument, "accl{}_type must be 'FLOAT' or 'FLOAT16', got '{}'", k + 1,
           accl_types[k]);
  }
}

void LossScalingSettings::Validate() const {
  if (dynamic && automatic)
    Fail(ErrorKind::kInvalidArgument,
         "dynamic_loss_scaling and automatic_loss_scaling_settings.enabled both steer the loss "
         "scale: choose one");
  if (automatic && (update_period < 1 || !(threshold_upper_count_proportion >= 0 &&
                                           threshold_upper_count_proportion < 1)))
    Fail(ErrorKind::kInvalidArgument,
         "automatic loss scaling needs update_period >= 1 ({}) and 0 <= "
         "threshold_upper_count_proportion < 1 ({})",
         update_period, threshold_upper_count_proportion);
  if (steers() && (incr_every_n_steps < 1 || decr_every_n_nan_or_inf < 1 || !(incr_ratio > 1) ||
                   !(decr_ratio > 0 && decr_ratio < 1)))
    Fail(ErrorKind::kInvalidArgument,
         "dynamic loss scaling needs incr_every_n_steps >= 1 ({}), decr_every_n_nan_or_inf >= 1 "
         "({}), incr_ratio > 1 ({}) and 0 < decr_ratio < 1 ({})",
         incr_every_n_steps, decr_every_n_nan_or_inf, incr_ratio, decr_ratio);
  if (counts_gradients() && !(bin_edge_location > 0 && bin_edge_location <= 1))
    Fail(ErrorKind::kInvalidArgument, "bin_edge_location must be in (0, 1], got {}",
         bin_edge_location);
  if (!(scale > 0) || !std::isfinite(scale))
    Fail(ErrorKind::kInvalidArgument, "loss scaling must be a finite number > 0, got {}", scale);
}

}  // namespace tiller
