// Translation of a Paddle program into the IR, once per set of feed shapes.
// Each Paddle op type has one translator, registered in translate/<family>.cc
// next to its siblings; translators build IR ops through TranslateContext and
// read compile-time-known tensors (shapes, constants) through it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "frontend/paddle/program.h"
#include "ir/graph.h"

namespace tiller::paddle {

class TranslateContext {
 public:
  TranslateContext(const Program& program, ir::Graph& graph) : program_(program), graph_(graph) {}

  ir::Graph& graph() { return graph_; }
  const Program& program() const { return program_; }
  // Seed for random ops whose own seed attribute is 0 (the `random_seed`
  // option); 0 when unset.
  uint64_t random_seed() const { return random_seed_; }
  void set_random_seed(uint64_t seed) { random_seed_ = seed; }
  // Training compilation: ops honour is_test = false (dropout draws a mask,
  // batch_norm uses batch statistics and updates its running ones). For
  // inference every op runs in test mode, as Paddle Inference does.
  bool training() const { return training_; }
  void set_training(bool on) { training_ = on; }
  // TranslateOptions::entry_counted_outputs, and the values it marked:
  // each with its int64 [2] (count, dim): the leading slices along dim that
  // hold data.
  bool entry_counted_outputs() const { return entry_counted_outputs_; }
  void set_entry_counted_outputs(bool on) { entry_counted_outputs_ = on; }
  void MarkEntryCounted(ir::Value* v, ir::Value* count) { entry_counts_[v] = count; }
  const std::map<ir::Value*, ir::Value*>& entry_counts() const { return entry_counts_; }
  // The IPU `use_no_bias_optimizer` option: Adam, AdamW and Lamb skip bias
  // correction (as if beta1_pow and beta2_pow were 0).
  bool no_bias_optimizer() const { return no_bias_optimizer_; }
  void set_no_bias_optimizer(bool on) { no_bias_optimizer_ = on; }
  // The IPU `max_weight_norm` option: Lamb's trust ratio uses
  // min(||w||, max_weight_norm), as PopART's Lamb; 0: ||w|| (Paddle's op).
  double max_weight_norm() const { return max_weight_norm_; }
  void set_max_weight_norm(double v) { max_weight_norm_ = v; }
  // The training step number: an int64 [1] graph input named kStepInput,
  // added on first use (after the feeds). Random training ops (dropout) read
  // it so their draws change from step to step; a training session feeds it
  // and increments it once per step.
  static constexpr const char* kStepInput = ir::kStepInputName;
  ir::Value* StepCounter();

  // The IR value bound to argument `idx` of input slot `slot`; fails naming
  // the op when the slot is empty or the variable was never produced.
  ir::Value* In(const OpDesc& op, const std::string& slot, size_t idx = 0);
  // Like In, but nullptr when the slot is absent or empty.
  ir::Value* InOpt(const OpDesc& op, const std::string& slot, size_t idx = 0);
  std::vector<ir::Value*> Ins(const OpDesc& op, const std::string& slot);
  // Binds output argument `idx` of `slot` to `v` (no-op when the slot is absent).
  void SetOut(const OpDesc& op, const std::string& slot, ir::Value* v, size_t idx = 0);
  bool HasOut(const OpDesc& op, const std::string& slot) const;
  void Bind(const std::string& var, ir::Value* v) { vars_[var] = v; }
  ir::Value* Lookup(const std::string& var) const;

  // A paddle.sparse COO tensor (translate/sparse.cc): not an IR value of its
  // own but its stored entries, indices int64 [rank, nnz] and values [nnz],
  // side by side, with the dense shape. A dense input slot bound to one
  // fails naming the op (to_dense() it first).
  // An op whose entry count depends on the data (coalesce, add, slice,
  // ...) gives a padded one (ir/ops/sparse.cc): room for the most entries,
  // padding after them; `padded_by` names that op.
  struct Coo {
    ir::Value* indices = nullptr;
    ir::Value* values = nullptr;
    Shape shape;
    std::string padded_by;            // empty: every column is an entry
    DType index_dtype = DType::kI64;  // indices() casts to it (sparse cast)
    bool sum_of_all = false;          // values() is 0-d, indices() [1] (sparse sum)
    bool padded() const { return !padded_by.empty(); }
  };
  const Coo& CooIn(const OpDesc& op, const std::string& slot, size_t idx = 0);
  bool IsCoo(const OpDesc& op, const std::string& slot, size_t idx = 0) const;
  void SetCooOut(const OpDesc& op, const std::string& slot, Coo coo, size_t idx = 0);

  // Adds an IR op named after the Paddle op it comes from.
  ir::Value* Add1(const OpDesc& op, const std::string& type, std::vector<ir::Value*> inputs,
                  ir::AttrMap attrs = {});
  ir::Op* AddOp(const OpDesc& op, const std::string& type, std::vector<ir::Value*> inputs,
                ir::AttrMap attrs = {});
  ir::Value* Reshape(const OpDesc& op, ir::Value* x, const Shape& shape);

