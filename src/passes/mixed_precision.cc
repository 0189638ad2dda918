// matmul | matmul_accumulate | linear | conv2d on float32 operands
//   ==>  the same op on half operands, {out_dtype: float32}
//        (a cast before each operand, one per value; weights converted here, once)
// The ops whose precision rule is half safe do their multiplications in
// half precision and accumulate in float32 (the devices' half GEMMs and
// convolutions), and give a float32 result, so nothing
// downstream changes: softmax, layer_norm, losses, reductions and the
// optimizer keep running in float32 on float32 values, and so do the
// gradients' accumulators and the weights themselves (the master copies).
// A weight known at compile time (a parameter or constant) is converted
// into a new half parameter now and never again; a weight that is state
// (training) is cast once per run, and the forward and backward GEMMs that
// read it share that cast. Bias and accumulator operands stay float32.
//
// A cast of a value that only that cast reads, produced by a converted op
// through data movement alone (reshape, transpose), is folded away: the
// op writes the half type itself (out_dtype half, the GEMM rounding its
// float32 accumulators as it stores them: the same bits as the cast) and
// the movement runs on half the bytes. Attention's Q, K, V and context and
// the FFN's inner activation never exist in float32.
//
// Without half arithmetic on the device (compute_in_half false: a half type
// no device has a GEMM for) each operand makes the
// round trip float32 -> float16 -> float32 instead and the op stays
// float32: the values are those float16 storage holds, the arithmetic is
// float32's.
#include <fmt/format.h>

#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "core/half.h"
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

// The operands an op multiplies (its bias and accumulator are not).
std::vector<size_t> MultipliedOperands(ir::Opcode opcode) {
  switch (opcode) {
    case ir::Opcode::matmul:
    case ir::Opcode::linear:
    case ir::Opcode::conv2d:
      return {0, 1};
    case ir::Opcode::matmul_accumulate:
      return {1, 2};
    default:
      return {};
  }
}

// `v`'s data rounded to `half` (as_half: stored as half; else rounded and
// widened back to float32).
std::shared_ptr<AlignedBuffer> ConvertData(const ir::Value& v, DType half, bool as_half) {
  const int64_t n = NumElements(v.shape());
  const float* src = v.const_data<float>();
  auto out = std::make_shared<AlignedBuffer>(static_cast<size_t>(n) * (as_half ? 2 : 4));
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t bits = half == DType::kBF16 ? FloatToBF16(src[i]) : FloatToHalf(src[i]);
    if (as_half)
      out->as<uint16_t>()[i] = bits;
    else
      out->as<float>()[i] = half == DType::kBF16 ? BF16ToFloat(bits) : HalfToFloat(bits);
  }
  return out;
}

class Converter {
 public:
  Converter(ir::Graph& g, const MixedPrecisionOptions& o) : g_(g), o_(o) {}

  // The operand `v` as `op` should read it, converted once per value.
  ir::Value* Operand(ir::Value* v, const ir::Op& op) {
    auto it = converted_.find(v);
    if (it != converted_.end()) return it->second;
    ir::Value* out;
    const std::string suffix = o_.compute_in_half ? DTypeName(o_.half) : "rounded";
    if (HasData(v)) {
      out = g_.AddData(fmt::format("{}.{}", v->name, suffix),
                       {o_.compute_in_half ? o_.half : DType::kF32, v->shape()}, v->kind,
                       ConvertData(*v, o_.half, o_.compute_in_half));
      ++weights_;
      weight_bytes_ += v->bytes();
      weight_half_bytes_ += out->bytes();
    } else {
      // Before its first user: after the value's producer, in the user's
      // placement (shard, stage, phase).
      g_.SetInsertionPoint(&op);
      out = g_.Add1("cast", {v}, {{"dtype", std::string(DTypeName(o_.half))}},
                    fmt::format("{}.{}", v->name, DTypeName(o_.half)));
      ++casts_;
      if (!o_.compute_in_half) {
        out = g_.Add1("cast", {out}, {{"dtype", std::string("float32")}},
                      fmt::format("{}.rounded", v->name));
        ++casts_;
      }
      g_.SetInsertionPoint(nullptr);
    }
    converted_.emplace(v, out);
    return out;
  }

  // `folded`: casts FoldCastsIntoProducers removed since.
  std::string Detail(const std::map<std::string, int>& ops, int folded) const {
    std::string list;
    for (const auto& [type, n] : ops)
      list += fmt::format("{}{} {}", list.empty() ? "" : ", ", type, n);
    std::string s =
        fmt::format("{} {} ({}): ", o_.compute_in_half ? "multiplied in" : "operands rounded to",
                    DTypeName(o_.half), list);
    if (!o_.compute_in_half)
      s += fmt::format(
          "float32 arithmetic on {0}-rounded operands (no {0} arithmetic on the device); ",
          DTypeName(o_.half));
    s +=
        fmt::format("{} weights converted at compile time ({:.2f} -> {:.2f} MiB), {} casts per run",
                    weights_, static_cast<double>(weight_bytes_) / 1048576.0,
                    static_cast<double>(weight_half_bytes_) / 1048576.0, casts_ - folded);
    if (folded)
      s += fmt::format(" ({} more folded into the op before them, which writes {})", folded,
                       DTypeName(o_.half));
    return s;
  }

