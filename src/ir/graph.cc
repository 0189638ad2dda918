#include "ir/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_set>

#include "ir/op_schema.h"

namespace tiller::ir {

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kUpdate:
      return "update";
  }
  return "?";
}

const Attribute& Op::GetAttr(std::string_view attr, AttrKind kind) const {
  TILLER_CHECK(schema, "op {} ({}) has no schema", type, name);
  const AttrDecl* d = schema->FindAttr(attr);
  TILLER_CHECK(d, "op {} ({}) reads attribute '{}', which its schema does not declare", type, name,
               attr);
  TILLER_CHECK(d->kind == kind, "op {} ({}) reads attribute '{}' as a {}, it is declared a {}",
               type, name, attr, AttrKindName(kind), AttrKindName(d->kind));
  const Attribute* a = attrs.Find(std::string(attr));
  if (!a) {
    TILLER_CHECK(d->default_value, "op {} ({}) lacks required attribute '{}'", type, name, attr);
    return *d->default_value;
  }
  // AddOp converted it to the declared kind; a later direct write may not have.
  TILLER_CHECK(KindOf(*a) == kind, "op {} ({}): attribute '{}' = {} is not a {}", type, name, attr,
               AttributeToString(*a), AttrKindName(kind));
  return *a;
}

bool Op::GetBool(std::string_view n) const {
  return std::get<bool>(GetAttr(n, AttrKind::kBool));
}
int64_t Op::GetInt(std::string_view n) const {
  return std::get<int64_t>(GetAttr(n, AttrKind::kInt));
}
double Op::GetFloat(std::string_view n) const {
  return std::get<double>(GetAttr(n, AttrKind::kFloat));
}
const std::string& Op::GetStr(std::string_view n) const {
  return std::get<std::string>(GetAttr(n, AttrKind::kString));
}
const std::vector<int64_t>& Op::GetInts(std::string_view n) const {
  return std::get<std::vector<int64_t>>(GetAttr(n, AttrKind::kInts));
}
const std::vector<double>& Op::GetFloats(std::string_view n) const {
  return std::get<std::vector<double>>(GetAttr(n, AttrKind::kFloats));
}
const std::vector<std::string>& Op::GetStrs(std::string_view n) const {
  return std::get<std::vector<std::string>>(GetAttr(n, AttrKind::kStrings));
}

void Graph::SetInsertionPoint(const Op* op) {
  if (op && !insert_before_) scope_before_insertion_ = scope_;
  if (!op && insert_before_) scope_ = scope_before_insertion_;
  insert_before_ = op;
  if (op) scope_ = op->placement;
}

std::string TensorType::ToString() const {
  return fmt::format("{}{}", DTypeName(dtype), ShapeToString(shape));
}

Value* Graph::NewValue(const std::string& name, TensorType type, ValueKind kind) {
  // Byte counts are size_t products of the dims: a shape whose product
  // overflows would wrap to a small buffer that kernels then write past.
  if (!BytesFit(type.shape, DTypeSize(type.dtype))) {
    Fail(ErrorKind::kInvalidArgument,
         "tensor '{}' {} has more than 2^62 bytes: no device can hold it (a corrupt or absurd "
         "shape)",
         name, type.ToString());
  }
  auto v = std::make_unique<Value>();
  v->id = next_value_id_++;
  v->name = name;
  v->type = std::move(type);
  v->kind = kind;
  values_.push_back(std::move(v));
  return values_.back().get();
}

Value* Graph::AddInput(const std::string& name, TensorType type) {
  Value* v = NewValue(name, std::move(type), ValueKind::kInput);
  inputs_.push_back(v);
  return v;
}

Value* Graph::AddState(const std::string& name, TensorType type) {
  Value* v = NewValue(name, std::move(type), ValueKind::kState);
  states_.push_back(v);
  return v;
}

void Graph::RemoveState(Value* state) {
  TILLER_CHECK(state && state->kind == ValueKind::kState, "'{}' is not a state value",
               state ? state->name : "null");
  std::erase(states_, state);
  std::erase_if(state_updates_, [&](const auto& u) { return u.first == state; });
  state->kind = ValueKind::kIntermediate;
}

