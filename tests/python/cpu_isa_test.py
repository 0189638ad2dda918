"""The instruction-set report and its cap (core/cpu_isa.h): `tiller info`
without a model and tiller.about() say what this CPU offers, what the build
needs and what was chosen; TILLER_MAX_ISA caps it, and a value this build
cannot honour ends the work with a message instead of being ignored."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
TILLER = Path(os.environ.get("TILLER_BUILD_DIR", REPO / "build")) / "bin" / "tiller"
LEVELS = ["x86-64", "x86-64-v2", "avx2", "avx512", "amx"]


def info(cap=None):
    env = {k: v for k, v in os.environ.items() if k != "TILLER_MAX_ISA"}
    if cap is not None:
        env["TILLER_MAX_ISA"] = cap
    return subprocess.run([str(TILLER), "info"], capture_output=True, text=True, timeout=60, env=env)


def report():
    from tiller._tiller import cpu_isa_info

    return cpu_isa_info()


def test_info_and_about_report_the_cpu_the_build_and_the_choice():
    r = info()
    assert r.returncode == 0, r.stderr
    i = report()
    assert i["error"] == "" and i["cap"] == ""
    assert i["detected"] in LEVELS and i["compiled"] in LEVELS
    assert LEVELS.index(i["detected"]) >= LEVELS.index(i["compiled"])
    assert i["chosen"] == i["detected"]
    assert f"built for: {i['compiled']}" in r.stdout
    assert f"chosen: {i['detected']}: this CPU's highest level" in r.stdout
    # oneDNN's choice is recorded when the library loads (its probes).
    assert "oneDNN" in i["libraries"] and f"oneDNN: {i['libraries']['oneDNN']}" in r.stdout
    # The kernels' copy: the AVX-512 one only where the CPU has AVX-512 and
    # the build's own level is below it (kernels/isa_copy.h).
    above = LEVELS.index(i["detected"]) >= LEVELS.index("avx512") > LEVELS.index(i["compiled"])
    want = "avx512 (the x86-64-v4 copies)" if above else f"{i['compiled']} (the build's own)"
    assert i["libraries"]["Tiller kernels"] == want, i
    assert f"Tiller kernels: {want}" in r.stdout
    import tiller

    text = tiller.about()
    assert text.splitlines()[0] == f"tiller {tiller.__version__}"
    assert f"chosen: {i['why']}" in text and "TILLER_MAX_ISA: unset" in text


def test_cpu_flags_agree_with_proc_cpuinfo():
    """The features cpuid gave against the kernel's own list."""
    from cpu_info import cpu_flags

    flags = cpu_flags()
    if not flags:
        pytest.skip("no /proc/cpuinfo")
    i = report()
    proc_name = {"sse4.1": "sse4_1", "sse4.2": "sse4_2", "lzcnt": "abm", "sse3": "pni",
                 "amx_tile": "amx_tile", "amx_bf16": "amx_bf16", "amx_int8": "amx_int8"}
    for f in ["sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "avx", "avx2", "fma", "f16c", "bmi1",
              "bmi2", "movbe", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd",
              "avx512_vnni", "avx512_bf16"]:
        assert (f in i["features"]) == (proc_name.get(f, f) in flags), f


@pytest.mark.parametrize("cap", ["avx1024", "AVX2"])
def test_a_cap_that_is_not_a_level_ends_the_work_naming_the_choices(cap):
    r = info(cap)
    assert r.returncode == 2
    assert f"TILLER_MAX_ISA='{cap}' is not a level" in r.stderr and "x86-64-v4" in r.stderr


