"""Tiller's checkpoint manifest (<prefix>.tiller.json, issue 14): the step
count and loss-scaling state that Paddle's pickles do not hold, and a hash
of every tensor, so that

* a run with dropout resumed from a checkpoint repeats the uninterrupted
  run bit for bit (the step count draws the masks; without the manifest the
  resumed masks differ, shown below);
* a tensor with one flipped byte, a checkpoint mixed from two saves, or a
  corrupt manifest is refused with the tensor or file named, and the state
  is left as it was.
"""
from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

import tiller
from accumulation_test import MICRO, _concat, _micro_batches
from models import training as T


def _program(dropout=0.1):
    import paddle

    cfg = T.pretrain_config("bert-tiny")
    cfg = dataclasses.replace(cfg, bert=dataclasses.replace(
        cfg.bert, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout))
    built = T.build("bert", cfg, T.OptSpec("adam", schedule="constant"), seed=0)
    scope = paddle.static.Scope()
    T.init_scope(built, scope)
    s = tiller.IpuStrategy()
    s.set_graph_config(is_training=True, micro_batch_size=MICRO)
    s.set_options({"num_threads": 1})
    prog = tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=s).compile(
        built.feed_names, built.fetch_list)
    return prog


def _state(prog):
    return {n: prog.session.get_state(n).copy() for n in prog.session.state_names()}


def _feeds(n):
    return [_concat("bert", [m], False) for m in _micro_batches("bert", n)]


def test_a_resumed_run_with_dropout_repeats_the_uninterrupted_one(tmp_path):
    feeds = _feeds(6)
    prefix = str(tmp_path / "ck")
    with T.static_mode():
        whole = _program()
        losses = []
        for i, feed in enumerate(feeds):
            if i == 3:
                whole.save(prefix)
            losses.append(whole.run(feed=feed)[0])
        manifest = json.loads(open(prefix + ".tiller.json").read())
        assert manifest["step"] == 3 and manifest["micro_batches"] == 3
        assert {t["name"] for t in manifest["tensors"]} == set(whole.session.state_names()) - {
            n for n in whole.session.state_names() if n.startswith("@")}
        resumed = _program()
        resumed.load(prefix)
        assert resumed.session.step_count == 3
        again = [resumed.run(feed=feed)[0] for feed in feeds[3:]]
        for a, b in zip(losses[3:], again):
            np.testing.assert_array_equal(a, b)
        final = _state(resumed)
        for name, value in _state(whole).items():
            np.testing.assert_array_equal(final[name], value, err_msg=name)
        # Without the manifest (a checkpoint Paddle wrote) the run counts
        # from 0: other dropout masks, other losses.
        os.remove(prefix + ".tiller.json")
        fresh = _program()
        fresh.load(prefix)
        assert fresh.session.step_count == 0
        other = fresh.run(feed=feeds[3])[0]
        assert not np.array_equal(other, losses[3])


def test_damaged_checkpoints_are_refused_by_name(tmp_path):
    import pickle

    feeds = _feeds(2)
    prefix = str(tmp_path / "ck")
    with T.static_mode():
        prog = _program(dropout=0.0)
        prog.run(feed=feeds[0])
        prog.save(prefix)
        good = _state(prog)
        data = open(prefix + ".pdparams", "rb").read()
        params = pickle.loads(data)
        name = max(params, key=lambda k: params[k].size)  # the word embeddings
        raw = params[name].tobytes()
        at = data.find(raw)
        assert at > 0
        flipped = bytearray(data)
        flipped[at + len(raw) // 2] ^= 0x10
        open(prefix + ".pdparams", "wb").write(bytes(flipped))
        with pytest.raises(tiller.TillerError,
                           match=rf"tensor '{name}' does not match the manifest"):
            prog.load(prefix)
        open(prefix + ".pdparams", "wb").write(data)
        # A .pdopt from another save (one step later): mixed files.
        opt_before = open(prefix + ".pdopt", "rb").read()
        prog.run(feed=feeds[1])
        prog.save(str(tmp_path / "later"))
        open(prefix + ".pdopt", "wb").write(open(str(tmp_path / "later") + ".pdopt", "rb").read())
        with pytest.raises(tiller.TillerError, match="does not match the manifest"):
            prog.load(prefix)
        open(prefix + ".pdopt", "wb").write(opt_before)
        # A corrupt manifest.
        text = open(prefix + ".tiller.json").read()
        open(prefix + ".tiller.json", "w").write(text[: len(text) // 2])
        with pytest.raises(tiller.TillerError, match=r"manifest '.*ck\.tiller\.json' is corrupt"):
            prog.load(prefix)
        open(prefix + ".tiller.json", "w").write(text)
        # Intact again: it loads, and the refusals changed nothing before it.
        current = _state(prog)
        prog.load(prefix)
        for n, value in _state(prog).items():
            np.testing.assert_array_equal(value, good[n], err_msg=n)
        assert any(not np.array_equal(current[n], good[n]) for n in good)
