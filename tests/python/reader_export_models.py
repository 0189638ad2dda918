"""Exports the reader's reference models (BERT, ERNIE-like, ResNet-50, tiny
test nets) with paddle.jit.save and paddle.static.save_inference_model.

The file format follows FLAGS_enable_pir_api, which Paddle reads at import
time: run once with it unset (PIR JSON, the 3.x default) and once with
FLAGS_enable_pir_api=0 (legacy .pdmodel). Output goes under OUT_DIR (default
/tmp/tiller_models/<pir|legacy>); generated files never belong in git.

  .venv/bin/python tests/python/reader_export_models.py [OUT_DIR]
"""
import os
import sys

import numpy as np
import paddle
import paddle.nn as nn

FORMAT = "legacy" if os.environ.get("FLAGS_enable_pir_api") in ("0", "false", "False") else "pir"


# (legacy op type, input slots, attribute names, Python parameter names) for
# _C_ops functions that 3.3.1 binds directly as paddle APIs.
_LEGACY_OPS = {
    "matmul": ("matmul_v2", ["X", "Y"], ["trans_x", "trans_y"],
               ["x", "y", "transpose_x", "transpose_y"]),
    "gelu": ("gelu", ["X"], ["approximate"], ["x", "approximate"]),
    "tanh": ("tanh", ["X"], [], ["x"]),
    "sigmoid": ("sigmoid", ["X"], [], ["x"]),
    "multiply": ("elementwise_mul", ["X", "Y"], [], ["x", "y"]),
    "sum": ("reduce_sum", ["X"], ["dim", "dtype", "keep_dim"], ["x", "axis", "dtype", "keepdim"]),
}


def _patch_legacy_ops():
    """Several paddle APIs are plain _C_ops functions in 3.3.1 and reject
    legacy static Variables ("argument (position 1) must be Value, but got
    Variable"), so legacy export of a model using them fails. Replace every
    reference to those functions with one that appends the legacy op through
    LayerHelper, as older Paddle did."""
    from paddle import _C_ops
    from paddle.base.framework import Variable
    from paddle.base.layer_helper import LayerHelper

    def make(name, orig):
        op_type, slots, attr_names, params = _LEGACY_OPS[name]

        def fn(*args, **kwargs):
            x = args[0] if args else kwargs.get("x")
            if not isinstance(x, Variable):
                return orig(*args, **kwargs)
            args = list(args) + [kwargs[p] for p in params[len(args):] if p in kwargs]
            inputs = dict(zip(slots, args[:len(slots)]))
            values = args[len(slots):]
            attrs = dict(zip(attr_names, values))
            if op_type == "reduce_sum":
                dim = attrs.get("dim")
                attrs = {"dim": [] if dim is None else ([dim] if isinstance(dim, int) else list(dim)),
                         "keep_dim": bool(attrs.get("keep_dim", False)),
                         "reduce_all": dim is None or dim == []}
            helper = LayerHelper(op_type)
            out = helper.create_variable_for_type_inference(dtype=args[0].dtype)
            helper.append_op(type=op_type, inputs=inputs, outputs={"Out": out}, attrs=attrs)
            return out

        return fn

    for name in _LEGACY_OPS:
        orig = getattr(_C_ops, name)
        fn = make(name, orig)
        setattr(_C_ops, name, fn)
        for attr, value in list(vars(Variable).items()):
            if value is orig:
                setattr(Variable, attr, fn)
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("paddle"):
                for attr in dir(mod):
                    try:
                        if getattr(mod, attr) is orig:
                            setattr(mod, attr, fn)
                    except Exception:
                        pass


if FORMAT == "legacy":
    _patch_legacy_ops()


