"""Paddle's IPU op-test style, on Tiller (issue 11): every op-harness case
that has a Paddle API builder is built as a static program with Paddle and
run three ways, as Paddle's IPUOpTest ran its cases: CPU_FP32 (Paddle's
executor), IPU_FP32 and IPU_FP16 (after tiller.patch_paddle():
paddle.static.IpuStrategy(is_training=False) +
paddle.static.IpuCompiledProgram(...).compile(feeds, fetches) +
Executor(paddle.IPUPlace()).run). Unmodified Paddle calls only.

Tolerances: IPU_FP32 against CPU_FP32 at the case's own (op_harness.Case,
with its reasons; integer / bool results exact); IPU_FP16 (enable_fp16 with
half_dtype float16: the GEMM-type ops multiply float16-rounded operands) at
rtol 1e-2 and atol 1e-2 x max(1, max |reference|): float16 rounds each
operand by up to 2^-11 relative, and a K-term product sum adds those errors
(K <= 64 in these cases); integer results exact. All cases run in one child
process (patching changes paddle for the whole process).
"""
from __future__ import annotations

import json
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np

from interpreters import child_env, paddle2

HERE = Path(__file__).resolve().parent


def _compare(got, ref, rtol, atol, exact):
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        return f"shape {got.shape} vs {ref.shape}"
    if exact or ref.dtype.kind in "iub":
        return "" if np.array_equal(got, ref) else "values differ (exact)"
    if got.dtype != ref.dtype:
        return f"dtype {got.dtype} vs {ref.dtype}"
    ok = np.allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
    return "" if ok else f"max abs diff {np.nanmax(np.abs(got.astype(np.float64) - ref)):.3g}"


def _child(out_path, fmt):
    sys.path.insert(0, str(HERE))
    import paddle
    import paddle.static

    import op_harness
    import tiller

    if fmt == "legacy":
        from models import _legacy_compat

        _legacy_compat.install()
    tiller.patch_paddle()
    paddle.enable_static()
    results = {}
    for case in op_harness.all_cases():
        if fmt not in case.formats or case.reference is not None:
            continue
        if fmt == "pir" and case.api is None:
            continue
        try:
            main, startup = paddle.static.Program(), paddle.static.Program()
            with paddle.static.program_guard(main, startup):
                feeds = {n: paddle.static.data(n, list(a.shape), str(a.dtype))
                         for n, a in case.inputs.items()}
                params = {n: paddle.static.create_parameter(
                    list(a.shape), str(a.dtype), name=n,
                    default_initializer=paddle.nn.initializer.Assign(a))
                    for n, a in (case.params or {}).items()}
                if fmt == "legacy" and case.legacy is not None:
                    outs = op_harness._build_legacy(paddle, case, {**feeds, **params})
                else:
                    outs = case.api(paddle, *feeds.values(), *params.values())
                outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            scope = paddle.static.Scope()
            with paddle.static.scope_guard(scope):
                exe = paddle.static.Executor(paddle.IPUPlace())
                exe.run(startup)
                ref = exe.run(main, feed=dict(case.inputs), fetch_list=outs)
                errors = {}
                for mode in ("IPU_FP32", "IPU_FP16"):
                    strategy = paddle.static.IpuStrategy()
                    strategy.set_graph_config(is_training=False)
                    if mode == "IPU_FP16":
                        strategy.set_precision_config(enable_fp16=True)
                        strategy.set_options({"half_dtype": "float16"})
                    prog = paddle.static.IpuCompiledProgram(
                        main, scope=scope, ipu_strategy=strategy).compile(list(case.inputs), outs)
                    got = exe.run(prog, feed=dict(case.inputs), fetch_list=outs)
                    # Tiller's compiled program ran it (its inference predictor).
                    ran_on_tiller = type(prog).__module__ == "tiller.ipu" and \
                        prog._predictor is not None
                    msgs = [] if ran_on_tiller else ["not run by Tiller"]
                    for i, (g, r) in enumerate(zip(got, ref)):
                        r = np.asarray(r)
                        if mode == "IPU_FP32":
                            m = _compare(g, r, case.rtol, case.atol, case.exact)
                        else:
                            scale = max(1.0, float(np.nanmax(np.abs(r)))) if r.size and \
                                r.dtype.kind == "f" else 1.0
                            m = _compare(g, r, 1e-2, 1e-2 * scale, case.exact)
                        if m:
                            msgs.append(f"output {i}: {m}")
                    if len(got) != len(ref):
                        msgs.append(f"{len(got)} outputs, Paddle {len(ref)}")
                    errors[mode] = "; ".join(msgs)
            results[case.id] = errors
        except Exception:
            results[case.id] = {"build": traceback.format_exc(limit=2)[-800:]}
    Path(out_path).write_text(json.dumps(results))


