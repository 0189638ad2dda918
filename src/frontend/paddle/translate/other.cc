// Paddle ops outside the math families: print, identity/detach,
// checkpointoutput (a recomputation boundary), yolo_box. Custom op types are
// translated by runtime/custom_op.cc, registered when their library loads.
#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"

namespace tiller::paddle {
namespace {

using pir::T;

void Print(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "In");
  std::string phase = op.attrs.Str("print_phase", "BOTH");
  if (phase != "BOTH" && phase != "FORWARD" && phase != "BACKWARD")
    ctx.Unsupported(op, "print_phase = '{}' (FORWARD, BACKWARD, BOTH)", phase);
  // The backward half of a print (is_forward = false, or phase BACKWARD)
  // prints nothing in a forward run.
  if (phase == "BACKWARD" || !op.attrs.Bool("is_forward", true)) {
    ctx.SetOut(op, "Out", x);
    return;
  }
  const auto& names = op.Inputs("In");
  ir::AttrMap a;
  a.Set("var_name", names.empty() ? std::string() : names[0]);
  a.Set("message", op.attrs.Str("message", ""));
  a.Set("summarize", op.attrs.Int("summarize", 20));
  a.Set("first_n", op.attrs.Int("first_n", -1));
  for (const char* flag : {"print_tensor_name", "print_tensor_type", "print_tensor_shape"})
    a.Set(flag, op.attrs.Bool(flag, true));
  // print_tensor_layout / print_tensor_lod: Tiller tensors are dense row-major
  // without LoD, so there is nothing to add for them.
  ctx.SetOut(op, "Out", ctx.Add1(op, "print", {x}, a));
}

void PassThrough(TranslateContext& ctx, const OpDesc& op) {
  ctx.SetOut(op, "Out", ctx.In(op, "X"));
}

// checkpointoutput marks a value a later training pass keeps instead of
// recomputing (recomputation checkpoint): an identity op flagged `checkpoint`
// so the value and the mark survive translation.
void CheckpointOutput(TranslateContext& ctx, const OpDesc& op) {
  ctx.SetOut(op, "Out", ctx.Add1(op, "identity", {ctx.In(op, "X")}, {{"checkpoint", true}}));
}

void YoloBox(TranslateContext& ctx, const OpDesc& op) {
  ir::AttrMap a;
  a.Set("anchors", op.attrs.Ints("anchors"));
  a.Set("class_num", op.attrs.Int("class_num", 1));
  a.Set("conf_thresh", op.attrs.Float("conf_thresh", 0.01));
  a.Set("downsample_ratio", op.attrs.Int("downsample_ratio", 32));
  a.Set("clip_bbox", op.attrs.Bool("clip_bbox", true));
  a.Set("scale_x_y", op.attrs.Float("scale_x_y", 1.0));
  a.Set("iou_aware", op.attrs.Bool("iou_aware", false));
  a.Set("iou_aware_factor", op.attrs.Float("iou_aware_factor", 0.5));
  ir::Value* img = ctx.In(op, "ImgSize");
  if (img->dtype() != DType::kI32)
    ctx.Unsupported(op, "ImgSize dtype {} (Paddle's kernel reads int32)", DTypeName(img->dtype()));
  // One IR op per output (each decodes what it writes), so an unused
  // output costs nothing once dead code is removed.
  ir::Value* x = ctx.In(op, "X");
  a.Set("output", std::string("boxes"));
  ctx.SetOut(op, "Boxes", ctx.Add1(op, "yolo_box", {x, img}, a));
  a.Set("output", std::string("scores"));
  ctx.SetOut(op, "Scores", ctx.Add1(op, "yolo_box", {x, img}, a));
}

const bool kRegistered = [] {
  RegisterTranslator("print", Print, {"print"});
  RegisterPirOpCompat("print", {"print", {T("In")}, {"Out"}, {}, {}});
  RegisterTranslator("identity", PassThrough, {});
  RegisterTranslator("detach", PassThrough, {});
  RegisterTranslator("checkpointoutput", CheckpointOutput, {"identity"});
  RegisterTranslator("yolo_box", YoloBox, {"yolo_box"});
  RegisterPirOpCompat("yolo_box",
                      {"yolo_box", {T("X"), T("ImgSize")}, {"Boxes", "Scores"}, {}, {}});
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
