// Attribute normalization shared by op schemas and kernels, so the two
// always agree on what an attribute means.
#pragma once

#include <cstdint>
#include <vector>

#include "core/shape.h"
#include "ir/attribute.h"

namespace tiller::ir {

// A slice resolved against a shape: per dim, first index, step and count.
struct SliceSpec {
  std::vector<int64_t> start, step;
  Shape out;
};
// Python slicing semantics per listed axis (negative indices count from the
// end, out-of-range bounds clamp); returns false on a bad axis or zero step.
bool ResolveSlice(const Shape& in, const AttrMap& attrs, SliceSpec* spec);

// Sorted, non-negative reduction axes; empty `axes` (or reduce_all) means all.
bool ResolveAxes(const std::vector<int64_t>& axes, int rank, std::vector<int>* out);

// Output shape of a reduction over `axes`.
Shape ReducedShape(const Shape& in, const std::vector<int>& axes, bool keepdim);

// Output size of a convolution/pooling window along one dim.
int64_t WindowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                         int64_t pad_end, int64_t dilation, bool ceil_mode);

}  // namespace tiller::ir