class BertLike(nn.Layer):
    """Embeddings + TransformerEncoder + tanh pooler; task_types adds the
    ERNIE task-type embedding."""

    def __init__(self, vocab=100, hidden=32, heads=4, layers=2, max_pos=64, task_types=0):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.sent = nn.Embedding(2, hidden)
        self.task = nn.Embedding(task_types, hidden) if task_types else None
        self.ln = nn.LayerNorm(hidden)
        self.drop = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(hidden, heads, hidden * 4, dropout=0.1,
                                           activation="gelu")
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.pool = nn.Linear(hidden, hidden)

    def forward(self, input_ids, token_type_ids, attention_mask, task_type_ids=None):
        seq = paddle.shape(input_ids)[1]
        pos_ids = paddle.arange(0, seq, dtype="int64").unsqueeze(0)
        emb = self.word(input_ids) + self.pos(pos_ids) + self.sent(token_type_ids)
        if self.task is not None:
            emb = emb + self.task(task_type_ids)
        emb = self.drop(self.ln(emb))
        # [B, S] 1/0 mask -> additive [B, 1, 1, S] mask.
        mask = (1.0 - attention_mask.astype("float32").unsqueeze([1, 2])) * -1e4
        seq_out = self.encoder(emb, mask)
        pooled = paddle.tanh(self.pool(seq_out[:, 0]))
        return seq_out, pooled


class Tiny(nn.Layer):
    """Small net touching ops the big models do not: concat, transpose,
    reshape, softmax, sigmoid, relu, scale, cast, mean/sum, flatten, squeeze."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.conv = nn.Conv2D(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2D(4)

    def forward(self, x, img):
        a = paddle.nn.functional.relu(self.fc(x))
        b = paddle.nn.functional.sigmoid(x) * 2.0
        c = paddle.concat([a, b], axis=-1)
        d = paddle.reshape(c, [-1, 4, 4]).transpose([0, 2, 1])
        e = paddle.nn.functional.softmax(d, axis=-1)
        f = paddle.scale(e, scale=0.5, bias=1.0).astype("float64").astype("float32")
        g = f.mean(axis=1) + f.sum(axis=[1, 2], keepdim=False).unsqueeze(-1)
        h = self.bn(self.conv(img))
        h = paddle.nn.functional.max_pool2d(h, 2, 2)
        h = paddle.flatten(paddle.nn.functional.adaptive_avg_pool2d(h, 1), 1)
        s = paddle.stack([g.sum(axis=1), h.sum(axis=1)], axis=1).squeeze(-1)
        return g, h, s


def save(layer, specs, out, name):
    layer.eval()
    path = os.path.join(out, name, "model")
    paddle.jit.save(layer, path, input_spec=specs)
    # Run once so the exporter's numbers can be compared later.
    print(f"saved {path} ({FORMAT})")


def save_static(out):
    """paddle.static.save_inference_model of a small program."""
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, 4], "float32")
        y = paddle.static.nn.fc(x, 3)
        z = paddle.nn.functional.gelu(y, approximate=True)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    path = os.path.join(out, "static_fc", "model")
    paddle.static.save_inference_model(path, [x], [z, y], exe, program=main)
    paddle.disable_static()
    print(f"saved {path} ({FORMAT})")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else f"/tmp/tiller_models/{FORMAT}"
    os.makedirs(out, exist_ok=True)
    paddle.seed(0)
    ids = lambda n: paddle.static.InputSpec([-1, -1], "int64", n)
    bert = BertLike()
    save(bert, [ids("input_ids"), ids("token_type_ids"),
                paddle.static.InputSpec([-1, -1], "int64", "attention_mask")], out, "bert")
    ernie = BertLike(task_types=3)
    save(ernie, [ids("input_ids"), ids("token_type_ids"),
                 paddle.static.InputSpec([-1, -1], "int64", "attention_mask"),
                 ids("task_type_ids")], out, "ernie")
    from paddle.vision.models import resnet50
    save(resnet50(), [paddle.static.InputSpec([-1, 3, 224, 224], "float32", "image")], out,
         "resnet50")
    save(Tiny(), [paddle.static.InputSpec([-1, 8], "float32", "x"),
                  paddle.static.InputSpec([-1, 2, 8, 8], "float32", "img")], out, "tiny")
    save_static(out)


if __name__ == "__main__":
    main()
