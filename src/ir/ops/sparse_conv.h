// Shape arithmetic of Paddle's sparse conv3d, for the IR op's inference,
// the frontend's COO shape and the CPU kernel's output grid alike.
#pragma once

#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace tiller::ir {

// The output grid [N, D', H', W'] of a sparse conv3d of x [N, D, H, W, C]
// with a kernel [kD, kH, kW, C, C_out]: each d' = (d + 2 padding -
// dilation (k - 1) - 1) / stride + 1 in C++'s truncating division, as
// Paddle's GetOutShape computes it (a dim below 1 leaves no output). The
// vectors hold 3 values each, strides >= 1.
inline Shape SparseConvGrid(const Shape& x, const Shape& w, const std::vector<int64_t>& paddings,
                            const std::vector<int64_t>& dilations,
                            const std::vector<int64_t>& strides) {
  Shape grid{x[0]};
  for (size_t i = 0; i < 3; ++i)
    grid.push_back((x[i + 1] + 2 * paddings[i] - dilations[i] * (w[i] - 1) - 1) / strides[i] + 1);
  return grid;
}

}  // namespace tiller::ir
