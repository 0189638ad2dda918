// The CPU backend: devices are teams of OpenMP threads on this machine's
// cores, with host memory. Each CpuDevice owns a worker thread that runs
// everything submitted to its stream with the device's thread count (the
// OpenMP setting is per thread, so devices do not disturb each other or the
// caller) and its own oneDNN engine and stream.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "backend/backend.h"
#include "backends/cpu/dnnl_context.h"

namespace tiller::cpu {

// Runs submitted work, in order, on one thread of its own.
//
// The worker's OpenMP team outlives each item (libgomp keeps a pool per
// thread). libgomp counts the pool threads of every team in the process, and
// once they outnumber the CPUs it stops spinning between parallel regions and
// sleeps in the kernel instead, which slows every team - the active one too -
// by tens of percent on a model of many small kernels (two 2-thread
// predictors on a 2-core machine: BERT at batch 1 ran 50-80% slower). So a
// worker that has been idle for kPoolIdleRelease while the process's Tiller
// teams hold more threads than the machine has CPUs releases its pool; the
// next item starts a new one (one thread creation per team thread).
class WorkerStream : public backend::Stream {
 public:
  explicit WorkerStream(int threads);
  ~WorkerStream() override;
  void Submit(std::function<void()> work) override;
  void SubmitWithThreads(std::function<void()> work, int threads) override;
  void Synchronize() override;

  // How long an idle worker keeps its OpenMP team when the process's teams
  // oversubscribe the CPUs (libgomp itself spins about 3 ms before sleeping).
  static constexpr std::chrono::milliseconds kPoolIdleRelease{10};
  // OpenMP pool threads the process's workers hold now (their teams' sizes
  // less the workers themselves).
  static int PooledThreads();

 private:
  struct Item {
    std::function<void()> work;
    int threads;  // the OpenMP team size while it runs
  };
  void Loop();
  // Notes that this worker's team now has `threads` threads.
  void SetTeam(int threads);
  // Whether the teams of all workers hold more threads than there are CPUs.
  static bool Oversubscribed();

  int threads_;
  int team_ = 1;  // the worker's OpenMP team size as libgomp keeps it
  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<Item> queue_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

class CpuDevice : public backend::Device {
 public:
  CpuDevice(const backend::Backend& backend, int ordinal, const backend::DeviceOptions& options);
  size_t capacity_bytes() const override { return capacity_; }
  bool host_accessible() const override { return true; }
  int threads() const override { return threads_; }
  std::unique_ptr<backend::Buffer> Allocate(size_t bytes) override;
  backend::Stream& stream() override { return stream_; }
  std::unique_ptr<backend::Event> CreateEvent() override;
  void CopyFromHost(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  Dnnl& dnnl() { return dnnl_; }

 private:
  int threads_;
  size_t capacity_;
  Dnnl dnnl_;
  WorkerStream stream_;
};

// The CPU backend object (registered as "cpu").
const backend::Backend& CpuBackend();

}  // namespace tiller::cpu
