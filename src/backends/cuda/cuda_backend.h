// The CUDA backend: NVIDIA GPUs as Tiller devices. Built as its own library
// (libtiller_cuda.so, CMake TILLER_CUDA) that the runtime loads when a
// device names cuda, so libtiller never depends on the CUDA runtime.
//
// Device names: "cuda" or "cuda:N" is GPU N (default 0); "cuda:N.M" is the
// M-th logical device of GPU N, with its own stream, so that pipeline
// stages or replicas can share one GPU (DeviceOptions::memory_bytes caps
// each one's memory).
//
// A device's work runs on its own CUDA stream: Stream::Submit runs the host
// closure at once on the calling thread, and the kernels it launches queue
// on the stream; Synchronize waits for them and turns an asynchronous CUDA
// error into tiller::Error. Kernels launch on cudaStream_of(args.stream).
//
// This header stays free of CUDA's headers (the layering check compiles it
// with the host compiler alone); cuda_runtime.h is included by the sources.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace tiller::cuda {

// The backend's registry name and the prefix of its device names.
inline constexpr const char* kBackendName = "cuda";

// "" -> {0, 0}; "N" -> {N, 0}; "N.M" -> {N, M}. Throws tiller::Error
// (kInvalidArgument) naming `unit` for anything else.
struct Unit {
  int gpu = 0;
  int logical = 0;
};
Unit ParseUnit(const std::string& unit);

class CudaDevice;

// The CUDA stream of a device's Stream (a kernel's args.stream), as the
// opaque handle cudaStream_t is.
void* CudaStreamOf(backend::Stream* stream);
// The device a kernel runs on, for its cuBLASLt handle and workspace.
CudaDevice& DeviceOf(backend::Device& device);

}  // namespace tiller::cuda
