// Detection ops.
//   yolo_box(x [N, C, H, W] float32, img_size [N, 2] int32 (h, w)) ->
//     output "boxes": [N, A*H*W, 4] or "scores": [N, A*H*W, class_num]
//     {output, anchors: 2A ints, class_num, conf_thresh, downsample_ratio, clip_bbox,
//      scale_x_y, iou_aware, iou_aware_factor}; C = A*(5 + class_num), plus A
//     leading IoU channels when iou_aware.
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
  std::vector<int64_t> anchors = c.attrs().Ints("anchors");
  int64_t classes = c.attrs().Int("class_num", 1);
  if (anchors.empty() || anchors.size() % 2 != 0) c.Fail("anchors must hold (w, h) pairs");
  if (classes <= 0) c.Fail("class_num must be positive, got {}", classes);
  int64_t a = static_cast<int64_t>(anchors.size()) / 2;
  int64_t channels = a * (5 + classes) + (c.attrs().Bool("iou_aware", false) ? a : 0);
  if (x.shape[1] != channels)
    c.Fail("x has {} channels, expected {} for {} anchors and {} classes", x.shape[1], channels, a,
           classes);
  int64_t boxes = a * x.shape[2] * x.shape[3];
  std::string output = c.attrs().Str("output", "boxes");
  if (output != "boxes" && output != "scores") c.Fail("output must be boxes or scores");
  c.AddOutput({x.dtype, {x.shape[0], boxes, output == "boxes" ? 4 : classes}});
}

const bool kRegistered = [] {
  RegisterOpSchema({"yolo_box", 2, 2, InferYoloBox});
  return true;
}();

}  // namespace
}  // namespace tiller::ir
