// The IR: a graph of typed values and ops. Ops are kept in insertion order,
// which is a topological order because an op can only consume values that
// exist when it is added. Shapes are static (see core/shape.h).
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "ir/attribute.h"
#include "ir/opcode.h"

namespace tiller::ir {

struct Op;

enum class ValueKind {
  kInput,         // fed by the user on every run
  kParam,         // a weight loaded from the parameter file
  kConstant,      // data known at compile time (folded or a literal)
  kIntermediate,  // produced by an op at run time
  kState,         // persists across runs in storage the caller owns (training:
                  // parameters, optimizer moments, learning rate, running
                  // statistics); read like an input, never folded or prepacked
};

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;
  size_t bytes() const { return static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype); }
  std::string ToString() const;  // "float32[1, 128]"
  bool operator==(const TensorType&) const = default;
};

struct Value {
  int id = 0;
  std::string name;  // the frontend's variable name, for messages
  TensorType type;
  ValueKind kind = ValueKind::kIntermediate;
  Op* producer = nullptr;
  std::vector<Op*> users;
  // Data of kParam and kConstant values (shared so folded graphs can alias weights).
  std::shared_ptr<const AlignedBuffer> data;

  DType dtype() const { return type.dtype; }
  const Shape& shape() const { return type.shape; }
  int rank() const { return static_cast<int>(type.shape.size()); }
  size_t bytes() const { return type.bytes(); }
  bool is_constant() const { return kind == ValueKind::kConstant; }
  // A weight or constant: its bytes are in the graph (compile-time known).
  bool is_weight() const { return kind == ValueKind::kParam || kind == ValueKind::kConstant; }
  // A weight or constant whose bytes are still here (the executable drops
  // them once every kernel reading it has its own copy).
  bool has_bytes() const { return is_weight() && data; }
  template <typename T>
  const T* const_data() const {
    return data ? data->as<T>() : nullptr;
  }
};

struct OpSchema;

// Which part of a training step an op belongs to. Accumulation and
// replication act at these boundaries: gradients leave the backward part,
// the update part runs once per (accumulated, reduced) gradient.
enum class Phase : uint8_t {
  kForward,   // the model and the loss (all of an inference graph)
  kBackward,  // gradients (autodiff)
  kUpdate,    // clipping, regularization, optimizer updates
};
const char* PhaseName(Phase p);

// Where an op belongs, as the user and the frontend say it: a virtual device
// (Paddle's ipu_index, "shard") and a pipeline stage (ipu_stage), plus its
// phase. Graph::AddOp copies the graph's current placement scope into every
// new op, so passes, gradient rules and autodiff keep placements without
// doing anything (see Graph::SetInsertionPoint, ScopedPlacement).
struct Placement {
  int shard = 0;
  int stage = 0;
  Phase phase = Phase::kForward;
  // The source op an op derives from, for attributing time to it (the
  // measured split: compile/measured_cost.h); -1: none. It travels with
  // the placement (gradient and replacement ops inherit it) but is not
  // where the op runs: equality ignores it, so fusions see one place.
  int origin = -1;
  bool operator==(const Placement& o) const {
    return shard == o.shard && stage == o.stage && phase == o.phase;
  }
};

// The order a pipeline runs its stages in: by ipu_stage, then by ipu_index.
// A program that sets only ipu_index (every stage 0) pipelines by device; one
// that sets both may run device 1 before device 0, or put several stages on
// one device (Tiller's interleaved split, or a head placed back on the first
// device): a forward value may flow only to the same or a later stage.
inline std::pair<int, int> PipelineOrder(const Placement& p) {
  return {p.stage, p.shard};
}

