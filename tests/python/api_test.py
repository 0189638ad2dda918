"""The Python module's paddle.inference-shaped API, and its errors on bad
files and bad feeds: each must raise TillerError naming the file, op or
tensor, never crash."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

import tiller
import tiller.inference as ti
from models import export


@pytest.fixture(scope="module")
def bert(zoo):
    return zoo.export("bert-tiny", "pir")


def make(model_file, params_file=None):
    config = ti.Config(model_file, params_file) if params_file else ti.Config(model_file)
    return ti.create_predictor(config)


def test_handle_api_like_paddle_inference(bert):
    predictor = make(bert.model_file, bert.params_file)
    assert predictor.get_input_names() == ["input_ids", "token_type_ids"]
    assert predictor.get_input_shape("input_ids") == [-1, -1]
    inputs = export.make_inputs("bert-tiny", batch=2, seq_len=10, seed=0)
    for name in predictor.get_input_names():
        handle = predictor.get_input_handle(name)
        handle.reshape(list(inputs[name].shape))
        handle.copy_from_cpu(inputs[name])
    assert predictor.run() is None
    ref = export.paddle_infer(bert.dir, inputs)
    for name, r in zip(predictor.get_output_names(), ref.values()):
        out = predictor.get_output_handle(name)
        assert out.shape() == list(r.shape)
        np.testing.assert_allclose(out.copy_to_cpu(), r, atol=1e-4, rtol=1e-4)
    summary = predictor.summary()
    assert 0 < summary["arena_bytes"] < summary["naive_bytes"]
    assert summary["weight_bytes"] > 0


def test_profile_by_op_type_and_by_shape(bert):
    """enable_profiling times every op of later runs; profile() sums them by
    op type, profile(by_shape=True) by type and input shapes (the same
    total, split further)."""
    predictor = make(bert.model_file, bert.params_file)
    inputs = export.make_inputs("bert-tiny", batch=2, seq_len=10, seed=0)

    def run():
        for name in predictor.get_input_names():
            handle = predictor.get_input_handle(name)
            handle.reshape(list(inputs[name].shape))
            handle.copy_from_cpu(inputs[name])
        predictor.run()

    run()
    assert predictor.profile() == []          # nothing timed before enabling
    predictor.enable_profiling()
    run()
    run()
    by_type = predictor.profile()
    by_shape = predictor.profile(by_shape=True)
    assert len(by_shape) > len(by_type) > 0
    assert [ms for _, ms, _ in by_type] == sorted((ms for _, ms, _ in by_type), reverse=True)
    types = {t: (ms, calls) for t, ms, calls in by_type}
    assert types["attention"][1] % 2 == 0     # two runs of every (fused) attention
    for t, (ms, _) in types.items():
        split = [(key, m) for key, m, _ in by_shape if key == t or key.startswith(t + " ")]
        assert split and sum(m for _, m in split) == pytest.approx(ms, rel=1e-9)
    # bert-tiny (hidden 128): the attention's output projection keyed by x, w, bias and the
    # residual it adds (fuse_linear_residual), and its merged Q/K/V projection
    assert any(key == "linear [2, 10, 128] [128, 128] [128] [2, 10, 128]"
               for key, _, _ in by_shape), by_shape
    assert any(key == "linear [2, 10, 128] [128, 384] [384]" for key, _, _ in by_shape), by_shape


def test_model_dir_config(bert):
    predictor = make(bert.dir)
    assert predictor.get_output_names() == ["fetch_name_0", "fetch_name_1"]


def test_import_from_a_fresh_interpreter():
    # What `.venv/bin/python -c "import tiller"` does after set-up.
    out = subprocess.run([sys.executable, "-c", "import tiller, tiller.inference; print(tiller.__version__)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == tiller.__version__


def expect_error(fn, *fragments):
    with pytest.raises(tiller.TillerError) as info:
        fn()
    msg = str(info.value)
    for f in fragments:
        assert f in msg, f"'{f}' not in: {msg}"
    return msg


def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.json")
    expect_error(lambda: make(path, str(tmp_path / "nope.pdiparams")), path)


@pytest.mark.parametrize("fmt", ["pir", "legacy"])
def test_truncated_params(zoo, tmp_path, fmt):
    m = zoo.export("bert-tiny", fmt)
    params = tmp_path / "model.pdiparams"
    data = open(m.params_file, "rb").read()
    for cut in (len(data) - 1, len(data) // 2, 100, 3):
        params.write_bytes(data[:cut])
        expect_error(lambda: make(m.model_file, str(params)), str(params), "truncated")


def test_a_params_file_past_32_mb_read_by_threads_equals_paddle(tmp_path):
    """Past 32 MB the records' data is read by a few threads at once, in
    pieces of at most 8 MiB (frontend/paddle/params_reader.cc): a 34 MB
    weight in five pieces and the small ones around it give Paddle
    Inference's outputs (tolerance 1e-5 of the largest output: the same
    float32 GEMMs, summed in another order). Cut inside the big record, the
    file is refused as truncated before any data is read."""
    import paddle

    paddle.seed(3)
    net = paddle.nn.Sequential(paddle.nn.Linear(2048, 4096), paddle.nn.ReLU(),
                               paddle.nn.Linear(4096, 64))
    spec = [paddle.static.InputSpec([None, 2048], "float32", "x")]
    paddle.jit.save(net, str(tmp_path / "model"), input_spec=spec)
    params = tmp_path / "model.pdiparams"
    assert params.stat().st_size > 32 << 20
    x = np.random.default_rng(3).standard_normal((3, 2048)).astype("float32")
    (want,) = export.paddle_infer(str(tmp_path), {"x": x}, threads=1).values()
    (got,) = make(str(tmp_path / "model.json"), str(params)).run([x])
    scale = np.abs(want).max()
    assert scale > 1e-3
    assert np.abs(got - want).max() <= 1e-5 * scale
    cut = tmp_path / "cut.pdiparams"
    cut.write_bytes(params.read_bytes()[: 20 << 20])
    expect_error(lambda: make(str(tmp_path / "model.json"), str(cut)), str(cut), "truncated")


def test_trailing_bytes_in_params(bert, tmp_path):
    params = tmp_path / "model.pdiparams"
    params.write_bytes(open(bert.params_file, "rb").read() + b"\0" * 8)
    expect_error(lambda: make(bert.model_file, str(params)), str(params), "trailing")


@pytest.mark.parametrize("fmt", ["pir", "legacy"])
def test_corrupt_program(zoo, tmp_path, fmt):
    m = zoo.export("bert-tiny", fmt)
    data = bytearray(open(m.model_file, "rb").read())
    bad = tmp_path / ("model.json" if fmt == "pir" else "model.pdmodel")
    # Truncated, and garbage in the middle.
    for variant in (data[: len(data) // 2], data[:100] + b"\xff\x13{" * 50 + data[400:]):
        bad.write_bytes(bytes(variant))
        with pytest.raises(tiller.TillerError) as info:
            make(str(bad), m.params_file)
        assert str(bad) in str(info.value)


def test_param_shape_mismatch(zoo, tmp_path):
    small = zoo.export("bert-tiny", "pir", intermediate_size=256)
    big = zoo.export("bert-tiny", "pir")
    # Same parameter names, one FFN width differs: the program and params disagree.
    expect_error(lambda: make(small.model_file, big.params_file), "shape")


def _save_static(tmp_path, build):
    """Saves the inference model `build(paddle)` makes (it returns (feed
    variables, fetch variables), built in static mode) as tmp_path/model;
    returns that prefix."""
    import paddle

    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            feeds, fetches = build(paddle)
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        prefix = str(tmp_path / "model")
        paddle.static.save_inference_model(prefix, feeds, fetches, exe, program=main)
    finally:
        paddle.disable_static()
    return prefix


def test_unsupported_ops_are_listed_with_counts(tmp_path):
    def build(paddle):
        x = paddle.static.data("x", [2, 3], "float32")
        return [x], [paddle.nonzero(x), paddle.nonzero(2 * x), paddle.masked_select(x, x > 0)]

    prefix = _save_static(tmp_path, build)
    model_file = prefix + (".json" if (tmp_path / "model.json").exists() else ".pdmodel")
    # Refused at creation, as Paddle Inference does, with every type counted.
    msg = expect_error(lambda: make(model_file, prefix + ".pdiparams"), "unsupported",
                       "nonzero (x2)", "masked_select (x1)")
    assert model_file in msg


def test_bad_feeds(bert):
    predictor = make(bert.model_file, bert.params_file)
    expect_error(lambda: predictor.get_input_handle("input_idz"), "input_idz", "input_ids")
    ids = predictor.get_input_handle("input_ids")
    expect_error(lambda: ids.copy_from_cpu(np.zeros((2, 4), np.int32)), "input_ids", "int64", "int32")
    expect_error(lambda: ids.copy_from_cpu(np.zeros((2, 4, 1), np.int64)), "input_ids", "[2, 4, 1]")
    expect_error(lambda: predictor.run([np.zeros((2, 4), np.int64)]), "2")
    ids.copy_from_cpu(np.zeros((2, 4), np.int64))
    expect_error(predictor.run, "token_type_ids", "not set")
    expect_error(lambda: predictor.get_output_handle("fetch_name_0").copy_to_cpu(), "before Run")
    expect_error(lambda: predictor.get_output_handle("nope"), "nope", "fetch_name_0")


def test_static_dim_mismatch(zoo):
    m = zoo.export("resnet-tiny", "pir")
    predictor = make(m.model_file, m.params_file)
    x = predictor.get_input_handle("x")
    expect_error(lambda: x.copy_from_cpu(np.zeros((1, 3, 32, 32), np.float32)), "x", "[1, 3, 32, 32]")


def test_output_that_is_an_input(tmp_path):
    """Paddle names the fetch of a passed-through input after the input."""
    def build(paddle):
        x = paddle.static.data("x", [2, 3], "float32")
        return [x], [paddle.nn.functional.dropout(x, p=0.0, training=False),
                     paddle.nn.functional.relu(x)]

    _save_static(tmp_path, build)
    predictor = make(str(tmp_path / "model.json"), str(tmp_path / "model.pdiparams"))
    assert predictor.get_output_names()[0] == "x"
    data = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    y_out, z_out = predictor.run([data])
    np.testing.assert_array_equal(y_out, data)
    np.testing.assert_array_equal(z_out, np.maximum(data, 0))


def _save_index_model(tmp_path):
    """gather, one_hot and cross_entropy over fed indices and labels."""
    def build(paddle):
        x = paddle.static.data("x", [4, 3], "float32")
        idx = paddle.static.data("idx", [2], "int64")
        label = paddle.static.data("label", [4, 1], "int64")
        hot_ids = paddle.static.data("hot_ids", [2], "int64")
        return [x, idx, label, hot_ids], [
            paddle.gather(x, idx), paddle.nn.functional.one_hot(hot_ids, 5),
            paddle.nn.functional.cross_entropy(x, label, reduction="none")]

    return _save_static(tmp_path, build)


def test_index_select_out_of_range_is_refused_naming_the_op(tmp_path):
    """index_select (gather along its dim) of an index outside the dim raises
    naming the op and the index; a negative one counts from the end, as in
    Paddle."""
    def build(paddle):
        x = paddle.static.data("x", [3, 4], "float32")
        idx = paddle.static.data("idx", [2], "int64")
        return [x, idx], [paddle.index_select(x, idx, axis=1)]

    prefix = _save_static(tmp_path, build)
    predictor = make(prefix + ".json", prefix + ".pdiparams")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(predictor.run([x, np.array([-1, 2], np.int64)])[0], x[:, [3, 2]])
    expect_error(lambda: predictor.run([x, np.array([0, 4], np.int64)]), "index_select",
                 "holds 4", "outside [0, 4)")


def test_gather_nd_out_of_range_is_refused_naming_the_op(tmp_path):
    """gather_nd raises naming the op and the index outside its dim (each
    row's indices are checked, not only the slab they add up to)."""
    def build(paddle):
        x = paddle.static.data("x", [3, 4], "float32")
        idx = paddle.static.data("idx", [2, 2], "int64")
        return [x, idx], [paddle.gather_nd(x, idx)]

    prefix = _save_static(tmp_path, build)
    predictor = make(prefix + ".json", prefix + ".pdiparams")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(predictor.run([x, np.array([[2, -1], [0, 1]], np.int64)])[0],
                                  x[[2, 0], [3, 1]])
    # [0, 5] would be element 5 of the flat x, inside it: still refused
    expect_error(lambda: predictor.run([x, np.array([[1, 1], [0, 5]], np.int64)]), "gather_nd",
                 "holds 5", "outside [0, 4)")


def test_einsum_diagonal_is_refused_naming_the_op_and_label(tmp_path):
    """A label repeated in one operand (a diagonal, "ii->i") has no
    translation: creation is refused naming einsum, the label and the
    operand's term, never a wrong sum."""
    def build(paddle):
        x = paddle.static.data("x", [3, 3], "float32")
        y = paddle.static.data("y", [3, 4], "float32")
        return [x, y], [paddle.einsum("ii,ij->j", x, y)]

    prefix = _save_static(tmp_path, build)
    expect_error(lambda: make(prefix + ".json", prefix + ".pdiparams"), "einsum",
                 "label 'i' twice in operand 0 ('ii')", "diagonals are not supported")


def test_bitwise_ops_on_floats_are_refused_naming_the_dtype(tmp_path):
    """bitwise_and of float32 tensors (Paddle's Python API refuses to build
    one; a program written by other means can hold it) is refused at
    creation naming the op and the dtype, never a logical or bitwise and of
    the floats' bytes."""
    import legacy_writer

    x = np.ones((3, 4), np.float32)
    model, _ = legacy_writer.write_program(
        tmp_path, "bitwise_and", {"x": x, "y": x}, {}, {"X": ["x"], "Y": ["y"]},
        {"Out": (["out"], np.float32, x.shape)}, {})
    expect_error(lambda: make(str(model), ""), "bitwise_and", "float32 operands")


def test_scatter_index_out_of_range_is_refused_naming_the_op(tmp_path):
    """scatter of a row index outside x's rows raises naming the op and the
    index (the row is never written out of bounds); a negative one counts
    from the end, as in Paddle."""
    def build(paddle):
        x = paddle.static.data("x", [4, 2], "float32")
        idx = paddle.static.data("idx", [2], "int64")
        u = paddle.static.data("u", [2, 2], "float32")
        return [x, idx, u], [paddle.scatter(x, idx, u)]

    prefix = _save_static(tmp_path, build)
    predictor = make(prefix + ".json", prefix + ".pdiparams")
    x = np.zeros((4, 2), np.float32)
    u = np.array([[1, 2], [3, 4]], np.float32)
    want = x.copy()
    want[[3, 1]] = u
    np.testing.assert_array_equal(predictor.run([x, np.array([-1, 1], np.int64), u])[0], want)
    expect_error(lambda: predictor.run([x, np.array([1, 4], np.int64), u]), "scatter", "4")


def test_ctc_labels_and_lengths_out_of_range_are_refused(tmp_path):
    """ctc_loss over a class id outside [0, classes) or a length beyond its
    tensor raises naming the input (it gave a NaN loss and went on)."""
    T, B, C, L = 6, 2, 4, 2

    def build(paddle):
        logits = paddle.static.data("logits", [T, B, C], "float32")
        labels = paddle.static.data("labels", [B, L], "int32")
        tlen = paddle.static.data("tlen", [B], "int64")
        llen = paddle.static.data("llen", [B], "int64")
        loss = paddle.nn.functional.ctc_loss(logits, labels, tlen, llen, blank=0,
                                             reduction="none")
        return [logits, labels, tlen, llen], [loss]

    prefix = _save_static(tmp_path, build)
    predictor = make(prefix + ".json", prefix + ".pdiparams")
    logits = np.random.default_rng(0).standard_normal((T, B, C)).astype(np.float32)
    labels = np.array([[1, 2], [3, 1]], np.int32)
    tlen, llen = np.array([T, T - 1], np.int64), np.array([L, L - 1], np.int64)
    (good,) = predictor.run([logits, labels, tlen, llen])
    assert np.isfinite(good).all()
    bad = labels.copy()
    bad[1, 0] = C
    expect_error(lambda: predictor.run([logits, bad, tlen, llen]), "ctc_loss",
                 "input 'labels' holds 4", "outside [0, 4)")
    expect_error(lambda: predictor.run([logits, labels, np.array([T + 1, T], np.int64), llen]),
                 "input 'tlen' holds 7", "outside [0, 7)")
    expect_error(lambda: predictor.run([logits, labels, tlen, np.array([L, -1], np.int64)]),
                 "input 'llen' holds -1")
    np.testing.assert_array_equal(predictor.run([logits, labels, tlen, llen])[0], good)


def test_indices_out_of_range_are_refused_naming_the_op_and_input(bert, tmp_path):
    """An id, index or label outside what its op indexes raises, as Paddle
    raises, instead of a zero (or NaN) row; the predictor stays usable."""
    predictor = make(bert.model_file, bert.params_file)
    ids, types = np.full((1, 8), 5, np.int64), np.zeros((1, 8), np.int64)
    good = predictor.run([ids, types])
    bad = ids.copy()
    bad[0, 3] = 100000
    expect_error(lambda: predictor.run([bad, types]), "embedding", "input 'input_ids' holds 100000",
                 "outside [0, 1024)")
    bad_types = types.copy()
    bad_types[0, 0] = -1
    expect_error(lambda: predictor.run([ids, bad_types]), "input 'token_type_ids' holds -1",
                 "outside [0, 2)")
    for a, b in zip(predictor.run([ids, types]), good):
        np.testing.assert_array_equal(a, b)

    prefix = _save_index_model(tmp_path)
    predictor = make(prefix + ".json", prefix + ".pdiparams")
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    label = np.array([[0], [1], [2], [1]], np.int64)
    idx, hot_ids = np.array([3, 0], np.int64), np.array([4, 1], np.int64)
    gathered, hot, loss = predictor.run([x, idx, label, hot_ids])
    np.testing.assert_array_equal(gathered, x[[3, 0]])
    np.testing.assert_array_equal(hot, np.eye(5, dtype=np.float32)[[4, 1]])
    assert np.isfinite(loss).all()
    expect_error(lambda: predictor.run([x, np.array([1, 4], np.int64), label, hot_ids]),
                 "gather", "input 'idx' holds 4", "outside [0, 4)")
    expect_error(lambda: predictor.run([x, np.array([1, -5], np.int64), label, hot_ids]),
                 "gather", "holds -5")
    expect_error(lambda: predictor.run([x, idx, label, np.array([5, 1], np.int64)]),
                 "one_hot", "input 'hot_ids' holds 5", "outside [0, 5)")
    bad_label = label.copy()
    bad_label[2, 0] = 3
    expect_error(lambda: predictor.run([x, idx, bad_label, hot_ids]), "holds 3",
                 "outside [0, 3)")
