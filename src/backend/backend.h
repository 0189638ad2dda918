// The backend interface: what the compiler and the runtime need from a kind
// of hardware, and nothing more. A Backend (the CPU, a test backend, later
// CUDA) registers once per process and hands out Devices; a Device owns its
// execution resources (threads, engine, streams) and its memory: nothing is
// process-wide. Kernels come from the kernel registry (kernel.h), keyed by
// (backend, op type) and picked by dtype signature.
//
//   backend::Backend* cpu = backend::FindBackend("cpu");
//   auto dev = cpu->CreateDevice(0, {.threads = 2});
//   auto kernel = cpu->CreateKernel(op, *dev);        // at compile time
//   dev->stream().Submit([&] { kernel->Run(args); });  // at run time
//   dev->stream().Synchronize();
//
// How to add a backend: docs/ARCHITECTURE.md, "Adding a backend".
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tiller::passes {
class PassPipeline;
}  // namespace tiller::passes

namespace tiller::backend {

class Backend;
class Collective;
class Kernel;

// A queue of work on one device: items run one at a time, in submission
// order, on the device's own execution resources.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual void Submit(std::function<void()> work) = 0;
  // Like Submit, with `threads` execution threads for this item instead of
  // the device's own, where the backend can (the CPU: its OpenMP team).
  // For a caller that knows other devices' threads are idle meanwhile: a
  // step whose devices run one at a time lends the idle devices' cores to
  // the one working, so the threads in use never exceed the devices' sum.
  // Only these items (runs) may run with fewer threads under contention
  // (DeviceOptions::adapt_to_contention); Submit's (building kernels, which
  // fixes their work split) always get the device's threads.
  virtual void SubmitWithThreads(std::function<void()> work, int threads) {
    (void)threads;
    Submit(std::move(work));
  }
  // Waits for everything submitted so far. If an item threw, rethrows the
  // first exception (tiller::Error keeps its kind); items queued after it
  // were skipped.
  virtual void Synchronize() = 0;
};

// A point in a stream that others can wait for (cross-device ordering).
class Event {
 public:
  virtual ~Event() = default;
  // Marks the current end of `stream`.
  virtual void Record(Stream& stream) = 0;
  // Blocks the calling thread until the recorded point is reached.
  virtual void Wait() = 0;
};

// Device memory: `data` is what kernels of the device are handed.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* data() = 0;
  virtual size_t size() const = 0;
};

struct DeviceOptions {
  int threads = 1;          // execution threads (CPU: the size of its OpenMP team)
  size_t memory_bytes = 0;  // memory the device may use; 0: the backend's default
  // Run with fewer threads while other work competes for the CPUs (CPU:
  // cpu_backend.h's WorkerStream). Only for a device whose runs never wait
  // on another device (a collective, a pipeline stage), which would read as
  // contention.
  bool adapt_to_contention = false;
  // Which of the backend's hardware units: the text after the backend's
  // name in a device name ("cuda:1" -> "1", "cuda:0.1" -> "0.1": GPU 0's
  // second logical device); "": the backend's default.
  std::string unit = {};
  // After its work runs out, keep the device's threads spinning this long
  // (ms), so that work arriving after a short idle gap finds them awake
  // (CPU: WorkerStream's keep-warm; TILLER_KEEP_WARM_MS overrides). 0: they
  // sleep at once, as for a device that waits on others between its runs.
  int keep_warm_ms = 0;
};
// The longest keep-warm window a setting may ask for (ms).
inline constexpr int kMaxKeepWarmMs = 10000;

// What a device offers the compiler, gathered once per compile: the
// generic passes decide from it (half and int8 GEMMs for mixed precision
// and the int8 passes, host memory for copies), and its backend's own
// passes (Backend::AddPasses) from the fields it filled in.
struct DeviceCaps {
  std::string backend;  // the backend's registry name: "cpu"
  std::string name;     // the device's: "cpu:0"
  size_t memory_bytes = 0;
  bool host_accessible = false;
  int threads = 1;
  // GEMM operand types the device multiplies (matmul with a float32
  // result): float32 always where matmul runs, bfloat16 / float16 where a
  // kernel for them is registered; int8: linear_int8's exact int32 sums.
  // How fast it multiplies each is Device::GemmGflops, measured when asked
  // rather than here: these caps are gathered for every compile.
  std::vector<DType> gemm_types;
  bool int8_gemm = false;
  // The channel block of the activation layout its float32 convolutions run
  // fastest on: 8 for [N, C / 8, H, W, 8], 0 for channel-last.
  int conv_channel_block = 0;
  // Rewrites its backend may add for it (Backend::AddPasses), by pass name.
  std::vector<std::string> fusions;

  bool multiplies(DType t) const {
    return std::find(gemm_types.begin(), gemm_types.end(), t) != gemm_types.end();
  }
  bool fuses(const std::string& pass) const {
    return std::find(fusions.begin(), fusions.end(), pass) != fusions.end();
  }
};

// The compile settings a backend's passes read (compile::CompileOptions
// holds them; the backend layer does not see it).
struct BackendPassSettings {
  bool optimize = true;       // the optimization passes run at all
  bool conv_winograd = true;  // Winograd's algorithm for eligible convolutions
  // The blocked activation layout: -1 each device's caps decide, 0 never,
  // 8 always.
  int conv_channel_block = -1;
};

