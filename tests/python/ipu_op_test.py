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


# Ops whose cases are programs written directly because Paddle 3.3 has no API
# that builds them, but Paddle 2.6.2's does: its static.nn.data_norm and fc
# (mul + elementwise_add). (Its sparse_embedding writes lookup_table over a
# parameter-server table that Paddle's own CPU executor cannot run.)
PADDLE2_CHILD = r"""
import json, sys
import numpy as np
import paddle, paddle.static as st
import tiller
tiller.patch_paddle()
paddle.enable_static()
rng = np.random.default_rng(5)
x = rng.standard_normal((4, 8)).astype("float32")
ids = rng.integers(0, 10, (4, 1)).astype("int64")
inputs = {"x": x, "ids": ids}
builders = {  # op: (its input, the Paddle 2 call)
    "data_norm": ("x", lambda v: st.nn.data_norm(v)),
    "mul": ("x", lambda v: st.nn.fc(v, 3)),
}
results = {}
for name, (feed_name, build) in builders.items():
    main, start = st.Program(), st.Program()
    main.random_seed = start.random_seed = 11
    value = inputs[feed_name]
    with st.program_guard(main, start):
        out = build(st.data(feed_name, list(value.shape), str(value.dtype)))
    types = [op.type for op in main.global_block().ops]
    scope = st.Scope()
    with st.scope_guard(scope):
        exe = st.Executor(paddle.IPUPlace())
        exe.run(start)
        feed = {feed_name: value}
        ref, = exe.run(main, feed=feed, fetch_list=[out])
        got = ipu_modes(main, scope, exe, feed, [out])
        for mode in ("IPU_FP32", "IPU_FP16"):
            got[mode] = got[mode][0]
    results[name] = {"types": types, "ref": np.asarray(ref).tolist(), **got}
results["version"] = paddle.__version__
print(json.dumps(results))
"""


def test_ops_only_paddle_2_builds_run_through_paddles_ipu_api():
    """data_norm and mul have no Paddle 3.3 builder: built by Paddle 2.6.2's
    API (.venv-paddle2) and run as the op test above runs its cases, at the
    same tolerances (fp32 1e-5 relative: a K=8 product sum, or a
    normalization; fp16 as above)."""
    proc = subprocess.run([paddle2(), "-c", PADDLE2_IPU_MODES + PADDLE2_CHILD],
                          env=child_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    assert results.pop("version") == "2.6.2"
    assert set(results) == {"data_norm", "mul"}, list(results)
    for op, r in results.items():
        assert op in r["types"], (op, r["types"])
        ref = np.asarray(r["ref"], np.float32)
        assert r["IPU_FP32_tiller"] and r["IPU_FP16_tiller"], op
        np.testing.assert_allclose(r["IPU_FP32"], ref, rtol=1e-5, atol=1e-6, err_msg=op)
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(r["IPU_FP16"], ref, rtol=1e-2, atol=1e-2 * scale, err_msg=op)


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
