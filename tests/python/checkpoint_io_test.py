"""Paddle checkpoints (.pdparams / .pdopt) through Tiller's C++ pickle code
and its state roles, against Python's pickle and Paddle itself.

* Reader: pickles written by Python (every supported dtype, 0-d, empty,
  Fortran-ordered, big-endian and non-contiguous arrays, numpy scalars;
  protocols 2 to 5; numpy 1.x module names) and by paddle.static.save
  (both program forms, bfloat16 as uint16) read with identical names,
  order, dtypes, shapes and bytes.
* Writer: files load with pickle.load, paddle.load and paddle.static.load
  identically, and are byte for byte what pickle.dumps(protocol=4) writes
  (Tiller names numpy.core.multiarray, which numpy 1.x also knows).
* Roles: for BERT-tiny and the small CNN of models/training.py with every
  optimizer (10) in both program forms, the .pdparams/.pdopt split of
  _tiller.paddle_state_roles equals the keys paddle.static.save wrote, and
  the roles agree with the program (trainable parameters, batch-norm
  statistics, learning_rate_0, accumulators).
The legacy form runs in one child process (models.training.call_in_format).
"""
from __future__ import annotations

import json
import os
import pickle
import re
import struct
from pathlib import Path

import numpy as np
import pytest

import tiller._tiller as tt
from models import training as T

DTYPES = ("float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32", "int64",
          "bool")
CASES = [(kind, opt) for kind in T.KINDS for opt in T.OPTIMIZERS]
# Paddle's BatchNorm note while building the CNN in PIR mode.
pytestmark = pytest.mark.filterwarnings("ignore:When training, we now always track")
HERE = Path(__file__).resolve().parent


def _sample(seed=0) -> dict[str, np.ndarray]:
    """One array per dtype and shape kind, plus the layouts numpy pickles
    differently (Fortran order, big-endian, non-contiguous views, scalars,
    read-only buffers)."""
    rng = np.random.default_rng(seed)
    out = {}
    for dt in DTYPES:
        for i, shape in enumerate([(), (0,), (5,), (2, 3, 4), (3, 0, 2), (1, 2, 1, 2, 1)]):
            a = rng.integers(0, 2, shape) if dt == "bool" else rng.standard_normal(shape) * 100
            out[f"{dt}.w_{i}"] = np.asarray(a).astype(dt)
    out["fortran"] = np.asfortranarray(rng.standard_normal((3, 4, 5)).astype(np.float32))
    out["big_endian"] = np.arange(6, dtype=">i4").reshape(2, 3)
    out["strided"] = np.arange(20, dtype=np.int64).reshape(4, 5)[::2, 1::2]
    out["transposed"] = np.arange(12, dtype=np.float64).reshape(3, 4).T
    out["scalar"] = np.float32(1.25)
    # Read-only: protocol 5 passes its buffer as bytes, not bytearray.
    out["read_only"] = np.frombuffer(np.arange(4, dtype=np.int32).tobytes(), np.int32)
    out["big"] = rng.standard_normal(70000).astype(np.float32)   # past a 64 KiB frame
    out["ünïcode/name"] = np.ones(2, np.uint8)
    return out


def _assert_same(got: dict, want: dict, what: str):
    assert list(got) == list(want), what
    for k, w in want.items():
        w = np.asarray(w)
        g = got[k]
        assert isinstance(g, np.ndarray), f"{what}: {k}"
        assert g.dtype == w.dtype.newbyteorder("="), f"{what}: {k} {g.dtype} vs {w.dtype}"
        assert g.shape == w.shape, f"{what}: {k}"
        assert g.tobytes() == w.astype(g.dtype).tobytes(order="C"), f"{what}: {k}"