 private:
  ir::Graph& g_;
  const MixedPrecisionOptions& o_;
  std::unordered_map<ir::Value*, ir::Value*> converted_;
  int weights_ = 0, casts_ = 0;
  size_t weight_bytes_ = 0, weight_half_bytes_ = 0;
};

bool IsMovement(const ir::Op& op) {
  return op.is(ir::Opcode::reshape) || op.is(ir::Opcode::transpose);
}

// Whether `v` is read by exactly one op and is no graph output, state
// update or pinned value (then its float32 form is needed as such).
bool OnlyReadBy(const ir::Graph& g, const ir::Value* v) {
  if (v->users.size() != 1 || g.IsPinned(v)) return false;
  for (const auto& [name, out] : g.outputs()) {
    if (out == v) return false;
  }
  for (const auto& [state, update] : g.state_updates()) {
    if (update == v) return false;
  }
  return true;
}

// Folds casts into the converted op above them (see the file comment).
// Returns the casts removed.
int FoldCastsIntoProducers(ir::Graph& g, DType half) {
  std::vector<ir::Op*> casts;
  for (const auto& op : g.ops()) {
    if (op->is(ir::Opcode::cast) && op->inputs[0]->dtype() == DType::kF32 &&
        op->outputs[0]->dtype() == half)
      casts.push_back(op.get());
  }
  int folded = 0;
  for (ir::Op* cast : casts) {
    // Up through data movement whose results only the next op reads.
    std::vector<ir::Op*> chain;  // bottom-up
    ir::Value* v = cast->inputs[0];
    while (v->producer && IsMovement(*v->producer) && OnlyReadBy(g, v)) {
      chain.push_back(v->producer);
      v = v->producer->inputs[0];
    }
    ir::Op* top = v->producer;
    // A conv2d or linear adding a residual (fuse_conv_add,
    // fuse_linear_residual) adds it in the result's type, and the residual
    // is float32: it keeps writing float32.
    if (!top || MultipliedOperands(top->opcode).empty() || top->GetStr("out_dtype") != "float32" ||
        !OnlyReadBy(g, v) ||
        ((top->is(ir::Opcode::conv2d) || top->is(ir::Opcode::linear)) && top->inputs.size() > 3))
      continue;
    // The op again, writing half, then the movement on half values.
    g.SetInsertionPoint(top);
    ir::AttrMap attrs = top->attrs;
    attrs.Set("out_dtype", std::string(DTypeName(half)));
    ir::Value* h = g.AddOp(top->type, top->inputs, attrs, top->name)->outputs[0];
    h->name = v->name;
    g.SetInsertionPoint(nullptr);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      g.SetInsertionPoint(*it);
      ir::Value* moved = g.Add1((*it)->type, {h}, (*it)->attrs, (*it)->name);
      moved->name = (*it)->outputs[0]->name;
      h = moved;
      g.SetInsertionPoint(nullptr);
    }
    g.ReplaceAllUses(cast->outputs[0], h);
    ++folded;
  }
  if (folded) g.RemoveDeadCode();
  return folded;
}

}  // namespace

bool MultipliesInHalf(const std::string& type) {
  return !MultipliedOperands(ir::OpcodeOf(type)).empty();
}

int ConvertToMixedPrecision(ir::Graph& g, const MixedPrecisionOptions& options,
                            std::string* detail) {
  TILLER_CHECK(options.half == DType::kBF16 || options.half == DType::kF16, "mixed precision to {}",
               DTypeName(options.half));
  std::vector<ir::Op*> targets;
  for (const auto& op : g.ops()) {
    const std::vector<size_t> operands = MultipliedOperands(op->opcode);
    if (operands.empty() || !op->GetStr("out_dtype").empty()) continue;
    bool f32 = op->outputs[0]->dtype() == DType::kF32;
    for (size_t i : operands) f32 = f32 && op->inputs[i]->dtype() == DType::kF32;
    if (f32) targets.push_back(op.get());
  }
  Converter convert(g, options);
  std::map<std::string, int> counts;
  for (ir::Op* op : targets) {
    for (size_t i : MultipliedOperands(op->opcode))
      g.ReplaceInput(op, i, convert.Operand(op->inputs[i], *op));
    if (options.compute_in_half) op->attrs.Set("out_dtype", std::string("float32"));
    ++counts[op->type];
  }
  if (!targets.empty()) g.RemoveDeadCode();
  const int folded =
      options.compute_in_half && options.fold_casts ? FoldCastsIntoProducers(g, options.half) : 0;
  if (detail && !targets.empty()) *detail = convert.Detail(counts, folded);
  return static_cast<int>(targets.size());
}

}  // namespace tiller::passes
