// Op schemas: each IR op is declared once, with its arity, its attributes
// (kinds and defaults), a pure shape/dtype inference function that runs when
// the op is added to a graph, and the traits generic passes read (mixed
// precision, layout). Its gradient rule (ir/grad.h) and kernels (one per
// backend) are registered next to their own code.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"
#include "ir/opcode.h"

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

// An attribute an op takes: its kind and its default (none: required).
struct AttrDecl {
  std::string name;
  AttrKind kind = AttrKind::kInt;
  std::optional<Attribute> default_value;
};

// How the mixed-precision pass may treat an op (issue: bf16/fp16).
enum class PrecisionRule : uint8_t {
  kUndeclared,
  kAlwaysF32,     // numerically sensitive (softmax, norms, losses, exp/log, reductions,
                  // optimizers): runs in float32; half inputs are cast up
  kHalfSafe,      // gains from half precision and keeps float32 accumulation (matmul, conv)
  kFollowsInput,  // runs in whatever precision its inputs have (elementwise, data movement)
};
const char* PrecisionRuleName(PrecisionRule r);

// The result dtype of a half-safe op with an `out_dtype` attribute (matmul,
// matmul_accumulate, linear, conv2d): "" keeps the operands' dtype; the
// mixed-precision pass sets "float32" on ops whose operands it made half
// (float32 accumulation, float32 result, no cast back). Anything else fails
// naming the op.
DType HalfSafeOutDType(const InferContext& c, DType operands);

// The check of an integer-list attribute that kernels divide by, step by or
// size from (a window's strides, dilations, sizes, paddings): empty when
// `values` holds `count` values (0: any number) each >= `least`, else
// "<attr> <values> must be [<count> ]values >= <least>".
std::string ValuesAtLeastProblem(std::string_view attr, const std::vector<int64_t>& values,
                                 size_t count, int64_t least);

// How a layout pass (e.g. keeping NHWC between convolutions) may treat an op.
enum class LayoutRule : uint8_t {
  kUndeclared,
  kAgnostic,    // elementwise over same-shaped (or scalar) operands: any layout, if all share it
  kAxisAttrs,   // reads axes from attributes (axis_attrs): the pass remaps them
  kDataFormat,  // has a data_format / data_layout attribute the pass may switch
  kFixed,       // its meaning depends on the dim order (reshape, matmul, flatten): the
                // default layout must be restored before it
};
const char* LayoutRuleName(LayoutRule r);

struct OpSchema {
  OpSchema(std::string n, int min_in, int max_in, std::function<void(InferContext&)> fn,
           bool view = false)
      : name(std::move(n)),
        min_inputs(min_in),
        max_inputs(max_in),
        infer(std::move(fn)),
        is_view(view) {}

  std::string name;
  Opcode opcode = Opcode::kUnlisted;  // set by RegisterOpSchema from `name`
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
  // Output 0 may take the storage of this input (an index; -1: none) when
  // the input is an intermediate nothing reads afterwards: the kernel then
  // finds the input's bytes in its output and updates them (conv2d's
  // residual, added by oneDNN's sum post-op). The kernel must also work
  // when the two are apart. See compile/memory_plan.h.
  int inplace_input = -1;
  // Kept by dead-code removal even without used outputs (send).
  bool side_effects = false;
  // With constant inputs, not folded when added but by
  // Graph::FoldDeferredOps (the fold_deferred pass, after the passes that
  // read the op): dequantize_linear of an int8 weight stays visible to the
  // pass that runs the matmul in int8.
  bool defer_fold = false;

  // Attributes, declared once here: ir::Op's typed getters return the
  // default when an op does not set one, and Graph::AddOp refuses an
  // undeclared attribute or one of another kind (converting where nothing
  // is lost, e.g. an int for a float).
  std::vector<AttrDecl> attrs;
  bool attrs_declared = false;  // Attr / RequiredAttr / NoAttrs / OpenAttrs was called
  bool open_attrs = false;      // also takes undeclared attributes (custom ops carry theirs)
  PrecisionRule precision = PrecisionRule::kUndeclared;
  LayoutRule layout = LayoutRule::kUndeclared;
  std::vector<std::string> axis_attrs;  // for LayoutRule::kAxisAttrs