def _numpy2_bytes(b: bytes) -> bytes:
    """Tiller's pickle with numpy 2's module name: numpy._core.multiarray is
    one byte longer than numpy.core.multiarray, inside the first frame
    (a pickle too small for a frame names no module)."""
    if b[2] != 0x95:
        return b
    n = struct.unpack("<Q", b[3:11])[0]
    body = b[11:11 + n].replace(b"\x8c\x15numpy.core.multiarray", b"\x8c\x16numpy._core.multiarray")
    return b[:3] + struct.pack("<Q", len(body)) + body + b[11 + n:]


def _numpy1_bytes(b: bytes) -> bytes:
    """A numpy 2 pickle as numpy 1.x writes it (numpy.core.*), frame fixed."""
    def names(x):
        for old, new in ((b"numpy._core.multiarray", b"numpy.core.multiarray"),
                         (b"numpy._core.numeric", b"numpy.core.numeric")):
            x = x.replace(b"\x8c" + bytes([len(old)]) + old, b"\x8c" + bytes([len(new)]) + new)
            x = x.replace(old + b"\n", new + b"\n")   # protocol 2/3 GLOBAL lines
        return x
    if len(b) > 11 and b[2] == 0x95:
        n = struct.unpack("<Q", b[3:11])[0]
        body = names(b[11:11 + n])
        return b[:3] + struct.pack("<Q", len(body)) + body + names(b[11 + n:])
    return names(b)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_reader_matches_python_pickle(tmp_path, protocol):
    want = _sample(protocol)
    data = pickle.dumps(want, protocol=protocol)
    for label, blob in (("numpy 2", data), ("numpy 1.x names", _numpy1_bytes(data))):
        path = tmp_path / "x.pdparams"
        path.write_bytes(blob)
        _assert_same(tt.read_paddle_pickle(str(path)), want, f"protocol {protocol}, {label}")
    if protocol >= 4:
        assert b"numpy._core" in data and b"numpy._core" not in _numpy1_bytes(data)


def test_writer_output_is_what_python_writes(tmp_path):
    want = {k: np.ascontiguousarray(v) if v.ndim else v for k, v in _sample(7).items()
            if k not in ("big_endian", "scalar", "fortran", "read_only")}
    # SETITEMS batches of 1000: a last batch of one, an empty last batch.
    many = {f"p{i}": np.full((i % 3,), i, np.int32) for i in range(1001)}
    # 4000 small arrays: frames pass 64 KiB in the middle of an array's opcodes.
    small = {f"s{i}": np.full(i % 4, i % 100, DTYPES[i % len(DTYPES)]) for i in range(4000)}
    for arrays in (want, many, small, {}, {"one": np.zeros(3, np.float16)}):
        path = tmp_path / "w.pdopt"
        tt.write_paddle_pickle(str(path), arrays)
        with open(path, "rb") as f:
            _assert_same(pickle.load(f), arrays, "pickle.load of Tiller's file")
        assert _numpy2_bytes(path.read_bytes()) == pickle.dumps(arrays, protocol=4)
        _assert_same(tt.read_paddle_pickle(str(path)), arrays, "round trip")
    assert sorted(os.listdir(tmp_path)) == ["w.pdopt"]   # no temporary files left


def test_writer_converts_layouts_and_refuses_bad_input(tmp_path):
    path = str(tmp_path / "l.pdparams")
    s = _sample(3)
    tt.write_paddle_pickle(path, {k: s[k] for k in ("fortran", "big_endian", "strided", "scalar")})
    with open(path, "rb") as f:
        got = pickle.load(f)
    for k in ("fortran", "big_endian", "strided", "scalar"):
        np.testing.assert_array_equal(got[k], s[k])
        assert got[k].flags.c_contiguous and got[k].dtype.isnative
    with pytest.raises(tt.TillerError, match="complex64.*cannot be written"):
        tt.write_paddle_pickle(path, {"c": np.zeros(2, np.complex64)})
    with pytest.raises(tt.TillerError, match="No such file or directory"):
        tt.write_paddle_pickle(str(tmp_path / "missing" / "x.pdparams"), {})
    np.testing.assert_array_equal(tt.read_paddle_pickle(path)["strided"], s["strided"])


