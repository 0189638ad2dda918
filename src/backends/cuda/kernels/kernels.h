// Helpers the CUDA kernels' registrations share (kernels/*.cc).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "backend/kernel.h"
#include "backends/cuda/kernels/launch.h"

namespace tiller::cuda {

// The kernels' element type of a Tiller dtype; nullopt for one they lack.
std::optional<Elem> ElemOf(DType type);

// Output `out` of up to kMaxRank dims read from inputs `a` (and `b`) with
// numpy broadcasting.
Indexing BroadcastIndexing(const Shape& out, const Shape& a, const Shape& b = {});

// A kernel whose Run launches on the device's CUDA stream and checks that
// the launch started, naming the op: "cuda kernel add (op 'x_add'): ...".
std::unique_ptr<backend::Kernel> Launching(
    const ir::Op& op, std::function<void(const backend::KernelArgs&, cudaStream_t)> launch,
    size_t workspace = 0);

// For a kernel predicate: nullopt when every tensor has at most kMaxRank
// dims.
std::optional<std::string> RankAtMostMax(const ir::Op& op);

}  // namespace tiller::cuda
