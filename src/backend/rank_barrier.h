// The meeting point of a collective's ranks that are threads of one process
// (backend/collective.h): every rank waits until all have arrived; Abort
// wakes the waiters, whose pending and later waits throw, until Reset.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

namespace tiller::backend {

class RankBarrier {
 public:
  // spin: waiters spin briefly before sleeping (ranks that fit the CPUs).
  RankBarrier(int ranks, bool spin) : ranks_(ranks), spin_(spin) {}
  int ranks() const { return ranks_; }
  // Returns when all ranks have called it; throws kInternal "<why>" once
  // aborted.
  void Wait();
  void Abort(const std::string& why);
  void Reset();

 private:
  static constexpr std::chrono::microseconds kSpin{100};
  const int ranks_;
  const bool spin_;
  std::mutex mu_;
  std::condition_variable wake_;
  int arrived_ = 0;
  std::atomic<int64_t> generation_{0};
  bool aborted_ = false;
  std::string why_;
};

// Spins, pausing the CPU between tests, until done() or `limit` has
// passed; returns done(). For waits that are usually short: a sleeping
// thread's wake-up costs 70-115 us on the project's VMs.
template <typename Done>
bool SpinUntil(Done done, std::chrono::microseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  do {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
    }
  } while (std::chrono::steady_clock::now() < until);
  return done();
}

// The CPUs this process may run on (its affinity mask, as taskset and
// container limits set it).
int UsableCpus();

}  // namespace tiller::backend