class Device {
 public:
  Device(const Backend& backend, int ordinal) : backend_(backend), ordinal_(ordinal) {}
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Backend& backend() const { return backend_; }
  int ordinal() const { return ordinal_; }
  std::string name() const;  // "cpu:0"

  virtual size_t capacity_bytes() const = 0;
  // Whether the device's memory is ordinary host memory the host (and other
  // host-accessible devices) may read and write directly.
  virtual bool host_accessible() const = 0;
  virtual int threads() const { return 1; }
  // What the compiler may assume of the device (see DeviceCaps). The base
  // fills the generic fields from the methods above and the backend's
  // kernels; a backend overrides it to add its layouts and fusions.
  virtual DeviceCaps caps() const;
  // How fast the device multiplies `type` operands into a float32 result
  // (matmul{out_dtype float32}; int8: linear_int8), in GFLOP/s (int8:
  // GOP/s) with its threads, measured on the device's own kernels. It is
  // what the compiler and the runtime decide precision from, since having a
  // half GEMM is not the same as its being faster than float32 (an Intel
  // Xeon with AVX512_BF16 but no AMX multiplied bfloat16 at 0.7x float32);
  // today the runtime reports a half type measured slower
  // (runtime/precision.cc). A CUDA backend would report its tensor cores'
  // rates here. 0: not measured (the
  // default), or no GEMM of that type on the device. Measured lazily, on
  // first use, since it takes a backend tens of milliseconds that most
  // compiles never need (so it is no DeviceCaps field); a backend caches it
  // (the CPU: per thread count and type, for the process) and answers from
  // any thread.
  virtual double GemmGflops(DType type) const { return 0; }
  virtual std::unique_ptr<Buffer> Allocate(size_t bytes) = 0;
  virtual Stream& stream() = 0;
  virtual std::unique_ptr<Event> CreateEvent() = 0;
  // Synchronous copies between host memory and this device's memory.
  virtual void CopyFromHost(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual void CopyToHost(void* host_dst, const void* device_src, size_t bytes) = 0;
  // Copies `bytes` from `src` (memory of device `from`) into `dst` (this
  // device's memory), synchronously. The default stages through the host;
  // backends override it where the hardware has a direct path.
  virtual void CopyFrom(Device& from, const void* src, void* dst, size_t bytes);

  // The replica group the device's work belongs to (collective ops such as
  // all_reduce run on it) and the device's rank there; none by default.
  void JoinReplicaGroup(Collective* group, int rank) {
    replica_group_ = group;
    replica_rank_ = rank;
  }
  Collective* replica_group() const { return replica_group_; }
  int replica_rank() const { return replica_rank_; }

 private:
  const Backend& backend_;
  int ordinal_;
  Collective* replica_group_ = nullptr;
  int replica_rank_ = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The registry key and the spelling in device names and options: "cpu".
  virtual const std::string& name() const = 0;
  // How messages name it: "CPU".
  virtual std::string display_name() const { return name(); }
  virtual std::unique_ptr<Device> CreateDevice(int ordinal, const DeviceOptions& options) const = 0;

  // Whether a kernel is registered for the op's type and dtypes: nullopt,
  // or the reason it is not ("no test kernel for op gelu", "dtype ...").
  // Cheap: the compiler asks it for every op when placing.
  std::optional<std::string> Supports(const ir::Op& op) const;
  // The op's kernel for `device`; throws kUnimplemented with the reason.
  std::unique_ptr<Kernel> CreateKernel(const ir::Op& op, Device& device) const;
  // Whether a GEMM of `type` operands with a float32 result (matmul{out_dtype
  // float32}) is registered; int8: linear_int8.
  bool MultipliesIn(DType type) const;

  // Appends this backend's own passes (its fusions, algorithm and layout
  // choices) to the compile's rewrite pipeline, after the generic ones;
  // `devices` are the caps of every device of the compile (all backends'),
  // so a rewrite that would not suit another device's kernels can stay out.
  // Each entry names the generic passes it must follow
  // (passes::PassPipeline::After). The default adds none.
  virtual void AddPasses(passes::PassPipeline& pipeline, const std::vector<DeviceCaps>& devices,
                         const BackendPassSettings& settings) const {}
};

// Backends register from a static initializer next to their code (the CPU
// backend in backends/cpu, test backends in tests/); names are unique.
bool RegisterBackend(std::unique_ptr<Backend> backend);
// nullptr when none is registered under `name`.
Backend* FindBackend(const std::string& name);
std::vector<std::string> BackendNames();

// A buffer of plain host memory (for host-accessible backends).
class HostBuffer : public Buffer {
 public:
  explicit HostBuffer(size_t bytes);
  ~HostBuffer() override;
  void* data() override { return data_; }
  size_t size() const override { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A stream that runs each item on the calling thread, at Submit.
class InlineStream : public Stream {
 public:
  void Submit(std::function<void()> work) override;
  void Synchronize() override;

 private:
  std::exception_ptr error_;
};

// An event for streams that finish work before Submit returns.
class CompletedEvent : public Event {
 public:
  void Record(Stream&) override {}
  void Wait() override {}
};

}  // namespace tiller::backend
