#include "frontend/paddle/translate.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/memory_cap.h"
#include "frontend/paddle/dtype_codes.h"
#include "ir/op_schema.h"

namespace tiller::paddle {
namespace {

struct Entry {
  Translator fn;
  std::optional<std::vector<std::string>> ir_ops;
};

std::map<std::string, Entry>& Registry() {
  static std::map<std::string, Entry> registry;
  return registry;
}

template <typename T>
std::shared_ptr<AlignedBuffer> MakeBuffer(const std::vector<T>& values) {
  auto buf = std::make_shared<AlignedBuffer>(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(buf->data(), values.data(), buf->size());
  return buf;
}

}  // namespace

bool RegisterTranslator(const std::string& paddle_type, Translator fn,
                        std::vector<std::string> ir_ops) {
  bool inserted = Registry().emplace(paddle_type, Entry{std::move(fn), std::move(ir_ops)}).second;
  TILLER_CHECK(inserted, "translator for '{}' registered twice", paddle_type);
  return true;
}

bool RegisterTranslator(const std::string& paddle_type, Translator fn) {
  bool inserted = Registry().emplace(paddle_type, Entry{std::move(fn), std::nullopt}).second;
  TILLER_CHECK(inserted, "translator for '{}' registered twice", paddle_type);
  return true;
}

const Translator* FindTranslator(const std::string& paddle_type) {
  auto it = Registry().find(paddle_type);
  return it == Registry().end() ? nullptr : &it->second.fn;
}

const std::vector<std::string>* TranslatorIrOps(const std::string& paddle_type) {
  auto it = Registry().find(paddle_type);
  return it == Registry().end() || !it->second.ir_ops ? nullptr : &*it->second.ir_ops;
}

std::vector<std::string> SupportedPaddleOps() {
  std::vector<std::string> out;
  for (const auto& [name, fn] : Registry()) out.push_back(name);
  return out;
}

ir::Value* TranslateContext::Lookup(const std::string& var) const {
  auto it = vars_.find(var);
  return it == vars_.end() ? nullptr : it->second;
}

ir::Value* TranslateContext::InOpt(const OpDesc& op, const std::string& slot, size_t idx) {
  const auto& args = op.Inputs(slot);
  if (idx >= args.size()) return nullptr;
  ir::Value* v = Lookup(args[idx]);
  if (!v && coos_.count(args[idx]))
    Unsupported(op,
                "input {} = '{}' is a sparse COO tensor, which this op does not take "
                "(to_dense() it first)",
                slot, args[idx]);
  if (!v) Invalid(op, "input {} = '{}' is not produced by any earlier op", slot, args[idx]);
  return v;
}

bool TranslateContext::IsCoo(const OpDesc& op, const std::string& slot, size_t idx) const {
  const auto& args = op.Inputs(slot);
  return idx < args.size() && coos_.count(args[idx]);
}

const TranslateContext::Coo& TranslateContext::CooIn(const OpDesc& op, const std::string& slot,
                                                     size_t idx) {
  const auto& args = op.Inputs(slot);
  if (idx >= args.size()) Invalid(op, "missing input slot {}[{}]", slot, idx);
  auto it = coos_.find(args[idx]);
  if (it == coos_.end()) {
    if (Lookup(args[idx]))
      Unsupported(op, "input {} = '{}' is a dense tensor; this op takes a sparse COO tensor", slot,
                  args[idx]);
    Invalid(op, "input {} = '{}' is not produced by any earlier op", slot, args[idx]);
  }
  return it->second;
}

void TranslateContext::SetCooOut(const OpDesc& op, const std::string& slot, Coo coo, size_t idx) {
  const auto& args = op.Outputs(slot);
  if (idx < args.size()) coos_[args[idx]] = std::move(coo);
}

ir::Value* TranslateContext::In(const OpDesc& op, const std::string& slot, size_t idx) {
  ir::Value* v = InOpt(op, slot, idx);
  if (!v) Invalid(op, "missing input slot {}[{}]", slot, idx);
  return v;
}

std::vector<ir::Value*> TranslateContext::Ins(const OpDesc& op, const std::string& slot) {
  std::vector<ir::Value*> out;
  for (size_t i = 0; i < op.Inputs(slot).size(); ++i) out.push_back(In(op, slot, i));
  return out;
}

bool TranslateContext::HasOut(const OpDesc& op, const std::string& slot) const {
  return !op.Outputs(slot).empty();
}

void TranslateContext::SetOut(const OpDesc& op, const std::string& slot, ir::Value* v, size_t idx) {
  const auto& args = op.Outputs(slot);
  if (idx < args.size()) {
    // Name run-time values after the Paddle variable, for messages and dumps.
    if (v->kind == ir::ValueKind::kIntermediate && v->producer && v->producer->outputs.size() == 1)
      v->name = args[idx];
    vars_[args[idx]] = v;
  }
}

ir::Op* TranslateContext::AddOp(const OpDesc& op, const std::string& type,
                                std::vector<ir::Value*> inputs, ir::AttrMap attrs) {
  // Keeps the declarations `tiller ops` prints true (the op harness runs
  // every translator through here).
  const std::vector<std::string>* declared = TranslatorIrOps(op.type);
  TILLER_CHECK(!declared || std::find(declared->begin(), declared->end(), type) != declared->end(),
               "translator of Paddle op {} emitted IR op {}, which its registration does not "
               "declare",
               op.type, type);
  return graph_.AddOp(type, std::move(inputs), std::move(attrs), op.Describe());
}

ir::Value* TranslateContext::Add1(const OpDesc& op, const std::string& type,
                                  std::vector<ir::Value*> inputs, ir::AttrMap attrs) {
  ir::Op* added = AddOp(op, type, std::move(inputs), std::move(attrs));
  TILLER_CHECK(added->outputs.size() == 1, "op {} has {} outputs", type, added->outputs.size());
  return added->outputs[0];
}

ir::Value* TranslateContext::StepCounter() {
  if (!step_) step_ = graph_.AddInput(kStepInput, {DType::kI64, {1}});
  return step_;
}

ir::Value* TranslateContext::Reshape(const OpDesc& op, ir::Value* x, const Shape& shape) {
  if (x->shape() == shape) return x;
  return Add1(op, "reshape", {x}, {{"shape", std::vector<int64_t>(shape)}});
}

ir::Value* TranslateContext::ConstI64(const std::vector<int64_t>& values, const Shape& shape) {
  return graph_.AddData("const", {DType::kI64, shape}, ir::ValueKind::kConstant,
                        MakeBuffer(values));
}

ir::Value* TranslateContext::ConstF32(const std::vector<float>& values, const Shape& shape) {
  return graph_.AddData("const", {DType::kF32, shape}, ir::ValueKind::kConstant,
                        MakeBuffer(values));
}

ir::Value* TranslateContext::ConstScalar(double value, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ConstF32({static_cast<float>(value)}, {});
    case DType::kI64:
      return ConstI64({static_cast<int64_t>(value)}, {});
    case DType::kF64:
      return graph_.AddData("const", {dtype, {}}, ir::ValueKind::kConstant,
                            MakeBuffer(std::vector<double>{value}));
    case DType::kI32:
      return graph_.AddData("const", {dtype, {}}, ir::ValueKind::kConstant,
                            MakeBuffer(std::vector<int32_t>{static_cast<int32_t>(value)}));
    case DType::kBool:
      return graph_.AddData("const", {dtype, {}}, ir::ValueKind::kConstant,
                            MakeBuffer(std::vector<uint8_t>{static_cast<uint8_t>(value != 0)}));
    default:
      Fail(ErrorKind::kUnimplemented, "constant of dtype {} is not supported", DTypeName(dtype));
  }
}

std::vector<int64_t> TranslateContext::ConstInts(const OpDesc& op, const ir::Value* v) {
  if (!v->data)
    Unsupported(op, "tensor '{}' must be known at compile time (it depends on run-time data)",
                v->name);
  int64_t n = NumElements(v->shape());
  std::vector<int64_t> out(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (v->dtype()) {
      case DType::kI64:
        out[i] = v->const_data<int64_t>()[i];
        break;
      case DType::kI32:
        out[i] = v->const_data<int32_t>()[i];
        break;
      default:
        Unsupported(op, "tensor '{}' has dtype {}, expected an integer", v->name,
                    DTypeName(v->dtype()));
    }
  }
  return out;
}

int64_t TranslateContext::ConstInt(const OpDesc& op, const ir::Value* v) {
  const std::vector<int64_t> values = ConstInts(op, v);
  if (values.empty()) Invalid(op, "tensor '{}' holds no value, expected one", v->name);
  return values[0];
}

double TranslateContext::ConstFloat(const OpDesc& op, const ir::Value* v) {
  const std::vector<double> values = ConstFloats(op, v);
  if (values.empty()) Invalid(op, "tensor '{}' holds no value, expected one", v->name);
  return values[0];
}

std::vector<double> TranslateContext::ConstFloats(const OpDesc& op, const ir::Value* v) {
  if (!v->data) Unsupported(op, "tensor '{}' must be known at compile time", v->name);
  int64_t n = NumElements(v->shape());
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (v->dtype()) {
      case DType::kF32:
        out[i] = v->const_data<float>()[i];
        break;
      case DType::kF64:
        out[i] = v->const_data<double>()[i];
        break;
      case DType::kI64:
        out[i] = static_cast<double>(v->const_data<int64_t>()[i]);
        break;
      case DType::kI32:
        out[i] = v->const_data<int32_t>()[i];
        break;
      case DType::kBool:
        out[i] = v->const_data<uint8_t>()[i] != 0 ? 1.0 : 0.0;
        break;
      default:
        Unsupported(op, "tensor '{}' has dtype {}, expected a number", v->name,
                    DTypeName(v->dtype()));
    }
  }
  return out;
}

