// The IPU execution model's plumbing shared by the training session and the
// predictor: a run's feeds hold K micro-batches along their first dimension
// (batch outermost, replica innermost); each replica's executable gets its
// micro-batches' rows, and their outputs go back to their places in the
// run's results. Replicas run at once, one host thread each.
#pragma once

#include <exception>
#include <functional>
#include <vector>

#include "compile/executable.h"
#include "core/aligned_buffer.h"
#include "runtime/feeds.h"

namespace tiller::runtime {

// Copies micro-batch k of `micro_batches` of every feed into exe's first
// feeds.size() inputs.
void CopyMicroBatchIn(const FeedSet& feeds, int k, int micro_batches, compile::Executable& exe);

// Copies exe's first outputs.size() outputs to micro-batch k's place in
// `outputs` (each holding every micro-batch's value).
void CopyMicroBatchOut(const compile::Executable& exe, int k, std::vector<AlignedBuffer>& outputs);

// Runs fn(r) for every r in [0, n), at once: r = 0 on the calling thread,
// the others on threads the calling thread keeps for its later runs. When one throws, on_failure(r) runs on its
// thread right away (to abort the collectives the others wait in) and,
// after every thread has ended, the first failure is returned (r and its
// exception); none: r = -1.
struct ReplicaFailure {
  int replica = -1;
  std::exception_ptr error;
};
ReplicaFailure RunReplicas(int n, const std::function<void(int)>& fn,
                           const std::function<void(int)>& on_failure = {});

}  // namespace tiller::runtime
