"""Loss ops, forward only, as Paddle computes them in inference/eval
programs. PIR programs use paddle._C_ops (the ops' own signatures, so every
attribute can be set); legacy programs append the legacy op verbatim.
rank_loss has no PIR op and no Python API left in Paddle 3.3: legacy-only,
written directly with a numpy reference from Paddle's documented formula.
cross_entropy2 (no PIR op) and legacy warpctc must declare outputs that hold
no inference data (XShape, WarpCTCGrad), which the harness would fetch:
their legacy programs are written directly, with numpy references."""
from __future__ import annotations

import numpy as np

from op_harness import Case

rng = np.random.default_rng(4321)
C = lambda p: p._C_ops  # noqa: E731


def f32(*shape, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def softmax_ce_cases():
    cases = []
    # (name, logits shape, axis, soft, use_softmax, ignore_index, label dtype)
    specs = [("hard", (4, 7), -1, False, True, -100, np.int64),
             ("axis1", (3, 5, 4), 1, False, True, -100, np.int64),
             ("axis_neg2", (2, 6, 3), -2, False, True, -100, np.int64),
             ("ignore", (6, 5), -1, False, True, 2, np.int64),
             ("axis0", (5, 3), 0, False, True, -100, np.int64),
             ("size1", (1, 9), -1, False, True, -100, np.int64),
             ("soft", (4, 6), -1, True, True, -100, np.float32),
             ("soft_axis1", (2, 4, 3), 1, True, True, -100, np.float32),
             ("prob", (5, 4), -1, False, False, -100, np.int64),
             ("prob_ignore", (5, 4), -1, False, False, 1, np.int64),
             ("int32", (3, 8), -1, False, True, -100, np.int32)]
    for name, shape, axis, soft, use_sm, ignore, ldt in specs:
        x = f32(*shape, lo=-4, hi=4)
        ax = axis % len(shape)
        if not use_sm:  # probabilities
            e = np.exp(x - x.max(axis=ax, keepdims=True))
            x = (e / e.sum(axis=ax, keepdims=True)).astype(np.float32)
        if soft:
            e = rng.uniform(0.1, 1.0, size=shape)
            label = (e / e.sum(axis=ax, keepdims=True)).astype(np.float32)
        else:
            lshape = list(shape)
            lshape[ax] = 1
            label = rng.integers(0, shape[ax], size=lshape).astype(ldt)
        attrs = {"soft_label": soft, "use_softmax": use_sm, "numeric_stable_mode": True,
                 "ignore_index": ignore, "axis": axis}
        api = (lambda p, x, l, a=attrs: list(C(p).cross_entropy_with_softmax(
            x, l, a["soft_label"], a["use_softmax"], a["numeric_stable_mode"], a["ignore_index"],
            a["axis"])))
        legacy = ("softmax_with_cross_entropy", {"Logits": ["x"], "Label": ["label"]},
                  ["Softmax", "Loss"], attrs)
        cases.append(Case("softmax_with_cross_entropy", name, {"x": x, "label": label}, api=api,
                          legacy=legacy))
    # The public API (unsqueezes a 1-D label, then means the loss).
    x, label = f32(6, 5), rng.integers(0, 5, size=(6,)).astype(np.int64)
    cases.append(Case("softmax_with_cross_entropy", "api_mean", {"x": x, "label": label},
                      api=lambda p, x, l: p.nn.functional.cross_entropy(x, l), formats=("pir",)))
    return cases


def cross_entropy2_cases():
    """cross_entropy2 needs its XShape output declared, which the harness
    would then fetch (it holds no data): the legacy program is written
    directly with Y and MatchX, against a numpy reference."""
    cases = []
    for name, shape, ignore in [("2d", (5, 6), -100), ("3d", (2, 3, 4), -100), ("ignore", (6, 3), 1)]:
        e = rng.uniform(0.05, 1.0, size=shape)
        x = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
        label = rng.integers(0, shape[-1], size=shape[:-1] + (1,)).astype(np.int64)
        oshape = shape[:-1] + (1,)

        def ref(x, label, ignore=ignore):
            match = np.take_along_axis(x, label, axis=-1)
            keep = label != ignore
            return [np.where(keep, -np.log(match), 0).astype(np.float32),
                    np.where(keep, match, 0).astype(np.float32)]

        cases.append(Case("cross_entropy2", name, {"x": x, "label": label},
                          legacy=("cross_entropy2", {"X": ["x"], "Label": ["label"]},
                                  [("Y", np.float32, oshape), ("MatchX", np.float32, oshape)],
                                  {"ignore_index": ignore}),
                          reference=ref, formats=("legacy",)))
    return cases


def cross_entropy_v1_cases():
    """The v1 cross_entropy op (probabilities in; hard or soft labels)."""
    cases = []
    for name, shape, soft, ignore in [("hard", (5, 4), False, -100), ("soft", (3, 6), True, -100),
                                      ("hard_ignore", (6, 3), False, 0)]:
        e = rng.uniform(0.05, 1.0, size=shape)
        x = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
        if soft:
            e = rng.uniform(0.1, 1.0, size=shape)
            label = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
        else:
            label = rng.integers(0, shape[-1], size=shape[:-1] + (1,)).astype(np.int64)
        cases.append(Case("cross_entropy", name, {"x": x, "label": label},
                          legacy=("cross_entropy", {"X": ["x"], "Label": ["label"]}, ["Y"],
                                  {"soft_label": soft, "ignore_index": ignore}),
                          formats=("legacy",)))
    return cases


def sigmoid_ce_cases():
    cases = []
    for name, shape, normalize, ignore, pos_weight in [
            ("plain", (4, 9), False, -100, False), ("ignore", (3, 5, 2), False, -1, False),
            ("normalize", (6, 4), True, -1, False), ("pos_weight", (5, 3), False, -100, True),
            ("size1", (1, 7), True, -100, False)]:
        x = f32(*shape, lo=-6, hi=6)
        label = rng.uniform(0, 1, size=shape).astype(np.float32)
        if ignore != -100:
            label[rng.uniform(size=shape) < 0.3] = ignore
        inputs = {"x": x, "label": label}
        slots = {"X": ["x"], "Label": ["label"]}
        if pos_weight:
            inputs["pw"] = rng.uniform(0.5, 2.0, size=shape).astype(np.float32)
            slots["pos_weight"] = ["pw"]
        attrs = {"normalize": normalize, "ignore_index": ignore}
        api = (lambda p, x, l, w=None, a=attrs:
               C(p).sigmoid_cross_entropy_with_logits(x, l, w, a["normalize"], a["ignore_index"]))
        cases.append(Case("sigmoid_cross_entropy_with_logits", name, inputs, api=api,
                          legacy=("sigmoid_cross_entropy_with_logits", slots, ["Out"], attrs)))
    return cases


def kldiv_cases():
    cases = []
    for i, (reduction, log_target, shape) in enumerate([
            ("none", False, (4, 5)), ("mean", False, (3, 1, 6)), ("sum", False, (7,)),
            ("batchmean", False, (4, 6)), ("none", True, (2, 3, 4)), ("batchmean", True, (5, 2))]):
        x = np.log(rng.uniform(0.05, 1.0, size=shape)).astype(np.float32)
        if log_target:
            t = np.log(rng.uniform(0.05, 1.0, size=shape)).astype(np.float32)
        else:  # zeros and negatives exercise the target <= 0 branch
            t = rng.uniform(-0.2, 1.0, size=shape).astype(np.float32)
        attrs = {"reduction": reduction, "log_target": log_target}
        api = lambda p, x, t, a=attrs: C(p).kldiv_loss(x, t, a["reduction"], a["log_target"])
        cases.append(Case("kldiv_loss", f"{reduction}{'_logt' if log_target else ''}{i}",
                          {"x": x, "t": t}, api=api,
                          legacy=("kldiv_loss", {"X": ["x"], "Target": ["t"]}, ["Loss"], attrs)))
    return cases


def bce_cases():
    cases = []
    for i, shape in enumerate([(4, 6), (3, 1, 5), (9,)]):
        x = rng.uniform(0.001, 0.999, size=shape).astype(np.float32)
        x.flat[0], x.flat[-1] = 0.0, 1.0  # log clamps at -100
        label = rng.uniform(0, 1, size=shape).astype(np.float32)
        cases.append(Case("bce_loss", f"s{i}", {"x": x, "label": label},
                          api=lambda p, x, l: C(p).bce_loss(x, l),
                          legacy=("bce_loss", {"X": ["x"], "Label": ["label"]}, ["Out"], {})))
    return cases


def huber_cases():
    cases = []
    for i, (shape, delta) in enumerate([((5, 4), 1.0), ((3, 1, 7), 0.3), ((8, 1), 2.5)]):
        x, y = f32(*shape), f32(*shape)
        cases.append(Case("huber_loss", f"d{i}", {"x": x, "y": y},
                          api=lambda p, x, y, d=delta: C(p).huber_loss(x, y, d),
                          legacy=("huber_loss", {"X": ["x"], "Y": ["y"]}, ["Out", "Residual"],
                                  {"delta": delta})))
    return cases


def ctc_reference(logits, label, tlen, llen, blank):
    """CTC negative log-likelihood per sequence (float64 alpha recursion)."""
    T, B, _ = logits.shape
    out = np.zeros((B, 1), np.float32)
    for b in range(B):
        x = logits[: tlen[b], b].astype(np.float64)
        lp = x - x.max(axis=1, keepdims=True)
        lp = lp - np.log(np.exp(lp).sum(axis=1, keepdims=True))
        ext = [blank]
        for c in label[b, : llen[b]]:
            ext += [int(c), blank]
        S = len(ext)
        alpha = np.full(S, -np.inf)
        alpha[0] = lp[0, ext[0]]
        if S > 1:
            alpha[1] = lp[0, ext[1]]
        for t in range(1, len(x)):
            new = np.full(S, -np.inf)
            for s in range(S):
                terms = [alpha[s]] + ([alpha[s - 1]] if s >= 1 else [])
                if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                    terms.append(alpha[s - 2])
                new[s] = np.logaddexp.reduce(terms) + lp[t, ext[s]]
            alpha = new
        out[b, 0] = -np.logaddexp(alpha[-1], alpha[-2] if S > 1 else -np.inf)
    return out


def warpctc_cases():
    """PIR cases check against Paddle's warp-ctc. The legacy op must declare
    WarpCTCGrad (the harness would fetch it), so legacy programs are written
    directly against ctc_reference."""
    cases = []
    # (name, T, B, C, L, blank, norm_by_times)
    for name, T, B, Cn, L, blank, norm in [("blank0", 8, 2, 5, 3, 0, False),
                                           ("blank_last", 10, 3, 6, 4, 5, False),
                                           ("norm_by_times", 7, 2, 4, 2, 0, True),
                                           ("batch1", 5, 1, 3, 2, 0, False)]:
        logits = f32(T, B, Cn, lo=-2, hi=2)
        classes = [c for c in range(Cn) if c != blank]
        label = rng.choice(classes, size=(B, L)).astype(np.int32)
        if L >= 2:
            label[0, 1] = label[0, 0]  # a repeat needs a blank between
        tlen = np.array([T - (b % 2) for b in range(B)], dtype=np.int64)
        llen = np.array([L - (b % 2) for b in range(B)], dtype=np.int64)
        inputs = {"logits": logits, "label": label, "tlen": tlen, "llen": llen}
        attrs = {"blank": blank, "norm_by_times": norm}
        slots = {"Logits": ["logits"], "Label": ["label"], "LogitsLength": ["tlen"],
                 "LabelLength": ["llen"]}
        api = (lambda p, lg, lb, tl, ll, a=attrs:
               C(p).warpctc(lg, lb, tl, ll, a["blank"], a["norm_by_times"]))
        # warp-ctc sums in float32 log space, Tiller in double
        cases.append(Case("warpctc", name, inputs, api=api, formats=("pir",), rtol=2e-5,
                          atol=1e-5))
        cases.append(Case("warpctc", f"{name}_written", inputs,
                          legacy=("warpctc", slots, [("Loss", np.float32, (B, 1))], attrs),
                          reference=lambda logits, label, tlen, llen, blank=blank:
                          [ctc_reference(logits, label, tlen, llen, blank)],
                          formats=("legacy",), rtol=2e-5, atol=1e-5))
    return cases


def rank_loss_cases():
    cases = []
    for i, n in enumerate([5, 1, 12]):
        label = rng.integers(0, 2, size=(n, 1)).astype(np.float32)
        left, right = f32(n, 1), f32(n, 1)

        def ref(label, left, right):
            d = left - right
            return [(np.log1p(np.exp(d.astype(np.float64))) - label * d).astype(np.float32)]

        cases.append(Case("rank_loss", f"n{n}", {"label": label, "left": left, "right": right},
                          legacy=("rank_loss", {"Label": ["label"], "Left": ["left"],
                                                "Right": ["right"]},
                                  [("Out", np.float32, (n, 1))], {}),
                          reference=ref, formats=("legacy",)))
    return cases


def identity_loss_cases():
    cases = []
    for r, shape in [(0, (4, 5)), (1, (3, 2, 4)), (2, (6,)), (1, (1, 7))]:
        x = f32(*shape)
        cases.append(Case("identity_loss", f"r{r}_{len(shape)}d", {"x": x},
                          api=lambda p, x, r=r: C(p).identity_loss(x, r),
                          legacy=("identity_loss", {"X": ["x"]}, ["Out"], {"reduction": r})))
    return cases


CASES = [*softmax_ce_cases(), *cross_entropy_v1_cases(), *cross_entropy2_cases(), *sigmoid_ce_cases(), *kldiv_cases(),
         *bce_cases(), *huber_cases(), *warpctc_cases(), *rank_loss_cases(),
         *identity_loss_cases()]