DType PaddleAttrDType(const TranslateContext& ctx, const OpDesc& op, const std::string& attr) {
  const ir::Attribute* a = op.attrs.Find(attr);
  if (!a) ctx.Invalid(op, "missing attribute '{}'", attr);
  DType out;
  if (auto* s = std::get_if<std::string>(a)) {
    if (ParseDType(*s, &out)) return out;
  } else if (auto* i = std::get_if<int64_t>(a)) {
    if (DTypeFromVarType(*i, &out)) return out;
  }
  ctx.Unsupported(op, "attribute {} = {} is not a supported dtype", attr,
                  ir::AttributeToString(*a));
}

std::map<std::string, int> UnsupportedOps(const Program& program) {
  std::map<std::string, int> missing;
  for (const OpDesc& op : program.ops) {
    if (!FindTranslator(op.type)) ++missing[op.type];
  }
  return missing;
}

void FailUnsupportedOps(const std::string& path, const std::map<std::string, int>& missing) {
  if (missing.empty()) return;
  std::string list;
  int total = 0;
  for (const auto& [type, count] : missing) {
    list += fmt::format("\n  {} (x{})", type, count);
    total += count;
  }
  Fail(ErrorKind::kUnimplemented, "{}: {} unsupported op type(s), {} op(s) in all:{}", path,
       missing.size(), total, list);
}

