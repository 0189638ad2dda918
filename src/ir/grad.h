// Gradient rules. Each differentiable IR op registers one rule that, given
// the gradients flowing into its outputs, adds IR ops computing the
// gradients of its inputs. Rules live in ir/ops/<family>.cc beside the
// op family they differentiate; passes/autodiff.cc drives them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"

namespace tiller::ir {

class GradContext {
 public:
  GradContext(Graph& g, const Op& op, std::vector<Value*> out_grads, std::vector<bool> needs_grad)
      : g_(g),
        op_(op),
        out_grads_(std::move(out_grads)),
        needs_(std::move(needs_grad)),
        in_grads_(op.inputs.size(), nullptr) {}

  const Op& op() const { return op_; }
  Value* input(size_t i) const { return op_.input(i); }
  Value* output(size_t i = 0) const { return op_.outputs[i]; }
  // Gradient flowing into output i; nullptr when nothing downstream needs it
  // (a rule may then treat it as zero or skip the work).
  Value* out_grad(size_t i = 0) const { return i < out_grads_.size() ? out_grads_[i] : nullptr; }
  // Whether the gradient of input i is wanted; rules skip the others.
  bool needs_grad(size_t i) const { return i < needs_.size() && needs_[i]; }
  void SetInputGrad(size_t i, Value* grad);
  const std::vector<Value*>& input_grads() const { return in_grads_; }

  // Adds an op to the backward graph, named after the forward op.
  Value* Add(const std::string& type, std::vector<Value*> inputs, AttrMap attrs = {});
  Value* Constant(double value, DType dtype);  // a scalar
  // Sums `grad` down to `shape` over broadcast dims (numpy rules), then
  // reshapes: the gradient of an input that was broadcast to grad's shape.
  Value* ReduceTo(Value* grad, const Shape& shape);
  // reshape(v) to `shape` (a view).
  Value* Reshape(Value* v, const Shape& shape);
  // Sums `v` over every dim but the channel dim 1, reshaped to `to`: the
  // gradient of a per-channel scale or bias.
  Value* SumPerChannel(Value* v, const Shape& to);
  Graph& graph() { return g_; }

 private:
  Graph& g_;
  const Op& op_;
  std::vector<Value*> out_grads_;
  std::vector<bool> needs_;
  std::vector<Value*> in_grads_;
};

// A shape as an int-list attribute value ("shape", "input_shape", ...).
inline std::vector<int64_t> ShapeAttr(const Shape& s) {
  return {s.begin(), s.end()};
}

using GradFn = std::function<void(GradContext&)>;

bool RegisterGrad(const std::string& op_type, GradFn fn);
const GradFn* FindGrad(const std::string& op_type);
std::vector<std::string> DifferentiableOps();

#define TILLER_GRAD_CONCAT2(a, b) a##b
#define TILLER_GRAD_CONCAT(a, b) TILLER_GRAD_CONCAT2(a, b)
#define TILLER_REGISTER_GRAD(op_type, fn)                           \
  static const bool TILLER_GRAD_CONCAT(tiller_grad_, __COUNTER__) = \
      ::tiller::ir::RegisterGrad(op_type, fn)

}  // namespace tiller::ir
