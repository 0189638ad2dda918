"""A DLRM-style recommendation model in Paddle's static API (issue 44): many
sparse slots, each an embedding table of its own size looked up with one id
per example (Criteo's categorical features), dense features through a
bottom MLP, everything concatenated into a top MLP with a click logit and a
sigmoid cross-entropy loss.

The tables use ``paddle.nn.Embedding(sparse=...)``: in a legacy program
(FLAGS_enable_pir_api=0) their gradients are SelectedRows, in PIR dense
(docs/TRAINING_PROGRAMS.md [sparse]). Ids follow a power law (a few hot
rows, many cold ones), so a batch repeats ids as real click logs do.

``tables`` sizes: ``criteo_like(total_bytes)`` spreads a byte budget over
26 tables of Criteo-like relative sizes (a few huge, many small).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Relative sizes of Criteo Terabyte's 26 categorical features' vocabularies
# (rounded, in thousands of ids): a few tables hold nearly all the rows.
_CRITEO_SHAPE = [40000, 39000, 17000, 7400, 20000, 3, 7, 1500, 1, 11000, 12000, 40000, 4,
                 10000, 25, 40000, 0.3, 4, 5800, 1, 2, 12500, 32, 300, 4, 1]


@dataclass
class DlrmConfig:
    tables: list[int] = field(default_factory=lambda: [50, 30, 20, 12])  # rows per slot
    dim: int = 8           # embedding width
    dense: int = 13        # dense features
    bottom: tuple = (32, 8)   # bottom MLP widths (the last one is dim)
    top: tuple = (32,)        # top MLP hidden widths (then 1 logit)
    batch: int = 16
    sparse: bool = True

    @property
    def slots(self) -> int:
        return len(self.tables)

    def table_bytes(self) -> int:
        return sum(self.tables) * self.dim * 4


def criteo_like(total_bytes: float, dim: int = 16, min_rows: int = 4) -> list[int]:
    """26 table sizes in Criteo's proportions whose float32 rows of `dim`
    add up to about `total_bytes`."""
    rows_total = total_bytes / (4 * dim)
    scale = rows_total / sum(_CRITEO_SHAPE)
    return [max(min_rows, int(s * scale)) for s in _CRITEO_SHAPE]


def slot_names(cfg: DlrmConfig) -> list[str]:
    return [f"slot_{i}" for i in range(cfg.slots)]


def feed_names(cfg: DlrmConfig) -> list[str]:
    return ["dense"] + slot_names(cfg) + ["label"]


def make_batch(cfg: DlrmConfig, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One batch: dense features, one power-law id per slot, 0/1 labels."""
    feed = {"dense": rng.standard_normal((cfg.batch, cfg.dense)).astype("float32")}
    for slot, (name, rows) in enumerate(zip(slot_names(cfg), cfg.tables)):
        # Zipf-like: rank r drawn with probability ~ 1/r^1.1, capped at the
        # table; the ranks hashed to rows (a multiplicative hash per slot),
        # as Criteo's hashed categorical values are: the hot rows lie all
        # over the table, not at its start. (Ranks from 1: rank 0, a tenth
        # of the lookups, would hash to row 97 * slot, the hottest row of
        # every table at its start.)
        ranks = np.minimum(rng.zipf(1.1, cfg.batch), rows).astype("int64")
        ids = (ranks * 2654435761 + 97 * slot) % rows
        feed[name] = ids.astype("int64").reshape(cfg.batch, 1)
    feed["label"] = (rng.random((cfg.batch, 1)) < 0.3).astype("float32")
    return feed


def _mlp(x, widths, final_relu=True):
    import paddle

    for i, w in enumerate(widths):
        x = paddle.nn.Linear(x.shape[-1], w)(x)
        if final_relu or i + 1 < len(widths):
            x = paddle.nn.functional.relu(x)
    return x


def build(cfg: DlrmConfig, optimizer=None, seed: int = 0):
    """(main, startup, loss, logit, table names) in the current program
    form; `optimizer` (a paddle.optimizer instance) minimizes the loss (fed
    `label`) when given, else it is an inference program (loss None)."""
    import paddle

    if cfg.bottom[-1] != cfg.dim:
        raise ValueError(f"the bottom MLP must end at the embedding width {cfg.dim}")
    paddle.seed(seed)
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        dense = paddle.static.data("dense", [cfg.batch, cfg.dense], "float32")
        ids = [paddle.static.data(n, [cfg.batch, 1], "int64") for n in slot_names(cfg)]
        tables, feats = [], [_mlp(dense, cfg.bottom)]
        for rows, x in zip(cfg.tables, ids):
            emb = paddle.nn.Embedding(rows, cfg.dim, sparse=cfg.sparse)
            tables.append(emb.weight.name)
            feats.append(paddle.reshape(emb(x), [cfg.batch, cfg.dim]))
        logit = paddle.nn.Linear(cfg.top[-1], 1)(_mlp(paddle.concat(feats, axis=1), cfg.top))
        loss = None
        if optimizer is not None:
            label = paddle.static.data("label", [cfg.batch, 1], "float32")
            loss = paddle.mean(paddle.nn.functional.binary_cross_entropy_with_logits(logit, label))
            optimizer.minimize(loss)
    return main, startup, loss, logit, tables