def test_every_op_case_runs_cpu_ipu_fp32_and_ipu_fp16_through_paddles_ipu_api(tmp_path):
    """Both program forms: PIR (Paddle 3's default) and legacy
    (FLAGS_enable_pir_api=0, the IPU era's); between them every op of the
    op list that Paddle 3.3 still builds."""
    import op_harness

    results = {}
    for fmt in ("pir", "legacy"):
        out = tmp_path / f"{fmt}.json"
        env = child_env(with_repo=True, FLAGS_enable_pir_api="1" if fmt == "pir" else "0")
        proc = subprocess.run([sys.executable, __file__, str(out), fmt], env=env,
                              capture_output=True, text=True, timeout=1200)
        assert proc.returncode == 0, proc.stderr[-4000:]
        results.update({f"{cid}[{fmt}]": r for cid, r in json.loads(out.read_text()).items()})
    failures = {cid: r for cid, r in results.items() if any(r.values())}
    assert not failures, "\n".join(f"{cid}: {r}" for cid, r in sorted(failures.items()))
    ran = {cid.split("/")[0] for cid in results}
    # Ops Paddle 3.3 can no longer build (their cases are programs written
    # directly, checked against numpy by ops_test.py) have no Paddle program
    # to compile here; Paddle 2.6.2 builds two of them with its API and six
    # more through block.append_op (the tests below).
    every = {c.op for c in op_harness.all_cases() if c.reference is None}
    assert ran == every, f"ops not run: {sorted(every - ran)}"


# Both Paddle 2.6.2 children below run a built program the way the op test
# above runs its cases: IPU_FP32 and IPU_FP16 through the patched
# paddle.static API (prepended to each child's code).
PADDLE2_IPU_MODES = r"""
import numpy as np
import paddle.static as st


def ipu_modes(main, scope, exe, feed, outs):
    # {mode: the outputs as lists, mode + "_tiller": whether Tiller ran it}
    got = {}
    for mode in ("IPU_FP32", "IPU_FP16"):
        strategy = st.IpuStrategy()
        strategy.set_graph_config(is_training=False)
        if mode == "IPU_FP16":
            strategy.set_precision_config(enable_fp16=True)
            strategy.set_options({"half_dtype": "float16"})
        prog = st.IpuCompiledProgram(main, scope=scope, ipu_strategy=strategy).compile(
            list(feed), outs)
        got[mode] = [np.asarray(g).tolist() for g in exe.run(prog, feed=feed, fetch_list=outs)]
        got[mode + "_tiller"] = type(prog).__module__ == "tiller.ipu" and \
            prog._predictor is not None
    return got
"""


