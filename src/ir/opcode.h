// Op types as ids. Every IR op type is listed once below, in the X-macro
// TILLER_OPCODES (as XLA's HLO_OPCODE_LIST lists HLO's), which makes the
// enum `Opcode`: code outside the frontend's translators compares
// `op->opcode == Opcode::matmul` (or op->is(Opcode::matmul)), so renaming or
// removing an op type breaks the build instead of a string comparison that
// silently stops matching. The op schemas (ir/ops/) stay the definition of
// each op; RegisterOpSchema gives each schema its opcode, and a test
// (tests/cpp/ir_test.cc, Opcodes.*) checks that the list and the
// registered schemas are the same set. Schemas registered outside
// libtiller (tests) get Opcode::kUnlisted.
#pragma once

#include <cstdint>
#include <string_view>

// X(name): one entry per IR op type, the enumerator named as the type.
// clang-format off
#define TILLER_OPCODES(X) \
  X(abs) X(accumulate) X(acos) X(acosh) X(adadelta) X(adagrad) X(adagrad_rows) X(adam) X(adam_rows) X(adamax) X(add) X(all_gather) \
  X(all_reduce) X(all_reduce_start) X(all_reduce_wait) X(any_non_finite) X(argmax) X(argmin) \
  X(argsort) X(asin) X(asinh) X(atan) X(atan2) X(atanh) X(attention) X(batch_norm) X(batch_norm_grad) X(batch_norm_train) \
  X(bce) X(bitwise_and) X(bitwise_not) X(bitwise_or) X(bitwise_xor) X(brelu) X(cast) X(ceil) X(celu) X(clip) X(concat) X(conv2d) X(conv2d_1x1_depthwise) \
  X(conv2d_1x1_depthwise_1x1) X(conv2d_depthwise_1x1) X(conv2d_grad_filter) \
  X(conv2d_grad_input) X(conv2d_int8) X(conv2d_transpose) X(coo_coalesce) X(coo_conv3d) X(coo_matmul) X(coo_merge) \
  X(coo_reshape) X(coo_slice) X(coo_softmax) X(coo_subm_conv3d) X(coo_sum) X(coo_to_dense) X(copy) X(cos) X(cosh) \
  X(cross_entropy) X(cross_entropy_grad) X(ctc_loss) X(cumprod) X(cumprod_grad) X(cumsum) X(custom) X(dense_to_coo) X(dequantize_linear) \
  X(div) X(dropout) X(elu) X(embedding) X(embedding_grad) X(embedding_grad_add) X(equal) X(erf) \
  X(exchange_rows) X(exp) X(expand) X(expm1) X(floor) X(floor_div) X(gather) X(gather_grad) X(gather_nd) X(gather_rows) X(gelu) X(gelu_grad) \
  X(gradient_histogram) X(greater) X(greater_equal) X(group_norm) X(hard_shrink) \
  X(hard_sigmoid) X(hard_swish) X(huber) X(identity) X(interp) X(interp_grad) X(kldiv) X(lamb) \
  X(layer_norm) X(layer_norm_grad) X(leaky_relu) X(less) X(less_equal) X(linear) X(linear_block_sparse) X(linear_int8) \
  X(log) X(log10) X(log1p) X(log2) X(log_softmax) X(logical_and) X(logical_not) X(logical_or) \
  X(logical_xor) X(logsigmoid) X(logsumexp) X(matmul) X(matmul_accumulate) X(max) \
  X(max_pool2d_with_index) X(max_pool2d_with_index_grad) X(min) X(mish) X(mod) X(momentum) \
  X(mul) X(neg) X(not_equal) X(one_hot) X(pad_nd) X(pad_nd_grad) X(pool2d) X(pool2d_grad) \
  X(pow) X(pow_scalar) X(prelu) X(print) X(put_along_axis) X(quantize_linear) X(random_normal) X(random_uniform) \
  X(rank_loss) X(reciprocal) X(recv) X(reduce_max) X(reduce_mean) X(reduce_min) X(reduce_prod) \
  X(reduce_scatter) X(reduce_sum) X(relu) X(relu6) X(reshape) X(restore) X(rmsprop) X(round) \
  X(rsqrt) X(scale) X(scale_tensor) X(selu) X(send) X(sgd) X(sgd_rows) X(sigmoid) X(sigmoid_cross_entropy) \
  X(sigmoid_cross_entropy_grad) X(sign) X(silu) X(sin) X(sinh) X(slice) X(slice_grad) \
  X(softmax) X(softmax_grad) X(softplus) X(softshrink) X(softsign) X(split) X(sqrt) X(square) \
  X(stash) X(stochastic_cast) X(sub) X(swish) X(take_along_axis) X(tan) X(tanh) X(tanh_shrink) X(thresholded_relu) \
  X(top_k) X(transpose) X(update_loss_scaling) X(where) X(yolo_box)
// clang-format on

namespace tiller::ir {

enum class Opcode : uint16_t {
#define TILLER_OPCODE_ENUMERATOR(name) name,
  TILLER_OPCODES(TILLER_OPCODE_ENUMERATOR)
#undef TILLER_OPCODE_ENUMERATOR
      kUnlisted,  // a schema registered outside the list (tests)
};

// The opcode of op type `type`; kUnlisted for a type not in the list.
Opcode OpcodeOf(std::string_view type);
// The op type an opcode stands for ("matmul"); "" for kUnlisted.
std::string_view OpcodeName(Opcode opcode);

}  // namespace tiller::ir
