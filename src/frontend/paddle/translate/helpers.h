// Helpers shared by the translators of several op families.
#pragma once

#include "frontend/paddle/translate.h"

namespace tiller::paddle {

// Applies Paddle's elementwise `axis` rule: a lower-rank operand is aligned
// with the other starting at dim `axis` (-1: numpy alignment from the right),
// by reshaping it with size-1 dims.
void AlignForAxis(TranslateContext& ctx, const OpDesc& op, ir::Value** x, ir::Value** y);

// An int list given as attribute `attr`, or as compile-time-known tensor
// operands: one 1-D tensor in `tensor_slot`, or 1-element tensors in
// `list_slot` (either slot name may be empty). Shapes, axes, slice bounds.
std::vector<int64_t> IntsFrom(TranslateContext& ctx, const OpDesc& op, const std::string& attr,
                              const std::string& tensor_slot, const std::string& list_slot);

// `v` as dtype `to`: itself when it already is, else an IR cast.
ir::Value* Cast(TranslateContext& ctx, const OpDesc& op, ir::Value* v, DType to);

// Resolves a Paddle target shape (0 copies the input dim, -1 is inferred).
Shape ResolveTargetShape(TranslateContext& ctx, const OpDesc& op, const Shape& in,
                         const std::vector<int64_t>& target);

// Explicit [top, bottom, left, right] pads from Paddle's paddings /
// padding_algorithm for a window op over an NCHW input.
std::vector<int64_t> WindowPads(TranslateContext& ctx, const OpDesc& op, const Shape& in_nchw,
                                const std::vector<int64_t>& ksize,
                                const std::vector<int64_t>& strides,
                                const std::vector<int64_t>& dilations);

}  // namespace tiller::paddle
