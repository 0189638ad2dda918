// yolo_box, float32: decodes YOLOv3 head outputs into corner boxes and
// class scores per anchor and grid cell, with Paddle's arithmetic (float
// values, integer image sizes; sigmoid evaluated as 1.0 / (1.0 + exp(-x))
// in double from a float exp). Cells whose confidence is below conf_thresh
// keep zero boxes and scores. The op computes one of the two outputs
// (attribute `output`); parallel over (image, anchor) pairs.
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

float Sigmoid(float x) {
  return static_cast<float>(1.0 / (1.0 + std::exp(-x)));
}

std::unique_ptr<Kernel> MakeYoloBox(const ir::Op& op) {
  const Shape& s = op.inputs[0]->shape();
  int64_t n = s[0], h = s[2], w = s[3];
  std::vector<int64_t> anchors = op.GetInts("anchors");
  int64_t an = static_cast<int64_t>(anchors.size()) / 2;
  int64_t classes = op.GetInt("class_num");
  float thresh = static_cast<float>(op.GetFloat("conf_thresh"));
  int64_t ratio = op.GetInt("downsample_ratio");
  bool clip = op.GetBool("clip_bbox");
  float scale = static_cast<float>(op.GetFloat("scale_x_y"));
  float bias = -0.5f * (scale - 1.0f);
  bool iou_aware = op.GetBool("iou_aware");
  float iou_factor = static_cast<float>(op.GetFloat("iou_aware_factor"));
  int64_t stride = h * w, an_stride = (classes + 5) * stride;
  int64_t box_num = an * stride;
  int64_t in_h = ratio * h, in_w = ratio * w;
  bool want_boxes = op.GetStr("output") == "boxes";
  size_t out_bytes = op.outputs[0]->bytes();
  // Channel offset of entry `e` of anchor `a` in image `i`.
  auto entry = [=](int64_t i, int64_t a, int64_t e) {
    return iou_aware ? (i * an + a) * an_stride + (i * an + an + e) * stride
                     : (i * an + a) * an_stride + e * stride;
  };
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const int32_t* img = static_cast<const int32_t*>(args.inputs[1]);
    float* boxes = want_boxes ? static_cast<float*>(args.outputs[0]) : nullptr;
    float* scores = want_boxes ? nullptr : static_cast<float*>(args.outputs[0]);
    std::memset(args.outputs[0], 0, out_bytes);
    ParallelRange(
        n * an, stride * (classes + 8) * 4,
        [&](int64_t p0, int64_t p1) {
          for (int64_t p = p0; p < p1; ++p) {
            int64_t i = p / an, a = p % an;
            int64_t img_h = img[2 * i], img_w = img[2 * i + 1];
            for (int64_t k = 0; k < h; ++k) {
              for (int64_t l = 0; l < w; ++l) {
                int64_t hw = k * w + l;
                float conf = Sigmoid(x[entry(i, a, 4) + hw]);
                if (iou_aware) {
                  float iou = Sigmoid(x[i * an * an_stride + (i * an + a) * stride + hw]);
                  conf = std::pow(conf, 1.0f - iou_factor) * std::pow(iou, iou_factor);
                }
                if (conf < thresh) continue;
                if (!want_boxes) {
                  int64_t li = entry(i, a, 5) + hw;
                  float* sc = scores + (i * box_num + a * stride + hw) * classes;
                  for (int64_t c = 0; c < classes; ++c) sc[c] = conf * Sigmoid(x[li + c * stride]);
                  continue;
                }
                int64_t bi = entry(i, a, 0) + hw;
                float bx = (static_cast<float>(l) + Sigmoid(x[bi]) * scale + bias) *
                           static_cast<float>(img_w) / static_cast<float>(w);
                float by = (static_cast<float>(k) + Sigmoid(x[bi + stride]) * scale + bias) *
                           static_cast<float>(img_h) / static_cast<float>(h);
                float bw = std::exp(x[bi + 2 * stride]) * static_cast<float>(anchors[2 * a]) *
                           static_cast<float>(img_w) / static_cast<float>(in_w);
                float bh = std::exp(x[bi + 3 * stride]) * static_cast<float>(anchors[2 * a + 1]) *
                           static_cast<float>(img_h) / static_cast<float>(in_h);
                float* o = boxes + (i * box_num + a * stride + hw) * 4;
                o[0] = bx - bw / 2;
                o[1] = by - bh / 2;
                o[2] = bx + bw / 2;
                o[3] = by + bh / 2;
                if (clip) {
                  o[0] = o[0] > 0 ? o[0] : 0.0f;
                  o[1] = o[1] > 0 ? o[1] : 0.0f;
                  float mw = static_cast<float>(img_w - 1), mh = static_cast<float>(img_h - 1);
                  o[2] = o[2] < mw ? o[2] : mw;
                  o[3] = o[3] < mh ? o[3] : mh;
                }
              }
            }
          }
        },
        1);
  });
}

const bool kRegistered = [] {
  RegisterKernel("yolo_box", MakeYoloBox, Signature("T, int32 -> T").Where("T", {DType::kF32}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
