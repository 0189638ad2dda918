"""Placement and phase survive translation, autodiff and every pass (issue
8): a two-stage BERT-tiny training program (legacy form, forward ops split
into stages 0 and 1 with the ipu_index / ipu_stage attributes Paddle's
ipu_shard_guard writes) is compiled by Tiller's training session, and every
op of the compiled step carries the placement it must have:

* forward ops: the stage of the Paddle op they were translated from (also
  after fusion passes rewrote them);
* backward ops (Tiller's autodiff, named "<forward op>.grad"): the stage of
  the forward op they differentiate, phase backward;
* update ops (optimizer, clipping): phase update, and the optimizer op of a
  weight runs in the stage of the weight's first forward reader.

The compiled step prints each op as `... [phase shard/stage @device]  # name`,
where name starts with the Paddle op "type #index" it came from.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from models import training
from tiller import _tiller

LINE = re.compile(r"= (\w+)\(.*\) \[(forward|backward|update) (\d+)/(\d+) @(-?\d+)\]  # (.*)$")


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    out = tmp_path_factory.mktemp("staged")
    info = training.write_staged_program(out, stages=2, opt_spec="adam")
    return out, info


def _compiled_ops(out):
    import json

    meta = json.loads((out / "training_info.json").read_text())
    feeds = list(meta["feeds"])
    session = _tiller.TrainingSession(str(out / "train.pdmodel"), feeds, meta["fetch_vars"][:1])
    batch = training.make_batches("bert", "bert-tiny", n_steps=1, batch_size=2)[0]
    state = training_state(out)
    for info in session.state_info():
        session.set_state(info.name, np.ascontiguousarray(
            state[info.name].reshape(info.shape), dtype=info.dtype))
    session.run({k: batch[k] for k in feeds})
    ops = []
    for line in session.summary().graph.splitlines():
        m = LINE.search(line)
        if m:
            ops.append((m.group(1), m.group(2), int(m.group(3)), int(m.group(4)),
                        int(m.group(5)), m.group(6)))
    return ops


def training_state(out):
    from tiller import _tiller as t

    state = {}
    for suffix in (".pdparams", ".pdopt"):
        state.update(t.read_paddle_pickle(str(out / ("train" + suffix))))
    return state


def _paddle_index(name):
    m = re.search(r"#(\d+)", name)
    return int(m.group(1)) if m else None


def test_every_op_of_a_two_stage_training_step_carries_its_stage(staged):
    out, info = staged
    forward = {int(k): v for k, v in info["forward"].items()}
    update_stage = {int(k): v for k, v in info["update_stage"].items()}
    assert set(forward.values()) == {0, 1}
    ops = _compiled_ops(out)
    assert len(ops) > 150    # the whole step: 194 ops (each gelu's gradient one op)
    seen = {"forward": 0, "backward": 0, "update": 0}
    for op_type, phase, shard, stage, device, name in ops:
        seen[phase] += 1
        assert device == 0, (op_type, name)  # one CPU device: every shard runs there
        assert shard == stage, (op_type, name)
        idx = _paddle_index(name)
        if phase == "forward":
            assert idx is not None and idx < info["seed"], (op_type, name)
            assert stage == forward[idx], (op_type, name, stage, forward[idx])
        elif phase == "backward":
            if ".grad_sum" in name or "(loss seed)" in name:
                assert stage in (0, 1), (op_type, name)
                continue
            assert name.split(" ")[0] and ".grad" in name, (op_type, name)
            assert idx is not None and idx < info["seed"], (op_type, name)
            assert stage == forward[idx], (op_type, name, stage, forward[idx])
        else:
            assert idx is not None and idx > info["seed"], (op_type, name)
            if idx in update_stage:
                assert stage == update_stage[idx], (op_type, name, stage, update_stage[idx])
    assert all(seen.values()), seen
    # Both stages hold forward, backward and update work.
    for phase in ("forward", "backward", "update"):
        assert {s for _, p, _, s, _, _ in ops if p == phase} == {0, 1}, phase
