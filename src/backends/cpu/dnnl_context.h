// oneDNN state of one CPU device: its engine and stream. oneDNN's CPU
// runtime here is OpenMP, so primitives run on the OpenMP team of the
// thread that executes them: the device's worker (cpu_backend.h).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "backend/backend.h"
#include "core/dtype.h"

namespace tiller::cpu {

// Passes TILLER_MAX_ISA (core/cpu_isa.h) to oneDNN, once, and records the
// ISA oneDNN then runs at. oneDNN takes a cap only before its first call:
// every path into it (the probes below, a device's Dnnl) calls this first.
void ApplyDnnlIsaCap();

struct Dnnl {
  // First: the cap reaches oneDNN before the engine is made.
  struct Cap {
    Cap() { ApplyDnnlIsaCap(); }
  } cap;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

// The oneDNN state of a CPU device; an internal error for another backend's.
Dnnl& DnnlOf(backend::Device& device);
// Maps a Tiller dtype onto oneDNN's; throws kUnimplemented when oneDNN has none.
dnnl::memory::data_type ToDnnl(DType t);
// Whether oneDNN multiplies bfloat16 on this CPU (a GEMM it can create);
// the bfloat16 GEMM and convolution kernels are registered only then.
bool DnnlMultipliesBF16();
// Whether oneDNN's int8 GEMMs and convolutions are exact on this CPU (VNNI);
// linear_int8 and conv2d_int8 are registered only then.
bool DnnlMultipliesInt8Exactly();
// Whether oneDNN has a Winograd convolution for this CPU (2.6: AVX-512).
bool DnnlRunsWinograd();
// 8 when oneDNN's direct float32 convolutions take channels in blocks of 8
// (nChw8c: AVX2 without AVX-512), else 0 (Device::conv_channel_block).
int DnnlConvChannelBlock();
// conv2d kernels created with oneDNN's Winograd algorithm so far (their op's
// algorithm = "winograd" and a Winograd kernel for the CPU); for tests.
size_t WinogradConvolutionsCreated();
// matmul and linear kernels given a twin built for half the team (run while
// the worker halves its team under contention) so far; for tests.
size_t HalfTeamMatmulsCreated();

}  // namespace tiller::cpu