void Graph::SetStateUpdate(Value* state, Value* new_value) {
  TILLER_CHECK(state && state->kind == ValueKind::kState, "'{}' is not a state value",
               state ? state->name : "null");
  TILLER_CHECK(new_value && new_value->type.dtype == state->type.dtype &&
                   new_value->type.shape == state->type.shape,
               "state '{}' ({}) cannot take a value of type {}", state->name,
               state->type.ToString(), new_value ? new_value->type.ToString() : "null");
  for (auto& [s, v] : state_updates_) {
    if (s == state) {
      v = new_value;
      return;
    }
  }
  state_updates_.emplace_back(state, new_value);
}

Value* Graph::AddData(const std::string& name, TensorType type, ValueKind kind,
                      std::shared_ptr<const AlignedBuffer> data) {
  TILLER_CHECK(kind == ValueKind::kParam || kind == ValueKind::kConstant,
               "AddData needs a param or constant kind for '{}'", name);
  TILLER_CHECK(data && data->size() == type.bytes(), "data of '{}' has {} bytes, type {} needs {}",
               name, data ? data->size() : 0, type.ToString(), type.bytes());
  Value* v = NewValue(name, std::move(type), kind);
  v->data = std::move(data);
  return v;
}

Op* Graph::AddOp(const std::string& type, std::vector<Value*> inputs, AttrMap attrs,
                 const std::string& name) {
  const OpSchema* schema = FindOpSchema(type);
  TILLER_CHECK(schema != nullptr, "no IR op named '{}'", type);
  auto op = std::make_unique<Op>();
  op->id = next_op_id_++;
  op->type = type;
  op->name = name.empty() ? type : name;
  op->inputs = std::move(inputs);
  op->attrs = std::move(attrs);
  op->schema = schema;
  op->opcode = schema->opcode;
  op->placement = scope_;
  CheckAttributes(*schema, op->name, op->attrs);
  int n = static_cast<int>(op->inputs.size());
  if (n < schema->min_inputs || n > schema->max_inputs) {
    Fail(ErrorKind::kInternal, "op {} ({}) takes {}..{} inputs, got {}", type, op->name,
         schema->min_inputs, schema->max_inputs, n);
  }
  std::vector<TensorType> out_types;
  InferContext ctx(*op, &out_types);
  schema->infer(ctx);
  for (size_t i = 0; i < out_types.size(); ++i) {
    std::string vname = out_types.size() == 1 ? op->name : fmt::format("{}:{}", op->name, i);
    Value* v = NewValue(vname, std::move(out_types[i]), ValueKind::kIntermediate);
    v->producer = op.get();
    op->outputs.push_back(v);
  }
  bool all_const = !op->inputs.empty();
  for (Value* in : op->inputs) {
    if (in) in->users.push_back(op.get());
    if (in && !in->is_constant()) all_const = false;
  }
  Op* added = op.get();
  auto pos = ops_.end();
  if (insert_before_) {
    pos = std::find_if(ops_.begin(), ops_.end(),
                       [&](const std::unique_ptr<Op>& o) { return o.get() == insert_before_; });
  }
  pos = ops_.insert(pos, std::move(op));
  if (all_const && folder_ && !schema->defer_fold) FoldAt(pos);
  return added;
}

bool Graph::FoldAt(std::vector<std::unique_ptr<Op>>::iterator pos) {
  Op* op = pos->get();
  folder_(*this, *op);
  bool folded = std::all_of(op->outputs.begin(), op->outputs.end(),
                            [](const Value* v) { return v->is_constant(); });
  if (!folded) return false;
  // The outputs now carry their data; the op itself never runs.
  for (Value* in : op->inputs) {
    if (in) std::erase(in->users, op);
  }
  for (Value* out : op->outputs) out->producer = nullptr;
  folded_ops_.push_back(std::move(*pos));
  ops_.erase(pos);
  return true;
}

int Graph::FoldDeferredOps() {
  if (!folder_) return 0;
  int folded = 0;
  for (auto it = ops_.begin(); it != ops_.end();) {
    const Op& op = **it;
    const bool ready = op.schema->defer_fold && !op.inputs.empty() &&
                       std::all_of(op.inputs.begin(), op.inputs.end(),
                                   [](const Value* v) { return !v || v->has_bytes(); });
    // FoldAt erases `it` when it folds: step from its predecessor's place.
    const auto at = it - ops_.begin();
    if (ready && FoldAt(it)) {
      ++folded;
      it = ops_.begin() + at;
    } else {
      ++it;
    }
  }
  return folded;
}

