// A training run's data around its compiled steps: synthetic feeds
// (SessionOptions::synthetic_data_mode), the non-finite feed a failed check
// names, and the fetches reduced to what the anchor returns
// (SessionOptions::anchor). Micro-batches are in feed order: batch, then
// accumulation, then replica (runtime/micro_batches.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compile/executable.h"
#include "core/aligned_buffer.h"
#include "runtime/feeds.h"
#include "tiller/training.h"

namespace tiller::runtime {

// Writes exe's feed inputs (the first feeds.size()) as `options`'
// synthetic_data_mode says: zeros, or normal draws for float feeds, a
// stream per (random_seed, step_index, feed), instead of the fed values.
void FillSyntheticFeeds(const FeedSet& feeds, const training::SessionOptions& options,
                        compile::Executable& exe, int64_t step_index);

// "; feed 'x' holds nan at element e [of micro-batch k]" for the first
// non-finite float in micro-batch k of the `n` in the feeds, or "".
std::string NonFiniteFeed(const FeedSet& feeds, int n, int k);

// Reduces every micro-batch's fetches (`fetched`, micro-batch order; exe's
// outputs give a micro-batch's type) to what options.anchor returns, and
// sets `fetch_types` to its shape.
void ApplyAnchors(const training::SessionOptions& options, const compile::Executable& exe,
                  const std::vector<std::string>& fetch_names, std::vector<AlignedBuffer>& fetched,
                  std::vector<ir::TensorType>& fetch_types);

}  // namespace tiller::runtime