def test_reader_refuses_other_pickles(tmp_path):
    path = tmp_path / "bad.pdparams"
    for obj, pattern in ((["a list"], "EMPTY_LIST"), ({"a": 1.5}, "BINFLOAT"),
                         ({"a": np.array(["x"], dtype=object)}, "numpy dtype 'O8'"),
                         ({"a": np.zeros(2, np.complex64)}, "numpy dtype 'c8'"),
                         ({"a": {"nested": np.zeros(1)}}, "value of 'a' is a dict")):
        path.write_bytes(pickle.dumps(obj, protocol=4))
        with pytest.raises(tt.TillerError, match=pattern):
            tt.read_paddle_pickle(str(path))
    path.write_bytes(pickle.dumps({"a": np.zeros(3)}, protocol=4)[:-5])
    with pytest.raises(tt.TillerError, match=re.escape(str(path)) + ".*truncated"):
        tt.read_paddle_pickle(str(path))


# --- Paddle's side, in a process of the program form -----------------------


def _save_cases(out_dir: str, cases: list) -> None:
    """paddle.static.save of each (kind, optimizer) training program
    (startup values + models.training's seeded state) into
    out_dir/<kind>-<opt>/train.{json|pdmodel,pdparams,pdopt}."""
    with T.static_mode():
        for kind, opt in cases:
            T.save_training_program(T.build(kind, None, opt, 0), Path(out_dir) / f"{kind}-{opt}")


def _static_load(prefix: str, kind: str, opt: str) -> dict:
    """A restarted script: build, startup, paddle.static.load(prefix) into a
    fresh scope; the state it ends up with."""
    import paddle

    with T.static_mode():
        built = T.build(kind, None, opt, 0)
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(paddle.CPUPlace())
        with paddle.static.scope_guard(scope):
            exe.run(built.startup)
            paddle.static.load(built.main, prefix, exe)
        return T.read_state(built, scope)


def _paddle_side(out_dir: str, cases: list, rewrite: tuple) -> tuple:
    """In a process of the program form: _save_cases; then Paddle's files of
    the case `rewrite` = (kind, opt) read and written back by Tiller with
    every value changed (+0.5) to out_dir/tiller/ckpt.*, and loaded by
    _static_load. Returns (what Tiller wrote, what Paddle loaded)."""
    _save_cases(out_dir, cases)
    kind, opt = rewrite
    prefix = Path(out_dir) / "tiller" / "ckpt"
    prefix.parent.mkdir()
    written = {}
    for suffix in (".pdparams", ".pdopt"):
        arrays = tt.read_paddle_pickle(str(Path(out_dir) / f"{kind}-{opt}" / f"train{suffix}"))
        arrays = {k: (v + 0.5).astype(v.dtype) for k, v in arrays.items()}
        tt.write_paddle_pickle(str(prefix) + suffix, arrays)
        written.update(arrays)
    return written, _static_load(str(prefix), kind, opt)


@pytest.fixture(scope="module", params=T.FORMATS)
def saved(request, tmp_path_factory):
    """Every (kind, optimizer) saved by paddle.static.save in one form (the
    legacy form in one child process), and a Tiller-written checkpoint
    loaded back by paddle.static.load."""
    fmt = request.param
    root = tmp_path_factory.mktemp(f"ckpt-{fmt}")
    # The child imports this file as a module, and tiller from python/.
    path = [str(HERE), str(HERE.parents[1] / "python")] + [os.environ.get("PYTHONPATH", "")]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join(p for p in path if p))
        written, loaded = T.call_in_format(fmt, f"{__name__}:_paddle_side", out_dir=str(root),
                                           cases=CASES, rewrite=("cnn", "adam"))
    return fmt, root, written, loaded


def _load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def test_reader_matches_paddle_static_save(saved):
    fmt, root, _, _ = saved
    for kind, opt in CASES:
        for suffix in (".pdparams", ".pdopt"):
            path = root / f"{kind}-{opt}" / f"train{suffix}"
            _assert_same(tt.read_paddle_pickle(str(path)), _load(path),
                         f"{fmt} {kind} {opt} {suffix}")