Value* Graph::Add1(const std::string& type, std::vector<Value*> inputs, AttrMap attrs,
                   const std::string& name) {
  Op* op = AddOp(type, std::move(inputs), std::move(attrs), name);
  TILLER_CHECK(op->outputs.size() == 1, "op {} has {} outputs", type, op->outputs.size());
  return op->outputs[0];
}

void Graph::AddOutput(const std::string& name, Value* v) {
  outputs_.emplace_back(name, v);
}

void Graph::ReplaceAllUses(Value* from, Value* to) {
  for (Op* user : from->users) {
    for (Value*& in : user->inputs) {
      if (in == from) in = to;
    }
    to->users.push_back(user);
  }
  from->users.clear();
  for (auto& [name, v] : outputs_) {
    if (v == from) v = to;
  }
  for (auto& [state, v] : state_updates_) {
    if (v == from) v = to;
  }
  for (Value*& v : pins_) {
    if (v == from) v = to;
  }
}

size_t Graph::Pin(Value* v) {
  pins_.push_back(v);
  return pins_.size() - 1;
}

void Graph::ReplaceInput(Op* op, size_t i, Value* to) {
  Value* from = op->inputs.at(i);
  if (from == to) return;
  op->inputs[i] = to;
  if (from) {
    auto it = std::find(from->users.begin(), from->users.end(), op);
    if (it != from->users.end()) from->users.erase(it);
  }
  if (to) to->users.push_back(op);
}

void Graph::ReplaceOutput(size_t i, Value* to) {
  outputs_.at(i).second = to;
}

void Graph::RemoveDeadCode() {
  std::unordered_set<const Value*> live;
  for (const auto& [name, v] : outputs_) live.insert(v);
  for (const auto& [state, v] : state_updates_) live.insert(v);
  for (const Value* v : pins_) live.insert(v);
  std::unordered_set<const Op*> live_ops;
  for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) {
    Op* op = it->get();
    bool used =
        op->schema->side_effects || std::any_of(op->outputs.begin(), op->outputs.end(),
                                                [&](const Value* v) { return live.count(v) != 0; });
    if (!used) continue;
    live_ops.insert(op);
    // A kept op keeps all its outputs, used or not: it still writes them.
    for (const Value* out : op->outputs) live.insert(out);
    for (Value* in : op->inputs) {
      if (in) live.insert(in);
    }
  }
  std::erase_if(ops_, [&](const std::unique_ptr<Op>& op) { return live_ops.count(op.get()) == 0; });
  for (auto& v : values_) {
    std::erase_if(v->users, [&](const Op* op) { return live_ops.count(op) == 0; });
  }
  // Inputs and states stay even when unused: the user still feeds them, and
  // states keep their storage.
  std::erase_if(values_, [&](const std::unique_ptr<Value>& v) {
    return live.count(v.get()) == 0 && v->kind != ValueKind::kInput && v->kind != ValueKind::kState;
  });
}

int Graph::RemoveOps(const std::function<bool(const Op&)>& drop) {
  std::unordered_set<const Op*> dropped;
  std::unordered_set<const Value*> gone;
  for (const auto& op : ops_) {
    if (!drop(*op)) continue;
    dropped.insert(op.get());
    for (const Value* v : op->outputs) gone.insert(v);
  }
  if (dropped.empty()) return 0;
  for (const auto& op : ops_) {
    if (dropped.count(op.get())) continue;
    for (const Value* in : op->inputs)
      TILLER_CHECK(!in || !gone.count(in), "op {} ({}) reads %{} of an op being removed", op->type,
                   op->name, in->id);
  }
  for (const auto& [name, v] : outputs_)
    TILLER_CHECK(!gone.count(v), "output '{}' is computed by an op being removed", name);
  for (const auto& [state, v] : state_updates_)
    TILLER_CHECK(!gone.count(v), "the update of state '{}' is computed by an op being removed",
                 state->name);
  for (Value*& v : pins_) {
    if (gone.count(v)) v = nullptr;
  }
  std::erase_if(ops_, [&](const std::unique_ptr<Op>& op) { return dropped.count(op.get()) != 0; });
  for (auto& v : values_) {
    std::erase_if(v->users, [&](const Op* op) { return dropped.count(op) != 0; });
  }
  std::erase_if(values_, [&](const std::unique_ptr<Value>& v) { return gone.count(v.get()) != 0; });
  return static_cast<int>(dropped.size());
}

