// Optimizer update ops (sgd, momentum, adam, adamax, lamb, adagrad, adadelta,
// rmsprop); ir/ops/optimizer.cc states their operands and attributes.
#pragma once

#include <cstddef>
#include <string>

namespace tiller::ir {

// True for the IR optimizer update ops.
bool IsOptimizerOp(const std::string& type);
// True for their row-sparse forms (sgd_rows, adagrad_rows, adam_rows): the
// same operands, the gradient as rows [N, D] and their ids [N] last.
bool IsRowOptimizerOp(const std::string& type);

// The input whose new value an optimizer op's output `output` is: the op
// reads (param, grad, lr, state...) and writes (param, state...), so output
// 0 updates input 0 and output k >= 1 updates input k + 2. A training
// compiler binds the two to the same storage (every kernel allows it).
constexpr size_t OptimizerUpdatedInput(size_t output) {
  return output == 0 ? 0 : output + 2;
}

}  // namespace tiller::ir
