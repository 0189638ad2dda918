"""Runs every test suite `make test` covers and ends with one summary line.

Suites: the C++ tests (ctest, Release build), the Python tests (pytest
against Paddle), the C++ tests of the portable build (x86-64-v3, the
wheel's level) under each TILLER_MAX_ISA the issue names (avx2, avx512,
native: on a CPU without AVX-512 the last two run as avx2) and its kernel
tests under QEMU's Haswell (AVX2 only), the C++ tests
again under AddressSanitizer + UBSan, those
of code that threads share under ThreadSanitizer, and each fuzz target
(clang's libFuzzer with ASan + UBSan, build-fuzz) for TILLER_FUZZ_SECONDS
(60) on its seed corpus, two at a time, from libFuzzer seed 1 (the seed
corpora are made the same way each time, so a run repeats; the campaign of
`make fuzz FUZZ_RUNS=...` explores with new seeds).
Each suite's own output is shown, then its counts and wall time; the last
line counts all of them:
    total: N passed, N failed, N skipped
Exit status is non-zero when any test failed or any suite did not run.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The C++ tests run under QEMU's Haswell (about 30 s there).
QEMU_TESTS = ("CpuKernelSoftmax.*:CpuKernelNorm.*:CpuKernelReduce.*:CpuKernelUnary.*:"
              "CpuKernelShape.*:CpuKernelQuantize.*:CpuKernelLinearBlockSparse.*:CpuIsa.*")


def junit_counts(path: Path) -> tuple[int, int, int]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    total = failed = skipped = 0
    for s in suites:
        total += int(s.get("tests", 0))
        failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped += int(s.get("skipped", 0) or s.get("disabled", 0) or 0)
    return total - failed - skipped, failed, skipped


def run_suite(name: str, cmd: list[str], junit: Path, cwd: Path, env=None) -> tuple[int, int, int]:
    print(f"\n=== {name} ===", flush=True)
    junit.unlink(missing_ok=True)
    start = time.monotonic()
    rc = subprocess.call(cmd, cwd=cwd, env=env)
    took = f"{time.monotonic() - start:.0f} s"
    if not junit.exists():
        print(f"{name}: no results (exit code {rc}, {took})", flush=True)
        return 0, 1, 0
    passed, failed, skipped = junit_counts(junit)
    if rc != 0 and failed == 0:
        failed = 1  # the runner failed outside any test (e.g. a crash in collection)
    print(f"{name}: {passed} passed, {failed} failed, {skipped} skipped ({took})", flush=True)
    return passed, failed, skipped


def main() -> int:
    build = Path(os.environ.get("TILLER_BUILD_DIR", REPO / "build"))
    portable = Path(os.environ.get("TILLER_PORTABLE_DIR", REPO / "build-portable"))
    asan = Path(os.environ.get("TILLER_ASAN_DIR", REPO / "build-asan"))
    tsan = Path(os.environ.get("TILLER_TSAN_DIR", REPO / "build-tsan"))
    fuzz = Path(os.environ.get("TILLER_FUZZ_DIR", REPO / "build-fuzz"))
    fuzz_seconds = os.environ.get("TILLER_FUZZ_SECONDS", "60")
    jobs = str(os.cpu_count() or 2)
    results = [
        run_suite("C++ tests", ["ctest", "--output-on-failure", "-j", jobs, "--output-junit",
                                str(build / "ctest.xml")], build / "ctest.xml", build),
        run_suite("Python tests", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=15",
                                   f"--junitxml={build / 'pytest.xml'}", "tests/python"],
                  build / "pytest.xml", REPO, dict(os.environ, TILLER_BUILD_DIR=str(build))),
        *[run_suite(f"C++ tests, portable build (x86-64-v3), TILLER_MAX_ISA={cap}",
                    ["ctest", "--output-on-failure", "-j", jobs, "--output-junit",
                     str(portable / f"ctest-{cap}.xml")], portable / f"ctest-{cap}.xml", portable,
                    dict(os.environ, TILLER_MAX_ISA=cap))
          for cap in ("avx2", "avx512", "native")],
        # The same test binary on an emulated AVX2-only CPU: nothing outside
        # the per-ISA copies may use AVX-512 (a SIGILL fails the suite). The
        # kernels written on vectors and the ISA report, one thread (QEMU
        # emulates each instruction); oneDNN at AVX, as packaging_test
        # explains (QEMU 7.2 mis-executes its AVX2 JIT tanh).
        run_suite("C++ kernel tests, portable build, under qemu-x86_64 -cpu Haswell-noTSX",
                  ["qemu-x86_64", "-cpu", "Haswell-noTSX", str(portable / "bin" / "tiller_tests"),
                   "--gtest_filter=" + QEMU_TESTS, f"--gtest_output=xml:{portable / 'qemu.xml'}"],
                  portable / "qemu.xml", portable,
                  dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX", OMP_NUM_THREADS="1")),
        run_suite("C++ tests under AddressSanitizer/UBSan",
                  ["ctest", "--output-on-failure", "-j", jobs, "--output-junit", str(asan / "ctest.xml")],
                  asan / "ctest.xml", asan, dict(os.environ, ASAN_OPTIONS="detect_leaks=1")),
        run_suite("C++ tests of shared-thread code under ThreadSanitizer",
                  ["ctest", "--output-on-failure", "-j", jobs, "--output-junit", str(tsan / "ctest.xml")],
                  tsan / "ctest.xml", tsan),
        run_suite(f"Fuzz targets, {fuzz_seconds} s each",
                  [sys.executable, str(REPO / "scripts" / "fuzz.py"), "--build", str(fuzz),
                   "--seconds", fuzz_seconds, "--parallel", "2", "--seed", "1", "--junit",
                   str(fuzz / "fuzz.xml")], fuzz / "fuzz.xml", REPO),
    ]
    passed, failed, skipped = (sum(r[i] for r in results) for i in range(3))
    print(f"\ntotal: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