  const AttrDecl* FindAttr(std::string_view attr) const;

  // Builders, chained on a temporary or a named schema:
  //   OpSchema{"softmax", 1, 1, InferSame}
  //       .Attr("axis", int64_t{-1})
  //       .Precision(PrecisionRule::kAlwaysF32).Layout(LayoutRule::kAxisAttrs, {"axis"})
  // Attr's default fixes the kind: bool, an integer type (int64_t), a
  // floating type (double), a string, std::vector<int64_t|double|std::string>.
  template <typename T>
  OpSchema& Attr(std::string attr, T default_value) & {
    AddAttr(std::move(attr), ToAttribute(std::move(default_value)));
    return *this;
  }
  template <typename T>
  OpSchema&& Attr(std::string attr, T default_value) && {
    return std::move(Attr(std::move(attr), std::move(default_value)));
  }
  OpSchema& RequiredAttr(std::string attr, AttrKind kind) &;
  OpSchema&& RequiredAttr(std::string attr, AttrKind kind) && {
    return std::move(RequiredAttr(std::move(attr), kind));
  }
  OpSchema& NoAttrs() & {
    attrs_declared = true;
    return *this;
  }
  OpSchema&& NoAttrs() && { return std::move(NoAttrs()); }
  OpSchema& OpenAttrs() & {
    attrs_declared = open_attrs = true;
    return *this;
  }
  OpSchema&& OpenAttrs() && { return std::move(OpenAttrs()); }
  OpSchema& Precision(PrecisionRule r) & {
    precision = r;
    return *this;
  }
  OpSchema&& Precision(PrecisionRule r) && { return std::move(Precision(r)); }
  OpSchema& Layout(LayoutRule r, std::vector<std::string> axes = {}) & {
    layout = r;
    axis_attrs = std::move(axes);
    return *this;
  }
  OpSchema&& Layout(LayoutRule r, std::vector<std::string> axes = {}) && {
    return std::move(Layout(r, std::move(axes)));
  }
  OpSchema& SideEffects() & {
    side_effects = true;
    return *this;
  }
  OpSchema&& SideEffects() && { return std::move(SideEffects()); }
  OpSchema&& DeferFold() && {
    defer_fold = true;
    return std::move(*this);
  }
  OpSchema InPlaceSafe() && {
    inplace_safe = true;
    return std::move(*this);
  }
  OpSchema& InPlaceInput(int input) & {
    inplace_input = input;
    return *this;
  }
  OpSchema&& InPlaceInput(int input) && { return std::move(InPlaceInput(input)); }

 private:
  void AddAttr(std::string attr, Attribute default_value);
  template <typename T>
  static Attribute ToAttribute(T v) {
    if constexpr (std::is_same_v<T, bool>) {
      return v;
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<int64_t>(v);
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<double>(v);
    } else if constexpr (std::is_convertible_v<T, std::string>) {
      return std::string(v);
    } else {
      return Attribute(std::move(v));
    }
  }
};

// Checks an op's attributes against its schema and converts each to the
// declared kind (see OpSchema::attrs). Fails with kInternal naming the op:
// a translator, pass or rule set something its schema does not declare.
void CheckAttributes(const OpSchema& schema, const std::string& op_name, AttrMap& attrs);

// Registers a schema; called from static initializers in ir/ops/*.cc.
bool RegisterOpSchema(OpSchema schema);
// nullptr when unknown.
const OpSchema* FindOpSchema(const std::string& name);
std::vector<std::string> AllOpSchemaNames();

// Registers at static-initialization time:
//   TILLER_REGISTER_OP_SCHEMA(OpSchema{"softmax", 1, 1, InferSoftmax});
#define TILLER_OP_CONCAT2(a, b) a##b
#define TILLER_OP_CONCAT(a, b) TILLER_OP_CONCAT2(a, b)
#define TILLER_REGISTER_OP_SCHEMA(...)                                 \
  static const bool TILLER_OP_CONCAT(tiller_op_schema_, __COUNTER__) = \
      ::tiller::ir::RegisterOpSchema(__VA_ARGS__)

}  // namespace tiller::ir
