#include "backends/cpu/cpu_backend.h"

#include <omp.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <utility>

#include "backends/cpu/kernel.h"
#include "backends/cpu/passes/cpu_passes.h"
#include "core/aligned_buffer.h"
#include "core/cpu_isa.h"
#include "core/error.h"
#include "core/half.h"
#include "core/memory_cap.h"

namespace tiller::cpu {
namespace {

class CpuBackendImpl : public backend::Backend {
 public:
  const std::string& name() const override {
    static const std::string n = "cpu";
    return n;
  }
  std::string display_name() const override { return "CPU"; }
  std::unique_ptr<backend::Device> CreateDevice(
      int ordinal, const backend::DeviceOptions& options) const override {
    CheckCpuIsa();  // a TILLER_MAX_ISA or a CPU this build cannot honour
    return std::make_unique<CpuDevice>(*this, ordinal, options);
  }
  void AddPasses(passes::PassPipeline& pipeline, const std::vector<backend::DeviceCaps>& devices,
                 const backend::BackendPassSettings& settings) const override {
    AddCpuPasses(pipeline, devices, settings);
  }
};

// Signalled when the stream's work up to Record() has run.
class WorkerEvent : public backend::Event {
 public:
  void Record(backend::Stream& stream) override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->done = false;
    }
    auto state = state_;
    stream.Submit([state] {
      std::lock_guard<std::mutex> lock(state->mu);
      state->done = true;
      state->cv.notify_all();
    });
  }
  void Wait() override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->cv.wait(lock, [&] { return state_->done; });
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = true;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

const bool kRegistered = backend::RegisterBackend(std::make_unique<CpuBackendImpl>());

// Pool threads of all workers' OpenMP teams (team size - 1 each).
std::atomic<int> g_pooled_threads{0};

// TILLER_KEEP_WARM_MS when set (0: off), else the device's option.
std::chrono::milliseconds KeepWarm(int option_ms) {
  const char* v = std::getenv("TILLER_KEEP_WARM_MS");
  if (!v || !*v) return std::chrono::milliseconds(std::max(0, option_ms));
  char* end = nullptr;
  const long ms = std::strtol(v, &end, 10);
  if (*end != '\0' || ms < 0 || ms > backend::kMaxKeepWarmMs)
    Fail(ErrorKind::kInvalidArgument,
         "TILLER_KEEP_WARM_MS={}: expected milliseconds from 0 (off) to {}", v,
         backend::kMaxKeepWarmMs);
  return std::chrono::milliseconds(ms);
}

bool AdaptiveThreadsEnabled() {
  const char* v = std::getenv("TILLER_ADAPTIVE_THREADS");
  return !v || std::strcmp(v, "0") != 0;
}

std::chrono::nanoseconds ThreadCpuTime() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

}  // namespace

const backend::Backend& CpuBackend() {
  (void)kRegistered;
  return *backend::FindBackend("cpu");
}

WorkerStream::WorkerStream(int threads, bool adapt_to_contention, int keep_warm_ms)
    : threads_(std::max(1, threads)),
      adapt_(adapt_to_contention && AdaptiveThreadsEnabled()),
      keep_warm_(KeepWarm(keep_warm_ms)) {
  thread_ = std::thread([this] { Loop(); });
}

WorkerStream::~WorkerStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    pending_.fetch_add(1);  // ends a keep-warm spin
  }
  wake_.notify_all();
  thread_.join();
}

int WorkerStream::PooledThreads() {
  return g_pooled_threads.load();
}

bool WorkerStream::Oversubscribed() {
  // libgomp's own test: its managed threads (the process's first thread and
  // every pool thread) against the CPUs this process may run on.
  return 1 + g_pooled_threads.load() > omp_get_num_procs();
}

int WorkerStream::ChooseTeam(int threads) {
  if (!adapt_ || threads <= 1) return threads;
  if (skip_halving_ > 0) {
    --skip_halving_;
    return threads;
  }
  if (!contended_ || reduced_items_ >= kProbeEvery) return threads;
  ++reduced_items_;
  return std::max(1, threads / 2);
}

void WorkerStream::NoteRun(int team, int threads, std::chrono::nanoseconds wall,
                           std::chrono::nanoseconds cpu) {
  if (!adapt_ || threads <= 1 || wall < kMinMeasured) return;
  if (team == threads) {
    contended_ =
        static_cast<double>(cpu.count()) < kContendedShare * static_cast<double>(wall.count());
    reduced_items_ = 0;
    full_wall_ = wall;
    compare_next_ = contended_;
  } else if (compare_next_) {
    // The first halved item of an episode against the full-team item that
    // started it (a server's consecutive runs are alike). Kernels that fixed
    // their thread count when they were built (oneDNN primitives without a
    // half-team twin) still start full teams, now beside a smaller pool: no
    // gain, or a loss.
    // Slower only: the full team's runs next to a busy process vary 1-2x
    // from run to run (ResNet-50 batch 1 on AMD Zen 3: 91-207 ms, one
    // thread a steady 92), so a halved run that merely failed to beat the
    // one full-team sample gave halving up while it held the median at
    // 1.4x of one thread's.
    compare_next_ = false;
    if (wall > full_wall_) {
      contended_ = false;
      skip_halving_ = kSkipHalvingAfterNoGain;
    }
  }
}

