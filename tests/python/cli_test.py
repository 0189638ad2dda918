"""The `tiller` command: info, run, bench, ops, and its errors (exit code 2
with the file / tensor named)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from models import export

REPO = Path(__file__).resolve().parents[2]
TILLER = Path(os.environ.get("TILLER_BUILD_DIR", REPO / "build")) / "bin" / "tiller"


def tiller(*args, check=True):
    res = subprocess.run([str(TILLER), *map(str, args)], capture_output=True, text=True, timeout=300)
    if check:
        assert res.returncode == 0, res.stderr
    return res


@pytest.fixture(scope="module")
def bert(zoo):
    return zoo.export("bert-tiny", "legacy")


def test_info(bert):
    out = tiller("info", bert.model_file, "--shape", "input_ids=2x16", "--shape", "token_type_ids=2x16").stdout
    assert "input_ids" in out and "int64" in out and "[-1, -1]" in out
    assert "matmul_v2" in out and "layer_norm" in out
    assert "planned activation memory" in out
    assert "input_ids=[2, 16]" in out


def test_info_passes_prints_the_pipeline_that_ran(bert):
    """`tiller info --passes`: the compile's pass pipelines as they ran (the
    passes this compile called for, in order, whether or not they rewrote
    anything), then what each pass changed."""
    out = tiller("info", bert.model_file, "--shape", "input_ids=2x16", "--shape",
                 "token_type_ids=2x16", "--passes").stdout
    pipeline = out[out.index("compile pipeline"):out.index("compile stages")]
    lines = [line.strip() for line in pipeline.splitlines()[1:]]
    # Inference in float32 on one device: the optimization passes run, the
    # training and half-precision ones do not; half_fallback ran (it rewrote
    # nothing, so the stages below leave it out).
    assert "optimize" in lines and "fuse_attention" in lines, pipeline
    for not_run in ("place_updates", "recompute", "mixed_precision", "order_by_device"):
        assert not any(line.startswith(not_run) for line in lines), (not_run, pipeline)
    assert lines.index("fuse_attention") < lines.index("half_fallback") < \
        lines.index("insert_copies")
    assert "fuse_attention" in out[out.index("compile stages"):]


def test_run_writes_outputs_matching_paddle(bert, tmp_path):
    inputs = export.make_inputs("bert-tiny", batch=2, seq_len=12, seed=4)
    args = []
    for name, arr in inputs.items():
        np.save(tmp_path / f"{name}.npy", arr)
        args += ["--input", f"{name}={tmp_path / (name + '.npy')}"]
    tiller("run", bert.model_file, *args, "--output-dir", tmp_path / "out")
    ref = export.paddle_infer(bert.dir, inputs)
    for name, r in ref.items():
        got = np.load(tmp_path / "out" / f"{name}.npy")
        np.testing.assert_allclose(got, r, atol=1e-4, rtol=1e-4)


def test_bench(bert):
    out = tiller("bench", bert.model_file, "--batch", 2, "--seq-len", 16, "--iters", 3, "--profile").stdout
    assert "latency: median" in out
    assert "throughput" in out
    assert "linear" in out  # the profile lists fused linear layers


def test_ops_lists_the_translators():
    out = tiller("ops").stdout
    for op in ("matmul_v2", "layer_norm", "conv2d", "lookup_table_v2", "softmax"):
        assert op in out


def _ops_table(half=None):
    """`tiller ops` rows as {paddle op: (pir names, ir ops, dtypes)}; `half`
    (a dict) receives each row's half-precision column."""
    lines = tiller("ops").stdout.splitlines()
    assert lines[0].split()[-5:] == ["op(s)", "dtypes", "half", "precision", "notes"], lines[0]
    start, end = lines[0].index("half precision"), lines[0].index("notes")
    rows = {}
    for line in lines[1:-1]:
        paddle_op, pir, ir_ops, dtypes = line.split()[:4]
        rows[paddle_op] = (pir, ir_ops.split(","), dtypes)
        if half is not None:
            half[paddle_op] = line[start:end].strip()
    assert lines[-1] == f"{len(rows)} Paddle op types"
    return rows


