// conv2d|conv2d_int8|conv2d_transpose|pool2d|interp -> relu -> add -> conv2d ...
//   (NCHW, inference)
//   ==>  transpose{to NHWC} -> conv2d{NHWC} -> relu -> add -> conv2d{NHWC} ...
//        -> transpose{to NCHW} only where an NCHW reader remains
// Convolution kernels run fastest on channel-last activations (GEMM-based
// ones pick that layout themselves for most shapes), so a convolution on NCHW tensors reorders its
// input and its result every time: on MobileNetV3 at batch 8 the reorders took more time than the
// convolutions. Here a chain of convolutions, poolings, resamplings (UNet's upsampling) and the ops
// between them that are layout-agnostic (activations, residual adds, the squeeze-excitation
// multiply) or name their axes (concat of skip connections, slices,
// reductions keeping their dims) keeps NHWC tensors, and a transpose
// converts only where the chain starts and where something outside it reads
// its values. Inference only: the gradient rules are channel-first.
//
// One walk in graph order keeps, for each NCHW value, its NHWC twin once one
// exists. A conv2d or conv2d_transpose is rebuilt channel-last on its
// input's twin (a transpose makes one when there is none), a pool2d or an
// interp when its input has a twin. An op of LayoutRule::kAgnostic, or of
// kAxisAttrs with a 4-D result (its axes renumbered), is rebuilt when some
// inputs have twins: the others are single elements (they broadcast alike in
// any layout) or 4-D tensors transposed in, if they are no more bytes than
// the twins. A rebuilt op's result gets a transpose back to NCHW for the
// readers that stay; dead-code removal drops the ones nobody reads.
#include <unordered_map>

#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

// A convolution, pooling or resampling with data_format NCHW whose kernel
// has an NHWC form for this op.
bool IsChannelFirstSpatialOp(const ir::Op& op) {
  switch (op.opcode) {
    case ir::Opcode::conv2d:
    case ir::Opcode::conv2d_int8:
    case ir::Opcode::pool2d:
    case ir::Opcode::conv2d_transpose:
    case ir::Opcode::interp:
      break;
    default:
      return false;
  }
  if (op.GetStr("data_format") != "NCHW" || op.inputs[0]->rank() != 4) return false;
  // A convolution: its half types too.
  if (op.is(ir::Opcode::conv2d) || op.is(ir::Opcode::conv2d_int8)) return true;
  const DType dt = op.inputs[0]->dtype();
  // The NHWC resampling kernel takes what the NCHW one does (integers only
  // for nearest, which that kernel checks); the NHWC pooling kernel is
  // float32's; conv2d_transpose's NHWC form takes float32, one group and an
  // output padding no larger than the end pad.
  if (op.is(ir::Opcode::interp)) return dt == DType::kF32 || dt == DType::kI32 || dt == DType::kI64;
  if (dt != DType::kF32) return false;
  if (op.is(ir::Opcode::pool2d)) return true;
  if (op.GetInt("groups") != 1) return false;
  const std::array<int64_t, 2> end =
      ir::ConvTransposeEndPads(op, op.inputs[0]->shape(), op.inputs[1]->shape());
  return end[0] >= 0 && end[1] >= 0;
}

// Where NCHW dim d sits in NHWC.
constexpr int64_t kNhwcPosition[4] = {0, 3, 1, 2};

// An op naming NCHW axes in attributes, with them renumbered for NHWC
// inputs and result into `attrs`; false when it does not qualify
// (transpose's perm is an order, not axes: it is left alone).
bool RemapAxes(const ir::Op& op, ir::AttrMap* attrs) {
  const ir::OpSchema* s = ir::FindOpSchema(op.type);
  if (!s || s->layout != ir::LayoutRule::kAxisAttrs || s->side_effects ||
      op.is(ir::Opcode::transpose) || op.outputs.size() != 1 || op.outputs[0]->rank() != 4)
    return false;
  for (const ir::Value* in : op.inputs) {
    if (!in || in->rank() != 4) return false;
  }
  auto position = [](int64_t axis, int64_t* out) {
    const int a = NormalizeAxis(axis, 4);
    if (a < 0) return false;
    *out = kNhwcPosition[a];
    return true;
  };
  for (const std::string& name : s->axis_attrs) {
    const ir::AttrDecl* decl = s->FindAttr(name);
    if (!decl) return false;
    if (decl->kind == ir::AttrKind::kInt) {
      int64_t a = 0;
      if (!position(op.GetInt(name), &a)) return false;
      attrs->Set(name, a);
    } else if (decl->kind == ir::AttrKind::kInts) {
      std::vector<int64_t> axes;
      for (int64_t axis : op.GetInts(name)) {
        if (!position(axis, &axes.emplace_back())) return false;
      }
      attrs->Set(name, std::move(axes));
    } else {
      return false;
    }
  }
  return true;
}