void WorkerStream::SetTeam(int threads) {
  if (threads == team_) return;
  g_pooled_threads += threads - team_;
  team_ = threads;
}

void WorkerStream::Loop() {
  // The OpenMP thread count is a per-thread setting: this sets the team size
  // of every parallel region (ours and oneDNN's) this worker starts.
  omp_set_num_threads(threads_);
  std::unique_lock<std::mutex> lock(mu_);
  const auto has_work = [&] { return stop_ || !queue_.empty(); };
  for (;;) {
    // With a team, wake up every kPoolIdleRelease while idle to check
    // whether other teams have come since (a wake-up costs microseconds).
    if (team_ > 1 && !wake_.wait_for(lock, kPoolIdleRelease, has_work)) {
      if (Oversubscribed()) {
        // Idle, and this team's threads make every team sleep between
        // parallel regions: give them back (see the class comment).
        lock.unlock();
        omp_pause_resource(omp_pause_soft, omp_get_initial_device());
        SetTeam(1);
        lock.lock();
      }
      continue;
    }
    wake_.wait(lock, has_work);
    if (queue_.empty()) break;  // stopping with nothing left
    Item item = std::move(queue_.front());
    queue_.pop_front();
    pending_.fetch_sub(1);
    busy_ = true;
    bool skip = error_ != nullptr;
    lock.unlock();
    std::exception_ptr failed;
    if (!skip) {
      const int team = item.may_shrink ? ChooseTeam(item.threads) : item.threads;
      if (team != threads_) omp_set_num_threads(team);
      // libgomp keeps a pool of the last team's size (it trims a larger one).
      SetTeam(team);
      const auto wall0 = std::chrono::steady_clock::now();
      const auto cpu0 = ThreadCpuTime();
      try {
        item.work();
      } catch (...) {
        failed = std::current_exception();
      }
      if (item.may_shrink)
        NoteRun(team, item.threads, std::chrono::steady_clock::now() - wall0,
                ThreadCpuTime() - cpu0);
      if (team != threads_) omp_set_num_threads(threads_);
    }
    item.work = nullptr;
    lock.lock();
    if (failed && !error_) error_ = failed;
    busy_ = false;
    if (queue_.empty()) {
      idle_.notify_all();
      // After runs only: kernel building (Submit) comes in bursts while the
      // caller's thread compiles, and a team spinning then took CPU from it
      // (BERT-Base's load + compile + first run spent 12% of its CPU time in
      // the spin and libgomp's barrier).
      if (item.may_shrink && keep_warm_.count() > 0 && !stop_ && !Oversubscribed()) {
        lock.unlock();
        SpinWhileIdle();
        lock.lock();
      }
    }
  }
  SetTeam(1);  // the pool ends with this thread
}

void WorkerStream::SpinWhileIdle() {
  // The worker and its pool threads spin in one parallel region until work
  // comes or keep_warm_ has passed; the worker's thread polls the queue's
  // count (and the clock every 64 polls), the others a flag it sets.
  const auto deadline = std::chrono::steady_clock::now() + keep_warm_;
  std::atomic<bool> done{false};
#if defined(__SANITIZE_THREAD__)
  // libgomp's fork and barriers are invisible to ThreadSanitizer, which
  // then reports the region's shared variables as races (CMakeLists.txt
  // keeps its tests to single-thread teams for that reason): under it, only
  // this thread spins.
  const int team = 1;
#else
  const int team = team_;
#endif
#pragma omp parallel num_threads(team)
  {
    if (omp_get_thread_num() == 0) {
      for (unsigned i = 0; pending_.load(std::memory_order_acquire) == 0; ++i) {
        if (i % 64 == 0) {
          if (std::chrono::steady_clock::now() >= deadline) break;
          sched_yield();
        }
        __builtin_ia32_pause();
      }
      done.store(true, std::memory_order_release);
    } else {
      for (unsigned i = 0; !done.load(std::memory_order_acquire); ++i) {
        if (i % 64 == 0) sched_yield();
        __builtin_ia32_pause();
      }
    }
  }
}

void WorkerStream::Submit(std::function<void()> work) {
  Enqueue({std::move(work), threads_, false});
}

