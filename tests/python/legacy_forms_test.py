"""Older Paddle save forms that Paddle 3 still reads: the directory form
(`__model__` + one file per parameter) and fluid's `fc` (legacy `mul` op
plus `elementwise_add` with axis=1). The files are written by Paddle itself
in legacy (non-PIR) mode; the reference is Paddle's static executor."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

import tiller.inference as ti

WRITER = textwrap.dedent("""
    import os, sys
    import numpy as np, paddle
    from paddle.framework.io_utils import is_persistable
    from paddle.static.io import save_vars
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, 4, 3], "float32")
        h = paddle.static.nn.fc(x, size=5, num_flatten_dims=2, activation="relu")
        y = paddle.static.nn.fc(h, size=2, num_flatten_dims=1)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "__model__"), "wb") as f:
        f.write(paddle.static.io.serialize_program([x], [y], program=main))
    save_vars(exe, d, main_program=main, predicate=is_persistable, filename=None)
    xin = np.random.default_rng(0).standard_normal((3, 4, 3)).astype("float32")
    out, = exe.run(main, feed={"x": xin}, fetch_list=[y])
    np.save(os.path.join(d, "x.npy"), xin)
    np.save(os.path.join(d, "ref.npy"), out)
    print(" ".join(op.type for op in main.global_block().ops))
""")


def test_directory_form_with_mul(tmp_path):
    model_dir = tmp_path / "model"
    env = dict(os.environ, FLAGS_enable_pir_api="0")
    res = subprocess.run([sys.executable, "-c", WRITER, str(model_dir)], env=env,
                         capture_output=True, text=True, check=True)
    assert "mul" in res.stdout.split()  # the legacy op this test is about
    assert (model_dir / "__model__").exists() and (model_dir / "fc_0.w_0").exists()

    predictor = ti.create_predictor(ti.Config(str(model_dir)))
    out, = predictor.run([np.load(model_dir / "x.npy")])
    np.testing.assert_allclose(out, np.load(model_dir / "ref.npy"), rtol=1e-5, atol=1e-5)


def test_directory_form_missing_param_file(tmp_path):
    model_dir = tmp_path / "model"
    env = dict(os.environ, FLAGS_enable_pir_api="0")
    subprocess.run([sys.executable, "-c", WRITER, str(model_dir)], env=env, capture_output=True,
                   check=True)
    (model_dir / "fc_1.b_0").unlink()
    try:
        ti.create_predictor(ti.Config(str(model_dir)))
    except ti.TillerError as e:
        assert "fc_1.b_0" in str(e)
    else:
        raise AssertionError("a missing parameter file must be an error")