void Graph::ReorderOps(const std::vector<const Op*>& order) {
  TILLER_CHECK(order.size() == ops_.size(), "reorder: {} ops for {}", order.size(), ops_.size());
  std::unordered_map<const Op*, size_t> old_index;
  for (size_t i = 0; i < ops_.size(); ++i) old_index[ops_[i].get()] = i;
  std::unordered_set<const Op*> placed;
  std::vector<std::unique_ptr<Op>> next;
  const Op* last_effect = nullptr;
  std::vector<const Op*> effects;
  for (const auto& op : ops_) {
    if (op->schema->side_effects) effects.push_back(op.get());
  }
  size_t effect = 0;
  for (const Op* op : order) {
    auto it = old_index.find(op);
    TILLER_CHECK(it != old_index.end() && !placed.count(op),
                 "reorder: op {} ({}) is not a new op "
                 "of the graph",
                 op ? op->type : "null", op ? op->name : "");
    for (const Value* in : op->inputs) {
      TILLER_CHECK(!in || !in->producer || placed.count(in->producer),
                   "reorder: op {} ({}) before the producer of its input %{}", op->type, op->name,
                   in->id);
    }
    if (op->schema->side_effects) {
      TILLER_CHECK(effects[effect++] == op, "reorder: side-effect op {} ({}) moved past {}",
                   op->type, op->name, last_effect ? last_effect->name : "another");
      last_effect = op;
    }
    placed.insert(op);
    next.push_back(std::move(ops_[it->second]));
  }
  ops_ = std::move(next);
}

std::string Graph::ToString() const {
  std::string out;
  auto name_of = [](const Value* v) {
    return v ? fmt::format("%{}:{}", v->id, v->type.ToString()) : std::string("-");
  };
  for (const Value* v : inputs_) out += fmt::format("input {} = {}\n", v->name, name_of(v));
  for (const auto& op : ops_) {
    std::string outs, ins;
    for (const Value* v : op->outputs) outs += (outs.empty() ? "" : ", ") + name_of(v);
    for (const Value* v : op->inputs) ins += (ins.empty() ? "" : ", ") + name_of(v);
    std::string attrs;
    for (const auto& [k, a] : op->attrs.all())
      attrs += fmt::format(" {}={}", k, AttributeToString(a));
    // Placement, always: [phase shard/stage @device] (device -1: not placed yet).
    const Placement& p = op->placement;
    std::string where =
        fmt::format(" [{} {}/{} @{}]", PhaseName(p.phase), p.shard, p.stage, op->device);
    out += fmt::format("{} = {}({}){}{}  # {}\n", outs, op->type, ins, attrs, where, op->name);
  }
  for (const auto& [name, v] : outputs_) out += fmt::format("output {} = {}\n", name, name_of(v));
  for (const auto& [state, v] : state_updates_)
    out += fmt::format("state {} <- {}\n", state->name, name_of(v));
  return out;
}

void Verify(const Graph& g) {
  std::set<const Value*> defined;
  for (const auto& v : g.values()) {
    if (v->kind != ValueKind::kIntermediate) defined.insert(v.get());
  }
  for (const auto& op : g.ops()) {
    const OpSchema* schema = FindOpSchema(op->type);
    TILLER_CHECK(schema, "unknown op type '{}'", op->type);
    TILLER_CHECK(op->schema == schema, "op {} ({}) points at another schema", op->type, op->name);
    if (!schema->open_attrs) {
      for (const auto& [key, value] : op->attrs.all()) {
        const AttrDecl* d = schema->FindAttr(key);
        TILLER_CHECK(d && d->kind == KindOf(value),
                     "op {} ({}): attribute '{}' = {} is undeclared or of another kind", op->type,
                     op->name, key, AttributeToString(value));
      }
    }
    for (const Value* in : op->inputs) {
      if (!in) continue;
      TILLER_CHECK(defined.count(in), "op {} ({}) uses %{} before it is defined", op->type,
                   op->name, in->id);
      TILLER_CHECK(std::count(in->users.begin(), in->users.end(), op.get()) > 0,
                   "op {} missing from the users of %{}", op->type, in->id);
    }
    for (const Value* out : op->outputs) {
      TILLER_CHECK(out->producer == op.get(), "output %{} of {} has another producer", out->id,
                   op->type);
      defined.insert(out);
    }
  }
  for (const auto& [name, v] : g.outputs()) {
    TILLER_CHECK(defined.count(v), "graph output '{}' is not defined", name);
  }
}

}  // namespace tiller::ir