def test_paddle_static_load_reads_tillers_files(saved):
    fmt, _, written, loaded = saved
    assert set(loaded) == set(written), fmt
    for k, v in written.items():
        np.testing.assert_array_equal(loaded[k], v, err_msg=f"{fmt}: {k}")


def test_paddle_load_reads_tillers_files(saved, tmp_path):
    import paddle

    fmt, root, _, _ = saved
    for suffix in (".pdparams", ".pdopt"):
        want = tt.read_paddle_pickle(str(root / "bert-lamb" / f"train{suffix}"))
        path = str(tmp_path / f"t{suffix}")
        tt.write_paddle_pickle(path, want)
        _assert_same(paddle.load(path, return_numpy=True), want, f"paddle.load {fmt} {suffix}")


def test_state_roles_split_like_paddle_static_save(saved):
    fmt, root, _, _ = saved
    for kind, opt in CASES:
        case = root / f"{kind}-{opt}"
        what = f"{fmt} {kind} {opt}"
        program = case / ("train.json" if fmt == "pir" else "train.pdmodel")
        roles = tt.paddle_state_roles(str(program))
        for suffix in (".pdparams", ".pdopt"):
            assert {n for n, (_, f) in roles.items() if f == suffix} == set(_load(
                case / f"train{suffix}")), f"{what} {suffix}"
        info = json.loads((case / "training_info.json").read_text())
        assert set(roles) == set(info["persistables"]), what
        role_of = {n: r for n, (r, _) in roles.items()}
        assert {n for n, r in role_of.items() if r == "parameter"} == set(info["param_names"]), what
        assert role_of["learning_rate_0"] == "learning_rate", what
        stats = {n for n, r in role_of.items() if r == "statistic"}
        # BatchNorm's running mean and variance (w_1, w_2) are its only untrained parameters.
        assert stats == ({f"batch_norm2d_{i}.w_{j}" for i in (0, 1) for j in (1, 2)}
                         if kind == "cnn" else set()), what
        opt_state = {n for n, r in role_of.items() if r == "optimizer_state"}
        assert all(any(n.startswith(p) for p in info["param_names"]) for n in opt_state), what
        assert bool(opt_state) == (opt != "sgd"), what
        assert "other" not in role_of.values(), what


def test_bfloat16_and_float16_parameters_round_trip(tmp_path):
    """Paddle writes a bfloat16 parameter as its uint16 bits; Tiller reads
    them and writes them back so that paddle.static.load restores them."""
    import paddle

    with T.static_mode():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            for name, dt, v in (("w_bf16", "bfloat16", 1.5), ("w_fp16", "float16", 0.5)):
                init = paddle.nn.initializer.Constant(v)
                paddle.static.create_parameter([3, 2], dtype=dt, name=name,
                                               default_initializer=init)
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(paddle.CPUPlace())
        with paddle.static.scope_guard(scope):
            exe.run(startup)
            paddle.static.save(main, str(tmp_path / "p"))
        got = tt.read_paddle_pickle(str(tmp_path / "p.pdparams"))
        _assert_same(got, _load(tmp_path / "p.pdparams"), "bfloat16/float16")
        assert got["w_bf16"].dtype == np.uint16
        assert np.all(got["w_bf16"] == 0x3FC0)   # bfloat16 1.5
        changed = {"w_bf16": np.full((3, 2), 0x4010, np.uint16),   # bfloat16 2.25
                   "w_fp16": np.full((3, 2), 0.25, np.float16)}
        tt.write_paddle_pickle(str(tmp_path / "t.pdparams"), changed)
        tt.write_paddle_pickle(str(tmp_path / "t.pdopt"), {})
        with paddle.static.scope_guard(scope):
            paddle.static.load(main, str(tmp_path / "t"), exe)
            for name, want in changed.items():
                np.testing.assert_array_equal(np.array(scope.find_var(name).get_tensor()), want)
