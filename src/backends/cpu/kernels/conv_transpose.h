// The direct conv2d_transpose kernel (conv_transpose.cc): what the oneDNN
// deconvolution (matmul.cc) falls back to for grouped filters and output
// sizes past the window arithmetic.
#pragma once

#include <memory>

#include "backends/cpu/kernel.h"

namespace tiller::cpu {

std::unique_ptr<Kernel> MakeDirectConvTranspose(const ir::Op& op);

}  // namespace tiller::cpu
