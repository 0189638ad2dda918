"""Neural-network ops (part 2): group/instance norm, affine_channel,
data_norm, max_pool2d_with_index, conv2d_transpose, interpolation, pad3d.

Ops whose legacy form has required statistics outputs (group_norm,
instance_norm, data_norm) get their legacy programs from Paddle's
legacy-mode API, which emits the same op; a verbatim op would fetch them."""
from __future__ import annotations

import numpy as np

from op_harness import Case

rng = np.random.default_rng(8765)
F = lambda p: p.nn.functional  # noqa: E731


def x(shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def norm_cases():
    cases = []
    # Paddle computes group statistics as E[x^2] - mean^2 in float; Tiller uses
    # a corrected two-pass variance, so results differ by a few float ulps of
    # the variance: atol 1e-5 on unit-scale outputs.
    for i, (shape, g, fmt, affine) in enumerate([((2, 6, 4, 5), 3, "NCHW", True), ((2, 4, 5, 6), 2, "NHWC", True),
                                                 ((3, 4, 7), 4, "NCL", False), ((1, 8, 3, 3), 1, "NCHW", True),
                                                 ((2, 3, 2, 3, 4), 3, "NCDHW", True)]):
        c = shape[-1] if fmt == "NHWC" else shape[1]
        params = {"w": x((c,), 0.5, 1.5), "b": x((c,))} if affine else {}
        eps = 1e-5 if i % 2 == 0 else 1e-3
        if affine:
            api = lambda p, v, w, b, g=g, eps=eps, fmt=fmt: F(p).group_norm(v, g, eps, w, b, data_format=fmt)
        else:
            api = lambda p, v, g=g, eps=eps, fmt=fmt: F(p).group_norm(v, g, eps, data_format=fmt)
        cases.append(Case("group_norm", f"{i}", {"x": x(shape, -3, 3)}, params=params, api=api, atol=1e-5))
    for i, (shape, affine) in enumerate([((2, 3, 4, 5), True), ((2, 3, 7), False), ((1, 4, 3, 3), True)]):
        c = shape[1]
        params = {"w": x((c,), 0.5, 1.5), "b": x((c,))} if affine else {}
        if affine:
            api = lambda p, v, w, b: F(p).instance_norm(v, weight=w, bias=b, eps=1e-5)
        else:
            api = lambda p, v: F(p).instance_norm(v, eps=1e-3)
        cases.append(Case("instance_norm", f"{i}", {"x": x(shape, -3, 3)}, params=params, api=api, atol=1e-5))
    return cases


def affine_channel_cases():
    # Paddle 3.3's Python API has no affine_channel; the legacy op still runs.
    cases = []
    for i, (shape, layout) in enumerate([((2, 3, 4, 5), "NCHW"), ((2, 4, 5, 3), "NHWC"), ((3, 5), "NCHW")]):
        c = shape[-1] if layout == "NHWC" else shape[1]
        cases.append(Case("affine_channel", f"{i}", {"x": x(shape)}, params={"s": x((c,)), "b": x((c,))},
                          legacy=("affine_channel", {"X": ["x"], "Scale": ["s"], "Bias": ["b"]}, ["Out"],
                                  {"data_layout": layout}),
                          formats=("legacy",)))
    return cases


def data_norm_ref(slot_dim, shift):
    """Paddle's CPU data_norm kernel (phi DataNormKernel) in numpy, in its
    order of float32 operations."""
    def ref(x, bs, bsum, bsq, sw=None, sb=None):
        means = bsum / bs
        scales = np.sqrt(bs / bsq)
        if shift and slot_dim <= 0:
            y = x * (scales * sw) + (sb - means * scales * sw)
        else:
            y = (x - means) * scales
            if shift:
                y = y * sw + sb
        if slot_dim > 0:
            # A slot whose first ("show") value is within 1e-7 of 0 is zeroed.
            show = x[:, ::slot_dim]
            hidden = (show > -np.float32(1e-7)) & (show < np.float32(1e-7))
            y = np.where(np.repeat(hidden, slot_dim, axis=1), np.float32(0), y)
        return [y.astype(np.float32), means.astype(np.float32), scales.astype(np.float32)]
    return ref


def data_norm_cases():
    # Paddle 3.3 no longer registers data_norm: written programs with a numpy
    # reference of Paddle's CPU kernel (Paddle 2.6.2's own kernel is the
    # reference in ipu_op_test.py). Its input is 2-D [N, C] in either layout
    # it knows (NHWC and NCHW compute the same); slot_dim > 0 zeroes slots
    # whose "show" value is 0; epsilon, summary_decay_rate and sync_stats
    # only change the statistics' update in training, not Y. Means and
    # Scales are outputs too.
    cases = []
    # (n, c, enable_scale_and_shift, data_layout, slot_dim, other attributes)
    specs = [(4, 5, False, "NCHW", -1, {}), (3, 7, True, "NCHW", -1, {}),
             (4, 6, False, "NHWC", -1, {}), (5, 4, True, "NHWC", -1, {}),
             (4, 6, False, "NHWC", 2, {}), (3, 6, True, "NCHW", 3, {}),
             (4, 5, False, "NCHW", -1, {"epsilon": 1e-3, "summary_decay_rate": 0.9,
                                        "sync_stats": True})]
    for i, (n, c, shift, layout, slot_dim, extra) in enumerate(specs):
        params = {"bs": x((c,), 50, 200), "bsum": x((c,), -20, 20), "bsq": x((c,), 50, 200)}
        ins = {"X": ["x"], "BatchSize": ["bs"], "BatchSum": ["bsum"], "BatchSquareSum": ["bsq"]}
        if shift:
            params.update({"sw": x((c,), 0.5, 1.5), "sb": x((c,))})
            ins.update({"scale_w": ["sw"], "bias": ["sb"]})
        xv = x((n, c))
        if slot_dim > 0:
            # Show values at and around the 1e-7 threshold: 0, +-5e-8 hide
            # their slot, 1e-7 itself and -2e-7 do not.
            shows = np.array([0.0, 5e-8, -5e-8, 1e-7, -2e-7, 0.7], np.float32)
            xv[:, ::slot_dim] = np.resize(shows, (n, c // slot_dim))
        attrs = {"epsilon": 1e-4, "slot_dim": slot_dim, "enable_scale_and_shift": shift,
                 "data_layout": layout, "summary_decay_rate": 0.9999999, "sync_stats": False,
                 **extra}
        cases.append(Case("data_norm", f"{i}", {"x": xv}, params=params,
                          legacy=("data_norm", ins, [("Y", np.float32, (n, c)), ("Means", np.float32, (c,)),
                                                     ("Scales", np.float32, (c,))], attrs),
                          reference=data_norm_ref(slot_dim, shift), formats=("legacy",)))
    return cases


def max_pool_index_cases():
    cases = []
    for i, (shape, k, s, pd, ceil) in enumerate([((1, 2, 8, 8), 2, 2, 0, False), ((2, 3, 7, 9), 3, 2, 1, False),
                                                 ((1, 2, 9, 7), 3, 2, 1, True), ((2, 1, 5, 6), [2, 3], [1, 2], [1, 0], False)]):
        cases.append(Case("max_pool2d_with_index", f"{i}", {"x": x(shape)},
                          api=lambda p, v, k=k, s=s, pd=pd, ceil=ceil: F(p).max_pool2d(
                              v, k, s, pd, ceil_mode=ceil, return_mask=True),
                          legacy=("max_pool2d_with_index", {"X": ["x"]}, ["Out", ("Mask", "int32")],
                                  {"ksize": k if isinstance(k, list) else [k, k],
                                   "strides": s if isinstance(s, list) else [s, s],
                                   "paddings": pd if isinstance(pd, list) else [pd, pd],
                                   "global_pooling": False, "adaptive": False, "ceil_mode": ceil}),
                          exact=True))
    for i, (shape, out) in enumerate([((2, 3, 10, 7), [4, 3]), ((1, 2, 5, 5), [5, 2])]):
        cases.append(Case("max_pool2d_with_index", f"adaptive{i}", {"x": x(shape)},
                          api=lambda p, v, out=out: F(p).adaptive_max_pool2d(v, out, return_mask=True),
                          legacy=("max_pool2d_with_index", {"X": ["x"]}, ["Out", ("Mask", "int32")],
                                  {"ksize": out, "strides": [1, 1], "paddings": [0, 0], "global_pooling": False,
                                   "adaptive": True}),
                          exact=True))
    cases.append(Case("max_pool2d_with_index", "global", {"x": x((2, 3, 4, 5))},
                      legacy=("max_pool2d_with_index", {"X": ["x"]}, ["Out", ("Mask", "int32")],
                              {"ksize": [2, 2], "strides": [1, 1], "paddings": [0, 0], "global_pooling": True,
                               "adaptive": False}),
                      formats=("legacy",), exact=True))
    return cases


def conv_transpose_cases():
    cases = []
    # (x NCHW, out channels, kernel, stride, padding, output_padding, dilation, groups, output_size, fmt, bias)
    specs = [
        ((1, 3, 5, 5), 2, (3, 3), 1, 0, 0, 1, 1, None, "NCHW", False),
        ((2, 4, 4, 5), 6, (3, 2), 2, 1, 1, 1, 2, None, "NCHW", True),
        ((1, 2, 4, 4), 3, (3, 3), 2, [1, 0, 2, 1], 0, 2, 1, None, "NCHW", False),
        ((1, 2, 5, 4), 2, (4, 4), 3, 1, 0, 1, 1, [15, 12], "NCHW", False),
        ((1, 3, 4, 5), 2, (3, 3), 2, "SAME", 0, 1, 1, None, "NCHW", False),
        ((1, 3, 4, 5), 2, (3, 3), 2, "VALID", 0, 1, 1, None, "NCHW", False),
        ((2, 3, 4, 4), 4, (2, 2), 2, 0, 0, 1, 1, None, "NHWC", True),
    ]
    for i, (xs, oc, k, s, pd, opad, d, g, osz, fmt, bias) in enumerate(specs):
        xin = x(xs if fmt == "NCHW" else (xs[0], xs[2], xs[3], xs[1]))
        params = {"w": x((xs[1], oc // g, *k), -1, 1)}
        if bias:
            params["b"] = x((oc,))

        def api(p, v, w, b=None, s=s, pd=pd, opad=opad, d=d, g=g, osz=osz, fmt=fmt):
            return F(p).conv2d_transpose(v, w, b, stride=s, padding=pd, output_padding=opad, dilation=d,
                                         groups=g, output_size=osz, data_format=fmt)
        cases.append(Case("conv2d_transpose", f"{i}", {"x": xin}, params=params, api=api, rtol=1e-4, atol=1e-5))
    # depthwise: groups == in channels == out channels
    for i, (xs, k, s, pd) in enumerate([((1, 3, 5, 5), 3, 1, 1), ((2, 4, 4, 6), 2, 2, 0)]):
        c = xs[1]
        cases.append(Case("depthwise_conv2d_transpose", f"{i}", {"x": x(xs)}, params={"w": x((c, 1, k, k), -1, 1)},
                          api=lambda p, v, w, s=s, pd=pd, c=c: F(p).conv2d_transpose(v, w, stride=s, padding=pd, groups=c),
                          legacy=("depthwise_conv2d_transpose", {"Input": ["x"], "Filter": ["w"]}, ["Output"],
                                  {"strides": [s, s], "paddings": [pd, pd], "dilations": [1, 1], "groups": c,
                                   "output_padding": [], "output_size": [], "padding_algorithm": "EXPLICIT",
                                   "data_format": "NCHW"}),
                          rtol=1e-4, atol=1e-5))
    return cases


def interp_cases():
    cases = []
    # (op, mode, shape, size, scale, align_corners, align_mode, fmt)
    specs = [
        ("nearest_interp_v2", "nearest", (1, 2, 4, 5), [7, 9], None, False, 1, "NCHW"),
        ("nearest_interp_v2", "nearest", (2, 3, 6, 6), None, 0.5, False, 1, "NCHW"),
        ("nearest_interp_v2", "nearest", (1, 5, 4, 2), None, [1.5, 2.0], False, 1, "NHWC"),
        ("bilinear_interp_v2", "bilinear", (1, 2, 4, 5), [7, 9], None, False, 1, "NCHW"),
        ("bilinear_interp_v2", "bilinear", (1, 2, 4, 5), [7, 9], None, False, 0, "NCHW"),
        ("bilinear_interp_v2", "bilinear", (2, 2, 6, 5), [3, 8], None, True, 1, "NCHW"),
        ("bilinear_interp_v2", "bilinear", (1, 3, 5, 4), None, 1.7, False, 0, "NCHW"),
        ("bilinear_interp_v2", "bilinear", (1, 4, 5, 3), [8, 6], None, False, 0, "NHWC"),
        ("bicubic_interp_v2", "bicubic", (1, 2, 4, 5), [7, 9], None, False, 1, "NCHW"),
        ("bicubic_interp_v2", "bicubic", (1, 2, 6, 5), [3, 8], None, True, 1, "NCHW"),
        ("bicubic_interp_v2", "bicubic", (1, 2, 5, 4), None, 2.0, False, 1, "NCHW"),
        ("linear_interp_v2", "linear", (2, 3, 7), [12], None, False, 1, "NCW"),
        ("linear_interp_v2", "linear", (2, 3, 7), [4], None, True, 1, "NCW"),
        ("linear_interp_v2", "linear", (2, 3, 7), [11], None, False, 0, "NCW"),
        ("linear_interp_v2", "linear", (2, 7, 3), None, 1.5, False, 0, "NWC"),
        ("trilinear_interp_v2", "trilinear", (1, 2, 3, 4, 5), [5, 6, 4], None, False, 1, "NCDHW"),
        ("trilinear_interp_v2", "trilinear", (1, 2, 3, 4, 5), [5, 6, 4], None, True, 1, "NCDHW"),
        ("trilinear_interp_v2", "trilinear", (1, 2, 3, 4, 2), None, 2.0, False, 0, "NCDHW"),
        ("trilinear_interp_v2", "trilinear", (1, 3, 4, 2, 2), [4, 5, 6], None, False, 0, "NDHWC"),
    ]
    counts = {}
    for op, mode, shape, size, scale, ac, am, fmt in specs:
        n = counts.get(op, 0)
        counts[op] = n + 1
        cases.append(Case(op, f"{n}", {"x": x(shape)},
                          api=lambda p, v, mode=mode, size=size, scale=scale, ac=ac, am=am, fmt=fmt: F(p).interpolate(
                              v, size=size, scale_factor=scale, mode=mode, align_corners=ac, align_mode=am,
                              data_format=fmt),
                          rtol=1e-5, atol=1e-5))
    # Sizes and scales given as tensors: OutSize, SizeTensor, Scale inputs.
    tensor_specs = [
        ("bilinear_interp_v2", "bilinear", "outsize", lambda p: dict(size=p.full([2], 7, "int32"))),
        ("nearest_interp_v2", "nearest", "sizelist", lambda p: dict(size=[p.full([1], 9, "int32"), 5])),
        ("bicubic_interp_v2", "bicubic", "scaletensor", lambda p: dict(scale_factor=p.full([1], 1.5, "float32"))),
        ("bilinear_interp_v2", "bilinear", "scaleac", lambda p: dict(scale_factor=[1.5, 0.8], align_corners=True)),
    ]
    for op, mode, tag, kw in tensor_specs:
        cases.append(Case(op, tag, {"x": x((1, 2, 4, 6))},
                          api=lambda p, v, mode=mode, kw=kw: F(p).interpolate(v, mode=mode, **kw(p)),
                          atol=1e-5))
    # Integer nearest (a gather): int32 and int64.
    for dt in ("int32", "int64"):
        xi = rng.integers(-1000, 1000, size=(2, 3, 4, 5)).astype(dt)
        cases.append(Case("nearest_interp_v2", dt, {"x": xi},
                          api=lambda p, v: F(p).interpolate(v, size=[7, 3], mode="nearest"), exact=True))
    # The API refuses align_corners for nearest; the legacy op takes it.
    for i, (shape, size) in enumerate([((1, 2, 4, 5), [8, 3]), ((2, 1, 5, 3), [2, 7])]):
        cases.append(Case("nearest_interp_v2", f"ac{i}", {"x": x(shape)},
                          legacy=("nearest_interp_v2", {"X": ["x"]}, ["Out"],
                                  {"out_d": -1, "out_h": size[0], "out_w": size[1], "scale": [],
                                   "interp_method": "nearest", "align_corners": True, "align_mode": 1,
                                   "data_layout": "NCHW"}),
                          formats=("legacy",), exact=True))
    return cases


def pad3d_cases():
    cases = []
    for i, (shape, pads, mode, value, fmt) in enumerate([
            ((1, 2, 3, 4, 5), [1, 2, 0, 1, 2, 1], "constant", 0.5, "NCDHW"),
            ((1, 2, 3, 4, 5), [1, 2, 0, 1, 2, 1], "reflect", 0.0, "NCDHW"),
            ((2, 1, 3, 4, 5), [2, 2, 1, 3, 0, 2], "replicate", 0.0, "NCDHW"),
            ((1, 2, 3, 4, 5), [1, 4, 2, 3, 3, 1], "circular", 0.0, "NCDHW"),
            ((1, 3, 4, 5, 2), [1, 0, 2, 1, 1, 1], "constant", -1.0, "NDHWC"),
            ((1, 3, 4, 5, 2), [1, 1, 2, 1, 1, 2], "reflect", 0.0, "NDHWC")]):
        cases.append(Case("pad3d", f"{i}", {"x": x(shape)},
                          api=lambda p, v, pads=pads, mode=mode, value=value, fmt=fmt: F(p).pad(
                              v, pads, mode=mode, value=value, data_format=fmt),
                          legacy=("pad3d", {"X": ["x"]}, ["Out"],
                                  {"paddings": pads, "mode": mode, "value": value, "data_format": fmt}),
                          exact=True))
    ints = rng.integers(-100, 100, size=(1, 2, 2, 3, 4)).astype(np.int64)
    cases.append(Case("pad3d", "int64", {"x": ints},
                      api=lambda p, v: F(p).pad(v, [1, 0, 0, 2, 1, 1], mode="replicate"),
                      legacy=("pad3d", {"X": ["x"]}, ["Out"],
                              {"paddings": [1, 0, 0, 2, 1, 1], "mode": "replicate", "value": 0.0,
                               "data_format": "NCDHW"}),
                      exact=True))
    return cases


CASES = [
    *norm_cases(),
    *affine_channel_cases(),
    *data_norm_cases(),
    *max_pool_index_cases(),
    *conv_transpose_cases(),
    *interp_cases(),
    *pad3d_cases(),
]
