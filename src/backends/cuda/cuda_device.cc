// The CUDA backend's device, stream, events and memory (cuda_device.h).
#include "backends/cuda/cuda_device.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace tiller::cuda {

void Check(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // a sticky error stays; a recoverable one is cleared
  ErrorKind kind = ErrorKind::kInternal;
  if (status == cudaErrorMemoryAllocation) kind = ErrorKind::kResourceExhausted;
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver ||
      status == cudaErrorInvalidDevice || status == cudaErrorDevicesUnavailable)
    kind = ErrorKind::kInvalidArgument;
  Fail(kind, "{} failed: {} ({})", what, cudaGetErrorName(status), cudaGetErrorString(status));
}

void CheckBlas(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  Fail(status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorKind::kResourceExhausted : ErrorKind::kInternal,
       "{} failed: cuBLAS status {} ({})", what, static_cast<int>(status),
       cublasLtGetStatusString(status));
}

Unit ParseUnit(const std::string& unit) {
  Unit u;
  if (unit.empty()) return u;
  const size_t dot = unit.find('.');
  auto number = [&](const std::string& text) {
    if (text.empty() || text.size() > 4 ||
        text.find_first_not_of("0123456789") != std::string::npos)
      Fail(ErrorKind::kInvalidArgument,
           "device cuda:{}: expected cuda:N (GPU N) or cuda:N.M (logical device M of GPU N)", unit);
    return std::atoi(text.c_str());
  };
  u.gpu = number(unit.substr(0, dot));
  if (dot != std::string::npos) u.logical = number(unit.substr(dot + 1));
  return u;
}

namespace {

// The GPU of `unit`, after checking that the driver runs and has it.
int ValidatedGpu(const std::string& unit) {
  const Unit u = ParseUnit(unit);
  const std::string label = "cuda" + (unit.empty() ? std::string() : ":" + unit);
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    Fail(ErrorKind::kInvalidArgument,
         "{}: no usable GPU: the CUDA runtime reports {} ({}); is an NVIDIA driver installed "
         "and a GPU visible (nvidia-smi, CUDA_VISIBLE_DEVICES)?",
         label, cudaGetErrorName(status), cudaGetErrorString(status));
  }
  if (u.gpu >= count)
    Fail(ErrorKind::kInvalidArgument, "{}: this machine has {} GPU(s){}", label, count,
         count ? fmt::format(" (cuda:0 .. cuda:{})", count - 1) : std::string());
  return u.gpu;
}

std::string GpuName(int gpu) {
  cudaDeviceProp prop{};
  Check(cudaGetDeviceProperties(&prop, gpu), fmt::format("cudaGetDeviceProperties({})", gpu));
  return prop.name;
}

class CudaBuffer : public backend::Buffer {
 public:
  CudaBuffer(int gpu, size_t bytes, const std::string& label) : size_(bytes) {
    if (!bytes) return;
    Check(cudaSetDevice(gpu), label + ": cudaSetDevice");
    Check(cudaMalloc(&data_, bytes), fmt::format("{}: cudaMalloc({} bytes)", label, bytes));
  }
  ~CudaBuffer() override {
    if (data_) cudaFree(data_);
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  void* data() override { return data_; }
  size_t size() const override { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_;
};

class CudaBackend : public backend::Backend {
 public:
  const std::string& name() const override {
    static const std::string n = kBackendName;
    return n;
  }
  std::string display_name() const override { return "CUDA"; }
  std::unique_ptr<backend::Device> CreateDevice(
      int ordinal, const backend::DeviceOptions& options) const override {
    return std::make_unique<CudaDevice>(*this, ordinal, options);
  }
};

}  // namespace

// ---- Stream and events -------------------------------------------------------

CudaStream::CudaStream(int gpu, std::string device_name)
    : gpu_(gpu), device_name_(std::move(device_name)) {
  Check(cudaSetDevice(gpu_), device_name_ + ": cudaSetDevice");
  Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
        device_name_ + ": cudaStreamCreate");
}

CudaStream::~CudaStream() {
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

void CudaStream::Submit(std::function<void()> work) {
  if (error_) return;
  try {
    Check(cudaSetDevice(gpu_), device_name_ + ": cudaSetDevice");
    work();
  } catch (...) {
    error_ = std::current_exception();
  }
}

void CudaStream::Synchronize() {
  const cudaError_t status = cudaStreamSynchronize(stream_);
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
  // An error of a kernel that ran asynchronously surfaces here; the op that
  // launched it is named by the launch check where it failed to start.
  Check(status, device_name_ + ": work on the device's stream");
}

CudaEvent::CudaEvent(int gpu) : gpu_(gpu) {
  Check(cudaSetDevice(gpu_), "cudaSetDevice");
  Check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
}

CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);
}

