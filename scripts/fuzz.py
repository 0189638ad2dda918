"""Runs Tiller's fuzz targets (fuzz/*_fuzzer.cc, built by `make build-fuzz`
with clang's libFuzzer, ASan and UBSan), each for --seconds, and prints the
executions each ran and what it found.

Seed corpora are made here, not committed: small models Paddle exports in
both program forms (a CNN beside an embedding + layer_norm + softmax
block; save_inference_model under FLAGS_enable_pir_api 0 and 1), their
parameter files, a training checkpoint (paddle.static.save: .pdparams /
.pdopt), .npy files of every dtype the CLI reads, and IPU config files.
fuzz/*.dict hold each format's tokens. A crash, leak, sanitizer report, an
input that runs longer than 5 s or allocates past the limit is kept under
BUILD/fuzz-findings/ and fails the run (and each becomes a regression test
of the reader it broke).

    .venv/bin/python scripts/fuzz.py [--build build-fuzz] [--seconds 60] [--runs N]
                                     [--targets a,b] [--parallel 2] [--seed N] [--junit out.xml]

--runs N ends each target after N executions instead (--seconds then only
bounds it): the benchmark-style run is `--runs 1000000 --seconds 14400`.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ["program_desc", "pir_json", "params", "pickle", "npy", "ipu_config", "model"]

EXPORT = textwrap.dedent("""
    import sys, numpy as np, paddle
    paddle.enable_static()
    out = sys.argv[1]
    paddle.seed(0)
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        img = paddle.static.data("img", [-1, 3, 16, 16], "float32")
        ids = paddle.static.data("ids", [-1, 8], "int64")
        x = paddle.nn.Conv2D(3, 8, 3, stride=2, padding=1)(img)
        x = paddle.nn.BatchNorm2D(8)(x)
        x = paddle.nn.functional.relu(x)
        x = paddle.nn.MaxPool2D(2)(x)
        x = paddle.flatten(x, 1)
        e = paddle.nn.Embedding(50, 16)(ids)
        e = paddle.nn.LayerNorm(16)(e)
        # (Paddle 3.3.1 cannot build matmul into a legacy program.)
        e = paddle.mean(e * paddle.nn.functional.softmax(e, -1), axis=1)
        y = paddle.nn.Linear(112 + 16, 10)(paddle.concat([x[:, :112], e], 1))
        out_t = paddle.nn.functional.softmax(y)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    paddle.static.save_inference_model(out + "/model", [img, ids], [out_t], exe, program=main)
    # A training checkpoint of the same layers (Adam: .pdopt holds moments).
    with paddle.static.program_guard(main, startup):
        label = paddle.static.data("label", [-1, 1], "int64")
        loss = paddle.nn.functional.cross_entropy(y, label)
        paddle.optimizer.Adam(1e-3).minimize(loss)
    exe.run(startup)
    paddle.static.save(main, out + "/ckpt")
