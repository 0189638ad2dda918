// The CUDA device, its stream, events and memory (cuda_backend.h says what
// the backend is). Internal to the backend: includes CUDA's runtime header.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <exception>
#include <mutex>
#include <string>

#include "backends/cuda/cuda_backend.h"

namespace tiller::cuda {

// Throws tiller::Error naming `what` (the call, the device, the op) when a
// CUDA runtime call failed: "cuda:0: cudaMalloc(1073741824 bytes) failed:
// cudaErrorMemoryAllocation (out of memory)". Out of memory is
// kResourceExhausted, a missing driver or GPU kInvalidArgument, the rest
// kInternal.
void Check(cudaError_t status, const std::string& what);
void CheckBlas(cublasStatus_t status, const std::string& what);

class CudaStream : public backend::Stream {
 public:
  CudaStream(int gpu, std::string device_name);
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  // Runs `work` now, on the calling thread, with this stream's GPU current;
  // the kernels it launches queue on handle(). An exception it throws is
  // kept for Synchronize and skips the items after it.
  void Submit(std::function<void()> work) override;
  void Synchronize() override;
  cudaStream_t handle() const { return stream_; }
  int gpu() const { return gpu_; }

 private:
  int gpu_;
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  std::exception_ptr error_;
};

class CudaEvent : public backend::Event {
 public:
  explicit CudaEvent(int gpu);
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  void Record(backend::Stream& stream) override;
  void Wait() override;

 private:
  int gpu_;
  cudaEvent_t event_ = nullptr;
  bool recorded_ = false;
};

class CudaDevice : public backend::Device {
 public:
  // Fails (kInvalidArgument) when there is no driver, no GPU or no GPU of
  // the unit's number, saying which GPUs there are.
  CudaDevice(const backend::Backend& backend, int ordinal, const backend::DeviceOptions& options);
  ~CudaDevice() override;

  // DeviceOptions::memory_bytes, else the GPU's free memory when the device
  // was made (shared by its logical devices: each gets its share).
  size_t capacity_bytes() const override { return capacity_; }
  bool host_accessible() const override { return false; }
  backend::DeviceCaps caps() const override;
  std::unique_ptr<backend::Buffer> Allocate(size_t bytes) override;
  backend::Stream& stream() override { return stream_; }
  std::unique_ptr<backend::Event> CreateEvent() override;
  void CopyFromHost(void* device_dst, const void* host_src, size_t bytes) override;
  void CopyToHost(void* host_dst, const void* device_src, size_t bytes) override;
  // From another CUDA device: a device-to-device (or peer) copy; from any
  // other, through the host.
  void CopyFrom(backend::Device& from, const void* src, void* dst, size_t bytes) override;

  int gpu() const { return gpu_; }
  const std::string& label() const { return label_; }  // "cuda:0" or "cuda:0.1"
  const std::string& gpu_name() const { return gpu_name_; }
  // The device's cuBLASLt handle and the workspace its GEMMs share (work on
  // one stream runs one GEMM at a time).
  cublasLtHandle_t blas();
  void* blas_workspace() const { return blas_workspace_; }
  static constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;

 private:
  int gpu_;
  std::string label_, gpu_name_;
  size_t capacity_ = 0;
  CudaStream stream_;
  std::mutex blas_mu_;
  cublasLtHandle_t blas_ = nullptr;
  void* blas_workspace_ = nullptr;
};

}  // namespace tiller::cuda