namespace {

// The window attributes of convolutions and poolings, which kernels divide
// by (strides, groups), step by (dilations) or size buffers from (ksize,
// paddings): refused with the value named whatever the input shapes, so a
// model with a dynamic batch is refused at creation too (a stride of 0 was
// a division by zero, SIGFPE, when the model ran; an empty strides list was
// read past its end).
void CheckWindowAttributes(const Program& program) {
  auto fail = [&](const OpDesc& op, const std::string& problem) {
    if (!problem.empty())
      Fail(ErrorKind::kInvalidArgument, "{}: op {}: {}", program.path, op.Describe(), problem);
  };
  auto check = [&](const OpDesc& op, const char* attr, size_t count, int64_t least) {
    if (op.attrs.Has(attr))
      fail(op, ir::ValuesAtLeastProblem(attr, op.attrs.Ints(attr), count, least));
  };
  for (const OpDesc& op : program.ops) {
    const bool conv = op.type.find("conv2d") != std::string::npos;
    const bool pool = op.type == "pool2d" || op.type == "max_pool2d_with_index";
    if (!conv && !pool) continue;
    check(op, "strides", 2, 1);
    check(op, "dilations", 2, 1);
    if (op.attrs.Str("padding_algorithm", "EXPLICIT") == "EXPLICIT" && op.attrs.Has("paddings")) {
      // [h, w] or [top, bottom, left, right].
      const size_t n = op.attrs.Ints("paddings").size();
      check(op, "paddings", n == 2 ? 2 : 4, 0);
    }
    if (pool && !op.attrs.Bool("global_pooling", false)) check(op, "ksize", 2, 1);
    if (conv && op.attrs.Int("groups", 1) < 1)
      fail(op, fmt::format("groups {} must be >= 1", op.attrs.Int("groups", 1)));
  }
}

}  // namespace

void CheckSupported(const Program& program) {
  FailUnsupportedOps(program.path, UnsupportedOps(program));
  CheckWindowAttributes(program);
}

void TranslateOp(TranslateContext& ctx, const OpDesc& op) {
  const Translator* fn = FindTranslator(op.type);
  if (!fn)
    Fail(ErrorKind::kUnimplemented, "{}: op {} is not supported", ctx.program().path,
         op.Describe());
  // Manual sharding set by Paddle's ipu_shard_guard travels with every IR op
  // the Paddle op becomes (through the graph's placement scope). An op
  // outside a guard (-1 or no attribute, as in Paddle) runs where the
  // latest of its inputs (in pipeline order) was computed: ops Paddle adds
  // after the user's (save_inference_model's scale, AMP's casts) stay
  // downstream of what they read instead of flowing back to the first
  // stage; an op that reads nothing computed keeps the scope's.
  ir::Placement where = ctx.graph().placement_scope();
  int64_t shard = op.attrs.Int("ipu_index", -1), stage = op.attrs.Int("ipu_stage", -1);
  if (shard < 0 && stage < 0) {
    const ir::Op* latest = nullptr;
    for (const auto& [slot, names] : op.inputs) {
      for (const std::string& name : names) {
        const ir::Value* v = ctx.Lookup(name);
        const ir::Op* p = v ? v->producer : nullptr;
        if (p &&
            (!latest || ir::PipelineOrder(latest->placement) < ir::PipelineOrder(p->placement)))
          latest = p;
      }
    }
    if (latest) {
      where.shard = latest->placement.shard;
      where.stage = latest->placement.stage;
    }
  }
  if (shard >= 0) where.shard = static_cast<int>(shard);
  if (stage >= 0) where.stage = static_cast<int>(stage);
  ir::ScopedPlacement scope(ctx.graph(), where);
  try {
    (*fn)(ctx, op);
  } catch (const Error& e) {
    // Shape errors raised by IR schemas name the IR op; add the file.
    std::string msg = e.what();
    const std::string& path = ctx.program().path;
    if (msg.find(path) == std::string::npos) msg = path + ": " + msg;
    throw Error(e.kind(), msg);
  }
}

