// Detection ops.
//   yolo_box(x [N, C, H, W] float32, img_size [N, 2] int32 (h, w)) ->
//     output "boxes": [N, A*H*W, 4] or "scores": [N, A*H*W, class_num]
//     {output: string = "boxes", anchors: 2A ints, required, class_num: int
//      = 1, conf_thresh = 0.01, downsample_ratio: int = 32, clip_bbox: bool
//      = true, scale_x_y = 1.0, iou_aware: bool = false, iou_aware_factor =
//      0.5}; C = A*(5 + class_num), plus A leading IoU channels when
//     iou_aware.
// Precision: float32 (sigmoid/exp decoding into pixel coordinates). Layout:
// fixed (NCHW, no data_format attribute).
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferYoloBox(InferContext& c) {
  const TensorType& x = c.input(0);
  const TensorType& img = c.input(1);
  if (x.shape.size() != 4 || x.dtype != DType::kF32)
    c.Fail("x must be float32 [N, C, H, W], got {}", x.ToString());
  if (img.shape != Shape{x.shape[0], 2} || img.dtype != DType::kI32)
    c.Fail("img_size must be int32 [{}, 2], got {}", x.shape[0], img.ToString());
  const std::vector<int64_t>& anchors = c.op().GetInts("anchors");
  int64_t classes = c.op().GetInt("class_num");
  if (anchors.empty() || anchors.size() % 2 != 0) c.Fail("anchors must hold (w, h) pairs");
  if (classes <= 0) c.Fail("class_num must be positive, got {}", classes);
  int64_t a = static_cast<int64_t>(anchors.size()) / 2;
  int64_t channels = a * (5 + classes) + (c.op().GetBool("iou_aware") ? a : 0);
  if (x.shape[1] != channels)
    c.Fail("x has {} channels, expected {} for {} anchors and {} classes", x.shape[1], channels, a,
           classes);
  int64_t boxes = a * x.shape[2] * x.shape[3];
  const std::string& output = c.op().GetStr("output");
  if (output != "boxes" && output != "scores") c.Fail("output must be boxes or scores");
  c.AddOutput({x.dtype, {x.shape[0], boxes, output == "boxes" ? 4 : classes}});
}

TILLER_REGISTER_OP_SCHEMA(OpSchema{"yolo_box", 2, 2, InferYoloBox}
                              .Attr("output", "boxes")
                              .RequiredAttr("anchors", AttrKind::kInts)
                              .Attr("class_num", int64_t{1})
                              .Attr("conf_thresh", 0.01)
                              .Attr("downsample_ratio", int64_t{32})
                              .Attr("clip_bbox", true)
                              .Attr("scale_x_y", 1.0)
                              .Attr("iou_aware", false)
                              .Attr("iou_aware_factor", 0.5)
                              .Precision(PrecisionRule::kAlwaysF32)
                              .Layout(LayoutRule::kFixed));

}  // namespace
}  // namespace tiller::ir
