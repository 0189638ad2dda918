// include/tiller/option_groups.h: each group's checks, in one place for
// every option set that holds the group.
#include "tiller/option_groups.h"

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

}  // namespace tiller
