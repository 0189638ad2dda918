// The process-wide oneDNN CPU engine and stream. oneDNN's CPU runtime here is
// OpenMP, so kernels run on the calling thread's OpenMP team.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "core/dtype.h"

namespace tiller::cpu {

dnnl::engine& DnnlEngine();
dnnl::stream& DnnlStream();
// Maps a Tiller dtype onto oneDNN's; throws kUnimplemented when oneDNN has none.
dnnl::memory::data_type ToDnnl(DType t);

}  // namespace tiller::cpu
