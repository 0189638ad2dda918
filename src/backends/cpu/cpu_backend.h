// The CPU backend: devices are teams of OpenMP threads on this machine's
// cores, with host memory. Each CpuDevice owns a worker thread that runs
// everything submitted to its stream with the device's thread count (the
// OpenMP setting is per thread, so devices do not disturb each other or the
// caller) and its own oneDNN engine and stream.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
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
//
// Contention (adapt_to_contention): a team whose threads share the CPUs
// with other busy processes waits, at every parallel region's barrier, for
// whichever of its threads the scheduler left out: BERT-Base at batch 1 on
// 2 threads ran 2.9x slower next to one busy process, 1.6x on 1 thread.
// So the worker times each run (a SubmitWithThreads item; kernels are
// built with the full team, as they fix their work split then) that it
// runs with the full team: when its own thread got less than
// kContendedShare of the run's wall time on a CPU
// (alone it gets all of it: libgomp spins at barriers), the next
// kProbeEvery items run with half the team, then one with the full team
// measures again. Short items (< kMinMeasured) tell nothing and are not
// measured. When the first halved item is slower than the full-team one
// before it (kernels that keep the thread count they were
// built with start full teams beside the halved pool: ResNet-50 ran slower
// so before its convolutions got half-team primitives), the next
// kSkipHalvingAfterNoGain items keep the full team.
// TILLER_ADAPTIVE_THREADS=0 turns it off.
//
// Keeping warm: a worker whose queue runs empty after a run (not after
// kernel building) keeps itself and its pool threads spinning (one
// parallel region of pause loops that yield the CPU every 64 pauses, so
// that a thread with work - the caller's, another process's - gets it)
// for keep_warm_ (DeviceOptions::keep_warm_ms: a lone
// predictor's device 100 ms, others 0; TILLER_KEEP_WARM_MS overrides both),
// unless the process's teams oversubscribe the CPUs. Threads asleep in the
// kernel made every request after an idle gap slow, not only its first
// parallel region: MobileNetV3 at batch 1 took 9.9-13.9 ms after 50 ms idle
// and 16 ms after 200 ms, 2.9 ms back to back; with 100 ms of keep-warm
// 4.0 and 4.7 ms (2 threads, Xeon with AMX). The price is the team's CPUs
// busy for up to keep_warm_ after each request, as Intel's OpenMP keeps
// its threads for KMP_BLOCKTIME (200 ms by default).
class WorkerStream : public backend::Stream {
 public:
  explicit WorkerStream(int threads, bool adapt_to_contention = false, int keep_warm_ms = 0);
  ~WorkerStream() override;
  void Submit(std::function<void()> work) override;
  void SubmitWithThreads(std::function<void()> work, int threads) override;
  void Synchronize() override;

  // How long an idle worker keeps its OpenMP team when the process's teams
  // oversubscribe the CPUs (libgomp itself spins about 3 ms before sleeping).
  static constexpr std::chrono::milliseconds kPoolIdleRelease{10};
  static constexpr double kContendedShare = 0.8;
  static constexpr int kProbeEvery = 3;
  static constexpr int kSkipHalvingAfterNoGain = 50;
  static constexpr std::chrono::microseconds kMinMeasured{2000};
  // OpenMP pool threads the process's workers hold now (their teams' sizes
  // less the workers themselves).
  static int PooledThreads();

 private:
  struct Item {
    std::function<void()> work;
    int threads;      // the OpenMP team size while it runs
    bool may_shrink;  // a run (SubmitWithThreads), not kernel building
  };
  void Enqueue(Item item);
  void Loop();
  // Spins the team until work comes or keep_warm_ passes (class comment).
  void SpinWhileIdle();
  // Notes that this worker's team now has `threads` threads.
  void SetTeam(int threads);
  // Whether the teams of all workers hold more threads than there are CPUs.
  static bool Oversubscribed();
  // The team an item asking for `threads` runs with now (see the class
  // comment), and what its run says about contention.
  int ChooseTeam(int threads);
  void NoteRun(int team, int threads, std::chrono::nanoseconds wall, std::chrono::nanoseconds cpu);

  int threads_;
  bool adapt_;
  std::chrono::milliseconds keep_warm_;
  std::atomic<int> pending_{0};  // queue_.size() (and 1 more when stopping), read without mu_
  bool contended_ = false;       // the last full-team item measured contention
  int reduced_items_ = 0;        // items run with half the team since
  bool compare_next_ = false;    // the next halved item is compared with full_wall_
  std::chrono::nanoseconds full_wall_{0};  // the last measured full-team item
  int skip_halving_ = 0;  // items left that keep the full team after a halving without gain
  int team_ = 1;          // the worker's OpenMP team size as libgomp keeps it
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
  // The generic caps, its convolutions' preferred layout and the fusions
  // of its own kernels (backends/cpu/passes/).
  backend::DeviceCaps caps() const override;
  // Times x [128, 768] times W [768, 3072] (BERT-Base's feed-forward GEMM at
  // 128 tokens) with the kernel a compile would pick for it (W a constant,
  // prepacked; bfloat16 operands as the mixed-precision pass leaves them),
  // best of three runs after a warm-up: tens of milliseconds per type on
  // one thread. It runs on a device of its own with this one's thread
  // count, so this device's stream and the work queued there are left
  // alone; measured once per process for each thread count and type.
  double GemmGflops(DType type) const override;
  std::unique_ptr<backend::Buffer> Allocate(size_t bytes) override;
  backend::Stream& stream() override { return stream_; }
  std::unique_ptr<backend::Event> CreateEvent() override;
  void CopyFromHost(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  Dnnl& dnnl() { return dnnl_; }
  // A second worker, for collectives that run while the device computes
  // (all_reduce_start): one thread, FIFO, so every rank issues its
  // reductions in program order. Made on first use.
  WorkerStream& collective_stream();

 private:
  int threads_;
  size_t capacity_;
  Dnnl dnnl_;
  WorkerStream stream_;
  std::once_flag collective_once_;
  std::unique_ptr<WorkerStream> collective_stream_;
};

// The CPU device `device` is (a kernel's device); fails for another kind.
CpuDevice& CpuDeviceOf(backend::Device& device);

// The CPU backend object (registered as "cpu").
const backend::Backend& CpuBackend();

}  // namespace tiller::cpu
