// Loss ops (forward, as Paddle computes them in inference/eval programs).
//   cross_entropy(prob, label) {axis, soft_label, ignore_index, match}:
//     -log(prob) picked by a hard label (0 where ignored) or summed against
//     a soft label, with log(0) read as -1e20 (Paddle's "tolerable value").
//     The output has prob's shape with dim `axis` = 1; hard labels are
//     int32/int64 of that shape, soft labels are float of prob's shape.
//     match = true outputs the picked probability instead (cross_entropy2's
//     MatchX). log_input = true takes log-probabilities (log_softmax) and
//     uses them as they are: training translates softmax_with_cross_entropy
//     that way, so the gradient (softmax - onehot) stays finite where a
//     probability underflows. Ops have one output each: softmax is the
//     softmax op.
//   sigmoid_cross_entropy(x, label, pos_weight?) {normalize, ignore_index}
//   kldiv(x, target) {log_target}: elementwise; reductions are separate ops
//   bce(x, label); huber(x, y){delta} (the residual y - x is a sub op)
//   rank_loss(label, left, right)
//   ctc_loss(logits [T, B, C], label [B, L] int, logits_length? [B],
//            label_length? [B]) {blank} -> loss [B, 1]
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferCrossEntropy(InferContext& c) {
  const TensorType& x = c.input(0);
  const TensorType& label = c.input(1);
  int rank = static_cast<int>(x.shape.size());
  int axis = NormalizeAxis(c.attrs().Int("axis", -1), rank);
  if (axis < 0) c.Fail("axis out of range for {}", ShapeToString(x.shape));
  if (x.dtype != DType::kF32) c.Fail("prob must be float32, got {}", DTypeName(x.dtype));
  Shape reduced = x.shape;
  reduced[axis] = 1;
  if (c.attrs().Bool("soft_label", false)) {
    if (label.shape != x.shape || label.dtype != x.dtype)
      c.Fail("soft label {} must match prob {}", label.ToString(), x.ToString());
  } else {
    if (label.shape != reduced || (label.dtype != DType::kI64 && label.dtype != DType::kI32))
      c.Fail("hard label {} must be int32/int64 of shape {}", label.ToString(),
             ShapeToString(reduced));
  }
  c.AddOutput({x.dtype, reduced});
}

// Elementwise losses: every operand has the first one's shape and dtype.
void InferSameShape(InferContext& c) {
  const TensorType& x = c.input(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    if (c.input(i).shape != x.shape || c.input(i).dtype != x.dtype)
      c.Fail("operand {} is {}, expected {}", i, c.input(i).ToString(), x.ToString());
  }
  c.AddOutput(x);
}

void InferCtc(InferContext& c) {
  const TensorType& logits = c.input(0);
  const TensorType& label = c.input(1);
  if (logits.shape.size() != 3 || logits.dtype != DType::kF32)
    c.Fail("logits must be float32 [T, B, C], got {}", logits.ToString());
  if (label.shape.size() != 2 || label.shape[0] != logits.shape[1])
    c.Fail("label must be [B, L] with B = {}, got {}", logits.shape[1], label.ToString());
  for (size_t i = 2; i < 4; ++i) {
    if (c.has_input(i) && NumElements(c.input(i).shape) != logits.shape[1])
      c.Fail("length operand {} must have B = {} entries, got {}", i, logits.shape[1],
             c.input(i).ToString());
  }
  int64_t blank = c.attrs().Int("blank", 0);
  if (blank < 0 || blank >= logits.shape[2])
    c.Fail("blank {} out of range for {} classes", blank, logits.shape[2]);
  c.AddOutput({logits.dtype, {logits.shape[1], 1}});
}

const bool kRegistered = [] {
  RegisterOpSchema({"cross_entropy", 2, 2, InferCrossEntropy});
  RegisterOpSchema({"sigmoid_cross_entropy", 2, 3, InferSameShape});
  RegisterOpSchema({"kldiv", 2, 2, InferSameShape});
  RegisterOpSchema({"bce", 2, 2, InferSameShape});
  RegisterOpSchema({"huber", 2, 2, InferSameShape});
  RegisterOpSchema({"rank_loss", 3, 3, InferSameShape});
  RegisterOpSchema({"ctc_loss", 2, 4, InferCtc});
  return true;
}();

}  // namespace
}  // namespace tiller::ir
