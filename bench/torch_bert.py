"""PyTorch eager side of the training benchmark (bench/bench_training.py):
BERT pretraining (MLM with tied word embeddings + NSP, dropout 0) written
with torch.nn as models/training.py builds it with Paddle, trained by
torch.optim.Adam on the batches, initial weights and per-step learning
rates the parent passes in an .npz. Runs in .venv-torch, in a process of
its own (PyTorch's OpenMP runtime and Paddle's never share one).

    .venv-torch/bin/python bench/torch_bert.py DATA.npz --threads 2 --warmup 1

Prints one JSON line: {"times_ms": [...timed steps], "losses": [[loss, mlm,
nsp], ... every step], "torch": version, "threads": n}.

DATA.npz: ``cfg.<field>`` scalars (vocab_size, hidden_size, num_layers,
num_heads, intermediate_size, max_position, type_vocab_size, pad_token_id,
layer_norm_eps), ``param.<structured name>`` arrays in Paddle's layouts
(Linear weights [in, out]), ``batch<i>.<feed>`` arrays, ``lrs`` [steps].
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, h: int, heads: int):
        super().__init__()
        self.heads, self.dim = heads, h // heads
        self.q_proj, self.k_proj = nn.Linear(h, h), nn.Linear(h, h)
        self.v_proj, self.out_proj = nn.Linear(h, h), nn.Linear(h, h)

    def forward(self, x, mask):
        b, s, h = x.shape

        def split(t):
            return t.view(b, s, self.heads, self.dim).transpose(1, 2)

        # Paddle's nn.MultiHeadAttention scales q before q k^T.
        q = split(self.q_proj(x)) * (self.dim ** -0.5)
        scores = q @ split(self.k_proj(x)).transpose(-1, -2) + mask
        ctx = torch.softmax(scores, dim=-1) @ split(self.v_proj(x))
        return self.out_proj(ctx.transpose(1, 2).reshape(b, s, h))


class EncoderLayer(nn.Module):
    """Paddle's post-LayerNorm nn.TransformerEncoderLayer (epsilon 1e-5), gelu."""

    def __init__(self, h: int, heads: int, inter: int):
        super().__init__()
        self.self_attn = Attention(h, heads)
        self.linear1, self.linear2 = nn.Linear(h, inter), nn.Linear(inter, h)
        self.norm1, self.norm2 = nn.LayerNorm(h, eps=1e-5), nn.LayerNorm(h, eps=1e-5)

    def forward(self, x, mask):
        x = self.norm1(x + self.self_attn(x, mask))
        return self.norm2(x + self.linear2(F.gelu(self.linear1(x))))


class BertPretrain(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        h, eps = c["hidden_size"], c["layer_norm_eps"]
        self.pad = c["pad_token_id"]
        bert = nn.Module()
        emb = nn.Module()
        emb.word_embeddings = nn.Embedding(c["vocab_size"], h)
        emb.position_embeddings = nn.Embedding(c["max_position"], h)
        emb.token_type_embeddings = nn.Embedding(c["type_vocab_size"], h)
        emb.layer_norm = nn.LayerNorm(h, eps=eps)
        bert.embeddings = emb
        encoder = nn.Module()
        encoder.layers = nn.ModuleList(
            EncoderLayer(h, c["num_heads"], c["intermediate_size"]) for _ in range(c["num_layers"]))
        bert.encoder = encoder
        pooler = nn.Module()
        pooler.dense = nn.Linear(h, h)
        bert.pooler = pooler
        self.bert = bert
        self.transform = nn.Linear(h, h)
        self.transform_norm = nn.LayerNorm(h, eps=eps)
        self.decoder_bias = nn.Parameter(torch.zeros(c["vocab_size"]))
        self.nsp = nn.Linear(h, 2)

    def forward(self, input_ids, token_type_ids, masked_positions):
        e = self.bert.embeddings
        pos = torch.arange(input_ids.shape[1]).expand_as(input_ids)
        x = e.layer_norm(e.word_embeddings(input_ids) + e.position_embeddings(pos)
                         + e.token_type_embeddings(token_type_ids))
        mask = ((input_ids == self.pad).float() * -1e4)[:, None, None, :]
        for layer in self.bert.encoder.layers:
            x = layer(x, mask)
        pooled = torch.tanh(self.bert.pooler.dense(x[:, 0]))
        # masked_positions [B, P]: positions within each sequence.
        rows = masked_positions + torch.arange(x.shape[0])[:, None] * x.shape[1]
        picked = x.reshape(-1, x.shape[-1])[rows.reshape(-1)]
        t = self.transform_norm(F.gelu(self.transform(picked)))
        mlm = t @ e.word_embeddings.weight.t() + self.decoder_bias
        return mlm, self.nsp(pooled)


def losses(model, feed):
    mlm, nsp = model(feed["input_ids"], feed["token_type_ids"], feed["masked_positions"])
    labels = feed["masked_lm_labels"].reshape(-1)
    # models/training.py: mean(per-token CE, 0 where ignored) / mean(mask).
    per_token = F.cross_entropy(mlm, labels, ignore_index=-1, reduction="none")
    mlm_loss = per_token.mean() / (labels != -1).float().mean()
    nsp_loss = F.cross_entropy(nsp, feed["next_sentence_labels"].view(-1))
    return mlm_loss + nsp_loss, mlm_loss, nsp_loss


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    d = np.load(args.data)
    cfg = {k[4:]: d[k].item() for k in d.files if k.startswith("cfg.")}
    model = BertPretrain(cfg)
    params = dict(model.named_parameters())
    given = {k[6:] for k in d.files if k.startswith("param.")}
    if given != set(params):
        print(f"parameter names differ: only Paddle {sorted(given - set(params))[:5]}, "
              f"only torch {sorted(set(params) - given)[:5]}", file=sys.stderr)
        return 2
    with torch.no_grad():
        for name, p in params.items():
            a = d["param." + name]
            # Paddle's Linear weight is [in, out], torch's [out, in].
            is_linear = name.endswith(".weight") and a.ndim == 2 and "embeddings" not in name
            p.copy_(torch.from_numpy(a.T.copy() if is_linear else a))
    lrs = d["lrs"]
    steps = len(lrs)
    batches = [{f: torch.from_numpy(d[f"batch{i}.{f}"]) for f in
                ("input_ids", "token_type_ids", "masked_positions", "masked_lm_labels",
                 "next_sentence_labels")} for i in range(steps)]
    # Paddle's Adam defaults: beta1 0.9, beta2 0.999, epsilon 1e-8.
    opt = torch.optim.Adam(model.parameters(), lr=float(lrs[0]), betas=(0.9, 0.999), eps=1e-8)
    times, out = [], []
    for i, feed in enumerate(batches):
        for g in opt.param_groups:
            g["lr"] = float(lrs[i])
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss, mlm_loss, nsp_loss = losses(model, feed)
        loss.backward()
        opt.step()
        if i >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
        out.append([float(loss), float(mlm_loss), float(nsp_loss)])
        if not all(math.isfinite(v) for v in out[-1]):
            print(f"step {i}: non-finite loss {out[-1]}", file=sys.stderr)
            return 3
    print(json.dumps({"times_ms": times, "losses": out, "torch": torch.__version__,
                      "threads": torch.get_num_threads()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
