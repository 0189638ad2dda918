#include "frontend/paddle/translate/helpers.h"

namespace tiller::paddle {

void AlignForAxis(TranslateContext& ctx, const OpDesc& op, ir::Value** x, ir::Value** y) {
  int64_t axis = op.attrs.Int("axis", -1);
  ir::Value** small = (*y)->rank() <= (*x)->rank() ? y : x;
  ir::Value* big = small == y ? *x : *y;
  int big_rank = big->rank(), small_rank = (*small)->rank();
  if (axis == -1 || small_rank == big_rank) return;
  if (axis < 0) axis += big_rank - small_rank + 1;
  if (axis < 0 || axis + small_rank > big_rank)
    ctx.Invalid(op, "axis {} does not fit operands {} and {}", op.attrs.Int("axis", -1),
                ShapeToString((*x)->shape()), ShapeToString((*y)->shape()));
  Shape s(axis, 1);
  s.insert(s.end(), (*small)->shape().begin(), (*small)->shape().end());
  s.resize(big_rank, 1);
  *small = ctx.Reshape(op, *small, s);
}

std::vector<int64_t> IntsFrom(TranslateContext& ctx, const OpDesc& op, const std::string& attr,
                              const std::string& tensor_slot, const std::string& list_slot) {
  if (!tensor_slot.empty()) {
    if (ir::Value* t = ctx.InOpt(op, tensor_slot)) return ctx.ConstInts(op, t);
  }
  if (!list_slot.empty() && op.HasInput(list_slot)) {
    std::vector<int64_t> out;
    for (ir::Value* t : ctx.Ins(op, list_slot)) {
      auto v = ctx.ConstInts(op, t);
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  }
  return op.attrs.Ints(attr);
}

Shape ResolveTargetShape(TranslateContext& ctx, const OpDesc& op, const Shape& in,
                         const std::vector<int64_t>& target) {
  Shape out(target.begin(), target.end());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0) {
      if (i >= in.size())
        ctx.Invalid(op, "shape {} copies dim {} of {}", ShapeToString(target), i,
                    ShapeToString(in));
      out[i] = in[i];
    }
    if (out[i] == -1) {
      if (infer >= 0) ctx.Invalid(op, "shape {} has two -1 dims", ShapeToString(target));
      infer = static_cast<int>(i);
    } else if (out[i] < 0) {
      ctx.Invalid(op, "shape {} has a negative dim", ShapeToString(target));
    } else {
      known *= out[i];
    }
  }
  int64_t total = NumElements(in);
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      ctx.Invalid(op, "cannot reshape {} to {}", ShapeToString(in), ShapeToString(target));
    out[infer] = total / known;
  }
  if (NumElements(out) != total)
    ctx.Invalid(op, "cannot reshape {} to {}", ShapeToString(in), ShapeToString(target));
  return out;
}

std::vector<int64_t> WindowPads(TranslateContext& ctx, const OpDesc& op, const Shape& in,
                                const std::vector<int64_t>& ksize,
                                const std::vector<int64_t>& strides,
                                const std::vector<int64_t>& dilations) {
  std::string algo = op.attrs.Str("padding_algorithm", "EXPLICIT");
  std::vector<int64_t> p = op.attrs.Ints("paddings", {0, 0});
  if (algo == "VALID") return {0, 0, 0, 0};
  if (algo == "SAME") {
    std::vector<int64_t> pads(4);
    for (size_t d = 0; d < 2; ++d) {
      int64_t size = in[2 + d], s = strides[d];
      int64_t out = (size + s - 1) / s;
      int64_t total =
          std::max<int64_t>((out - 1) * s + (ksize[d] - 1) * dilations[d] + 1 - size, 0);
      pads[2 * d] = total / 2;
      pads[2 * d + 1] = total - total / 2;
    }
    return pads;
  }
  if (algo != "EXPLICIT") ctx.Unsupported(op, "padding_algorithm = \"{}\"", algo);
  if (p.size() == 2) return {p[0], p[0], p[1], p[1]};
  if (p.size() == 4) return p;
  ctx.Unsupported(op, "paddings with {} values", p.size());
}

ir::Value* Cast(TranslateContext& ctx, const OpDesc& op, ir::Value* v, DType to) {
  if (v->dtype() == to) return v;
  return ctx.Add1(op, "cast", {v}, {{"dtype", std::string(DTypeName(to))}});
}

}  // namespace tiller::paddle