# Programs Paddle 2.6.2's own API builds, run through Paddle's IPU API
# against Paddle 2.6.2's CPU kernels: data_norm and fc (mul +
# elementwise_add), which Paddle 3.3 has no API for, with the attributes of
# Paddle's test_data_norm_op_ipu (NHWC, epsilon, in_place, scale and shift,
# its statistics) and slot_dim; and logsumexp and a scale by a run-time
# tensor (test_scale_op_ipu's TestCase5), which Paddle 3.3's legacy mode
# cannot build (its paddle.logsumexp takes PIR values only). (Its
# sparse_embedding writes lookup_table over a parameter-server table that
# Paddle's own CPU executor cannot run.)
PADDLE2_CHILD = r"""
import json, sys
import numpy as np
import paddle, paddle.static as st
import tiller
tiller.patch_paddle()
paddle.enable_static()
rng = np.random.default_rng(5)
x = rng.standard_normal((4, 8)).astype("float32")
# data_norm's slot_dim 2: slots whose first ("show") value is 0 give zeros.
shows = x.copy()
shows[:, ::2] = np.resize(np.array([0.0, 0.7, -1e-8, 2.0, 0.0], np.float32), (4, 4))
inputs = {"x": x, "ids": rng.integers(0, 10, (4, 1)).astype("int64"), "shows": shows,
          "s": np.array([2.5], np.float32)}
stats = {"batch_size": 1e3, "batch_sum": 0.1, "batch_square": 1e3, "scale_w": 0.5, "bias": 0.1}
builders = {  # case: (op type, its inputs, the Paddle 2 call)
    "data_norm": ("data_norm", ["x"], lambda v: st.nn.data_norm(v)),
    "data_norm_nhwc": ("data_norm", ["x"], lambda v: st.nn.data_norm(v, data_layout="NHWC")),
    "data_norm_epsilon": ("data_norm", ["x"], lambda v: st.nn.data_norm(v, epsilon=0.001)),
    "data_norm_in_place": ("data_norm", ["x"], lambda v: st.nn.data_norm(v, in_place=True) + 1),
    "data_norm_scale_and_shift": ("data_norm", ["x"], lambda v: st.nn.data_norm(
        v, param_attr={"scale_w": 0.5, "bias": 0.1}, enable_scale_and_shift=True)),
    "data_norm_statistics": ("data_norm", ["x"], lambda v: st.nn.data_norm(
        v, param_attr=stats, enable_scale_and_shift=True)),
    "data_norm_statistics_nhwc": ("data_norm", ["x"], lambda v: st.nn.data_norm(
        v, param_attr=stats, data_layout="NHWC")),
    "data_norm_slot_dim": ("data_norm", ["shows"], lambda v: st.nn.data_norm(
        v, param_attr=stats, slot_dim=2)),
    "data_norm_slot_dim_scale_and_shift": ("data_norm", ["shows"], lambda v: st.nn.data_norm(
        v, param_attr=stats, slot_dim=2, enable_scale_and_shift=True)),
    "mul": ("mul", ["x"], lambda v: st.nn.fc(v, 3)),
    "logsumexp": ("logsumexp", ["x"], lambda v: paddle.logsumexp(v, axis=1)),
    "logsumexp_all": ("logsumexp", ["x"], lambda v: paddle.logsumexp(v, keepdim=True)),
    "scale_tensor": ("scale", ["x", "s"], lambda v, t: paddle.scale(v, scale=t, bias=0.5)),
}
results = {}
for name, (op_type, feed_names, build) in builders.items():
    main, start = st.Program(), st.Program()
    main.random_seed = start.random_seed = 11
    with st.program_guard(main, start):
        out = build(*[st.data(n, list(inputs[n].shape), str(inputs[n].dtype))
                      for n in feed_names])
    types = [op.type for op in main.global_block().ops]
    scope = st.Scope()
    with st.scope_guard(scope):
        exe = st.Executor(paddle.IPUPlace())
        exe.run(start)
        feed = {n: inputs[n] for n in feed_names}
        ref, = exe.run(main, feed=feed, fetch_list=[out])
        got = ipu_modes(main, scope, exe, feed, [out])
        for mode in ("IPU_FP32", "IPU_FP16"):
            got[mode] = got[mode][0]
    results[name] = {"op": op_type, "types": types, "ref": np.asarray(ref).tolist(), **got}
results["version"] = paddle.__version__
print(json.dumps(results))
"""
PADDLE2_CASES = {"data_norm", "data_norm_nhwc", "data_norm_epsilon", "data_norm_in_place",
                 "data_norm_scale_and_shift", "data_norm_statistics", "data_norm_statistics_nhwc",
                 "data_norm_slot_dim", "data_norm_slot_dim_scale_and_shift", "mul", "logsumexp",
                 "logsumexp_all", "scale_tensor"}


