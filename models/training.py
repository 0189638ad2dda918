"""Paddle static training programs and Paddle's own reference runs (issue 4).

Builds the two acceptance models as Paddle static *training* programs
(forward + loss + ``optimizer.minimize``) in either program form, and runs
them with Paddle's CPU ``Executor`` from numpy-seeded initial parameters, so
a Tiller run can start from the same parameters and batches and be compared
step for step::

    from models import training as T
    spec = T.OptSpec("adamw", weight_decay=0.01)
    built = T.build_bert_pretrain("bert-tiny", spec, seed=0)   # this process's form
    batches = T.make_batches("bert", "bert-tiny", n_steps=50, batch_size=4, seed=1)
    ref = T.paddle_reference("bert", spec, "bert-tiny", fmt="legacy", n_steps=50)
    ref.losses            # [n_steps, len(fetch_names)] float32; total loss first
    ref.final_state       # name -> ndarray: params, optimizer state, BN stats, LR

    # Driving a live program step by step (what a Tiller run replaces):
    scope = paddle.static.Scope()
    exe = T.init_scope(built, scope)          # startup + the seeded initial state
    losses = T.run_step(built, exe, scope, batches[0])   # exe.run + scheduler.step()
    T.read_state(built, scope)                # every persistable, by name

Also: paddle_reference(..., save_at=k, ckpt_dir=d) (interrupted at step k,
paddle.static.save + load, continued), save_training_program /
write_training_case (files for C++ tests; ``python -m models.training``),
call_in_format (run any function in a process of the other form).

Program forms: "pir" (Paddle 3's default) or "legacy" (ProgramDesc). Paddle
fixes the form when it is imported (``FLAGS_enable_pir_api``), so functions
asked for the other form run in a child process (:func:`call_in_format`).
Legacy processes install :mod:`models._legacy_compat`: without it Paddle
3.3.1 can build neither BERT (matmul/gelu/tanh) nor global-norm clipping
(its ``paddle.sqrt``) in legacy mode; see docs/TRAINING_PROGRAMS.md.

Learning rate: the optimizers take a ``paddle.optimizer.lr`` scheduler; the
executor writes ``scheduler()`` into the ``learning_rate_0`` variable before
every run, and the caller steps the scheduler after each step, like a user.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .bert import PRESETS as BERT_PRESETS
from .bert import BertConfig

FORMATS = ("pir", "legacy")
KINDS = ("bert", "cnn")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "adamax", "lamb", "adagrad", "adadelta",
              "rmsprop", "rmsprop_centered")
# Peak learning rates that make each optimizer visibly reduce the loss of both
# models within a few steps (Adadelta's update is scaled by lr, paper uses 1).
DEFAULT_LR = {"sgd": 0.05, "momentum": 0.02, "adam": 1e-3, "adamw": 1e-3, "adamax": 2e-3,
              "lamb": 1e-2, "adagrad": 1e-2, "adadelta": 1.0, "rmsprop": 1e-3,
              "rmsprop_centered": 1e-3}
MLM_IGNORE_INDEX = -1   # PaddleNLP's BERT pretraining convention
MASK_ID, CLS_ID, SEP_ID, PAD_ID = 3, 1, 2, 0
_REPO_ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------
# Configurations


@dataclass(frozen=True)
class PretrainConfig:
    bert: BertConfig
    seq_len: int
    max_predictions: int   # masked positions per sequence (padded with ignore_index)


def _no_dropout(cfg: BertConfig) -> BertConfig:
    return dataclasses.replace(cfg, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


PRETRAIN_PRESETS = {
    "bert-tiny": PretrainConfig(_no_dropout(BERT_PRESETS["bert-tiny"]), seq_len=32,
                                max_predictions=5),
    "bert-base": PretrainConfig(_no_dropout(BERT_PRESETS["bert-base"]), seq_len=128,
                                max_predictions=20),
}


def pretrain_config(cfg=None) -> PretrainConfig:
    """A PretrainConfig from itself, a preset name or None ("bert-tiny")."""
    if cfg is None:
        cfg = "bert-tiny"
    if isinstance(cfg, PretrainConfig):
        return cfg
    if cfg not in PRETRAIN_PRESETS:
        raise KeyError(f"unknown BERT pretraining preset {cfg!r}; "
                       f"known: {sorted(PRETRAIN_PRESETS)}")
    return PRETRAIN_PRESETS[cfg]


# Small CNN: 3x16x16 images, 10 classes.
CNN_IMAGE = (3, 16, 16)
CNN_CLASSES = 10


@dataclass(frozen=True)
class OptSpec:
    """Optimizer and its options. ``lr`` None -> DEFAULT_LR[name].

    schedule "warmup_poly": LinearWarmup(PolynomialDecay(lr -> lr*end_lr_ratio
    over decay_steps), warmup_steps, lr*warmup_start_ratio -> lr); "constant":
    a float learning rate (no scheduler).
    weight_decay: L2Decay regularizer for every optimizer except adamw
    (decoupled, biases and norm parameters excluded by apply_decay_param_fun)
    and lamb (lamb_weight_decay, the same exclusions through
    exclude_from_weight_decay_fn). Momentum folds L2Decay into its own op
    (regularization_method "l2_decay")."""
    name: str = "adam"
    lr: float | None = None
    schedule: str = "warmup_poly"
    warmup_steps: int = 5
    decay_steps: int = 50
    end_lr_ratio: float = 0.1
    warmup_start_ratio: float = 0.1
    clip_norm: float | None = 1.0
    weight_decay: float = 0.0
    momentum: float = 0.9          # momentum; rmsprop's momentum when name starts with rmsprop
    use_nesterov: bool = False

    def __post_init__(self):
        if self.name not in OPTIMIZERS:
            raise ValueError(f"optimizer {self.name!r} not in {OPTIMIZERS}")
        if self.schedule not in ("warmup_poly", "constant"):
            raise ValueError(f"schedule {self.schedule!r} not in ('warmup_poly', 'constant')")

    @property
    def peak_lr(self) -> float:
        return DEFAULT_LR[self.name] if self.lr is None else self.lr


def opt_spec_of(spec) -> OptSpec:
    if isinstance(spec, OptSpec):
        return spec
    if isinstance(spec, str):
        return OptSpec(spec)
    return OptSpec(**spec)


def decay_applies(param_name: str) -> bool:
    """Decoupled decay exclusions (AdamW, Lamb): biases and LayerNorm/BatchNorm
    parameters, as BERT recipes do."""
    return not (".b_" in param_name or "norm" in param_name)


def make_optimizer(spec: OptSpec):
    """(optimizer, lr scheduler or None) for ``spec``; call inside the guards
    of the program being built."""
    import paddle
    from paddle.regularizer import L2Decay

    lr0 = spec.peak_lr
    sched = None
    lr = lr0
    if spec.schedule == "warmup_poly":
        decay = paddle.optimizer.lr.PolynomialDecay(lr0, spec.decay_steps, lr0 * spec.end_lr_ratio)
        sched = paddle.optimizer.lr.LinearWarmup(decay, spec.warmup_steps,
                                                 lr0 * spec.warmup_start_ratio, lr0)
        lr = sched
    clip = paddle.nn.ClipGradByGlobalNorm(spec.clip_norm) if spec.clip_norm else None
    l2 = L2Decay(spec.weight_decay) if spec.weight_decay else None
    O = paddle.optimizer
    n = spec.name
    if n == "sgd":
        opt = O.SGD(lr, weight_decay=l2, grad_clip=clip)
    elif n == "momentum":
        opt = O.Momentum(lr, spec.momentum, use_nesterov=spec.use_nesterov, weight_decay=l2,
                         grad_clip=clip)
    elif n == "adam":
        opt = O.Adam(lr, weight_decay=l2, grad_clip=clip)
    elif n == "adamw":
        opt = O.AdamW(lr, weight_decay=spec.weight_decay, grad_clip=clip,
                      apply_decay_param_fun=decay_applies)
    elif n == "adamax":
        opt = O.Adamax(lr, weight_decay=l2, grad_clip=clip)
    elif n == "lamb":
        opt = O.Lamb(lr, lamb_weight_decay=spec.weight_decay, grad_clip=clip,
                     exclude_from_weight_decay_fn=lambda p: not decay_applies(p.name))
    elif n == "adagrad":
        opt = O.Adagrad(lr, weight_decay=l2, grad_clip=clip)
    elif n == "adadelta":
        opt = O.Adadelta(lr, weight_decay=l2, grad_clip=clip)
    else:
        opt = O.RMSProp(lr, momentum=spec.momentum, centered=n == "rmsprop_centered",
                        weight_decay=l2, grad_clip=clip)
    return opt, sched


# ---------------------------------------------------------------------------
# Models (paddle.nn, built in static mode)


def _bert_pretrain_layer(cfg: PretrainConfig):
    import paddle
    import paddle.nn as nn
    import paddle.nn.functional as F

    from .bert import BertModel

    class BertPretrain(nn.Layer):
        """PaddleNLP's BertForPretraining: MLM transform (dense, gelu,
        LayerNorm) on the gathered masked positions, decoder tied to the word
        embeddings plus a bias, NSP classifier on the pooled output."""

        def __init__(self, c: BertConfig):
            super().__init__()
            self.hidden = c.hidden_size
            self.bert = BertModel(c)
            self.transform = nn.Linear(c.hidden_size, c.hidden_size)
            self.transform_norm = nn.LayerNorm(c.hidden_size, epsilon=c.layer_norm_eps)
            self.decoder_bias = self.create_parameter([c.vocab_size], is_bias=True)
            self.nsp = nn.Linear(c.hidden_size, 2)

        def forward(self, input_ids, token_type_ids, masked_positions):
            """masked_positions [B, P]: positions within each sequence."""
            seq, pooled = self.bert(input_ids, token_type_ids)
            # Rows of the flattened [B x seq_len, hidden] sequence output:
            # position + b x seq_len (computed here, so a feed's positions
            # do not depend on which batch or micro-batch it lands in).
            length = paddle.shape(input_ids)[1]
            rows = paddle.arange(0, paddle.shape(masked_positions)[0], dtype="int64") * \
                paddle.cast(length, "int64")
            flat = paddle.reshape(masked_positions + paddle.unsqueeze(rows, 1), [-1])
            picked = paddle.gather(paddle.reshape(seq, [-1, self.hidden]), flat)
            h = self.transform_norm(F.gelu(self.transform(picked)))
            word = self.bert.embeddings.word_embeddings.weight
            mlm_logits = paddle.matmul(h, word, transpose_y=True) + self.decoder_bias
            return mlm_logits, self.nsp(pooled)

    return BertPretrain(cfg.bert)


def _small_cnn_layer():
    import paddle
    import paddle.nn as nn

    class SmallCNN(nn.Layer):
        def __init__(self):
            super().__init__()
            # No conv bias before BatchNorm (as ResNet does): BatchNorm
            # removes it, so its gradient is zero up to rounding, and
            # adaptive optimizers (Adam divides by sqrt(v)) turn that
            # rounding noise into full-size steps that no two
            # implementations reproduce.
            self.conv1 = nn.Conv2D(3, 8, 3, padding=1, bias_attr=False)
            self.bn1 = nn.BatchNorm2D(8)
            self.pool1 = nn.MaxPool2D(2, 2)
            self.conv2 = nn.Conv2D(8, 16, 3, padding=1, bias_attr=False)
            self.bn2 = nn.BatchNorm2D(16)
            self.pool2 = nn.AvgPool2D(2, 2)
            self.fc = nn.Linear(16 * 4 * 4, CNN_CLASSES)
            # One layer per use (no parameters), so pipeline stages can be
            # given layer by layer (_stage_layers).
            self.relu1 = nn.ReLU()
            self.relu2 = nn.ReLU()
            self.flatten = nn.Flatten(1)

        def forward(self, x):
            x = self.pool1(self.relu1(self.bn1(self.conv1(x))))
            x = self.pool2(self.relu2(self.bn2(self.conv2(x))))
            return self.fc(self.flatten(x))

    return SmallCNN()


def _init_arrays(model, seed: int) -> dict[str, np.ndarray]:
    """Numpy initial values for every parameter and BatchNorm statistic, by
    name (the rules of models/_init.py): Linear/Embedding N(0, 0.02) with
    small random biases; LayerNorm 1 + N(0, 0.1); conv Kaiming-normal;
    BatchNorm random affine terms and running statistics."""
    import paddle.nn as nn

    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}

    def put(p, a):
        out[p.name] = np.asarray(a, dtype=np.float32).reshape(p.shape)

    for _, layer in model.named_sublayers(include_self=True):
        if isinstance(layer, nn.Conv2D):
            fan_in = int(np.prod(layer.weight.shape[1:]))
            put(layer.weight, rng.normal(0.0, np.sqrt(2.0 / fan_in), layer.weight.shape))
            if layer.bias is not None:
                put(layer.bias, rng.normal(0.0, 0.01, layer.bias.shape))
        elif isinstance(layer, nn.BatchNorm2D):
            c = layer.weight.shape
            put(layer.weight, rng.uniform(0.5, 1.0, c))
            put(layer.bias, rng.normal(0.0, 0.1, c))
            put(layer._mean, rng.normal(0.0, 0.1, c))
            put(layer._variance, rng.uniform(0.5, 1.5, c))
        elif isinstance(layer, (nn.Linear, nn.Embedding)):
            put(layer.weight, rng.normal(0.0, 0.02, layer.weight.shape))
            if isinstance(layer, nn.Linear):
                put(layer.bias, rng.normal(0.0, 0.02, layer.bias.shape))
        elif isinstance(layer, nn.LayerNorm):
            put(layer.weight, 1.0 + rng.normal(0.0, 0.1, layer.weight.shape))
            put(layer.bias, rng.normal(0.0, 0.1, layer.bias.shape))
    for p in model.parameters():   # parameters owned directly (the MLM decoder bias)
        if p.name not in out:
            put(p, rng.normal(0.0, 0.02, p.shape))
    return out


# ---------------------------------------------------------------------------
# Building


@dataclass
class BuiltProgram:
    kind: str                      # "bert" | "cnn"
    fmt: str                       # "pir" | "legacy"
    main: Any                      # paddle.static.Program
    startup: Any
    feed_names: list[str]
    feed_specs: dict[str, tuple]   # name -> (shape with -1 batch, dtype)
    fetch_list: list               # Variables (legacy) or Values (PIR); total loss first
    fetch_names: list[str]         # "loss", "mlm_loss", "nsp_loss"
    lr_scheduler: Any              # paddle.optimizer.lr.LRScheduler or None
    param_names: list[str]         # trainable parameters
    init_state: dict[str, np.ndarray]   # parameters + BatchNorm statistics
    opt_spec: OptSpec
    config: Any = None
    notes: list[str] = field(default_factory=list)
    # Other values worth fetching (BERT: "mlm_logits", "nsp_logits").
    outputs: dict[str, Any] = field(default_factory=dict)
    # The layer's structured parameter names ("bert.encoder.layers.0.linear1.weight")
    # -> the program's (init_state's) names: for other frameworks' copies of the model.
    param_paths: dict[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def static_mode():
    """paddle.enable_static() for the block, back to dynamic mode afterwards
    if the process was in it (other code in the process, e.g. other tests,
    expects Paddle's default dynamic mode)."""
    import paddle

    was_dynamic = paddle.in_dynamic_mode()
    paddle.enable_static()
    try:
        yield
    finally:
        if was_dynamic:
            paddle.disable_static()


def current_format() -> str:
    from .export import current_process_format

    return current_process_format()


def _stage_layers(kind: str, model, stages: int):
    """Pipeline stages for the layers of ``model``, as a user of
    tiller.set_ipu_shard would give them: (the stage of ops outside every
    listed layer, [(layer, stage)]), with stage i on device i. BERT: the
    embeddings (and the attention mask) first, the encoder layers spread
    evenly, the pooler and heads last. CNN: conv blocks, pooling, fc in order."""
    last = stages - 1
    if kind == "bert":
        units = [model.bert.embeddings, *model.bert.encoder.layers]
        per = len(units) / stages
        layers = [(model.bert, 0)]
        layers += [(u, min(last, int(i / per))) for i, u in enumerate(units)]
        layers.append((model.bert.pooler, last))
        return last, layers
    order = [model.conv1, model.bn1, model.relu1, model.pool1, model.conv2, model.bn2,
             model.relu2, model.pool2, model.flatten, model.fc]
    per = len(order) / stages
    return 0, [(layer, min(last, int(i / per))) for i, layer in enumerate(order)]


def _build(kind: str, cfg, spec, seed: int, legacy_compat: bool = True,
           stages: int = 1) -> BuiltProgram:
    """legacy_compat False: build legacy programs without models._legacy_compat
    (scripts/dump_training_programs.py shows what then fails). stages > 1:
    the model sharded into that many pipeline stages with
    tiller.ipu_shard_guard / set_ipu_shard (_stage_layers), the loss in the
    last."""
    import paddle
    import paddle.nn.functional as F

    fmt = current_format()
    notes = []
    if fmt == "legacy" and legacy_compat:
        from . import _legacy_compat

        _legacy_compat.install()
        notes.append("legacy: models._legacy_compat installed (matmul/gelu/tanh/sqrt/maximum "
                     "append legacy ops)")
    paddle.enable_static()
    spec = opt_spec_of(spec)
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = seed
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        if kind == "bert":
            cfg = pretrain_config(cfg)
            s = cfg.seq_len
            feeds = {"input_ids": ([-1, s], "int64"), "token_type_ids": ([-1, s], "int64"),
                     "masked_positions": ([-1, cfg.max_predictions], "int64"),
                     "masked_lm_labels": ([-1, cfg.max_predictions], "int64"),
                     "next_sentence_labels": ([-1, 1], "int64")}
            v = {n: paddle.static.data(n, shp, dt) for n, (shp, dt) in feeds.items()}
            model = _bert_pretrain_layer(cfg)
            with _sharded(kind, model, stages) as loss_stage:
                mlm_logits, nsp_logits = model(v["input_ids"], v["token_type_ids"],
                                                v["masked_positions"])
            # reduction="mean" divides by the non-ignored count only when
            # ignore_index >= 0 (paddle/nn/functional/loss.py); PaddleNLP's
            # -1 would average over the padding too, so normalise explicitly:
            # sum(loss) / count = mean(loss) / mean(mask) (means, because
            # paddle.sum cannot be traced in legacy mode; make_batches masks at
            # least one token per sequence, so mean(mask) > 0).
            with loss_stage():
                labels = paddle.reshape(v["masked_lm_labels"], [-1, 1])
                per_token = F.cross_entropy(mlm_logits, labels, ignore_index=MLM_IGNORE_INDEX,
                                            reduction="none")
                mask = paddle.cast(labels != MLM_IGNORE_INDEX, "float32")
                mlm_loss = paddle.mean(per_token) / paddle.mean(mask)
                nsp_loss = F.cross_entropy(nsp_logits, v["next_sentence_labels"])
                loss = mlm_loss + nsp_loss
            fetch, fetch_names = [loss, mlm_loss, nsp_loss], ["loss", "mlm_loss", "nsp_loss"]
        elif kind == "cnn":
            cfg = None
            feeds = {"image": ([-1, *CNN_IMAGE], "float32"), "label": ([-1, 1], "int64")}
            v = {n: paddle.static.data(n, shp, dt) for n, (shp, dt) in feeds.items()}
            model = _small_cnn_layer()
            with _sharded(kind, model, stages) as loss_stage:
                logits = model(v["image"])
            with loss_stage():
                loss = F.cross_entropy(logits, v["label"])
            fetch, fetch_names = [loss], ["loss"]
        else:
            raise ValueError(f"kind {kind!r} not in {KINDS}")
        opt, sched = make_optimizer(spec)
        opt.minimize(loss)
    init = _init_arrays(model, seed)
    params = [p.name for p in model.parameters() if not p.stop_gradient]
    outputs = {"mlm_logits": mlm_logits, "nsp_logits": nsp_logits} if kind == "bert" else {}
    paths = {path: p.name for path, p in model.named_parameters()}
    return BuiltProgram(kind, fmt, main, startup, list(feeds), feeds, fetch, fetch_names, sched,
                        params, init, spec, cfg, notes, outputs, paths)


@contextlib.contextmanager
def _sharded(kind: str, model, stages: int):
    """Builds the model's ops inside its pipeline stages (nothing when
    stages is 1); yields a context for the loss's ops (the last stage)."""
    if stages <= 1:
        yield contextlib.nullcontext
        return
    import tiller

    outer, layers = _stage_layers(kind, model, stages)
    for layer, stage in layers:
        tiller.set_ipu_shard(layer, index=stage, stage=stage)
    with tiller.ipu_shard_guard(index=outer, stage=outer):
        yield lambda: tiller.ipu_shard_guard(index=stages - 1, stage=stages - 1)


def build_bert_pretrain(cfg="bert-tiny", opt_spec="adam", seed: int = 0,
                        stages: int = 1) -> BuiltProgram:
    """BERT pretraining program (MLM with tied word embeddings + NSP, dropout
    0) in this process's program form. Feeds: input_ids, token_type_ids
    [B, seq]; masked_positions [B, P] (positions within each sequence);
    masked_lm_labels [B, P] (-1 = padding, ignored); next_sentence_labels
    [B, 1]. Every feed's first dim is the batch, so micro-batches are rows
    (the IPU execution model: micro_batch_size rows each)."""
    return _build("bert", cfg, opt_spec, seed, stages=stages)


def build_small_cnn(opt_spec="adam", seed: int = 0, stages: int = 1) -> BuiltProgram:
    """conv-bn-relu-maxpool-conv-bn-relu-avgpool-fc + softmax cross entropy;
    feeds image [B, 3, 16, 16] float32, label [B, 1] int64."""
    return _build("cnn", None, opt_spec, seed, stages=stages)


def build(kind: str, cfg=None, opt_spec="adam", seed: int = 0, stages: int = 1) -> BuiltProgram:
    """build_bert_pretrain (cfg default "bert-tiny") or build_small_cnn;
    stages > 1: sharded into pipeline stages (see _build).
    Leaves Paddle in static mode (paddle.enable_static())."""
    if kind == "bert":
        return build_bert_pretrain(cfg or "bert-tiny", opt_spec, seed, stages)
    if kind == "cnn":
        return build_small_cnn(opt_spec, seed, stages)
    raise ValueError(f"kind {kind!r} not in {KINDS}")


# ---------------------------------------------------------------------------
# Batches


def make_batches(kind: str, cfg=None, n_steps: int = 10, batch_size: int = 4,
                 seed: int = 0, distinct: int | None = None) -> list[dict[str, np.ndarray]]:
    """Deterministic feed dicts, one per step; with ``distinct`` = d, the
    first d batches repeat cyclically (step i gets batch i % d), so losses of
    the same batch can be compared across epochs.

    bert: "[CLS] A [SEP] B [SEP] pad..." with Zipf-distributed token ids
    (learnable unigram statistics), ~15% of the tokens masked (replaced by
    MASK_ID) up to max_predictions per sequence; unused prediction slots
    point at position 0 with label -1 (ignored). NSP labels are random.
    cnn: N(0, 1) images; labels from a fixed random linear teacher, so the
    task is learnable."""
    if distinct is not None and distinct < n_steps:
        first = make_batches(kind, cfg, distinct, batch_size, seed)
        return [first[i % distinct] for i in range(n_steps)]
    rng = np.random.default_rng(seed)
    if kind == "cnn":
        teacher = np.random.default_rng(seed + 7919).standard_normal(
            (int(np.prod(CNN_IMAGE)), CNN_CLASSES))
        out = []
        for _ in range(n_steps):
            x = rng.standard_normal((batch_size, *CNN_IMAGE)).astype(np.float32)
            y = np.argmax(x.reshape(batch_size, -1) @ teacher, axis=1)
            out.append({"image": x, "label": y.astype(np.int64).reshape(-1, 1)})
        return out
    if kind != "bert":
        raise ValueError(f"kind {kind!r} not in {KINDS}")
    cfg = pretrain_config(cfg or "bert-tiny")
    s, p, vocab = cfg.seq_len, cfg.max_predictions, cfg.bert.vocab_size
    first = 4                                     # ids 0..3 are PAD, CLS, SEP, MASK
    zipf = 1.0 / (np.arange(vocab - first) + 10.0)
    zipf /= zipf.sum()
    out = []
    for _ in range(n_steps):
        ids = np.full((batch_size, s), PAD_ID, np.int64)
        types = np.zeros((batch_size, s), np.int64)
        positions = np.zeros((batch_size, p), np.int64)
        labels = np.full((batch_size, p), MLM_IGNORE_INDEX, np.int64)
        for b in range(batch_size):
            n = int(rng.integers(max(5, s // 2), s + 1))       # used length incl. specials
            a = int(rng.integers(1, n - 3))                      # tokens of sentence A
            toks = rng.choice(vocab - first, size=n - 3, p=zipf) + first
            row = np.concatenate([[CLS_ID], toks[:a], [SEP_ID], toks[a:], [SEP_ID]])
            ids[b, :n] = row
            types[b, a + 2:n] = 1
            candidates = np.array([i for i in range(n) if row[i] >= first])
            k = min(p, max(1, int(round(0.15 * len(candidates)))))
            pick = np.sort(rng.choice(candidates, size=k, replace=False))
            labels[b, :k] = ids[b, pick]
            ids[b, pick] = MASK_ID
            positions[b, :k] = pick
        out.append({"input_ids": ids, "token_type_ids": types, "masked_positions": positions,
                    "masked_lm_labels": labels,
                    "next_sentence_labels": rng.integers(0, 2, (batch_size, 1)).astype(np.int64)})
    return out


# ---------------------------------------------------------------------------
# Running with Paddle's executor


def persistable_names(built: BuiltProgram) -> list[str]:
    """Every persistable variable of the main program (parameters, optimizer
    accumulators, BatchNorm statistics, learning_rate_0), sorted."""
    if built.fmt == "pir":
        from paddle.static.pir_io import get_pir_parameters

        params, opts = get_pir_parameters(built.main)
        return sorted({v.name for v in params + opts if v.persistable})
    from paddle.base import core

    skip = (core.VarDesc.VarType.FEED_MINIBATCH, core.VarDesc.VarType.FETCH_LIST,
            core.VarDesc.VarType.READER)
    return sorted(v.name for v in built.main.list_vars() if v.persistable and v.type not in skip)


def read_state(built: BuiltProgram, scope) -> dict[str, np.ndarray]:
    out = {}
    for name in persistable_names(built):
        var = scope.find_var(name)
        if var is not None and var.get_tensor()._is_initialized():
            out[name] = np.array(var.get_tensor()).copy()
    return out


def write_state(scope, state: dict[str, np.ndarray]) -> None:
    import paddle

    for name, a in state.items():
        var = scope.find_var(name)
        if var is None:
            raise KeyError(f"{name} is not a variable of the scope")
        t = var.get_tensor()
        if t._is_initialized():
            have = np.array(t)
            if have.shape != a.shape or have.dtype != a.dtype:
                raise ValueError(f"{name}: scope holds {have.dtype}{list(have.shape)}, "
                                 f"state gives {a.dtype}{list(a.shape)}")
        t.set(np.ascontiguousarray(a), paddle.CPUPlace())


def init_scope(built: BuiltProgram, scope, exe=None):
    """Run the startup program in ``scope`` (optimizer accumulators get
    Paddle's initial values), then set the seeded numpy parameters and
    BatchNorm statistics. Returns the executor."""
    import paddle

    exe = exe or paddle.static.Executor(paddle.CPUPlace())
    with paddle.static.scope_guard(scope):
        exe.run(built.startup)
        write_state(scope, built.init_state)
    return exe


def run_step(built: BuiltProgram, exe, scope, feed) -> list[np.ndarray]:
    """One training step, then the scheduler step a user would do."""
    import paddle

    with paddle.static.scope_guard(scope):
        outs = exe.run(built.main, feed=feed, fetch_list=built.fetch_list)
    if built.lr_scheduler is not None:
        built.lr_scheduler.step()
    return outs


@dataclass
class ReferenceRun:
    kind: str
    fmt: str
    fetch_names: list[str]
    losses: np.ndarray               # [n_steps, len(fetch_names)] float32
    lrs: list[float]                 # learning rate each step ran with
    init_state: dict[str, np.ndarray]
    final_state: dict[str, np.ndarray]
    param_names: list[str]
    notes: list[str]
    snapshots: dict[int, dict[str, np.ndarray]]   # step k -> state before step k


def _reference_here(kind, opt_spec, cfg=None, n_steps=10, batch_size=4, seed=0, data_seed=None,
                    distinct=None, save_at=None, ckpt_dir=None, snapshot_at=()) -> ReferenceRun:
    import paddle

    if save_at is not None and ckpt_dir is None:
        raise ValueError("save_at needs ckpt_dir")
    data_seed = seed + 1 if data_seed is None else data_seed
    batches = make_batches(kind, cfg, n_steps, batch_size, data_seed, distinct)
    built = build(kind, cfg, opt_spec, seed)
    scope = paddle.static.Scope()
    exe = init_scope(built, scope)
    init_state = read_state(built, scope)
    losses, lrs, snapshots = [], [], {}
    for i, feed in enumerate(batches):
        if i in snapshot_at:
            snapshots[i] = read_state(built, scope)
        if save_at is not None and i == save_at:
            built, scope, exe = _save_and_resume(built, scope, exe, ckpt_dir, kind, cfg, seed)
        lrs.append(float(built.lr_scheduler()) if built.lr_scheduler else built.opt_spec.peak_lr)
        outs = run_step(built, exe, scope, feed)
        losses.append([float(np.asarray(o).reshape(())) for o in outs])
    return ReferenceRun(kind, built.fmt, built.fetch_names, np.asarray(losses, np.float32), lrs,
                        init_state, read_state(built, scope), built.param_names, built.notes,
                        snapshots)


def _references_here(requests: list[dict]) -> list[ReferenceRun]:
    with static_mode():
        return [_reference_here(**r) for r in requests]


def save_checkpoint(built: BuiltProgram, scope, prefix) -> None:
    """paddle.static.save of the program's state in ``scope`` plus the LR
    scheduler's state (``prefix``.lr.json), which Paddle keeps in Python only."""
    import paddle

    with paddle.static.scope_guard(scope):
        paddle.static.save(built.main, str(prefix))
    if built.lr_scheduler is not None:
        Path(str(prefix) + ".lr.json").write_text(json.dumps(built.lr_scheduler.state_dict()))


def load_checkpoint(built: BuiltProgram, scope, prefix, exe) -> None:
    """Startup + paddle.static.load into ``scope``, and the LR scheduler state."""
    import paddle

    with paddle.static.scope_guard(scope):
        exe.run(built.startup)
        paddle.static.load(built.main, str(prefix), exe)
    if built.lr_scheduler is not None:
        set_lr_state(built, json.loads(Path(str(prefix) + ".lr.json").read_text()))


def set_lr_state(built: BuiltProgram, state: dict) -> None:
    """built.lr_scheduler.set_state_dict(state) (e.g. to rewind it to a
    state_dict() taken earlier)."""
    with warnings.catch_warnings():
        # LinearWarmup's state nests its inner scheduler's; the base class
        # warns about that key before LinearWarmup restores it.
        warnings.filterwarnings("ignore", "There are some unused values in state_dict")
        built.lr_scheduler.set_state_dict(state)


def _save_and_resume(built, scope, exe, ckpt_dir, kind, cfg, seed):
    """An interruption: checkpoint, forget everything, rebuild the program as
    a restarted script would, load the checkpoint into a fresh scope."""
    import paddle

    prefix = Path(ckpt_dir) / "ckpt"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(built, scope, prefix)
    rebuilt = build(kind, cfg, built.opt_spec, seed)
    fresh = paddle.static.Scope()
    exe = paddle.static.Executor(paddle.CPUPlace())
    load_checkpoint(rebuilt, fresh, prefix, exe)
    return rebuilt, fresh, exe


def paddle_reference(kind: str, opt_spec="adam", cfg=None, fmt: str | None = None,
                     n_steps: int = 10, batch_size: int = 4, seed: int = 0,
                     data_seed: int | None = None, distinct: int | None = None,
                     save_at: int | None = None, ckpt_dir=None,
                     snapshot_at: tuple = ()) -> ReferenceRun:
    """Train ``n_steps`` with Paddle's CPU executor from the seeded initial
    state (``build(kind, cfg, opt_spec, seed)``) on make_batches(kind, cfg,
    n_steps, batch_size, data_seed (default seed + 1), distinct).

    With ``save_at`` = k the run is interrupted before step k:
    paddle.static.save to ``ckpt_dir``/ckpt.* (+ ckpt.lr.json), rebuild,
    startup + paddle.static.load into a fresh scope, continue; the files stay
    for others to load. ``snapshot_at``: steps k whose state (before step k)
    is kept in ``snapshots``. ``fmt`` None = this process's form; the other
    form runs in a child process."""
    return paddle_references(fmt, dict(
        kind=kind, opt_spec=opt_spec, cfg=cfg, n_steps=n_steps, batch_size=batch_size,
        seed=seed, data_seed=data_seed, distinct=distinct, save_at=save_at,
        ckpt_dir=ckpt_dir, snapshot_at=tuple(snapshot_at)))[0]


def paddle_references(fmt: str | None, *requests: dict) -> list[ReferenceRun]:
    """Several paddle_reference runs (keyword dicts without fmt) in one
    process of form ``fmt``: one child process for all of them."""
    reqs = []
    for r in requests:
        r = dict(r)
        r["opt_spec"] = opt_spec_of(r.get("opt_spec", "adam"))
        if r.get("ckpt_dir") is not None:
            r["ckpt_dir"] = str(r["ckpt_dir"])
        reqs.append(r)
    return call_in_format(fmt or current_format(), "models.training:_references_here",
                          requests=reqs)


# ---------------------------------------------------------------------------
# Files for C++ tests


def save_training_program(built: BuiltProgram, out_dir, state=None, fetch_ops: bool = True):
    """Write ``built`` as paddle.static.save does (PIR: train.json +
    train.pdparams + train.pdopt; legacy: train.pdmodel + .pdparams + .pdopt)
    from ``state`` (default: startup values + the seeded initial state), the
    startup program (startup.json / startup.pdmodel) and training_info.json.

    fetch_ops: the saved main program gets fetch ops for the losses, in
    fetch order (PIR values have no names otherwise): "pd_op.fetch" named
    loss/mlm_loss/nsp_loss (PIR), "fetch" ops with col = index (legacy)."""
    import paddle

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    scope = paddle.static.Scope()
    exe = init_scope(built, scope)
    if state is not None:
        write_state(scope, state)
    prog = built.main
    fetch_vars = list(built.fetch_names)
    if fetch_ops:
        prog, fetch_vars = _with_fetch_ops(built)
    with paddle.static.scope_guard(scope):
        paddle.static.save(prog, str(out / "train"))
    if built.fmt == "pir":
        paddle.base.core.serialize_pir_program(built.startup, str(out / "startup.json"))
    else:
        (out / "startup.pdmodel").write_bytes(built.startup.desc.serialize_to_string())
    info = {
        "kind": built.kind, "format": built.fmt, "paddle_version": paddle.__version__,
        "feeds": {n: {"shape": list(s), "dtype": d} for n, (s, d) in built.feed_specs.items()},
        "fetch_names": built.fetch_names, "fetch_vars": fetch_vars,
        "param_names": built.param_names, "persistables": persistable_names(built),
        "opt_spec": dataclasses.asdict(built.opt_spec),
        "config": dataclasses.asdict(built.config) if built.config else None,
        "notes": built.notes,
    }
    (out / "training_info.json").write_text(json.dumps(info, indent=1))
    return out


def _with_fetch_ops(built: BuiltProgram):
    """A copy of the main program with fetch ops appended; returns it and the
    names the fetched variables have in the file."""
    import paddle
    from paddle.base import core

    if built.fmt == "pir":
        mapping = paddle.pir.IrMapping()
        prog = built.main.clone(mapping)
        with paddle.static.program_guard(prog):
            for i, (v, name) in enumerate(zip(built.fetch_list, built.fetch_names)):
                paddle._pir_ops.fetch(mapping.look_up(v), name, i).persistable = True
        return prog, list(built.fetch_names)
    prog = built.main.clone()
    block = prog.global_block()
    fetch_var = block.create_var(name="fetch", type=core.VarDesc.VarType.FETCH_LIST,
                                 persistable=True)
    names = [v.name for v in built.fetch_list]
    for i, n in enumerate(names):
        block.append_op(type="fetch", inputs={"X": [n]}, outputs={"Out": [fetch_var]},
                        attrs={"col": i})
    return prog, names


def describe_saved_program(out_dir) -> dict:
    """Parse ``out_dir``/train.json|pdmodel back with Paddle (in a process of
    its form) and return {"fetch": [(name, col)], "op_counts": {type: n}}."""
    import collections

    import paddle

    with static_mode():
        if current_format() == "pir":
            prog = paddle.static.Program()
            if not paddle.base.core.deserialize_pir_program(
                    str(Path(out_dir) / "train.json"), prog, -1):
                raise RuntimeError(f"Paddle could not read {out_dir}/train.json")
            ops = list(prog.global_block().ops)
            fetch = [(op.attrs()["name"], op.attrs()["col"]) for op in ops
                     if op.name() == "pd_op.fetch"]
            types = [op.name() for op in ops]
        else:
            data = (Path(out_dir) / "train.pdmodel").read_bytes()
            ops = paddle.static.Program.parse_from_string(data).global_block().ops
            fetch = [(op.input("X")[0], op.attr("col")) for op in ops if op.type == "fetch"]
            types = [op.type for op in ops]
    return {"fetch": fetch, "op_counts": dict(collections.Counter(types))}


def _write_case_here(out_dir, kind, opt_spec, cfg, n_steps, batch_size, seed, data_seed,
                     distinct):
    with static_mode():
        out = save_training_program(build(kind, cfg, opt_spec, seed), out_dir)
        ref = _reference_here(kind, opt_spec, cfg, n_steps, batch_size, seed, data_seed,
                              distinct)
    batches = make_batches(kind, cfg, n_steps, batch_size,
                           seed + 1 if data_seed is None else data_seed, distinct)
    np.savez(out / "batches.npz", **{f"{i}/{k}": v for i, b in enumerate(batches)
                                     for k, v in b.items()})
    np.savez(out / "reference.npz", losses=ref.losses, lrs=np.asarray(ref.lrs, np.float64),
             **{f"init/{k}": v for k, v in ref.init_state.items()},
             **{f"final/{k}": v for k, v in ref.final_state.items()})
    return str(out)


def write_training_case(out_dir, kind: str, opt_spec="adam", cfg=None, fmt: str | None = None,
                        n_steps: int = 10, batch_size: int = 4, seed: int = 0,
                        data_seed: int | None = None, distinct: int | None = None) -> str:
    """Everything a C++ test needs, in ``out_dir``: the training program and
    its initial state (save_training_program), batches.npz ("<step>/<feed>"
    arrays) and reference.npz from Paddle: losses [n_steps, n_fetch], lrs
    [n_steps], "init/<name>" and "final/<name>" for every persistable before
    the first and after the last step."""
    return call_in_format(fmt or current_format(), "models.training:_write_case_here",
                          out_dir=str(Path(out_dir).resolve()), kind=kind,
                          opt_spec=opt_spec_of(opt_spec), cfg=cfg, n_steps=n_steps,
                          batch_size=batch_size, seed=seed, data_seed=data_seed,
                          distinct=distinct)


def _write_staged_here(out_dir, stages: int, opt_spec) -> dict:
    """Legacy BERT-tiny pretraining with its forward ops split into `stages`
    consecutive pipeline stages (ipu_index = ipu_stage = s, the attributes
    Paddle's ipu_shard_guard writes; this Paddle build has no IPU, so they
    are set on the ops directly). Saved with save_training_program; returns
    {"forward": {op index: stage}, "seed": index of the backward seed,
    "update_stage": {op index: stage of the weight it updates}}."""
    with static_mode():
        built = build("bert", "bert-tiny", opt_spec, seed=0)
        ops = list(built.main.global_block().ops)
        roles = [op.attr("op_role") if op.has_attr("op_role") else 0 for op in ops]
        seed = next(i for i, r in enumerate(roles) if r & 0x101 == 0x101)
        forward = list(range(seed))
        stage_of = {}
        for pos, i in enumerate(forward):
            s = min(stages - 1, pos * stages // len(forward))
            ops[i]._set_attr("ipu_index", s)
            ops[i]._set_attr("ipu_stage", s)
            stage_of[i] = s
        first_reader = {}
        for i in forward:
            for name in ops[i].input_arg_names:
                first_reader.setdefault(name, stage_of[i])
        update_stage = {}
        for i in range(seed + 1, len(ops)):
            if "Param" in ops[i].input_names and ops[i].input("Param"):
                update_stage[i] = first_reader[ops[i].input("Param")[0]]
        save_training_program(built, out_dir)
    return {"forward": stage_of, "seed": seed, "update_stage": update_stage}


def write_staged_program(out_dir, stages: int = 2, opt_spec="adam") -> dict:
    """_write_staged_here in a legacy-program process."""
    return call_in_format("legacy", "models.training:_write_staged_here",
                          out_dir=str(Path(out_dir).resolve()), stages=stages,
                          opt_spec=opt_spec_of(opt_spec))


# ---------------------------------------------------------------------------
# Running a function in a process of the other program form


def call_in_format(fmt: str, target: str, **kwargs):
    """Call ``target`` ("package.module:function") with ``kwargs`` in a process
    whose Paddle builds ``fmt`` programs: here when this process already
    does, otherwise in a child (FLAGS_enable_pir_api set before import);
    arguments and result travel as pickles."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    mod_name, fn_name = target.split(":")
    if fmt == current_format():
        import importlib

        return getattr(importlib.import_module(mod_name), fn_name)(**kwargs)
    with tempfile.TemporaryDirectory(prefix="tiller-train-") as d:
        (Path(d) / "args.pkl").write_bytes(pickle.dumps((target, kwargs)))
        env = dict(os.environ)
        env["FLAGS_enable_pir_api"] = "0" if fmt == "legacy" else "1"
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env.setdefault("GLOG_minloglevel", "2")
        r = subprocess.run([sys.executable, "-m", "models.training", "--call", d], env=env,
                           cwd=str(_REPO_ROOT), capture_output=True, text=True)
        result = Path(d) / "result.pkl"
        if r.returncode != 0 or not result.exists():
            raise RuntimeError(f"{target} in a {fmt} child failed ({r.returncode}):\n"
                               f"{r.stdout[-4000:]}\n{r.stderr[-8000:]}")
        ok, value = pickle.loads(result.read_bytes())
        if not ok:
            raise RuntimeError(f"{target} in a {fmt} child raised:\n{value}")
        return value


def _child_main(d: str) -> int:
    import importlib
    import traceback

    target, kwargs = pickle.loads((Path(d) / "args.pkl").read_bytes())
    mod_name, fn_name = target.split(":")
    try:
        out = (True, getattr(importlib.import_module(mod_name), fn_name)(**kwargs))
    except Exception:  # the parent re-raises with this text
        out = (False, traceback.format_exc())
    (Path(d) / "result.pkl").write_bytes(pickle.dumps(out))
    return 0


def main(argv=None) -> int:
    import argparse

    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--call":
        return _child_main(sys.argv[2])
    ap = argparse.ArgumentParser(description="Write a training case (program, initial "
                                 "state, batches, Paddle reference) for C++ tests.")
    ap.add_argument("--out", required=True)
    ap.add_argument("--kind", choices=KINDS, default="bert")
    ap.add_argument("--preset", default="bert-tiny", help="BERT pretraining preset")
    ap.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    ap.add_argument("--format", choices=FORMATS, default=None)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--clip-norm", type=float, default=1.0, help="0 = no clipping")
    a = ap.parse_args(argv)
    spec = OptSpec(a.optimizer, weight_decay=a.weight_decay, clip_norm=a.clip_norm or None)
    print(write_training_case(a.out, a.kind, spec, a.preset if a.kind == "bert" else None,
                              a.format, a.steps, a.batch, a.seed))
    return 0


if __name__ == "__main__":
    # Run the imported module's main, not __main__'s: pickled OptSpec and
    # ReferenceRun objects must be models.training classes.
    from models.training import main as _main

    sys.exit(_main())