// A value that broadcasts alike against NCHW and NHWC tensors.
bool IsSingleElement(const ir::Value* v) {
  return v->rank() <= 4 && NumElements(v->shape()) == 1;
}

}  // namespace

int ChannelsLast(ir::Graph& g) {
  std::vector<ir::Op*> ops;
  for (const auto& op : g.ops()) ops.push_back(op.get());
  std::unordered_map<ir::Value*, ir::Value*> twin;  // NCHW value -> the same tensor in NHWC
  auto to_nhwc = [&](ir::Value* v) {
    auto it = twin.find(v);
    if (it != twin.end()) return it->second;
    ir::Value* t = g.Add1("transpose", {v}, {{"perm", kToNhwc}}, v->name + ".nhwc");
    t->name = v->name + ".nhwc";
    twin[v] = t;
    return t;
  };
  int rewrites = 0;
  for (ir::Op* op : ops) {
    std::vector<ir::Value*> ins = op->inputs;
    ir::AttrMap attrs = op->attrs;
    // A pooling or resampling alone would only gain two transposes: it
    // joins a chain a convolution started.
    const bool starts_chain = op->is(ir::Opcode::conv2d) || op->is(ir::Opcode::conv2d_int8) ||
                              op->is(ir::Opcode::conv2d_transpose);
    if (IsChannelFirstSpatialOp(*op) && (starts_chain || twin.count(ins[0]))) {
      g.SetInsertionPoint(op);
      ins[0] = to_nhwc(ins[0]);
      attrs.Set("data_format", std::string("NHWC"));
    } else if (const bool axes = RemapAxes(*op, &attrs); axes || IsLayoutAgnostic(*op)) {
      // Inputs without a twin are transposed in (rank 4: any such tensor
      // broadcasts alike in both layouts) when that moves no more bytes
      // than the twins would moving back: a skip connection's concat of an
      // upsampled NCHW tensor and a chain value joins the chain.
      size_t twin_bytes = 0, other_bytes = 0;
      bool all_ok = true;
      for (ir::Value* in : ins) {
        if (!in || (!twin.count(in) && !IsSingleElement(in) && in->rank() != 4)) {
          all_ok = false;
        } else if (twin.count(in)) {
          twin_bytes += in->bytes();
        } else if (IsSingleElement(in)) {
          // broadcasts alike; a rank-4 one has the same shape in both layouts
          all_ok = all_ok && (!axes || in->rank() == 4);
        } else {
          other_bytes += in->bytes();
        }
      }
      if (!all_ok || twin_bytes == 0 || twin_bytes < other_bytes) continue;
      g.SetInsertionPoint(op);
      for (ir::Value*& in : ins) {
        if (twin.count(in)) {
          in = twin.at(in);
        } else if (!IsSingleElement(in)) {
          in = to_nhwc(in);
        }
      }
    } else {
      continue;
    }
    ir::Value* y = op->outputs[0];
    ir::Value* y_nhwc = g.Add1(op->type, ins, attrs, op->name);
    y_nhwc->name = y->name + ".nhwc";
    ir::Value* back = g.Add1("transpose", {y_nhwc}, {{"perm", kToNchw}}, op->name + ".nchw");
    g.SetInsertionPoint(nullptr);
    back->name = y->name;
    g.ReplaceAllUses(y, back);
    twin[back] = y_nhwc;
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
