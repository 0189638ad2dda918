#include "runtime/micro_batches.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/rank_barrier.h"

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

namespace {

// Threads that run replicas 1 .. n - 1 of every step (the caller runs
// replica 0), kept between steps: starting a thread per replica per step
// cost a replicated step its threads' start-up and first-touch of their
// stacks every time. Between steps a worker spins briefly (when the
// replicas fit the CPUs) and then sleeps, as the collectives' barrier does.
class ReplicaThreads {
 public:
  ~ReplicaThreads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // fn(r) for every r in [0, n), fn(0) on the calling thread; fn must not
  // throw.
  void Run(int n, const std::function<void(int)>& fn) {
    while (static_cast<int>(threads_.size()) < n - 1) {
      const int index = static_cast<int>(threads_.size()) + 1;
      threads_.emplace_back([this, index] { Work(index); });
    }
    spin_ = n <= backend::UsableCpus();
    {
      std::lock_guard<std::mutex> lock(mu_);
      task_ = &fn;
      n_ = n;
      remaining_.store(n - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    fn(0);
    if (spin_)
      backend::SpinUntil([&] { return remaining_.load(std::memory_order_acquire) == 0; }, kSpin);
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return remaining_.load(std::memory_order_acquire) == 0; });
  }

 private:
  static constexpr std::chrono::microseconds kSpin{200};

  void Work(int index) {
    int64_t seen = 0;
    for (;;) {
      if (spin_)
        backend::SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen; },
                           kSpin);
      const std::function<void(int)>* task = nullptr;
      int n = 0;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
        seen = generation_.load(std::memory_order_relaxed);
        if (stop_) return;
        task = task_;
        n = n_;
      }
      if (index >= n) continue;
      (*task)(index);
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // the caller is waiting or about to
        done_.notify_all();
      }
    }
  }

  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::atomic<int64_t> generation_{0};
  std::atomic<int> remaining_{0};
  std::atomic<bool> spin_{false};
  const std::function<void(int)>* task_ = nullptr;
  int n_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// The calling thread's pool. A forked child has none of its parent's
// threads: it starts a pool of its own (the parent's stays unjoined).
ReplicaThreads& ThreadsOfCaller() {
  thread_local std::unique_ptr<ReplicaThreads> pool;
  thread_local pid_t owner = 0;
  if (!pool || owner != getpid()) {
    if (pool && owner != getpid()) (void)pool.release();  // a fork's copy: its threads are gone
    pool = std::make_unique<ReplicaThreads>();
    owner = getpid();
  }
  return *pool;
}

}  // namespace

ReplicaFailure RunReplicas(int n, const std::function<void(int)>& fn,
                           const std::function<void(int)>& on_failure) {
  ReplicaFailure failure;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::atomic<int> first{-1};
  auto guarded = [&](int r) {
    try {
      fn(r);
    } catch (...) {
      errors[static_cast<size_t>(r)] = std::current_exception();
      int none = -1;
      first.compare_exchange_strong(none, r);
      if (on_failure) on_failure(r);
    }
  };
  // A replica that runs replicas itself (a predictor inside a custom op)
  // gets threads of its own: the caller's pool is busy with it.
  thread_local bool busy = false;
  if (n == 1) {
    guarded(0);
  } else if (!busy) {
    busy = true;
    ThreadsOfCaller().Run(n, guarded);
    busy = false;
  } else {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) threads.emplace_back(guarded, r);
    for (std::thread& t : threads) t.join();
  }
  if (first >= 0) failure = {first, errors[static_cast<size_t>(first)]};
  return failure;
}

}  // namespace tiller::runtime