  // Constants.
  ir::Value* ConstI64(const std::vector<int64_t>& values, const Shape& shape);
  ir::Value* ConstF32(const std::vector<float>& values, const Shape& shape);
  ir::Value* ConstScalar(double value, DType dtype);
  // The contents of a compile-time constant integer tensor (e.g. a shape
  // operand); fails naming the op when the value is only known at run time.
  std::vector<int64_t> ConstInts(const OpDesc& op, const ir::Value* v);
  std::vector<double> ConstFloats(const OpDesc& op, const ir::Value* v);
  // The first value of such a tensor (a scalar operand: AxisTensor, K,
  // Start); fails naming the op and tensor when it holds none.
  int64_t ConstInt(const OpDesc& op, const ir::Value* v);
  double ConstFloat(const OpDesc& op, const ir::Value* v);

  // Unsupported attribute value: fails with the op, attribute and value named.
  template <typename... Args>
  [[noreturn]] void Unsupported(const OpDesc& op, fmt::format_string<Args...> format,
                                Args&&... args) const {
    Fail(ErrorKind::kUnimplemented, "{}: op {}: {}", program_.path, op.Describe(),
         fmt::format(format, std::forward<Args>(args)...));
  }
  template <typename... Args>
  [[noreturn]] void Invalid(const OpDesc& op, fmt::format_string<Args...> format,
                            Args&&... args) const {
    Fail(ErrorKind::kInvalidArgument, "{}: op {}: {}", program_.path, op.Describe(),
         fmt::format(format, std::forward<Args>(args)...));
  }

 private:
  const Program& program_;
  ir::Graph& graph_;
  std::map<std::string, ir::Value*> vars_;
  std::map<std::string, Coo> coos_;
  uint64_t random_seed_ = 0;
  bool training_ = false;
  bool entry_counted_outputs_ = false;
  std::map<ir::Value*, ir::Value*> entry_counts_;
  bool no_bias_optimizer_ = false;
  double max_weight_norm_ = 0;
  ir::Value* step_ = nullptr;
};

using Translator = std::function<void(TranslateContext&, const OpDesc&)>;

// `ir_ops` lists every IR op type the translator can emit, whatever the
// attributes and dtypes (none for pass-through ops). `tiller ops` prints
// them and the dtypes their CPU kernels declare; translation checks the list:
// emitting an unlisted type is an internal error naming both.
bool RegisterTranslator(const std::string& paddle_type, Translator fn,
                        std::vector<std::string> ir_ops);
// Undeclared IR ops: nothing is checked and `tiller ops` shows none.
bool RegisterTranslator(const std::string& paddle_type, Translator fn);
const Translator* FindTranslator(const std::string& paddle_type);
// The IR op types declared for paddle_type's translator; nullptr if it is
// unknown or did not declare them.
const std::vector<std::string>* TranslatorIrOps(const std::string& paddle_type);
std::vector<std::string> SupportedPaddleOps();

#define TILLER_PADDLE_CONCAT2(a, b) a##b
#define TILLER_PADDLE_CONCAT(a, b) TILLER_PADDLE_CONCAT2(a, b)
#define TILLER_PADDLE_OP(type, fn, ...)                                    \
  static const bool TILLER_PADDLE_CONCAT(tiller_paddle_op_, __COUNTER__) = \
      ::tiller::paddle::RegisterTranslator(type, fn __VA_OPT__(, ) __VA_ARGS__)

// Op types in the program that have no translator, with their counts.
std::map<std::string, int> UnsupportedOps(const Program& program);
// Fails (kUnimplemented) listing every unsupported op type with its count;
// then (kInvalidArgument) at the first convolution or pooling whose window
// attributes no input could make valid (a stride, dilation or window size
// below 1, a negative padding, groups below 1), naming op, attribute, value.
void CheckSupported(const Program& program);
// The same failure for a list gathered by the caller (type -> count); returns
// when it is empty.
void FailUnsupportedOps(const std::string& path, const std::map<std::string, int>& missing);

// Builds the IR graph for the given feed types (one per program.feed_names).
// Fails listing every unsupported op type with its count before translating.
struct TranslateOptions {
  uint64_t random_seed = 0;  // 0: random ops use a fixed per-model default
  bool training = false;     // see TranslateContext::training()
  // A fetch target with a dim known only after a run (values() or
  // indices() of a sparse result whose entry count depends on the data)
  // becomes a graph output holding the most it can, and the graph output
  // named EntriesOutputName(target), int64 [2], holds (count, dim): the
  // caller gives back the first count slices along dim. Without it such a
  // target is refused (training sessions, the IPU execution model).
  bool entry_counted_outputs = false;
};

// The name of the graph output holding a fetch target's entry count.
inline std::string EntriesOutputName(const std::string& fetch) {
  return fetch + "@entries";
}

std::unique_ptr<ir::Graph> Translate(const Model& model, const std::vector<ir::TensorType>& feeds,
                                     ir::Graph::Folder folder,
                                     const TranslateOptions& options = {});

// Translates one op into ctx's graph; errors name the program file.
void TranslateOp(TranslateContext& ctx, const OpDesc& op);

// Paddle's VarType enum value for a dtype (the legacy `dtype`/`out_dtype`
// attributes) or a PIR dtype string; fails on an unknown one.
DType PaddleAttrDType(const TranslateContext& ctx, const OpDesc& op, const std::string& attr);

}  // namespace tiller::paddle