void WorkerStream::SubmitWithThreads(std::function<void()> work, int threads) {
  Enqueue({std::move(work), std::max(1, threads), true});
}

void WorkerStream::Enqueue(Item item) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(item));
    pending_.fetch_add(1);
  }
  wake_.notify_one();
}

void WorkerStream::Synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

backend::DeviceCaps CpuDevice::caps() const {
  backend::DeviceCaps c = Device::caps();
  c.conv_channel_block = DnnlConvChannelBlock();
  // On AVX-512, whose 32 registers hold the fused kernels' 4 x 6 tiles
  // (kernels/fused_depthwise.cc, its build's own or its AVX-512 copy). On
  // AVX2 their 2 x 4 tiles ran the 1x1 stages slower than oneDNN's jit_1x1
  // kernels, which run those at the GEMM rate there: MobileNetV3 batch 8
  // took 12% longer fused (AMD Zen 3). The level is the one chosen at run
  // time (TILLER_MAX_ISA caps it), not the build's.
  if (CpuIsa().chosen >= IsaLevel::kAvx512)
    c.fusions = {"fuse_pointwise_depthwise", "fuse_depthwise_pointwise"};
  return c;
}

namespace {

// `n` values value(i) of `type` at `p`.
template <typename F>
void FillAs(void* p, DType type, int64_t n, F value) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = value(i);
    if (type == DType::kBF16)
      static_cast<uint16_t*>(p)[i] = FloatToBF16(v);
    else if (type == DType::kF16)
      static_cast<uint16_t*>(p)[i] = FloatToHalf(v);
    else if (type == DType::kI8)
      static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
    else
      static_cast<float*>(p)[i] = v;
  }
}

// CpuDevice::GemmGflops's measurement, on a device of `threads` of its own.
double MeasureGemmGflops(const backend::Backend& backend, int threads, DType type) {
  constexpr int64_t M = 128, K = 768, N = 3072;
  // Small integers: exact in every operand type, no denormals anywhere.
  const auto w_value = [](int64_t i) { return static_cast<float>(i % 7 - 3); };
  const auto x_value = [](int64_t i) { return static_cast<float>(i % 5 - 2); };
  ir::Graph g;
  ir::Value* x = g.AddInput("x", {type, {M, K}});
  auto w_data = std::make_shared<AlignedBuffer>(static_cast<size_t>(K * N) * DTypeSize(type));
  FillAs(w_data->data(), type, K * N, w_value);
  ir::Value* w = g.AddData("w", {type, {K, N}}, ir::ValueKind::kParam, w_data);
  std::vector<const void*> inputs{nullptr, w_data->data()};
  ir::Op* op;
  if (type == DType::kI8) {
    auto scale = std::make_shared<AlignedBuffer>(static_cast<size_t>(N) * sizeof(float));
    FillAs(scale->data(), DType::kF32, N, [](int64_t) { return 0.01f; });
    ir::Value* s = g.AddData("scale", {DType::kF32, {N}}, ir::ValueKind::kConstant, scale);
    inputs.push_back(scale->data());
    op = g.AddOp("linear_int8", {x, w, s}, {}, "gemm_rate");
  } else {
    op = g.AddOp("matmul", {x, w}, {{"out_dtype", std::string("float32")}}, "gemm_rate");
  }
  CpuDevice device(backend, 0, {.threads = threads});
  double best = 1e30;
  // Created and run in one item of the device's stream: with its threads.
  device.stream().Submit([&] {
    std::unique_ptr<backend::Kernel> kernel = backend.CreateKernel(*op, device);
    AlignedBuffer in(x->bytes()), out(op->outputs[0]->bytes()),
        workspace(kernel->workspace_bytes());
    FillAs(in.data(), type, M * K, x_value);
    inputs[0] = in.data();
    backend::KernelArgs args;
    args.inputs = inputs;
    args.outputs = {out.data()};
    args.workspace = workspace.data();
    args.stream = &device.stream();
    kernel->Run(args);  // the warm-up
    for (int r = 0; r < 3; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      kernel->Run(args);
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  });
  device.stream().Synchronize();
  return 2.0 * M * K * N / best / 1e9;
}

}  // namespace

double CpuDevice::GemmGflops(DType type) const {
  if (type != DType::kF32 && type != DType::kBF16 && type != DType::kF16 && type != DType::kI8)
    return 0;
  if (!backend().MultipliesIn(type)) return 0;
  static std::mutex mu;
  static std::map<std::pair<int, DType>, double> measured;
  // Held while measuring: a second caller waits for the first one's answer.
  std::lock_guard<std::mutex> lock(mu);
  const std::pair<int, DType> key{threads_, type};
  auto it = measured.find(key);
  if (it != measured.end()) return it->second;
  const double rate = MeasureGemmGflops(backend(), threads_, type);
  measured.emplace(key, rate);
  return rate;
}

