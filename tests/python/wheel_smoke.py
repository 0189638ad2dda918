"""A smoke run of an installed tiller (no Paddle, no checkout), for
packaging_test: bert-tiny inference on saved feeds, then a few training
steps of a program paddle.static.save wrote (models.training's
write_training_case), with Paddle's learning rates. Writes every output,
loss and final parameter to one .npz, so that runs under different
TILLER_MAX_ISA caps can be compared with each other and with Paddle.

    python wheel_smoke.py MODEL_DIR FEEDS.npz TRAIN_DIR STEPS OUT.npz
"""
from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np


def main() -> int:
    model_dir, feeds_path, train_dir, steps, out_path = sys.argv[1:6]
    import tiller
    import tiller._tiller as tt
    import tiller.inference as ti

    result = {"about": np.array(tiller.about())}
    feeds = dict(np.load(feeds_path))
    predictor = ti.create_predictor(ti.Config(model_dir))
    for name, value in zip(predictor.get_output_names(),
                           predictor.run([feeds[n] for n in predictor.get_input_names()])):
        result[f"output:{name}"] = value

    train = Path(train_dir)
    info = json.loads((train / "training_info.json").read_text())
    program = train / ("train.json" if (train / "train.json").exists() else "train.pdmodel")
    names = list(info["feeds"])
    session = tt.TrainingSession(str(program), names, info["fetch_vars"][:1])
    state = {}
    for suffix in (".pdparams", ".pdopt"):
        path = train / ("train" + suffix)
        if path.exists():
            with open(path, "rb") as f:
                state.update(pickle.load(f))
    for si in session.state_info():
        session.set_state(si.name, np.asarray(state[si.name], dtype=si.dtype).reshape(si.shape))
    batches = np.load(train / "batches.npz")
    ref = np.load(train / "reference.npz")
    losses = []
    for step in range(int(steps)):
        session.set_learning_rate(float(ref["lrs"][step]))
        (loss,) = session.run({n: batches[f"{step}/{n}"] for n in names})
        losses.append(float(np.asarray(loss).reshape(-1)[0]))
    result["losses"] = np.array(losses)
    for name in info["param_names"]:
        result[f"param:{name}"] = session.get_state(name)
    np.savez(out_path, **result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
