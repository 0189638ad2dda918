// RunReplicas (runtime/micro_batches.h): every replica runs once per call,
// concurrently, on threads the calling thread keeps between calls; what a
// replica wrote is visible to the caller when the call returns; the first
// failure comes back with its replica after every replica ended; a replica
// that runs replicas itself gets threads of its own.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/micro_batches.h"

namespace tiller::runtime {
namespace {

TEST(ReplicaThreads, EveryReplicaRunsOncePerCallOnThreadsKeptBetweenCalls) {
  constexpr int kReplicas = 3, kCalls = 200;
  std::vector<int> runs(kReplicas, 0);  // plain ints: each written by one replica
  std::vector<std::set<std::thread::id>> threads(kReplicas);
  for (int call = 0; call < kCalls; ++call) {
    // The replicas meet, so they run at once, not one after another.
    std::atomic<int> arrived{0};
    ReplicaFailure f = RunReplicas(kReplicas, [&](int r) {
      ++arrived;
      while (arrived.load() < kReplicas) std::this_thread::yield();
      ++runs[r];
      threads[r].insert(std::this_thread::get_id());
    });
    ASSERT_EQ(f.replica, -1);
  }
  for (int r = 0; r < kReplicas; ++r) {
    EXPECT_EQ(runs[r], kCalls) << "replica " << r;
    EXPECT_EQ(threads[r].size(), 1u) << "replica " << r << " changed threads";
  }
  EXPECT_EQ(*threads[0].begin(), std::this_thread::get_id());  // replica 0: the caller
  // Fewer replicas next: the pool's extra thread sits it out.
  std::vector<int> two(2, 0);
  EXPECT_EQ(RunReplicas(2, [&](int r) { ++two[r]; }).replica, -1);
  EXPECT_EQ(two, (std::vector<int>{1, 1}));
}

TEST(ReplicaThreads, TheFirstFailureComesBackAfterEveryReplicaEnded) {
  std::atomic<int> ended{0}, aborted{0};
  ReplicaFailure f = RunReplicas(
      3,
      [&](int r) {
        if (r == 1) throw std::runtime_error("replica 1 broke");
        ++ended;
      },
      [&](int r) { aborted += r == 1; });
  EXPECT_EQ(f.replica, 1);
  ASSERT_TRUE(f.error);
  EXPECT_THROW(std::rethrow_exception(f.error), std::runtime_error);
  EXPECT_EQ(ended.load(), 2);
  EXPECT_EQ(aborted.load(), 1);
  // The pool is usable again.
  std::atomic<int> again{0};
  EXPECT_EQ(RunReplicas(3, [&](int) { ++again; }).replica, -1);
  EXPECT_EQ(again.load(), 3);
}

TEST(ReplicaThreads, AReplicaThatRunsReplicasGetsThreadsOfItsOwn) {
  std::atomic<int> inner{0};
  ReplicaFailure f =
      RunReplicas(2, [&](int) { EXPECT_EQ(RunReplicas(2, [&](int) { ++inner; }).replica, -1); });
  EXPECT_EQ(f.replica, -1);
  EXPECT_EQ(inner.load(), 4);
}

}  // namespace
}  // namespace tiller::runtime