def test_a_cap_below_the_build_is_refused_where_work_starts(zoo):
    i = report()
    below = LEVELS.index(i["compiled"]) - 1
    if below < 0:
        pytest.skip("a baseline build runs at every level")
    cap = LEVELS[below]
    r = info(cap)
    assert r.returncode == 2 and f"TILLER_MAX_ISA={cap} is below {i['compiled']}" in r.stderr
    # A predictor is refused when it makes its CPU device, with the same words.
    m = zoo.export("bert-tiny", "pir")
    code = ("import tiller.inference as infer, sys\n"
            f"c = infer.Config({str(m.model_file)!r}, {str(m.params_file)!r})\n"
            "try:\n    infer.create_predictor(c)\nexcept Exception as e:\n"
            "    print(type(e).__name__, e); sys.exit(3)\n")
    env = {**os.environ, "TILLER_MAX_ISA": cap, "PYTHONPATH": str(REPO / "python")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=env)
    assert p.returncode == 3, p.stdout + p.stderr
    assert f"TILLER_MAX_ISA={cap} is below {i['compiled']}" in p.stdout


def test_caps_this_build_honours_give_the_uncapped_results(zoo, tmp_path):
    """Each level from the build's up: `tiller run` on bert-tiny gives the
    uncapped outputs (the build's own kernels run at its level whatever the
    cap; oneDNN runs at min(cap, CPU), which here changes nothing above the
    CPU's level). Tolerance 0: the same kernels run."""
    from models import export

    i = report()
    m = zoo.export("bert-tiny", "pir")
    inputs = export.make_inputs("bert-tiny", batch=2, seq_len=12, seed=3)
    args = []
    for name, arr in inputs.items():
        np.save(tmp_path / f"{name}.npy", arr)
        args += ["--input", f"{name}={tmp_path / (name + '.npy')}"]

    def run(cap):
        out = tmp_path / (cap or "uncapped")
        env = {k: v for k, v in os.environ.items() if k != "TILLER_MAX_ISA"}
        if cap:
            env["TILLER_MAX_ISA"] = cap
        p = subprocess.run([str(TILLER), "run", str(m.model_file), *args, "--output-dir", str(out)],
                           capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 0, p.stderr
        return {f.stem: np.load(f) for f in out.glob("*.npy")}

    ref = run(None)
    assert ref
    for cap in LEVELS[LEVELS.index(i["compiled"]):]:
        got = run(cap)
        assert got.keys() == ref.keys()
        for k in ref:
            np.testing.assert_array_equal(got[k], ref[k], err_msg=f"TILLER_MAX_ISA={cap}: {k}")


def test_a_cpu_below_the_build_gets_a_message_not_an_illegal_instruction():
    """Under qemu's Sandy Bridge (AVX, no AVX2 / FMA): the library's first
    static initializer (core/cpu_guard.cc, compiled for the baseline) names
    what the CPU lacks and exits 2, for the CLI and for `import tiller`,
    instead of dying on the first AVX2 instruction."""
    import shutil

    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        pytest.skip("qemu-x86_64 missing (scripts/setup.sh installs qemu-user)")
    i = report()
    if LEVELS.index(i["compiled"]) < LEVELS.index("avx2"):
        pytest.skip("this build runs on a Sandy Bridge")
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    for cmd in ([str(TILLER), "info"], [sys.executable, "-c", "import tiller"]):
        p = subprocess.run([qemu, "-cpu", "SandyBridge", *cmd], capture_output=True, text=True,
                           timeout=120, env=env)
        assert p.returncode == 2, (cmd, p.returncode, p.stderr[-2000:])
        assert f"this build's code is compiled for {i['compiled']}" in p.stderr, p.stderr
        assert "it lacks" in p.stderr and " avx2" in p.stderr and " fma" in p.stderr, p.stderr
    # The same binaries on a Haswell (AVX2, FMA, F16C, BMI) start normally.
    p = subprocess.run([qemu, "-cpu", "Haswell-noTSX", str(TILLER), "info"], capture_output=True,
                       text=True, timeout=120, env=env)
    if i["compiled"] == "avx2":
        assert p.returncode == 0 and "chosen: avx2" in p.stdout, p.stderr[-2000:]