def test_ops_names_the_ir_ops_and_their_kernel_dtypes():
    rows = _ops_table()
    # Every translator declares the IR ops it emits (translate.h).
    assert not [op for op, (_, ir, _) in rows.items() if ir == ["-"]]
    assert rows["softmax"][1:] == (["softmax"], "float32")
    assert rows["layer_norm"][1:] == (["layer_norm"], "float32")
    assert rows["conv2d"][1] == ["conv2d", "transpose"]
    assert rows["matmul_v2"][1][0] == "matmul"
    # The dtypes of the IR ops' CPU kernels (backends/cpu/kernels).
    assert rows["relu"][2] == "float32,float64,int32,int64"  # exact on integers
    assert rows["gelu"][2] == "float32,float64"
    assert rows["equal"][2] == "float32,float64,int8,uint8,int16,int32,int64,bool"
    assert rows["less_than"][2] == "float32,float64,int8,uint8,int16,int32,int64"
    assert rows["cast"][2] == "all" and rows["transpose2"][2] == "all"
    assert rows["one_hot_v2"][2] == "int32,int64"  # the ids' dtype
    assert rows["where"][2] == "all"  # x and y; the condition is bool
    # Several IR ops: the dtypes all of them run (p_norm: sqrt is float-only).
    assert rows["p_norm"][2] == "float32,float64"
    # Views and pass-through ops run no kernel.
    assert rows["reshape2"][1:] == (["reshape"], "all")
    assert rows["assign"][1:] == (["(none)"], "all")


def test_ops_says_how_each_op_runs_in_half_precision():
    half = {}
    _ops_table(half)
    for op in ("matmul_v2", "conv2d", "bmm"):
        assert half[op] == "bfloat16 GEMM, float16 rounded", op
    assert half["cast"] == half["reshape2"] == "bfloat16, float16"  # any dtype
    assert half["softmax"] == half["layer_norm"] == "via float32"
    assert half["one_hot_v2"] == "-"  # integer ids only


def test_errors_exit_2_with_names(bert, tmp_path):
    res = tiller("info", tmp_path / "missing.pdmodel", check=False)
    assert res.returncode == 2 and "missing.pdmodel" in res.stderr
    np.save(tmp_path / "ids.npy", np.zeros((2, 4), np.int32))
    res = tiller("run", bert.model_file, "--input", f"input_ids={tmp_path / 'ids.npy'}",
                 "--input", f"token_type_ids={tmp_path / 'ids.npy'}", check=False)
    assert res.returncode == 2 and "input_ids" in res.stderr and "int32" in res.stderr
    res = tiller("run", bert.model_file, "--input", f"input_idz={tmp_path / 'ids.npy'}", check=False)
    assert res.returncode == 2 and "input_idz" in res.stderr
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY garbage")
    res = tiller("run", bert.model_file, "--input", f"input_ids={tmp_path / 'bad.npy'}", check=False)
    assert res.returncode == 2 and "bad.npy" in res.stderr
    # Found by the npy fuzz target: a header key without a value was read
    # past the header's end.
    header = b"{'descr'i8:"
    (tmp_path / "nokey.npy").write_bytes(b"\x93NUMPY\x01\x00" + bytes([len(header), 0]) + header)
    res = tiller("run", bert.model_file, "--input", f"input_ids={tmp_path / 'nokey.npy'}",
                 check=False)
    assert res.returncode == 2 and "nokey.npy" in res.stderr and "descr" in res.stderr, res.stderr
    # And a dimension past int64 (std::stoll threw past the CLI's handler).
    header = b"{'descr': '|u1', 'fortran_order': False, 'shape': (2, 50000000000000000000000), }"
    (tmp_path / "huge.npy").write_bytes(b"\x93NUMPY\x01\x00" + bytes([len(header), 0]) + header)
    res = tiller("run", bert.model_file, "--input", f"input_ids={tmp_path / 'huge.npy'}",
                 check=False)
    assert res.returncode == 2 and "huge.npy" in res.stderr and "too large" in res.stderr, res.stderr


def test_info_marks_unsupported_ops(tmp_path):
    import paddle

    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [2, 3], "float32")
            y = paddle.nonzero(paddle.nn.functional.relu(x))
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        paddle.static.save_inference_model(str(tmp_path / "model"), [x], [y], exe, program=main)
    finally:
        paddle.disable_static()
    res = tiller("info", tmp_path / "model.json", check=False)
    assert res.returncode == 2
    assert "relu" in res.stdout and "nonzero" in res.stdout and "(unsupported)" in res.stdout
    assert "nonzero (x1)" in res.stderr


# ---------------------------------------------------------------------------
# Issue 41, point 12: the CLI's loose ends, one test per class.

import re
import sys


@pytest.fixture(scope="module")
def cnn(zoo):
    """resnet-tiny: one input 'x' of [-1, 3, 64, 64], no sequence dim."""
    return zoo.export("resnet-tiny", "pir")


