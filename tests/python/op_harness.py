"""Generic op harness: every Paddle op Tiller translates is checked against
Paddle itself, in both program formats.

A case (see op_cases/) names one Paddle op, its inputs (made by code from a
seeded generator) and how to build it:
  * ``api``: a function (paddle, *input_vars) -> output var(s) using Paddle's
    Python API; used for PIR programs, and for legacy ones unless
  * ``legacy`` is given: (op_type, {slot: [input names]}, [output slots], attrs)
    appended verbatim with LayerHelper, for exact control of the legacy op.
Generation (this file as a script, driven by ``generate_in_subprocess``)
builds each case's static program in one mode, saves it as an inference
model, runs Paddle's executor on the inputs and stores the reference
outputs. It runs in child processes (legacy ones with FLAGS_enable_pir_api=0)
so a case that crashes Paddle itself fails alone. The pytest side (ops_test.py) then runs Tiller on
every saved model and compares.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pkgutil
import sys
import traceback
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
CASE_TIMEOUT_S = 60  # building and running one tiny case takes well under a second


@dataclasses.dataclass
class Case:
    op: str                       # the Paddle op under test (legacy spelling)
    name: str                     # short case id, unique per op
    inputs: dict                  # input name -> np.ndarray
    api: Callable | None = None
    legacy: tuple | None = None   # (type, {slot: [names]}, [out slots], attrs)
    formats: tuple = ("pir", "legacy")
    exact: bool = False           # integer/bool/shape results: bit-exact
    rtol: float = 1e-5
    atol: float = 1e-6
    params: dict | None = None    # persistable inputs: name -> array (saved as parameters)
    # For ops Paddle 3.3 can no longer emit: a numpy reference (inputs and
    # params as keyword arrays -> list of outputs). The legacy program is then
    # written directly (legacy_writer.py) from `legacy`, whose output slots
    # are (slot, dtype, shape) triples; the case is legacy-only.
    reference: Callable | None = None
    # A half-precision variant (half_variant): also run by ops_test.py with
    # Tiller's bfloat16 and float16 precision.
    half: bool = False
    # False: no half variant for this case of a HALF_OPS op, because its
    # translation has no product to multiply in half (einsum of one operand:
    # sums and transposes only) or chains two (einsum of three operands: the
    # first product is rounded to half again before the second, beyond the
    # tolerance of one rounding). Its float32 form is checked as any case.
    has_half_variant: bool = True

    @property
    def id(self) -> str:
        return f"{self.op}/{self.name}"


def exact_case(op, name, inputs, api, legacy, **kw) -> Case:
    """A case whose results must match bit for bit (data movement, integers)."""
    kw.setdefault("exact", True)
    return Case(op, name, inputs, api=api, legacy=legacy, **kw)


def written_case(op, name, inputs, legacy, reference, **kw) -> Case:
    """A legacy-only case written directly, checked exactly against `reference`."""
    return Case(op, name, inputs, legacy=legacy, reference=reference, formats=("legacy",),
                exact=True, **kw)


# The Paddle ops whose translation multiplies in half precision under
# Tiller's bfloat16 / float16 precision (the "bfloat16 GEMM" rows of `tiller
# ops`; ops_test.py checks this set against that column).
HALF_OPS = frozenset({"addmm", "bmm", "conv2d", "depthwise_conv2d", "einsum", "matmul", "matmul_v2",
                      "mul", "mv"})


def to_bfloat16_grid(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even). They are
    float16 values too in the range the cases use (8 significant bits; below
    2^-17 float16 keeps fewer, an error under 3e-8)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).reshape(a.shape)


def half_variant(case: Case) -> Case:
    """The case with every float32 input and parameter on the bfloat16 grid:
    the "float32 upcast" of half operands. Paddle's float32 result on them is
    the reference a half-precision run must reproduce."""
    def grid(arrays):
        if arrays is None:
            return None
        return {k: to_bfloat16_grid(v) if v.dtype == np.float32 else v for k, v in arrays.items()}

    return dataclasses.replace(case, name=case.name + "@half", inputs=grid(case.inputs),
                               params=grid(case.params), exact=False, half=True)


def all_cases() -> list[Case]:
    """Every case of every module in op_cases/, in a stable order, then the
    half-precision variants of the float cases of HALF_OPS."""
    sys.path.insert(0, str(HERE))
    cases = []
    pkg = importlib.import_module("op_cases")
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"op_cases.{info.name}")
        cases.extend(mod.CASES)
    cases += [half_variant(c) for c in cases
              if c.op in HALF_OPS and c.has_half_variant
              and all(v.dtype == np.float32 for v in c.inputs.values())]
    ids = [c.id for c in cases]
    dup = {i for i in ids if ids.count(i) > 1}
    assert not dup, f"duplicate case ids: {sorted(dup)}"
    return cases


def case_dir(root: Path, case: Case, fmt: str) -> Path:
    return root / fmt / case.id.replace("/", "__")


def _build_legacy(paddle, case: Case, feeds: dict):
    from paddle.base.layer_helper import LayerHelper

    op_type, in_slots, out_slots, attrs = case.legacy
    helper = LayerHelper(op_type)
    inputs = {slot: [feeds[n] for n in names] for slot, names in in_slots.items()}
    first = next(iter(feeds.values()))
    outputs = {}
    for spec in out_slots:
        # "Out", or (slot, dtype) for another dtype, or (slot, dtype, n) for a
        # slot holding n variables (split, unstack, meshgrid).
        slot, dtype, count = (spec, first.dtype, 1) if not isinstance(spec, tuple) else \
            (spec + (1,) if len(spec) == 2 else spec)
        outputs[slot] = [helper.create_variable_for_type_inference(dtype=dtype or first.dtype)
                         for _ in range(count)]
    helper.append_op(type=op_type, inputs=inputs, outputs=outputs, attrs=attrs)
    return [v for spec in out_slots for v in outputs[spec if not isinstance(spec, tuple) else spec[0]]]


def generate_written_case(case: Case, out: Path) -> None:
    import legacy_writer

    op_type, in_slots, out_slots, attrs = case.legacy
    outputs = {slot: ([f"{slot.lower()}_out"], dtype, shape) for slot, dtype, shape in out_slots}
    legacy_writer.write_program(out, op_type, case.inputs, case.params or {}, in_slots, outputs,
                                attrs)
    refs = case.reference(**case.inputs, **(case.params or {}))
    np.savez(out / "inputs.npz", **case.inputs)
    np.savez(out / "outputs.npz", *[np.asarray(r) for r in refs])


def generate_case(paddle, case: Case, fmt: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if case.reference is not None:
        generate_written_case(case, out)
        return
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        feeds = {}
        for name, arr in case.inputs.items():
            feeds[name] = paddle.static.data(name, list(arr.shape), str(arr.dtype))
        for name, arr in (case.params or {}).items():
            feeds[name] = paddle.static.create_parameter(
                list(arr.shape), str(arr.dtype), name=name,
                default_initializer=paddle.nn.initializer.Assign(arr))
        if fmt == "legacy" and case.legacy is not None:
            outs = _build_legacy(paddle, case, feeds)
        else:
            outs = case.api(paddle, *feeds.values())
        if not isinstance(outs, (list, tuple)):
            outs = [outs]
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    feed_vars = [feeds[n] for n in case.inputs]
    paddle.static.save_inference_model(str(out / "model"), feed_vars, list(outs), exe, program=main)
    results = exe.run(main, feed=dict(case.inputs), fetch_list=list(outs))
    np.savez(out / "inputs.npz", **case.inputs)
    np.savez(out / "outputs.npz", *[np.asarray(r) for r in results])


def generate(fmt: str, root: Path, skip: set | None = None) -> None:
    """Builds every case of one format, appending one JSON line per case to
    root/fmt/status.jsonl: {"id", "state": "started" | "done", "error"}. A
    case that crashes Paddle itself leaves a "started" line with no "done"."""
    import paddle

    from models import _legacy_compat

    if fmt == "legacy":
        _legacy_compat.install()
    import faulthandler

    paddle.enable_static()
    (root / fmt).mkdir(parents=True, exist_ok=True)
    with open(root / fmt / "status.jsonl", "a") as log:
        for case in all_cases():
            if fmt not in case.formats or (skip and case.id in skip):
                continue
            log.write(json.dumps({"id": case.id, "state": "started"}) + "\n")
            log.flush()
            # Paddle can hang inside C++ on some programs; a watchdog thread
            # ends the process, and the parent records this case as failed.
            faulthandler.dump_traceback_later(CASE_TIMEOUT_S, exit=True)
            try:
                generate_case(paddle, case, fmt, case_dir(root, case, fmt))
                error = ""
            except Exception:  # recorded and reported by the test of that case
                error = traceback.format_exc(limit=3)
            faulthandler.cancel_dump_traceback_later()
            log.write(json.dumps({"id": case.id, "state": "done", "error": error}) + "\n")
            log.flush()
    paddle.disable_static()


def generate_in_subprocess(fmt: str, root: Path) -> dict:
    """Runs `generate` in child processes (legacy ones with
    FLAGS_enable_pir_api=0) and returns {case id: error or ""}. When Paddle
    crashes on a case, that case is recorded as the error and a new child
    carries on with the cases after it."""
    import subprocess

    env = dict(os.environ, FLAGS_enable_pir_api="1" if fmt == "pir" else "0")
    status: dict = {}
    for _ in range(50):  # bounded: at most 50 crashing cases
        res = subprocess.run([sys.executable, str(Path(__file__)), fmt, str(root)], env=env,
                             capture_output=True, text=True)
        started = None
        status = {}
        for line in (root / fmt / "status.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if rec["state"] == "started":
                started = rec["id"]
            else:
                status[rec["id"]] = rec["error"]
                started = None
        if res.returncode == 0:
            return status
        crashed = started or "<generator>"
        with open(root / fmt / "status.jsonl", "a") as log:
            log.write(json.dumps({"id": crashed, "state": "done", "error":
                                  f"Paddle crashed or hung (> {CASE_TIMEOUT_S} s) building this "
                                  f"case (exit {res.returncode}):\n"
                                  f"{res.stderr[-2000:]}"}) + "\n")
        if started is None:
            status[crashed] = res.stderr[-2000:]
            return status
    return status


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parents[1]))
    out_root = Path(sys.argv[2])
    done = set()
    log_path = out_root / sys.argv[1] / "status.jsonl"
    if log_path.exists():  # a restart after a crash: skip what is recorded
        done = {json.loads(l)["id"] for l in log_path.read_text().splitlines()
                if json.loads(l)["state"] == "done"}
    generate(sys.argv[1], out_root, skip=done)
