"""ERNIE 3.0, structured like PaddleNLP's ``ErnieModel`` (use_task_id=True).

Same as :mod:`models.bert` plus a task-type embedding added to the word,
position and token-type embeddings. Encoder layers are post-LayerNorm
``nn.TransformerEncoderLayer(activation="gelu")``; mask and pooler as BERT.

Preset values for "ernie-3.0-base" follow PaddleNLP's ``ernie-3.0-base-zh``
config: vocab_size 40000, hidden 768, 12 layers, 12 heads, intermediate
3072, hidden_act gelu, max_position_embeddings 2048, type_vocab_size 4,
task_type_vocab_size 3, use_task_id true, pad_token_id 0
(``ernie-3.0-medium-zh`` is the same with 6 layers).

Inputs: input_ids, token_type_ids, task_type_ids (int64 [batch, seq]).
With ``task_type_input=False`` the task ids are instead built in-graph as
``ones_like(input_ids) * task_id`` (what PaddleNLP does when they are not fed,
giving a 2-input model as PaddleNLP's export scripts produce).
Outputs: sequence_output, pooled_output.
"""

from __future__ import annotations

from dataclasses import dataclass

import paddle
import paddle.nn as nn

from .bert import Pooler, make_encoder, padding_attention_mask, position_ids_like


@dataclass(frozen=True)
class ErnieConfig:
    vocab_size: int = 40000
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_position: int = 2048
    type_vocab_size: int = 4
    task_type_vocab_size: int = 3
    task_id: int = 0
    task_type_input: bool = True
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    pad_token_id: int = 0
    # PaddleNLP's ErnieEmbeddings uses nn.LayerNorm's default epsilon.
    layer_norm_eps: float = 1e-5
    initializer_range: float = 0.02


PRESETS: dict[str, ErnieConfig] = {
    "ernie-tiny": ErnieConfig(vocab_size=1024, hidden_size=128, num_layers=2, num_heads=2,
                              intermediate_size=512, max_position=512),
    "ernie-3.0-base": ErnieConfig(),
    "ernie-3.0-medium": ErnieConfig(num_layers=6),
}


class ErnieEmbeddings(nn.Layer):
    def __init__(self, cfg: ErnieConfig):
        super().__init__()
        self.cfg = cfg
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_position, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.task_type_embeddings = nn.Embedding(cfg.task_type_vocab_size, cfg.hidden_size)
        self.layer_norm = nn.LayerNorm(cfg.hidden_size, epsilon=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids, task_type_ids=None):
        position_ids = position_ids_like(input_ids)
        if task_type_ids is None:
            task_type_ids = paddle.ones_like(input_ids, dtype="int64") * self.cfg.task_id
        emb = (self.word_embeddings(input_ids)
               + self.position_embeddings(position_ids)
               + self.token_type_embeddings(token_type_ids)
               + self.task_type_embeddings(task_type_ids))
        return self.dropout(self.layer_norm(emb))


class ErnieModel(nn.Layer):
    def __init__(self, cfg: ErnieConfig):
        super().__init__()
        self.cfg = cfg
        self.pad_token_id = cfg.pad_token_id
        self.embeddings = ErnieEmbeddings(cfg)
        self.encoder = make_encoder(cfg)
        self.pooler = Pooler(cfg.hidden_size)

    def forward(self, input_ids, token_type_ids, task_type_ids=None):
        attention_mask = padding_attention_mask(
            input_ids, self.pad_token_id, self.pooler.dense.weight.dtype)
        emb = self.embeddings(input_ids, token_type_ids, task_type_ids)
        sequence_output = self.encoder(emb, attention_mask)
        pooled_output = self.pooler(sequence_output)
        return sequence_output, pooled_output


def inputs_for(cfg: ErnieConfig):
    names = [("input_ids", "int64"), ("token_type_ids", "int64")]
    if cfg.task_type_input:
        names.append(("task_type_ids", "int64"))
    return tuple(names)


OUTPUTS = ("sequence_output", "pooled_output")