struct Op {
  int id = 0;
  std::string type;                   // IR op name (see ir/ops/)
  Opcode opcode = Opcode::kUnlisted;  // `type` as an id (ir/opcode.h), set by AddOp
  std::string name;                   // where it came from, e.g. "matmul_v2 (out: linear_1.tmp_0)"
  std::vector<Value*> inputs;         // nullptr marks an absent optional input
  std::vector<Value*> outputs;
  AttrMap attrs;
  Placement placement;
  // The compile device (an index into the compile's device list) the op
  // runs on; -1 until placement (compile/placement.h) assigns it.
  int device = -1;
  const OpSchema* schema = nullptr;  // set by AddOp

  bool is(Opcode o) const { return opcode == o; }
  Value* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  Value* output(size_t i = 0) const { return outputs[i]; }

  // Typed attribute reads: the value set on the op, else the default its
  // schema declares (op_schema.h). Reading an attribute the schema does not
  // declare, or with another kind, is an internal error: every default is
  // written once, in the schema.
  bool GetBool(std::string_view name) const;
  int64_t GetInt(std::string_view name) const;
  double GetFloat(std::string_view name) const;
  const std::string& GetStr(std::string_view name) const;
  const std::vector<int64_t>& GetInts(std::string_view name) const;
  const std::vector<double>& GetFloats(std::string_view name) const;
  const std::vector<std::string>& GetStrs(std::string_view name) const;

 private:
  const Attribute& GetAttr(std::string_view name, AttrKind kind) const;
};

// The training step number: an int64 [1] graph input of this name, added
// after the feeds by whatever needs it (dropout's translator, stochastic
// rounding); a training session feeds it each micro-batch, so random draws
// change from step to step and repeat for the same step.
inline constexpr const char* kStepInputName = "tiller.step";

class Graph {
 public:
  // Called after an op whose inputs are all constants was added; may fill in
  // the outputs' data and mark them constant (constant folding at build time).
  using Folder = std::function<void(Graph&, Op&)>;

  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Value* AddInput(const std::string& name, TensorType type);
  Value* AddData(const std::string& name, TensorType type, ValueKind kind,
                 std::shared_ptr<const AlignedBuffer> data);
  // Adds an op: checks it against its schema, infers output types, and folds
  // it when all inputs are constants and a folder is set. Returns the op.
  Op* AddOp(const std::string& type, std::vector<Value*> inputs, AttrMap attrs = {},
            const std::string& name = "");
  // Convenience: adds an op and returns its single output.
  Value* Add1(const std::string& type, std::vector<Value*> inputs, AttrMap attrs = {},
              const std::string& name = "");
  void AddOutput(const std::string& name, Value* v);
  // A persistent tensor (kState). Its new value after a run is set with
  // SetStateUpdate; without one it is read-only.
  Value* AddState(const std::string& name, TensorType type);
  // Drops a state a pass replaced (e.g. by a shard of it): it leaves states()
  // and state_updates() and becomes an ordinary value without a producer.
  // Its readers must be dead code; RemoveDeadCode then drops them and it,
  // and Verify refuses any reader left.
  void RemoveState(Value* state);
  // After each run, `state` holds `new_value` (same type). The executable
  // writes it in place when it can (see runtime/executable.h).
  void SetStateUpdate(Value* state, Value* new_value);
  // Ops added from now on go right before `op` and take its placement
  // (nullptr: at the end, with the placement in force before the first
  // call). Passes use it to put a replacement where, and as placed as, the
  // ops it replaces were.
  void SetInsertionPoint(const Op* op);
  // The placement new ops take (see Placement); ScopedPlacement sets it for
  // a block.
  const Placement& placement_scope() const { return scope_; }
  void set_placement_scope(const Placement& p) { scope_ = p; }

