// The CPU backend: devices are teams of OpenMP threads on this machine's
// cores, with host memory. Each CpuDevice owns a worker thread that runs
// everything submitted to its stream with the device's thread count (the
// OpenMP setting is per thread, so devices do not disturb each other or the
// caller) and its own oneDNN engine and stream.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "backend/backend.h"
#include "backends/cpu/dnnl_context.h"

namespace tiller::cpu {

// Runs submitted work, in order, on one thread of its own.
class WorkerStream : public backend::Stream {
 public:
  explicit WorkerStream(int threads);
  ~WorkerStream() override;
  void Submit(std::function<void()> work) override;
  void SubmitWithThreads(std::function<void()> work, int threads) override;
  void Synchronize() override;

 private:
  struct Item {
    std::function<void()> work;
    int threads;  // the OpenMP team size while it runs
  };
  void Loop();

  int threads_;
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
