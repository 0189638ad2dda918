// Packed copies of constant weights (oneDNN's blocked layouts), shared by
// every kernel that packs the same bytes from the same layout into the same
// layout: a predictor's steps compiled for other input shapes, and its
// clones, hold one copy. Bytes are recognised by AlignedBuffer::origin
// (weights loaded from a file); others are packed for their kernel alone.
#pragma once

#include <memory>

#include "backends/cpu/dnnl_context.h"
#include "core/aligned_buffer.h"

namespace tiller::cpu {

// `src` read in layout `plain`, in layout `chosen`: packed now on `dn`'s
// stream, or the copy another kernel packed (kept while a kernel holds it).
// Thread-safe.
std::shared_ptr<const AlignedBuffer> PackedWeight(Dnnl& dn, const AlignedBuffer& src,
                                                  const dnnl::memory::desc& plain,
                                                  const dnnl::memory::desc& chosen);

// Packed copies alive now (for tests).
size_t PackedWeightCount();

}  // namespace tiller::cpu
