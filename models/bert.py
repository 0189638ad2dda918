"""BERT, structured like PaddleNLP's ``BertModel`` so its exported program
looks like what PaddleNLP users export.

Structure (PaddleNLP ``paddlenlp/transformers/bert/modeling.py``):
  * embeddings: word + position + token-type ``nn.Embedding``; position ids
    are computed in-graph as ``cumsum(ones_like(input_ids)) - ones`` (PaddleNLP
    does exactly this when ``position_ids`` is not given); LayerNorm; Dropout.
  * attention mask: ``unsqueeze((input_ids == pad_token_id).astype(float32)
    * -1e4, axis=[1, 2])`` -> [batch, 1, 1, seq], added to the attention
    scores inside ``nn.MultiHeadAttention`` (equivalently ``(1 - mask) * -1e4``
    with ``mask = input_ids != pad``).
  * encoder: ``nn.TransformerEncoder`` of post-LayerNorm
    ``nn.TransformerEncoderLayer(activation="gelu", act_dropout=0)``.
  * pooler: first token -> Linear -> tanh.

Inputs: input_ids int64 [batch, seq], token_type_ids int64 [batch, seq].
Outputs: sequence_output [batch, seq, hidden], pooled_output [batch, hidden].
"""

from __future__ import annotations

from dataclasses import dataclass

import paddle
import paddle.nn as nn


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_position: int = 512
    type_vocab_size: int = 2
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    pad_token_id: int = 0
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02


PRESETS: dict[str, BertConfig] = {
    "bert-tiny": BertConfig(vocab_size=1024, hidden_size=128, num_layers=2, num_heads=2,
                            intermediate_size=512, max_position=512, type_vocab_size=2),
    # bert-base-uncased
    "bert-base": BertConfig(vocab_size=30522, hidden_size=768, num_layers=12, num_heads=12,
                            intermediate_size=3072, max_position=512, type_vocab_size=2),
}


def position_ids_like(input_ids: paddle.Tensor) -> paddle.Tensor:
    """PaddleNLP's in-graph position ids: cumsum(ones) - ones."""
    ones = paddle.ones_like(input_ids, dtype="int64")
    seq_length = paddle.cumsum(ones, axis=-1)
    position_ids = seq_length - ones
    position_ids.stop_gradient = True
    return position_ids


class BertEmbeddings(nn.Layer):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_position, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.layer_norm = nn.LayerNorm(cfg.hidden_size, epsilon=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids):
        position_ids = position_ids_like(input_ids)
        emb = (self.word_embeddings(input_ids)
               + self.position_embeddings(position_ids)
               + self.token_type_embeddings(token_type_ids))
        return self.dropout(self.layer_norm(emb))


class Pooler(nn.Layer):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


def make_encoder(cfg) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(
        cfg.hidden_size, cfg.num_heads, cfg.intermediate_size,
        dropout=cfg.hidden_dropout_prob, activation=cfg.hidden_act,
        attn_dropout=cfg.attention_probs_dropout_prob, act_dropout=0)
    encoder = nn.TransformerEncoder(layer, cfg.num_layers)
    # nn.LayerNorm in TransformerEncoderLayer uses epsilon=1e-5 (PaddleNLP too).
    return encoder


def padding_attention_mask(input_ids, pad_token_id: int, dtype) -> paddle.Tensor:
    """[batch, 1, 1, seq] additive mask, exactly as PaddleNLP builds it."""
    return paddle.unsqueeze(
        (input_ids == pad_token_id).astype(dtype) * -1e4, axis=[1, 2])


class BertModel(nn.Layer):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.cfg = cfg
        self.pad_token_id = cfg.pad_token_id
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = make_encoder(cfg)
        self.pooler = Pooler(cfg.hidden_size)

    def forward(self, input_ids, token_type_ids):
        attention_mask = padding_attention_mask(
            input_ids, self.pad_token_id, self.pooler.dense.weight.dtype)
        emb = self.embeddings(input_ids, token_type_ids)
        sequence_output = self.encoder(emb, attention_mask)
        pooled_output = self.pooler(sequence_output)
        return sequence_output, pooled_output


INPUTS = (("input_ids", "int64"), ("token_type_ids", "int64"))
OUTPUTS = ("sequence_output", "pooled_output")
