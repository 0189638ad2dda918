"""Neural-network ops (part 1): softmax, normalization, dropout, conv, pool.
PIR programs use Paddle's Python API; legacy programs append the legacy op
verbatim with the same attributes."""
from __future__ import annotations

import numpy as np

from op_harness import Case

rng = np.random.default_rng(4321)
F = lambda p: p.nn.functional  # noqa: E731


def x(shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def softmax_cases(op, fn):
    cases = []
    for i, (shape, axis) in enumerate([((3, 17), -1), ((2, 5, 7), 1), ((2, 1, 33), 0),
                                       ((2, 3, 4, 5), -3), ((4, 19), 0)]):
        cases.append(Case(op, f"{i}", {"x": x(shape, -5, 5)},
                          api=lambda p, v, axis=axis: fn(F(p))(v, axis=axis),
                          legacy=(op, {"X": ["x"]}, ["Out"], {"axis": axis})))
    return cases


def layer_norm_cases():
    cases = []
    for i, (shape, begin) in enumerate([((4, 17), 1), ((2, 3, 8), 2), ((2, 3, 4, 5), 1),
                                        ((3, 1, 6), 1)]):
        norm = int(np.prod(shape[begin:]))
        params = {"w": x((norm,), 0.5, 1.5), "b": x((norm,))}
        eps = 1e-5 if i % 2 == 0 else 1e-3
        cases.append(Case("layer_norm", f"{i}", {"x": x(shape, -3, 3)}, params=params,
                          api=lambda p, v, w, b, shape=shape, begin=begin, eps=eps: F(p).layer_norm(
                              v, list(shape[begin:]), w, b, eps),
                          atol=1e-5))
    # No scale/bias.
    cases.append(Case("layer_norm", "noaffine", {"x": x((5, 9))},
                      api=lambda p, v: F(p).layer_norm(v, [9]),
                      atol=1e-5))
    return cases


# layer_norm and batch_norm have required statistics outputs (Mean, MeanOut,
# ...) that a verbatim legacy op would fetch; their legacy programs come from
# Paddle's legacy-mode API, which emits the same op.
def batch_norm_cases():
    cases = []
    for i, (shape, layout) in enumerate([((2, 3, 4, 5), "NCHW"), ((2, 4, 5, 3), "NHWC"), ((4, 6), "NCHW"),
                                         ((2, 3, 7), "NCHW"), ((2, 3, 2, 2, 2), "NCHW"), ((2, 5, 3), "NLC"),
                                         ((2, 2, 3, 2, 4), "NDHWC")]):
        c = shape[-1] if layout in ("NHWC", "NLC", "NDHWC") else shape[1]
        params = {"mean": x((c,)), "var": x((c,), 0.2, 2.0), "w": x((c,), 0.5, 1.5), "b": x((c,))}
        eps = 1e-5 if i % 2 == 0 else 1e-3
        for gs in ([False, True] if i == 0 else [False]):
            api_fmt = {2: "NC", 3: "NCL", 4: "NCHW", 5: "NCDHW"}[len(shape)] if layout == "NCHW" else layout
            cases.append(Case(
                "batch_norm", f"{i}{'g' if gs else ''}", {"x": x(shape, -3, 3)}, params=params,
                api=lambda p, v, m, var, w, b, eps=eps, fmt=api_fmt, gs=gs: F(p).batch_norm(
                    v, m, var, w, b, training=False, epsilon=eps, data_format=fmt,
                    use_global_stats=gs if gs else None),
                atol=1e-5))
    return cases


def conv_cases():
    cases = []
    # (x shape NCHW, out channels, kernel, strides, paddings, dilations, groups, algo, format)
    specs = [
        ((1, 3, 8, 8), 4, (3, 3), [1, 1], [1, 1], [1, 1], 1, "EXPLICIT", "NCHW"),
        ((2, 4, 9, 7), 6, (3, 2), [2, 1], [1, 0, 2, 1], [1, 1], 2, "EXPLICIT", "NCHW"),
        ((1, 2, 10, 9), 3, (3, 3), [2, 2], [0, 0], [2, 1], 1, "SAME", "NCHW"),
        ((2, 3, 7, 8), 2, (2, 3), [1, 2], [0, 0], [1, 1], 1, "VALID", "NCHW"),
        ((1, 3, 6, 7), 4, (3, 3), [1, 1], [1, 2], [1, 1], 1, "EXPLICIT", "NHWC"),
        ((1, 4, 6, 6), 4, (1, 1), [1, 1], [0, 0], [1, 1], 4, "EXPLICIT", "NCHW"),
    ]
    for i, (xs, oc, k, s, pd, d, g, algo, fmt) in enumerate(specs):
        xin = x(xs if fmt == "NCHW" else (xs[0], xs[2], xs[3], xs[1]))
        w = x((oc, xs[1] // g, *k), -1, 1)
        attrs = {"strides": s, "paddings": pd, "dilations": d, "groups": g, "padding_algorithm": algo,
                 "data_format": fmt}
        api_pad = algo if algo != "EXPLICIT" else (pd if len(pd) == 2 else [[0, 0], [0, 0], pd[0:2], pd[2:4]]
                                                  if fmt == "NCHW" else [[0, 0], pd[0:2], pd[2:4], [0, 0]])
        cases.append(Case("conv2d", f"{i}", {"x": xin}, params={"w": w},
                          api=lambda p, v, w, s=s, api_pad=api_pad, d=d, g=g, fmt=fmt: F(p).conv2d(
                              v, w, stride=s, padding=api_pad, dilation=d, groups=g, data_format=fmt),
                          legacy=("conv2d", {"Input": ["x"], "Filter": ["w"]}, ["Output"], attrs),
                          rtol=1e-4, atol=1e-5))
    # Filter fed at run time, not a parameter.
    cases.append(Case("conv2d", "wfeed", {"x": x((1, 2, 5, 5)), "w": x((3, 2, 3, 3))},
                      api=lambda p, v, w: F(p).conv2d(v, w, padding=1),
                      legacy=("conv2d", {"Input": ["x"], "Filter": ["w"]}, ["Output"],
                              {"strides": [1, 1], "paddings": [1, 1], "dilations": [1, 1], "groups": 1}),
                      rtol=1e-4, atol=1e-5))
    # depthwise: groups == in channels (multiplier 1 and 2).
    for i, (xs, mult, k, s, pd, fmt) in enumerate([((1, 3, 8, 8), 1, 3, 1, 1, "NCHW"),
                                                   ((2, 4, 7, 9), 2, 3, 2, 0, "NCHW"),
                                                   ((1, 3, 6, 6), 1, 5, 1, 2, "NHWC")]):
        c = xs[1]
        xin = x(xs if fmt == "NCHW" else (xs[0], xs[2], xs[3], xs[1]))
        w = x((c * mult, 1, k, k), -1, 1)
        attrs = {"strides": [s, s], "paddings": [pd, pd], "dilations": [1, 1], "groups": c,
                 "padding_algorithm": "EXPLICIT", "data_format": fmt}
        cases.append(Case("depthwise_conv2d", f"{i}", {"x": xin}, params={"w": w},
                          api=lambda p, v, w, s=s, pd=pd, c=c, fmt=fmt: F(p).conv2d(
                              v, w, stride=s, padding=pd, groups=c, data_format=fmt),
                          legacy=("depthwise_conv2d", {"Input": ["x"], "Filter": ["w"]}, ["Output"], attrs),
                          rtol=1e-4, atol=1e-5))
    return cases


def pool_cases():
    # Adaptive max pooling is max_pool2d_with_index's (nn_ext.py): Paddle's
    # legacy pool2d with adaptive=True and max computes fixed windows of ksize
    # (stride 1) over the adaptive output size, which Tiller refuses.
    cases = []
    # (shape NCHW, type, ksize, strides, paddings, ceil, exclusive, adaptive, global, algo, fmt)
    specs = [
        ((1, 2, 8, 8), "max", [2, 2], [2, 2], [0, 0], False, True, False, False, "EXPLICIT", "NCHW"),
        ((2, 3, 7, 9), "avg", [3, 3], [2, 2], [1, 1], True, True, False, False, "EXPLICIT", "NCHW"),
        ((2, 3, 7, 9), "avg", [3, 2], [2, 1], [1, 0], True, False, False, False, "EXPLICIT", "NCHW"),
        ((1, 2, 9, 7), "max", [3, 3], [2, 2], [1, 2, 0, 1], True, True, False, False, "EXPLICIT", "NCHW"),
        ((1, 3, 10, 7), "avg", [3, 3], [2, 2], [0, 0], False, True, False, False, "SAME", "NCHW"),
        ((1, 3, 10, 7), "max", [3, 2], [2, 2], [0, 0], False, True, False, False, "VALID", "NCHW"),
        ((2, 3, 10, 7), "avg", [3, 2], [1, 1], [0, 0], False, True, True, False, "EXPLICIT", "NCHW"),
        ((2, 3, 5, 6), "avg", [1, 1], [1, 1], [0, 0], False, True, False, True, "EXPLICIT", "NCHW"),
        ((2, 5, 6, 3), "max", [2, 2], [2, 2], [0, 0], False, True, False, False, "EXPLICIT", "NHWC"),
        ((2, 5, 6, 3), "avg", [2, 2], [1, 1], [1, 1], False, False, False, False, "EXPLICIT", "NHWC"),
        # Not exclusive, windows hanging past the input + pad_begin (ceil_mode,
        # or a bottom pad larger than the top one): Paddle divides by the part
        # of the window that ends there, not by ksize.
        ((1, 2, 5, 5), "avg", [2, 2], [2, 2], [0, 0], True, False, False, False, "EXPLICIT", "NCHW"),
        ((1, 2, 5, 6), "avg", [3, 2], [2, 2], [0, 2, 1, 0], False, False, False, False, "EXPLICIT",
         "NCHW"),
    ]
    for i, (xs, t, k, s, pd, ceil, excl, adapt, glob, algo, fmt) in enumerate(specs):
        attrs = {"pooling_type": t, "ksize": k, "strides": s, "paddings": pd, "ceil_mode": ceil,
                 "exclusive": excl, "adaptive": adapt, "global_pooling": glob, "padding_algorithm": algo,
                 "data_format": fmt}
        api_pad = algo if algo != "EXPLICIT" else pd

        def api(p, v, t=t, k=k, s=s, api_pad=api_pad, ceil=ceil, excl=excl, adapt=adapt, glob=glob, fmt=fmt):
            f = F(p)
            if glob:
                return f.adaptive_avg_pool2d(v, 1, data_format=fmt)
            if adapt:
                return (f.adaptive_max_pool2d(v, k) if t == "max"
                        else f.adaptive_avg_pool2d(v, k, data_format=fmt))
            if t == "max":
                return f.max_pool2d(v, k, s, api_pad, ceil_mode=ceil, data_format=fmt)
            return f.avg_pool2d(v, k, s, api_pad, ceil_mode=ceil, exclusive=excl, data_format=fmt)
        cases.append(Case("pool2d", f"{i}", {"x": x(xs)}, api=api,
                          legacy=("pool2d", {"X": ["x"]}, ["Out"], attrs)))
    return cases


def dropout_cases():
    cases = []
    # The layer's Mask output makes the verbatim legacy form unusable here; the
    # legacy API emits the same op.
    for i, (mode, p) in enumerate([("upscale_in_train", 0.3), ("downscale_in_infer", 0.3),
                                   ("downscale_in_infer", 0.7), ("upscale_in_train", 0.5)]):
        cases.append(Case("dropout", f"{i}", {"x": x((3, 7))},
                          api=lambda pd, v, mode=mode, p=p: F(pd).dropout(v, p, training=False, mode=mode)))
    # Probability given as a tensor (DropoutProbTensor). PIR only: Paddle
    # 3.3's legacy dropout API rejects a tensor p (compares shape (1,) to [1]).
    cases.append(Case("dropout", "ptensor", {"x": x((4, 5))},
                      api=lambda pd, v: F(pd).dropout(v, pd.full([1], 0.25, "float32"), training=False,
                                                      mode="downscale_in_infer"),
                      formats=("pir",)))
    return cases


CASES = [
    *softmax_cases("softmax", lambda f: f.softmax),
    *softmax_cases("log_softmax", lambda f: f.log_softmax),
    *layer_norm_cases(),
    *batch_norm_cases(),
    *conv_cases(),
    *pool_cases(),
    *dropout_cases(),
]