namespace {

// After the fetch targets: each entry-counted value (TranslateContext::
// MarkEntryCounted) must reach the fetches only through ops that map each
// element to itself (scale, cast, identity: Paddle 2.6's
// save_inference_model puts a scale by 1 after every fetch target), since other
// ops would read its padding; each fetch of one gets its count as the graph
// output EntriesOutputName(target).
void AddEntryCounts(const TranslateContext& ctx, ir::Graph& graph) {
  if (ctx.entry_counts().empty()) return;
  std::map<const ir::Value*, ir::Value*> counts(ctx.entry_counts().begin(),
                                                ctx.entry_counts().end());
  for (const auto& op : graph.ops()) {
    for (const ir::Value* in : op->inputs) {
      auto it = counts.find(in);
      if (it == counts.end()) continue;
      if ((op->is(ir::Opcode::scale) || op->is(ir::Opcode::scale_tensor) ||
           op->is(ir::Opcode::cast) || op->is(ir::Opcode::identity)) &&
          op->inputs[0] == in && op->outputs[0]->shape() == in->shape()) {
        counts[op->outputs[0]] = it->second;
        continue;
      }
      Fail(ErrorKind::kUnimplemented,
           "{}: '{}' (values() or indices() of a sparse tensor whose entry count depends on "
           "the data) is read by op {} ({}): Tiller gives such a tensor only as a fetch "
           "target, its entry dim known after the run",
           ctx.program().path, in->name, op->type, op->name);
    }
  }
  const size_t targets = graph.outputs().size();
  for (size_t i = 0; i < targets; ++i) {
    const auto [name, v] = graph.outputs()[i];
    auto it = counts.find(v);
    if (it != counts.end()) graph.AddOutput(EntriesOutputName(name), it->second);
  }
}

}  // namespace

std::unique_ptr<ir::Graph> Translate(const Model& model, const std::vector<ir::TensorType>& feeds,
                                     ir::Graph::Folder folder, const TranslateOptions& options) {
  const Program& program = model.program;
  CheckSupported(program);
  TILLER_CHECK(feeds.size() == program.feed_names.size(), "{} feed types for {} feeds",
               feeds.size(), program.feed_names.size());

  auto graph = std::make_unique<ir::Graph>();
  graph->set_folder(std::move(folder));
  TranslateContext ctx(program, *graph);
  ctx.set_random_seed(options.random_seed);
  ctx.set_training(options.training);
  ctx.set_entry_counted_outputs(options.entry_counted_outputs);
  for (size_t i = 0; i < feeds.size(); ++i) {
    ctx.Bind(program.feed_names[i], graph->AddInput(program.feed_names[i], feeds[i]));
  }
  for (const std::string& name : program.param_names) {
    auto it = model.params.find(name);
    TILLER_CHECK(it != model.params.end(), "parameter '{}' was not loaded", name);
    const ParamTensor& p = it->second;
    ctx.Bind(name,
             graph->AddData(name, {p.dtype, p.dims}, ir::ValueKind::kParam, model.ParamData(name)));
  }
  // From here: the parameters' bytes (read as they are bound) are the
  // model's, not what building its graph takes.
  HostMemoryScope budget(program.path);
  for (size_t i = 0; i < program.ops.size(); ++i) {
    if (i % 4096 == 0 && i)
      CheckHostMemory(fmt::format("translating op {} of {}", i, program.ops.size()));
    TranslateOp(ctx, program.ops[i]);
  }
  for (const std::string& name : program.fetch_names) {
    ir::Value* v = ctx.Lookup(name);
    if (!v)
      Fail(ErrorKind::kInvalidArgument, "{}: fetch target '{}' is never produced", program.path,
           name);
    graph->AddOutput(name, v);
  }
  AddEntryCounts(ctx, *graph);
  graph->RemoveDeadCode();
  ir::Verify(*graph);
  return graph;
}

}  // namespace tiller::paddle