CpuDevice::CpuDevice(const backend::Backend& backend, int ordinal,
                     const backend::DeviceOptions& options)
    : Device(backend, ordinal),
      threads_(std::max(1, options.threads)),
      capacity_(options.memory_bytes ? options.memory_bytes : HostMemoryCap()),
      stream_(threads_, options.adapt_to_contention, options.keep_warm_ms) {}

namespace {

// A CPU device's memory (its arenas): an AlignedBuffer, so that an arena of
// several MiB sits on huge pages where the kernel grants them
// (AlignedBuffer: 2 MiB-aligned mappings advised MADV_HUGEPAGE). A batch's
// activations run to tens of MiB; on 4 KiB pages every pass over one
// misses the TLB's reach (~12 MiB on Zen 4) page after page.
class ArenaBuffer : public backend::Buffer {
 public:
  explicit ArenaBuffer(size_t bytes) {
    try {
      buf_.Resize(bytes);
    } catch (const std::bad_alloc&) {
      Fail(ErrorKind::kResourceExhausted, "out of memory allocating {} bytes", bytes);
    }
  }
  void* data() override { return buf_.data(); }
  size_t size() const override { return buf_.size(); }

 private:
  AlignedBuffer buf_;
};

}  // namespace

std::unique_ptr<backend::Buffer> CpuDevice::Allocate(size_t bytes) {
  return std::make_unique<ArenaBuffer>(bytes);
}

std::unique_ptr<backend::Event> CpuDevice::CreateEvent() {
  return std::make_unique<WorkerEvent>();
}

void CpuDevice::CopyFromHost(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void CpuDevice::CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

WorkerStream& CpuDevice::collective_stream() {
  std::call_once(collective_once_,
                 [this] { collective_stream_ = std::make_unique<WorkerStream>(1); });
  return *collective_stream_;
}

CpuDevice& CpuDeviceOf(backend::Device& device) {
  auto* cpu = dynamic_cast<CpuDevice*>(&device);
  TILLER_CHECK(cpu, "device {} is not a CPU device", device.name());
  return *cpu;
}

Dnnl& DnnlOf(backend::Device& device) {
  return CpuDeviceOf(device).dnnl();
}

dnnl::memory::data_type ToDnnl(DType t) {
  using dt = dnnl::memory::data_type;
  switch (t) {
    case DType::kF32:
      return dt::f32;
    case DType::kF16:
      return dt::f16;
    case DType::kBF16:
      return dt::bf16;
    case DType::kI32:
      return dt::s32;
    case DType::kI8:
      return dt::s8;
    case DType::kU8:
      return dt::u8;
    default:
      Fail(ErrorKind::kUnimplemented, "oneDNN has no data type for {}", DTypeName(t));
  }
}

// ---- kernel.h: the CPU registration conveniences ----

bool RegisterKernel(const std::string& op_type, OpKernelFactory factory, std::vector<DType> dtypes,
                    int dtype_input) {
  TILLER_CHECK(!dtypes.empty(), "CPU kernel for '{}' declares no dtypes", op_type);
  return RegisterKernel(op_type, std::move(factory),
                        backend::Signature::OneInput(std::move(dtypes), dtype_input));
}

bool RegisterKernel(const std::string& op_type, OpKernelFactory factory,
                    backend::Signature signature) {
  TILLER_CHECK(factory, "CPU kernel for '{}' has no factory", op_type);
  return backend::RegisterKernel(
      "cpu", op_type, std::move(signature),
      [f = std::move(factory)](const ir::Op& op, backend::Device&) { return f(op); });
}

bool RegisterKernel(const std::string& op_type, KernelFactory factory,
                    backend::Signature signature) {
  return backend::RegisterKernel("cpu", op_type, std::move(signature), std::move(factory));
}

std::unique_ptr<Kernel> CreateKernel(const ir::Op& op) {
  // Kernels created here run on the caller's thread (tests, tools); the
  // device only lends its oneDNN engine and stream.
  static std::unique_ptr<backend::Device> scratch = CpuBackend().CreateDevice(0, {});
  return backend::CreateKernel(CpuBackend(), op, *scratch);
}

void CheckKernelSupports(const ir::Op& op) {
  if (auto why = backend::KernelMismatch(CpuBackend(), op))
    Fail(ErrorKind::kUnimplemented, "{}", *why);
}

bool HasKernel(const std::string& op_type) {
  return backend::HasKernel("cpu", op_type);
}

const std::vector<DType>* KernelDTypes(const std::string& op_type) {
  return backend::KernelDTypes("cpu", op_type);
}

}  // namespace tiller::cpu
