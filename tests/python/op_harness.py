"""Generic op harness: every Paddle op Tiller translates is checked against
Paddle itself, in both program formats.

A case (see op_cases/) names one Paddle op, its inputs (made by code from a
seeded generator) and how to build it:
  * ``api``: a function (paddle, *input_vars) -> output var(s) using Paddle's
    Python API; used for PIR programs, and for legacy ones unless
  * ``legacy`` is given: (op_type, {slot: [input names]}, [output slots], attrs)
    appended verbatim with LayerHelper, for exact control of the legacy op.
Generation (this file as a script, or ``generate``) builds each case's
static program in one mode, saves it as an inference model, runs Paddle's
executor on the inputs and stores the reference outputs. PIR generation runs
in the test process; legacy generation runs in a subprocess started with
FLAGS_enable_pir_api=0. The pytest side (ops_test.py) then runs Tiller on
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

    @property
    def id(self) -> str:
        return f"{self.op}/{self.name}"


def all_cases() -> list[Case]:
    """Every case of every module in op_cases/, in a stable order."""
    sys.path.insert(0, str(HERE))
    cases = []
    pkg = importlib.import_module("op_cases")
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"op_cases.{info.name}")
        cases.extend(mod.CASES)
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
    for slot in out_slots:
        dtype = first.dtype
        if isinstance(slot, tuple):  # (slot, dtype) for outputs of another dtype
            slot, dtype = slot
        outputs[slot] = [helper.create_variable_for_type_inference(dtype=dtype)]
    helper.append_op(type=op_type, inputs=inputs, outputs=outputs, attrs=attrs)
    return [outputs[s if not isinstance(s, tuple) else s[0]][0] for s in out_slots]


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


def generate(fmt: str, root: Path, only: set | None = None) -> dict:
    """Builds every case for one format; returns {case id: error or ""}."""
    import paddle

    from models import _legacy_compat

    if fmt == "legacy":
        _legacy_compat.install()
    paddle.enable_static()
    status = {}
    for case in all_cases():
        if fmt not in case.formats or (only and case.id not in only):
            continue
        try:
            generate_case(paddle, case, fmt, case_dir(root, case, fmt))
            status[case.id] = ""
        except Exception:  # recorded and reported by the test of that case
            status[case.id] = traceback.format_exc(limit=3)
    paddle.disable_static()
    (root / fmt).mkdir(parents=True, exist_ok=True)
    (root / fmt / "status.json").write_text(json.dumps(status, indent=1))
    return status


def generate_legacy_in_subprocess(root: Path) -> dict:
    import subprocess

    env = dict(os.environ, FLAGS_enable_pir_api="0")
    subprocess.run([sys.executable, str(Path(__file__)), "legacy", str(root)], env=env, check=True,
                   capture_output=True, text=True)
    return json.loads((root / "legacy" / "status.json").read_text())


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parents[1]))
    generate(sys.argv[1], Path(sys.argv[2]))