  // Replaces every use of `from` (op inputs and graph outputs) by `to`.
  void ReplaceAllUses(Value* from, Value* to);
  // Pins a value: dead-code removal keeps it (and what computes it), and
  // ReplaceAllUses moves the pin to the replacement, so a compiler can find
  // values it needs after passes ran (a training step's gradients, which it
  // checks for NaN/Inf). Returns the pin's index for pin().
  size_t Pin(Value* v);
  Value* pin(size_t i) const { return pins_.at(i); }
  bool IsPinned(const Value* v) const {
    return std::find(pins_.begin(), pins_.end(), v) != pins_.end();
  }
  // Replaces one use: input i of op, or graph output i.
  void ReplaceInput(Op* op, size_t i, Value* to);
  void ReplaceOutput(size_t i, Value* to);
  // Drops ops whose outputs nobody uses, and values no longer referenced.
  void RemoveDeadCode();
  // Drops the ops `drop` selects and the values they compute, which no
  // other op, graph output or state update may read (kInternal otherwise);
  // pins of those values become null. Returns how many were dropped.
  int RemoveOps(const std::function<bool(const Op&)>& drop);
  // Puts the ops in `order`: a permutation of ops() in which every op comes
  // after the producers of its inputs and ops with side effects keep their
  // relative order. Throws kInternal otherwise.
  void ReorderOps(const std::vector<const Op*>& order);

  void set_folder(Folder f) { folder_ = std::move(f); }
  // Folds the ops whose schema defers folding (OpSchema::defer_fold) and
  // whose inputs all have data (constants, and parameters: callers fold
  // where parameters do not change, in inference), with the folder;
  // returns how many.
  int FoldDeferredOps();

  const std::vector<std::unique_ptr<Op>>& ops() const { return ops_; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<std::pair<std::string, Value*>>& outputs() const { return outputs_; }
  const std::vector<Value*>& states() const { return states_; }
  // (state, new value) pairs, in the order they were set.
  const std::vector<std::pair<Value*, Value*>>& state_updates() const { return state_updates_; }
  const std::vector<std::unique_ptr<Value>>& values() const { return values_; }

  // One line per op, for debugging and summaries:
  //   %3:float32[2, 4] = relu(%2:float32[2, 4]) [forward 0/1 @0]  # relu_1 (...)
  // the bracket being phase, shard/stage and compile device.
  std::string ToString() const;

 private:
  Value* NewValue(const std::string& name, TensorType type, ValueKind kind);

  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Op>> ops_;
  std::vector<Value*> inputs_;
  std::vector<std::pair<std::string, Value*>> outputs_;
  std::vector<Value*> states_;
  std::vector<std::pair<Value*, Value*>> state_updates_;
  std::vector<Value*> pins_;
  // Ops removed by folding; kept alive so callers may still read the Op* that
  // AddOp returned (its outputs are the constants).
  std::vector<std::unique_ptr<Op>> folded_ops_;
  // Runs the folder on the op at `pos` (all inputs constant); when it
  // filled in every output, moves the op out of ops_ into folded_ops_.
  bool FoldAt(std::vector<std::unique_ptr<Op>>::iterator pos);
  Folder folder_;
  const Op* insert_before_ = nullptr;
  Placement scope_;
  Placement scope_before_insertion_;  // restored by SetInsertionPoint(nullptr)
  int next_value_id_ = 0;
  int next_op_id_ = 0;
};

// Sets the graph's placement scope for its lifetime, then restores it:
//   { ir::ScopedPlacement s(g, {shard, stage, ir::Phase::kBackward}); ... }
class ScopedPlacement {
 public:
  ScopedPlacement(Graph& g, const Placement& p) : g_(g), saved_(g.placement_scope()) {
    g_.set_placement_scope(p);
  }
  ~ScopedPlacement() { g_.set_placement_scope(saved_); }
  ScopedPlacement(const ScopedPlacement&) = delete;
  ScopedPlacement& operator=(const ScopedPlacement&) = delete;

 private:
  Graph& g_;
  Placement saved_;
};

// Checks structural invariants (use lists, topological order, schema arity,
// declared attributes). Throws kInternal on a violation.
void Verify(const Graph& g);

}  // namespace tiller::ir
