#include "runtime/micro_batches.h"

#include <atomic>
#include <cstring>
#include <thread>

namespace tiller::runtime {

void CopyMicroBatchIn(const FeedSet& feeds, int k, int micro_batches, compile::Executable& exe) {
  for (size_t i = 0; i < feeds.size(); ++i) {
    const AlignedBuffer& data = feeds.data(i);
    const size_t bytes = data.size() / static_cast<size_t>(micro_batches);
    if (bytes) std::memcpy(exe.inputs()[i].data, data.data() + k * bytes, bytes);
  }
}

void CopyMicroBatchOut(const compile::Executable& exe, int k, std::vector<AlignedBuffer>& outputs) {
  for (size_t o = 0; o < outputs.size(); ++o) {
    const compile::TensorSlot& slot = exe.outputs()[o];
    const size_t bytes = slot.type.bytes();
    if (bytes) std::memcpy(outputs[o].data() + k * bytes, slot.data, bytes);
  }
}

ReplicaFailure RunReplicas(int n, const std::function<void(int)>& fn,
                           const std::function<void(int)>& on_failure) {
  ReplicaFailure failure;
  if (n == 1) {
    try {
      fn(0);
    } catch (...) {
      failure = {0, std::current_exception()};
      if (on_failure) on_failure(0);
    }
    return failure;
  }
  std::vector<std::exception_ptr> errors(n);
  std::atomic<int> first{-1};
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[r] = std::current_exception();
        int none = -1;
        first.compare_exchange_strong(none, r);
        if (on_failure) on_failure(r);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (first >= 0) failure = {first, errors[first]};
  return failure;
}

}  // namespace tiller::runtime