""")


def make_corpora(corpus: Path) -> Path:
    """Seed inputs per target under corpus/<target>; returns the parameter
    file the model target loads."""
    models = corpus / "_models"
    py = sys.executable
    for form, flag in (("legacy", "0"), ("pir", "1")):
        d = models / form
        if not (d / "ckpt.pdparams").exists():
            d.mkdir(parents=True, exist_ok=True)
            subprocess.run([py, "-c", EXPORT, str(d)], check=True, capture_output=True,
                           env={**os.environ, "FLAGS_enable_pir_api": flag}, timeout=600)
    seeds = {t: corpus / t for t in TARGETS}
    for d in seeds.values():
        d.mkdir(parents=True, exist_ok=True)
    legacy, pir = models / "legacy", models / "pir"
    shutil.copy(legacy / "model.pdmodel", seeds["program_desc"] / "model.pdmodel")
    shutil.copy(pir / "model.json", seeds["pir_json"] / "model.json")
    shutil.copy(legacy / "model.pdmodel", seeds["model"] / "model.pdmodel")
    shutil.copy(pir / "model.json", seeds["model"] / "model.json")
    params = pir / "model.pdiparams"
    data = params.read_bytes()
    # params_fuzzer: the first byte is the record count - 1; the model's 9
    # parameters, and a 3-record prefix of the file.
    for n in (1, 3, 8):
        (seeds["params"] / f"records{n}").write_bytes(bytes([n - 1]) + data)
    for form in ("legacy", "pir"):
        for suffix in ("pdparams", "pdopt"):
            shutil.copy(models / form / f"ckpt.{suffix}", seeds["pickle"] / f"{form}.{suffix}")
    for dtype in ("float32", "float64", "int64", "int32", "uint8", "bool", "float16"):
        arr = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
        np.save(seeds["npy"] / f"{dtype}.npy", arr)
    np.save(seeds["npy"] / "scalar.npy", np.float32(1.5))
    (seeds["ipu_config"] / "full").write_text(
        "ipu_device_num,2\nipu_micro_batch_size,4\nipu_enable_pipelining,true\n"
        "ipu_batches_per_step,2\nipu_enable_fp16,false\nipu_replica_num,1\n"
        "ipu_available_memory_proportion,0.6\nipu_enable_half_partial,false\n")
    (seeds["ipu_config"] / "short").write_text("ipu_device_num,1\n")
    return params


def run_target(build: Path, name: str, corpus: Path, seconds: int, runs: int, seed: int,
               findings: Path, env):
    binary = build / "bin" / f"{name}_fuzzer"
    work = build / "fuzz-corpus" / name  # grows with what libFuzzer finds
    work.mkdir(parents=True, exist_ok=True)
    for f in corpus.iterdir():
        if f.is_file() and not (work / f.name).exists():
            shutil.copy(f, work / f.name)
    findings.mkdir(parents=True, exist_ok=True)
    cmd = [str(binary), str(work), f"-max_total_time={seconds}", "-timeout=5",
           "-rss_limit_mb=4096", "-malloc_limit_mb=2048", "-print_final_stats=1",
           f"-artifact_prefix={findings}/{name}-"]
    if runs:
        cmd.append(f"-runs={runs}")
    if seed:
        cmd.append(f"-seed={seed}")
    dictionary = ROOT / "fuzz" / f"{name}.dict"
    if dictionary.exists():
        cmd.append(f"-dict={dictionary}")
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=seconds * 2 + 300)
    execs = re.search(r"stat::number_of_executed_units:\s*(\d+)", p.stderr)
    return {"rc": p.returncode, "seconds": time.monotonic() - start,
            "execs": int(execs.group(1)) if execs else 0, "log": p.stderr}


def write_junit(path: Path, results: dict) -> None:
    """One test case per target, failed when it found something: the form
    scripts/run_tests.py counts."""
    import xml.etree.ElementTree as ET
    suite = ET.Element("testsuite", name="fuzz", tests=str(len(results)),
                       failures=str(sum(r["rc"] != 0 for r in results.values())))
    for name, r in results.items():
        case = ET.SubElement(suite, "testcase", classname="fuzz", name=f"{name}_fuzzer",
                             time=f"{r['seconds']:.1f}")
        if r["rc"] != 0:
            ET.SubElement(case, "failure", message=f"rc {r['rc']}").text = r["log"][-4000:]
    ET.ElementTree(suite).write(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build-fuzz")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--runs", type=int, default=0, help="executions per target (0: no limit)")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--seed", type=int, default=0,
                    help="libFuzzer's random seed (0: a new one each run); CI fixes it so that "
                         "a run from the same seed corpus repeats")
    ap.add_argument("--parallel", type=int, default=1,
                    help="targets run at once (each is one process on one core)")
    ap.add_argument("--junit", help="also write the results as JUnit XML here")
    args = ap.parse_args()
    build = (ROOT / args.build).resolve()
    corpus = build / "fuzz-seeds"
    params = make_corpora(corpus)
    # UBSan reports end the run (the build sets -fno-sanitize-recover).
    env = {**os.environ, "TILLER_FUZZ_PARAMS": str(params), "OMP_NUM_THREADS": "1",
           "ASAN_OPTIONS": "detect_leaks=1:allocator_may_return_null=1",
           "UBSAN_OPTIONS": "print_stacktrace=1"}
    findings = build / "fuzz-findings"
    failed, results = [], {}
    print(f"{'target':14} {'seconds':>8} {'executions':>12} {'exec/s':>8}  result", flush=True)
    names = args.targets.split(",")
    with ThreadPoolExecutor(max(1, args.parallel)) as pool:
        futures = {pool.submit(run_target, build, name, corpus / name, args.seconds, args.runs,
                               args.seed, findings, env): name for name in names}
        for future in as_completed(futures):
            name, r = futures[future], future.result()
            results[name] = r
            ok = r["rc"] == 0
            print(f"{name:14} {r['seconds']:>8.0f} {r['execs']:>12} "
                  f"{r['execs'] / max(r['seconds'], 1e-9):>8.0f}  "
                  f"{'no crash, hang or leak' if ok else 'FOUND (rc %d)' % r['rc']}", flush=True)
            if not ok:
                failed.append(name)
                print(textwrap.indent(r["log"][-4000:], "    "))
    if args.junit:
        write_junit(Path(args.junit), {n: results[n] for n in names})
    if failed:
        print(f"findings in {findings}: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