@pytest.fixture(scope="module")
def train_program(tmp_path_factory):
    """A legacy training program (fc + cross-entropy + SGD) fed by 'x' and
    'label', written as IpuCompiledProgram writes one for `tiller plan`."""
    path = tmp_path_factory.mktemp("train") / "train.pdmodel"
    script = f"""
import paddle
paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    x = paddle.static.data("x", [-1, 8], "float32")
    label = paddle.static.data("label", [-1, 1], "int64")
    loss = paddle.nn.functional.cross_entropy(paddle.static.nn.fc(x, 4), label).mean()
    paddle.optimizer.SGD(0.1).minimize(loss)
open({str(path)!r}, "wb").write(main.desc.serialize_to_string())
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300,
                   env=dict(os.environ, FLAGS_enable_pir_api="0"))
    return path


def _bench_numbers(out):
    """(batch, median latency ms, samples/s) as bench printed them."""
    batch = int(re.search(r"threads \d+  batch (\d+)", out).group(1))
    median = float(re.search(r"latency: median ([\d.]+) ms", out).group(1))
    rate = float(re.search(r"throughput: ([\d.]+) samples/s", out).group(1))
    return batch, median, rate


def test_bench_reports_the_shapes_it_ran_and_their_throughput(cnn, bert):
    """The batch printed is the first dim of the inputs run (--shape's, or
    --batch's where it filled a dynamic dim), the throughput is that batch
    over the median latency, and seq_len is printed only where --seq-len
    filled a dynamic second dim: a CNN has none."""
    out = tiller("bench", cnn.model_file, "--shape", "x=16x3x64x64", "--iters", 3,
                 "--warmup", 0).stdout
    batch, median, rate = _bench_numbers(out)
    assert batch == 16, out
    assert rate == pytest.approx(batch * 1000 / median, rel=0.01), out
    assert "seq_len" not in out and "x=[16, 3, 64, 64]" in out, out

    res = tiller("bench", cnn.model_file, "--batch", 3, "--seq-len", 64, "--iters", 2,
                 "--warmup", 0)
    batch, median, rate = _bench_numbers(res.stdout)
    assert batch == 3 and "seq_len" not in res.stdout, res.stdout
    assert rate == pytest.approx(3 * 1000 / median, rel=0.01), res.stdout
    assert "--seq-len 64 unused" in res.stderr, res.stderr

    out = tiller("bench", bert.model_file, "--batch", 2, "--seq-len", 16, "--iters", 2,
                 "--warmup", 0).stdout
    batch, median, rate = _bench_numbers(out)
    assert batch == 2 and "seq_len 16" in out, out
    assert rate == pytest.approx(2 * 1000 / median, rel=0.01), out


def test_shape_naming_no_input_is_refused_with_the_inputs_listed(cnn, bert, train_program):
    for cmd in (["info", cnn.model_file], ["bench", cnn.model_file, "--iters", 1],
                ["plan", cnn.model_file]):
        res = tiller(*cmd, "--shape", "image=16x3x64x64", check=False)
        assert res.returncode == 2, (cmd, res.stdout, res.stderr)
        assert "'image'" in res.stderr and "inputs: x" in res.stderr, (cmd, res.stderr)
    res = tiller("bench", bert.model_file, "--shape", "input_idz=2x16", check=False)
    assert res.returncode == 2
    assert "'input_idz'" in res.stderr and "input_ids, token_type_ids" in res.stderr, res.stderr
    # Training programs: checked against --feed, or against the program's
    # data variables (a variable that is not fed, such as a learning rate,
    # is refused too).
    res = tiller("plan", train_program, "--train", "--feed", "x", "--feed", "label",
                 "--shape", "lable=4x1", check=False)
    assert res.returncode == 2 and "'lable'" in res.stderr and "x, label" in res.stderr, res.stderr
    for name in ("lable", "learning_rate_0"):
        res = tiller("plan", train_program, "--train", "--shape", f"{name}=4x1", check=False)
        assert res.returncode == 2 and f"'{name}'" in res.stderr, res.stderr
        assert "not fed" in res.stderr, res.stderr
    tiller("plan", train_program, "--train", "--shape", "label=4x1", "--shape", "x=4x8")


def test_malformed_shapes_exit_2_naming_what_is_wrong(cnn):
    cases = {
        "x=-1x3x64x64": ["dimension 0 of 'x' is -1", "must be concrete", "x=1x3x64x64"],
        "x=4x3x-1x64": ["dimension 2 of 'x' is -1", "must be concrete"],
        "x=0x3x64x64": ["dimension 0 of 'x' is 0", "at least 1"],
        "x": ["is not NAME=DxDx"],
        "x=": ["no dimensions"],
        "=1x3x64x64": ["names no input"],
        "x=1xax64x64": ["dimension 1 of 'x' is 'a', not a whole number"],
        "x=1x3.5x64x64": ["'3.5', not a whole number"],
        "x=1x3x64x64abc": ["'64abc', not a whole number"],
        "x=1xx64x64": ["dimension 1 of 'x' is empty"],
        "x=99999999999999999999x3x64x64": ["too large"],
    }
    for shape, words in cases.items():
        res = tiller("bench", cnn.model_file, "--iters", 1, "--shape", shape, check=False)
        assert res.returncode == 2, (shape, res.stdout, res.stderr)
        for w in words:
            assert w in res.stderr, (shape, w, res.stderr)
    res = tiller("info", cnn.model_file, "--shape", "x=1x3x64x64", "--shape", "x=2x3x64x64",
                 check=False)
    assert res.returncode == 2 and "given twice for 'x'" in res.stderr, res.stderr


def test_bad_numbers_are_a_one_line_usage_error_with_exit_2(cnn, tmp_path):
    """CLI11's validation errors exited 105 with a 300-digit range; every
    parse error is exit code 2 (README) in one line, --help still 0."""
    model = cnn.model_file
    commands = {
        "run": ["run", model, "--input", "x=x.npy"],
        "bench": ["bench", model],
        "plan": ["plan", model],
        "quantize": ["quantize", model, "--calibrate", tmp_path, "--output-dir", tmp_path],
    }
    for name, cmd in commands.items():
        for value, words in (("0", "at least 1, got 0"), ("-2", "at least 1, got -2"),
                             ("two", "'two' is not a whole number"),
                             ("99999999999", "at most 2147483647")):
            res = tiller(*cmd, "--threads", value, check=False)
            assert res.returncode == 2, (name, value, res.stderr)
            lines = res.stderr.strip().splitlines()
            assert len(lines) == 1 and len(lines[0]) < 160, (name, value, res.stderr)
            assert "--threads" in lines[0] and words in lines[0], (name, value, lines)
            assert f"tiller {name} --help" in lines[0], lines
        assert tiller(*cmd[:1], "--help").returncode == 0
    for cmd in (["bench", model, "--iters", "0"], ["bench", model, "--warmup", "-1"],
                ["bench", model, "--batch", "0"], ["plan", model, "--rank-link-gbs", "-1"],
                ["bench", model, "--no-such-option"], ["bench"], ["ops", "extra"]):
        res = tiller(*cmd, check=False)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, (cmd, res.stderr)


def test_unknown_or_missing_subcommand_is_a_usage_error():
    res = tiller("frobnicate", check=False)
    assert res.returncode == 2
    assert "unknown subcommand 'frobnicate'" in res.stderr, res.stderr
    assert "subcommands: info, run, bench, quantize, ops, plan" in res.stderr, res.stderr
    res = tiller(check=False)
    assert res.returncode == 2 and "Usage: tiller" in res.stderr and "bench" in res.stderr
    assert tiller("--help").returncode == 0


def test_version_comes_from_the_cmake_project():
    version = re.search(r"project\(tiller [^)]*VERSION ([\d.]+)",
                        (REPO / "CMakeLists.txt").read_text()).group(1)
    for flag in ("--version", "-V"):
        res = tiller(flag)
        assert res.stdout == f"tiller {version}\n", res.stdout
    # The Python package says the same (python/tiller/__init__.py).
    init = (REPO / "python" / "tiller" / "__init__.py").read_text()
    assert f'__version__ = "{version}"' in init
    # And the wheel's metadata (pyproject.toml).
    assert f'\nversion = "{version}"\n' in (REPO / "pyproject.toml").read_text()


def _option_help(sub):
    """{option: (signature, description)} from `tiller SUB --help`; CLI11
    puts the description at column 30, or on the next line when the
    signature is longer."""
    lines = tiller(sub, "--help").stdout.splitlines()
    opts = {}
    for i, line in enumerate(lines):
        m = re.match(r"  (-\S+)", line)
        if not m:
            continue
        if len(line) > 30 and line[29] == " " and line[:30].rstrip() != line.rstrip():
            sig, desc = line[:30].strip(), line[30:].strip()
        else:
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            sig, desc = line.strip(), nxt.strip() if nxt.startswith(" " * 30) else ""
        opts[m.group(1)] = (sig, desc)
    return opts


def test_every_option_has_help_and_shows_its_default():
    for sub in ("info", "run", "bench", "quantize", "ops", "plan"):
        for opt, (sig, desc) in _option_help(sub).items():
            assert desc, f"tiller {sub} {opt} has no help text"
    run, bench = _option_help("run"), _option_help("bench")
    assert run["--threads"][0].endswith("=1") and run["--output-dir"][0].endswith("=tiller_out")
    assert run["--precision"][0].endswith("=float32")
    for opt, default in (("--batch", 1), ("--seq-len", 128), ("--threads", 1), ("--warmup", 3),
                         ("--iters", 20), ("--precision", "float32")):
        assert bench[opt][0].endswith(f"={default}"), (opt, bench[opt])
    # A list option shows no "=[]".
    assert "=[]" not in bench["--shape"][0]
