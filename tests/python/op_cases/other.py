"""print, identity/detach/checkpointoutput and yolo_box. identity, detach
and checkpointoutput are op types of Paddle's IPU programs with no operator
in paddlepaddle 3.3: legacy-only, written directly, numpy reference = x."""
from __future__ import annotations

import numpy as np

from op_harness import Case

rng = np.random.default_rng(777)


def f32(*shape, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def print_cases():
    cases = []
    for i, (x, attrs) in enumerate([
            (f32(3, 4), {"summarize": 20, "message": "tiller", "first_n": -1}),
            (rng.integers(-5, 5, size=(2, 3, 2)).astype(np.int64), {"summarize": -1, "first_n": 1}),
            (f32(1, 40), {"summarize": 5, "print_tensor_name": False})]):
        full = {"first_n": -1, "message": "", "summarize": 20, "print_tensor_name": True,
                "print_tensor_type": True, "print_tensor_shape": True,
                "print_tensor_layout": True, "print_tensor_lod": True, "print_phase": "BOTH",
                "is_forward": True}
        full.update(attrs)
        api = (lambda p, v, a=full: p.static.Print(
            v, first_n=a["first_n"], message=a["message"] or None, summarize=a["summarize"],
            print_tensor_name=a["print_tensor_name"]))
        cases.append(Case("print", f"p{i}", {"x": x}, api=api,
                          legacy=("print", {"In": ["x"]}, ["Out"], full), exact=True))
    return cases


def passthrough_cases(op):
    cases = []
    for i, x in enumerate([f32(3, 5), rng.integers(0, 9, size=(2, 1, 4)).astype(np.int64)]):
        cases.append(Case(op, f"w{i}", {"x": x},
                          legacy=(op, {"X": ["x"]}, [("Out", x.dtype, x.shape)], {}),
                          reference=lambda x: [x], formats=("legacy",), exact=True))
    return cases


def yolo_box_cases():
    cases = []
    # (name, N, H, W, anchors, class_num, conf, ratio, clip, scale_x_y, iou_aware, factor)
    specs = [("basic", 1, 4, 4, [10, 13, 16, 30], 2, 0.01, 32, True, 1.0, False, 0.5),
             ("noclip", 2, 3, 5, [10, 13, 16, 30, 33, 23], 3, 0.3, 16, False, 1.0, False, 0.5),
             ("scale_xy", 1, 2, 3, [12, 8], 4, 0.5, 8, True, 1.2, False, 0.5),
             ("iou_aware", 2, 3, 3, [10, 13, 16, 30], 2, 0.2, 32, True, 1.05, True, 0.4)]
    for name, n, h, w, anchors, cls, conf, ratio, clip, sxy, iou, factor in specs:
        an = len(anchors) // 2
        ch = an * (5 + cls) + (an if iou else 0)
        x = f32(n, ch, h, w, lo=-2, hi=2)
        img = rng.integers(200, 640, size=(n, 2)).astype(np.int32)
        attrs = {"anchors": anchors, "class_num": cls, "conf_thresh": conf,
                 "downsample_ratio": ratio, "clip_bbox": clip, "scale_x_y": sxy,
                 "iou_aware": iou, "iou_aware_factor": factor}
        api = (lambda p, x, s, a=attrs: list(p.vision.ops.yolo_box(
            x, s, a["anchors"], a["class_num"], a["conf_thresh"], a["downsample_ratio"],
            a["clip_bbox"], scale_x_y=a["scale_x_y"], iou_aware=a["iou_aware"],
            iou_aware_factor=a["iou_aware_factor"])))
        cases.append(Case("yolo_box", name, {"x": x, "img_size": img}, api=api,
                          legacy=("yolo_box", {"X": ["x"], "ImgSize": ["img_size"]},
                                  ["Boxes", "Scores"], attrs),
                          # box coordinates are hundreds of pixels: float32 rounding
                          # of exp/sigmoid shows up as ~1e-5 absolute
                          atol=1e-4))
    return cases


CASES = [*print_cases(), *passthrough_cases("identity"), *passthrough_cases("detach"),
         *passthrough_cases("checkpointoutput"), *yolo_box_cases()]