void CudaEvent::Record(backend::Stream& stream) {
  Check(cudaEventRecord(event_, static_cast<cudaStream_t>(CudaStreamOf(&stream))),
        "cudaEventRecord");
  recorded_ = true;
}

void CudaEvent::Wait() {
  if (recorded_) Check(cudaEventSynchronize(event_), "cudaEventSynchronize");
}

void* CudaStreamOf(backend::Stream* stream) {
  auto* s = dynamic_cast<CudaStream*>(stream);
  TILLER_CHECK(s, "a CUDA kernel was handed a stream of another backend");
  return s->handle();
}

CudaDevice& DeviceOf(backend::Device& device) {
  auto* d = dynamic_cast<CudaDevice*>(&device);
  TILLER_CHECK(d, "a CUDA kernel was made for a device of another backend");
  return *d;
}

// ---- Device --------------------------------------------------------------------

CudaDevice::CudaDevice(const backend::Backend& backend, int ordinal,
                       const backend::DeviceOptions& options)
    : Device(backend, ordinal),
      gpu_(ValidatedGpu(options.unit)),
      label_("cuda:" + (options.unit.empty() ? std::string("0") : options.unit)),
      gpu_name_(GpuName(gpu_)),
      stream_(gpu_, label_) {
  size_t free = 0, total = 0;
  Check(cudaMemGetInfo(&free, &total), label_ + ": cudaMemGetInfo");
  capacity_ = options.memory_bytes ? options.memory_bytes : free;
  if (capacity_ > free)
    Fail(ErrorKind::kResourceExhausted, "{} ({}): {} bytes were asked for, {} of its {} are free",
         label_, gpu_name_, capacity_, free, total);
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(gpu_);
  cudaStreamSynchronize(stream_.handle());
  if (blas_workspace_) cudaFree(blas_workspace_);
  if (blas_) cublasLtDestroy(blas_);
}

backend::DeviceCaps CudaDevice::caps() const {
  backend::DeviceCaps c = Device::caps();
  c.name = label_;
  return c;
}

std::unique_ptr<backend::Buffer> CudaDevice::Allocate(size_t bytes) {
  if (bytes > capacity_)
    Fail(ErrorKind::kResourceExhausted, "{} ({}): {} bytes asked for, the device has {}", label_,
         gpu_name_, bytes, capacity_);
  return std::make_unique<CudaBuffer>(gpu_, bytes, label_);
}

std::unique_ptr<backend::Event> CudaDevice::CreateEvent() {
  return std::make_unique<CudaEvent>(gpu_);
}

void CudaDevice::CopyFromHost(void* device_dst, const void* host_src, size_t bytes) {
  if (!bytes) return;
  Check(cudaSetDevice(gpu_), label_ + ": cudaSetDevice");
  // Ordered after the work already queued on the stream, and complete when
  // this returns (the interface's copies are synchronous).
  Check(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_.handle()),
        fmt::format("{}: copy of {} bytes to the device", label_, bytes));
  Check(cudaStreamSynchronize(stream_.handle()), label_ + ": copy to the device");
}

void CudaDevice::CopyToHost(void* host_dst, const void* device_src, size_t bytes) {
  if (!bytes) return;
  Check(cudaSetDevice(gpu_), label_ + ": cudaSetDevice");
  Check(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_.handle()),
        fmt::format("{}: copy of {} bytes to the host", label_, bytes));
  Check(cudaStreamSynchronize(stream_.handle()), label_ + ": copy to the host");
}

void CudaDevice::CopyFrom(backend::Device& from, const void* src, void* dst, size_t bytes) {
  auto* other = dynamic_cast<CudaDevice*>(&from);
  if (!other) {
    Device::CopyFrom(from, src, dst, bytes);
    return;
  }
  if (!bytes) return;
  // The source's queued work first, then the copy on this device's stream.
  Check(cudaStreamSynchronize(other->stream_.handle()), other->label_ + ": before a copy");
  Check(cudaSetDevice(gpu_), label_ + ": cudaSetDevice");
  Check(cudaMemcpyPeerAsync(dst, gpu_, src, other->gpu_, bytes, stream_.handle()),
        fmt::format("copy of {} bytes from {} to {}", bytes, other->label_, label_));
  Check(cudaStreamSynchronize(stream_.handle()), label_ + ": copy from " + other->label_);
}

cublasLtHandle_t CudaDevice::blas() {
  std::lock_guard<std::mutex> lock(blas_mu_);
  if (!blas_) {
    Check(cudaSetDevice(gpu_), label_ + ": cudaSetDevice");
    CheckBlas(cublasLtCreate(&blas_), label_ + ": cublasLtCreate");
    Check(cudaMalloc(&blas_workspace_, kBlasWorkspaceBytes), label_ + ": the GEMM workspace");
  }
  return blas_;
}

namespace {
const bool kRegistered = backend::RegisterBackend(std::make_unique<CudaBackend>());
}  // namespace

}  // namespace tiller::cuda