def test_programs_paddle_2_builds_run_through_paddles_ipu_api():
    """Each program above built by Paddle 2.6.2's API (.venv-paddle2) and run
    as the op test above runs its cases, at the same tolerances (fp32 1e-5
    relative: a K=8 product sum, a normalization or a log of a sum; fp16 as
    above), its op in the program."""
    proc = subprocess.run([paddle2(), "-c", PADDLE2_IPU_MODES + PADDLE2_CHILD],
                          env=child_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    assert results.pop("version") == "2.6.2"
    assert set(results) == PADDLE2_CASES, sorted(set(results) ^ PADDLE2_CASES)
    for name, r in results.items():
        assert r["op"] in r["types"], (name, r["types"])
        ref = np.asarray(r["ref"], np.float32)
        assert r["IPU_FP32_tiller"] and r["IPU_FP16_tiller"], name
        np.testing.assert_allclose(r["IPU_FP32"], ref, rtol=1e-5, atol=1e-6, err_msg=name)
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(r["IPU_FP16"], ref, rtol=1e-2, atol=1e-2 * scale, err_msg=name)


# Training around data_norm (Paddle 2.6.2 builds it): fc -> data_norm -> fc
# -> cross entropy with SGD, data_norm's statistics frozen (trainable
# False), its scale_w and bias trained where enable_scale_and_shift is on;
# three updates through Paddle's IPU API (is_training) against Paddle's CPU
# executor from the same initial state. Training the statistics themselves
# (Paddle's data_norm_grad hands them batch summaries as gradients) is
# refused, naming data_norm.
PADDLE2_DATA_NORM_TRAIN_CHILD = r"""
import json
import numpy as np
import paddle, paddle.static as st
import tiller
tiller.patch_paddle()
paddle.enable_static()
rng = np.random.default_rng(3)
feed = {"x": rng.standard_normal((4, 8)).astype("float32"),
        "y": rng.integers(0, 3, (4, 1)).astype("int64")}
stats = {"batch_size": 1e3, "batch_sum": 0.1, "batch_square": 1e3, "scale_w": 0.5, "bias": 0.1}


def build(freeze, **attrs):
    main, start = st.Program(), st.Program()
    main.random_seed = start.random_seed = 3
    with st.program_guard(main, start), paddle.utils.unique_name.guard():
        x = st.data("x", [4, 8], "float32")
        y = st.data("y", [4, 1], "int64")
        h = st.nn.data_norm(st.nn.fc(x, 6), param_attr=stats, **attrs)
        loss = paddle.mean(paddle.nn.functional.cross_entropy(st.nn.fc(h, 3), y))
        for p in main.all_parameters():
            p.trainable = not (freeze and "batch" in p.name)
        paddle.optimizer.SGD(0.1).minimize(loss)
    return main, start, loss


def train(main, start, loss, ipu):
    names = [v.name for v in main.list_vars() if v.persistable and v.name not in ("feed", "fetch")]
    scope = st.Scope()
    with st.scope_guard(scope):
        exe = st.Executor(paddle.IPUPlace() if ipu else paddle.CPUPlace())
        exe.run(start)
        prog = main
        if ipu:
            strategy = st.IpuStrategy()
            strategy.set_graph_config(is_training=True, micro_batch_size=4)
            prog = st.IpuCompiledProgram(main, scope=scope, ipu_strategy=strategy).compile(
                ["x", "y"], [loss])
        losses = [float(np.asarray(exe.run(prog, feed=feed, fetch_list=[loss])[0]).mean())
                  for _ in range(3)]
        if ipu:
            prog._backend.weights_to_host()
        return {"losses": losses,
                "state": {n: np.array(scope.find_var(n).get_tensor()).tolist() for n in names}}


results = {}
for name, attrs in {"plain": {}, "nhwc": {"data_layout": "NHWC"},
                    "scale_and_shift": {"enable_scale_and_shift": True},
                    "slot_dim": {"slot_dim": 2, "enable_scale_and_shift": True}}.items():
    program = build(True, **attrs)
    results[name] = {"cpu": train(*program, ipu=False), "ipu": train(*program, ipu=True)}
try:
    train(*build(False), ipu=True)
    results["trained_statistics"] = "no error"
except Exception as e:
    results["trained_statistics"] = str(e)
print(json.dumps(results))
"""


def test_training_around_data_norm_follows_paddle_and_trained_statistics_are_refused():
    """Losses rtol 1e-5 and every persistable rtol 1e-4 + atol 1e-5 (the
    bounds of ipu_train_op_test.py); frozen statistics unchanged."""
    proc = subprocess.run([paddle2(), "-c", PADDLE2_DATA_NORM_TRAIN_CHILD],
                          env=child_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    refusal = results.pop("trained_statistics")
    assert "data_norm" in refusal and "batch_size" in refusal and "not supported" in refusal, \
        refusal
    assert set(results) == {"plain", "nhwc", "scale_and_shift", "slot_dim"}
    for name, r in results.items():
        cpu, ipu = r["cpu"], r["ipu"]
        np.testing.assert_allclose(ipu["losses"], cpu["losses"], rtol=1e-5, err_msg=name)
        assert ipu["state"].keys() == cpu["state"].keys(), name
        for var, want in cpu["state"].items():
            np.testing.assert_allclose(ipu["state"][var], want, rtol=1e-4, atol=1e-5,
                                       err_msg=f"{name} {var}")
        for var in ("dn.batch_size", "dn.batch_sum", "dn.batch_square_sum"):
            assert ipu["state"][var] == cpu["state"][var], (name, var)  # frozen
        if name in ("scale_and_shift", "slot_dim"):  # scale_w (0.5 at first) trained
            assert np.abs(np.asarray(cpu["state"]["dn.scale_w"]) - 0.5).max() > 1e-3, name


# The ops of the op list whose cases are programs written directly because no
# Paddle 3.3 API builds them. Paddle 2.6.2 still registers six of them, so a
# Paddle 2 program can hold them through Paddle's own block.append_op
# (LayerHelper), its CPU executor runs them, and they run through the IPU API
# like every other case. The other four were never registered in a CPU
# wheel (identity, detach and checkpointoutput belonged to Paddle's IPU
# builds; one_hot v1 is gone in 2.6): no Paddle program can hold them, and
# ops_test.py checks their written programs against numpy.
WRITTEN_ONLY = {"cross_entropy2", "rank_loss", "top_k", "lookup_table", "flatten2", "expand"}
NEVER_REGISTERED = {"identity", "detach", "checkpointoutput", "one_hot"}
PADDLE2_APPEND_OP_CHILD = r"""
import json, sys, traceback
import numpy as np
sys.path.insert(0, sys.argv[1])
import paddle, paddle.static as st
import tiller
import op_harness
from paddle.base.layer_helper import LayerHelper
tiller.patch_paddle()
paddle.enable_static()
TARGET = set(sys.argv[2].split(","))
XSHAPE = {"flatten2", "cross_entropy2"}
results = {}
for case in op_harness.all_cases():
    if case.reference is None or case.op not in TARGET:
        continue
    r = {}
    try:
        op_type, in_slots, out_slots, attrs = case.legacy
        main, start = st.Program(), st.Program()
        with st.program_guard(main, start):
            feeds = {n: st.data(n, list(a.shape), str(a.dtype)) for n, a in case.inputs.items()}
            params = {n: st.create_parameter(list(a.shape), str(a.dtype), name=n,
                      default_initializer=paddle.nn.initializer.Assign(a))
                      for n, a in (case.params or {}).items()}
            vals = {**feeds, **params}
            helper = LayerHelper(op_type)
            outputs = {slot: [helper.create_variable_for_type_inference(dtype=np.dtype(d).name)]
                       for slot, d, _ in out_slots}
            if op_type in XSHAPE:
                outputs["XShape"] = [helper.create_variable_for_type_inference(dtype="float32")]
            helper.append_op(type=op_type, inputs={s: [vals[n] for n in ns] for s, ns in in_slots.items()},
                             outputs=outputs, attrs=attrs)
            outs = [outputs[slot][0] for slot, _, _ in out_slots]
        scope = st.Scope()
        with st.scope_guard(scope):
            exe = st.Executor(paddle.IPUPlace())
            exe.run(start)
            ref = [np.asarray(v) for v in exe.run(main, feed=dict(case.inputs), fetch_list=outs)]
            r["reference"] = "paddle"
            r.update(ipu_modes(main, scope, exe, dict(case.inputs), outs))
            r["ref"] = [x.tolist() for x in ref]
            r["ref_dtype"] = [str(x.dtype) for x in ref]
            r["tol"] = [case.rtol, case.atol, bool(case.exact)]
    except Exception:
        r["error"] = traceback.format_exc(limit=3)[-900:]
    results[case.id] = r
results["version"] = paddle.__version__
print(json.dumps(results))
"""


def test_ops_paddle_2_holds_only_through_append_op_run_through_paddles_ipu_api():
    """Each case of the six ops (the case's inputs, attributes and outputs;
    flatten2 and cross_entropy2 with the XShape output Paddle's op declares)
    in a Paddle 2.6.2 program built with LayerHelper.append_op, Paddle's CPU
    executor the reference, then IPU_FP32 and IPU_FP16 through the patched
    paddle.static API, at the tolerances of the test above."""
    import op_harness

    ops = WRITTEN_ONLY | NEVER_REGISTERED
    proc = subprocess.run([paddle2(), "-c", PADDLE2_IPU_MODES + PADDLE2_APPEND_OP_CHILD,
                           str(HERE), ",".join(ops)],
                          env=child_env(with_repo=True), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    assert results.pop("version") == "2.6.2"
    expected = {c.id for c in op_harness.all_cases()
                if c.reference is not None and c.op in ops}
    assert set(results) == expected, sorted(set(results) ^ expected)
    ran, failures = set(), []
    for cid, r in results.items():
        op = cid.split("/")[0]
        if op in NEVER_REGISTERED:
            assert "has not been registered" in r.get("error", ""), (cid, r)
            continue
        assert "error" not in r, (cid, r["error"])
        assert r["reference"] == "paddle", (cid, r["reference"])
        assert r["IPU_FP32_tiller"] and r["IPU_FP16_tiller"], cid
        rtol, atol, exact = r["tol"]
        for i, (ref, dtype) in enumerate(zip(r["ref"], r["ref_dtype"])):
            ref = np.asarray(ref, dtype=dtype)
            m32 = _compare(np.asarray(r["IPU_FP32"][i], dtype=dtype), ref, rtol, atol, exact)
            scale = max(1.0, float(np.abs(ref).max())) if ref.size and ref.dtype.kind == "f" \
                else 1.0
            m16 = _compare(np.asarray(r["IPU_FP16"][i], dtype=dtype), ref, 1e-2, 1e-2 * scale,
                           exact)
            failures += [f"{cid} output {i} {mode}: {m}"
                         for mode, m in (("IPU_FP32", m32), ("IPU_FP16", m16)) if m]
        ran.add(op)
    assert not failures, "\n".join(failures)
    assert ran == WRITTEN_ONLY, sorted(ran ^ WRITTEN_ONLY)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
