// Op schemas: each IR op is declared once, with its arity and a pure
// shape/dtype inference function that runs when the op is added to a graph.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"

namespace tiller::ir {

// What an inference function sees. Errors it raises name the op.
class InferContext {
 public:
  InferContext(const Op& op, std::vector<TensorType>* outputs) : op_(op), outputs_(outputs) {}

  const Op& op() const { return op_; }
  size_t num_inputs() const { return op_.inputs.size(); }
  bool has_input(size_t i) const { return op_.input(i) != nullptr; }
  const TensorType& input(size_t i) const;
  const Value* input_value(size_t i) const { return op_.input(i); }
  const AttrMap& attrs() const { return op_.attrs; }
  void AddOutput(TensorType t) { outputs_->push_back(std::move(t)); }

  template <typename... Args>
  [[noreturn]] void Fail(fmt::format_string<Args...> format, Args&&... args) const {
    ::tiller::Fail(ErrorKind::kInvalidArgument, "op {} ({}): {}", op_.type, op_.name,
                   fmt::format(format, std::forward<Args>(args)...));
  }

 private:
  const Op& op_;
  std::vector<TensorType>* outputs_;
};

struct OpSchema {
  OpSchema(std::string n, int min_in, int max_in, std::function<void(InferContext&)> fn,
           bool view = false)
      : name(std::move(n)), min_inputs(min_in), max_inputs(max_in), infer(std::move(fn)),
        is_view(view) {}

  std::string name;
  int min_inputs;
  int max_inputs;
  std::function<void(InferContext&)> infer;
  // Output 0 is input 0's bytes reinterpreted (reshape): no copy, no kernel work.
  bool is_view;
  // The kernel stays correct when an output shares storage with an input of
  // the same type (it reads each element before writing it). Lets the
  // executable write a state update (an optimizer's new parameter) straight
  // into the state's storage; see compile/memory_plan.h.
  bool inplace_safe = false;

  OpSchema InPlaceSafe() && {
    inplace_safe = true;
    return std::move(*this);
  }
};

// Registers a schema; called from static initializers in ir/ops/*.cc.
bool RegisterOpSchema(OpSchema schema);
// nullptr when unknown.
const OpSchema* FindOpSchema(const std::string& name);
std::vector<std::string> AllOpSchemaNames();

// Registers at static-initialization time:
//   TILLER_REGISTER_OP_SCHEMA(OpSchema{"softmax", 1, 1, InferSoftmax});
#define TILLER_OP_CONCAT2(a, b) a##b
#define TILLER_OP_CONCAT(a, b) TILLER_OP_CONCAT2(a, b)
#define TILLER_REGISTER_OP_SCHEMA(...)                                     \
  static const bool TILLER_OP_CONCAT(tiller_op_schema_, __COUNTER__) = \
      ::tiller::ir::RegisterOpSchema(__VA_ARGS__)

}  // namespace tiller::ir
