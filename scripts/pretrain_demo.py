"""The IPU execution model in miniature: BERT pre-training (masked LM + next
sentence) on real English text, on 2 replicas x 2 pipeline stages with
gradient accumulation, then inference with the trained weights.

The text is the license texts Debian's base-files package installs in
/usr/share/common-licenses (GPL, LGPL, Apache, MPL, ...: ~300 KB of English);
the word-level vocabulary is built from it here. Nothing is downloaded.

    .venv/bin/python scripts/pretrain_demo.py [--updates 300] [--layers 4] [--hidden 128]
        [--precision bfloat16|float16] [--loss-scaling S] [--automatic-loss-scaling]

The model is BERT with --layers layers split into two pipeline stages with
tiller.set_ipu_shard (embeddings and the first half of the layers | the rest
and the heads); each update takes 2 replicas x --accumulate micro-batches of
--micro sequences. The progress line shows the update, the loss, masked-word
accuracy, sequences per second and the time left; in half precision also
the loss scale, the updates skipped for non-finite gradients and the
gradient elements float16 / bfloat16 flushed to zero. At the end the trained
weights run forward only (runtime_options.enable_eval) on sentences held
out from training, and a few masked words are filled in.

The full-size job is the same script with BERT-Base sizes:
    --layers 12 --hidden 768 --heads 12 --seq-len 128 --micro 8 --accumulate 16
(on text of your own: --text FILE).
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "python"), str(REPO)]

import numpy as np  # noqa: E402

SPECIALS = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"]   # ids 0..4 (models.training's)
UNK = 4


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--text", action="append", default=None,
                    help="text files (default: /usr/share/common-licenses/*)")
    ap.add_argument("--updates", type=int, default=300)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--micro", type=int, default=8, help="sequences per micro-batch")
    ap.add_argument("--accumulate", type=int, default=4, help="micro-batches per update per replica")
    ap.add_argument("--vocab", type=int, default=3000, help="most frequent words kept")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=4, help="CPU threads in all (one per device at least)")
    ap.add_argument("--precision", default="float32", choices=["float32", "bfloat16", "float16"],
                    help="half precision: matmuls in this type, float32 accumulation")
    ap.add_argument("--loss-scaling", type=float, default=1.0,
                    help="the (initial) loss scale")
    ap.add_argument("--automatic-loss-scaling", action="store_true",
                    help="steer the scale from gradient statistics (half precision)")
    return ap.parse_args(argv)


def read_text(paths) -> str:
    if paths is None:
        root = Path("/usr/share/common-licenses")
        if not root.is_dir():
            sys.exit("pretrain_demo: /usr/share/common-licenses (Debian's base-files) is missing; "
                     "pass --text FILE")
        # Several names are symlinks to the same file (GPL -> GPL-3): once each.
        paths = sorted({str(p.resolve()) for p in root.iterdir() if p.is_file()})
    return "\n".join(Path(p).read_text(errors="replace") for p in paths)


def sentences_of(text: str) -> list[list[str]]:
    out = []
    for chunk in re.split(r"(?<=[.;:!?])\s+|\n\s*\n", text):
        words = re.findall(r"[a-z]+(?:'[a-z]+)?|[0-9]+|[^\sa-z0-9]", chunk.lower())
        if 4 <= len(words) <= 60:
            out.append(words)
    return out


def build_vocab(sentences, size: int) -> dict[str, int]:
    counts = collections.Counter(w for s in sentences for w in s)
    vocab = {w: i for i, w in enumerate(SPECIALS)}
    for w, n in counts.most_common(size):
        if n >= 2:
            vocab.setdefault(w, len(vocab))
    return vocab


def make_examples(sentences, vocab, n, seq, max_pred, rng, mask_id=3, cls=1, sep=2):
    """n MLM + NSP examples in models.training's feed format (masked
    positions within each sequence)."""
    ids = np.zeros((n, seq), np.int64)
    types = np.zeros((n, seq), np.int64)
    positions = np.zeros((n, max_pred), np.int64)
    labels = np.full((n, max_pred), -1, np.int64)
    nsp = np.zeros((n, 1), np.int64)
    for b in range(n):
        i = int(rng.integers(0, len(sentences) - 1))
        is_next = rng.random() < 0.5
        a = sentences[i]
        bsent = sentences[i + 1] if is_next else sentences[int(rng.integers(0, len(sentences)))]
        budget = seq - 3
        a, bsent = a[:budget // 2], bsent[:budget - min(len(a), budget // 2)]
        toks = [cls] + [vocab.get(w, UNK) for w in a] + [sep]
        segb = [vocab.get(w, UNK) for w in bsent] + [sep]
        row = toks + segb
        ids[b, :len(row)] = row
        types[b, len(toks):len(row)] = 1
        nsp[b, 0] = int(is_next)
        candidates = [k for k in range(len(row)) if row[k] > UNK]
        if not candidates:
            candidates = [k for k in range(len(row)) if row[k] >= UNK]
        k = max(1, min(max_pred, int(round(0.15 * len(candidates)))))
        pick = np.sort(rng.choice(candidates, size=min(k, len(candidates)), replace=False))
        labels[b, :len(pick)] = ids[b, pick]
        ids[b, pick] = mask_id
        positions[b, :len(pick)] = pick
    return {"input_ids": ids, "token_type_ids": types,
            "positions": positions, "masked_lm_labels": labels, "next_sentence_labels": nsp}


def feed_of(ex, micro: int, seq: int) -> dict:
    """Examples as one run's feed (every feed's rows are sequences)."""
    return {"input_ids": ex["input_ids"], "token_type_ids": ex["token_type_ids"],
            "masked_positions": ex["positions"], "masked_lm_labels": ex["masked_lm_labels"],
            "next_sentence_labels": ex["next_sentence_labels"]}


def mlm_accuracy(logits, labels) -> float:
    logits = np.asarray(logits).reshape(-1, np.asarray(logits).shape[-1])
    labels = np.asarray(labels).reshape(-1)
    keep = labels >= 0
    return float((logits[keep].argmax(-1) == labels[keep]).mean()) if keep.any() else 0.0


def main(args) -> int:
    import paddle

    import tiller
    from models import training as T
    from models.bert import BertConfig

    sentences = sentences_of(read_text(args.text))
    rng = np.random.default_rng(0)
    order = rng.permutation(len(sentences))
    held_out = [sentences[i] for i in order[:len(sentences) // 10]]
    train_sents = [sentences[i] for i in sorted(order[len(sentences) // 10:])]
    vocab = build_vocab(train_sents, args.vocab)
    words = {i: w for w, i in vocab.items()}
    replicas, stages = 2, 2
    per_run = replicas * args.accumulate * args.micro
    max_pred = max(2, args.seq_len // 8)
    cfg = T.PretrainConfig(
        BertConfig(vocab_size=len(vocab), hidden_size=args.hidden, num_layers=args.layers,
                   num_heads=args.heads, intermediate_size=4 * args.hidden,
                   max_position=max(512, args.seq_len), type_vocab_size=2,
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
        seq_len=args.seq_len, max_predictions=max_pred)
    print(f"text: {sum(map(len, sentences))} words in {len(sentences)} sentences "
          f"({len(held_out)} held out); vocabulary {len(vocab)} words", flush=True)
    print(f"model: BERT {args.layers} layers, hidden {args.hidden}, seq {args.seq_len}; "
          f"{replicas} replicas x {stages} pipeline stages, accumulation {args.accumulate}, "
          f"micro-batch {args.micro}: {per_run} sequences per update", flush=True)

    with T.static_mode():
        built = T.build("bert", cfg, T.OptSpec("adam", lr=args.lr, schedule="constant",
                                               clip_norm=1.0), seed=0, stages=stages)
        scope = paddle.static.Scope()
        T.init_scope(built, scope)
        strategy = tiller.IpuStrategy()
        strategy.set_graph_config(num_ipus=replicas * stages, is_training=True,
                                  micro_batch_size=args.micro, enable_manual_shard=True)
        strategy.set_pipelining_config(enable_pipelining=True, enable_gradient_accumulation=True,
                                       accumulation_factor=args.accumulate)
        strategy.set_options({"enable_replicated_graphs": True,
                              "replicated_graph_count": replicas,
                              "num_threads": max(args.threads, replicas * stages),
                              "loss_scaling": args.loss_scaling})
        half = args.precision != "float32"
        if half:
            strategy.set_precision_config(enable_fp16=True)
            strategy.set_options({"half_dtype": args.precision, "gradient_statistics": True})
        if args.automatic_loss_scaling:
            strategy.set_options({"automatic_loss_scaling_settings": {"enabled": True}})
        fetches = built.fetch_list + [built.outputs["mlm_logits"]]
        t0 = time.perf_counter()
        prog = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=strategy).compile(
            built.feed_names, fetches)
        print(f"compiled in {time.perf_counter() - t0:.1f} s", flush=True)

        start = time.perf_counter()
        for step in range(1, args.updates + 1):
            ex = make_examples(train_sents, vocab, per_run, args.seq_len, max_pred, rng)
            loss, mlm, nsp, logits = prog.run(feed=feed_of(ex, args.micro, args.seq_len))
            acc = mlm_accuracy(logits, ex["masked_lm_labels"])
            elapsed = time.perf_counter() - start
            rate = step * per_run / elapsed
            eta = (args.updates - step) * elapsed / step
            if step == 1 or step % 5 == 0 or step == args.updates:
                scaling = ""
                if half:
                    sess = prog.session
                    flushed = sess.gradient_statistics["flushed_to_zero"]
                    scaling = (f"  scale {sess.loss_scale:g}, {sess.skipped_updates} skipped, "
                               f"{flushed:.0f} flushed")
                print(f"update {step:4d}/{args.updates}  loss {np.mean(loss):7.4f}  "
                      f"(mlm {np.mean(mlm):6.3f}, nsp {np.mean(nsp):5.3f})  "
                      f"mlm accuracy {100 * acc:5.1f}%  {rate:6.1f} seq/s  "
                      f"ETA {eta:5.0f} s{scaling}", flush=True)
        summary = prog.session.summary()
        print(f"pipeline: {summary.pipeline_max_in_flight} micro-batches in flight, "
              f"bubble {100 * summary.pipeline_bubble_fraction:.0f}%", flush=True)

        # Inference with the trained weights: the same program forward only.
        prog.weights_to_host()
        strategy.set_options({"runtime_options.enable_eval": True})
        evaluator = tiller.IpuCompiledProgram(built.main, scope=scope,
                                              ipu_strategy=strategy).compile(
            built.feed_names, fetches)
        ex = make_examples(held_out, vocab, per_run, args.seq_len, max_pred,
                           np.random.default_rng(1))
        _, _, _, logits = evaluator.run(feed=feed_of(ex, args.micro, args.seq_len))
        print(f"held-out masked-word accuracy: "
              f"{100 * mlm_accuracy(logits, ex['masked_lm_labels']):.1f}%")
        flat = np.asarray(logits).reshape(per_run, max_pred, -1)
        shown = 0
        for b in range(per_run):
            labels = ex["masked_lm_labels"][b]
            if shown == 3 or labels[0] < 0:
                continue
            row = [words.get(int(t), "?") for t in ex["input_ids"][b] if t != 0]
            k = int(ex["positions"][b, 0])
            row[k] = f"[{words[int(flat[b, 0].argmax())]} / {words[int(labels[0])]}]"
            print("  " + " ".join(row[1:40]))
            shown += 1
        print("  ([predicted / actual] for one masked word per sentence)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GLOG_minloglevel", "2")
    sys.exit(main(parse_args()))
