"""Sets each integer and float attribute of each op of small exported models
to boundary values and runs `tiller bench` on every result: issue 14's
attribute audit, repeatable.

Models (exported here by Paddle, in both program forms): convolutions,
transposed and depthwise convolutions, poolings (with index), the norms;
tile, expand, reshape, flatten, squeeze, transpose, concat, split, stack,
slice, strided_slice, flip, gather, cumsum, arg/sort/topk, one_hot, the
reductions, p_norm, arange, meshgrid, embedding; the five interpolations and
pad3d; yolo_box. Each int attribute (and each of the first six elements of
an int list, including the constant lists PIR passes as full_int_array
values) becomes 0, -1, -5, 3, 2^31 - 1, -2^31 and 10^12 in turn; each list
also becomes empty; each float 0, -1 and 1e30.

A mutation must end in a run (exit 0) or an error (exit 1 or 2 with a
message): a signal, a run past 20 s, or a peak RSS past the memory cap
(TILLER_MEMORY_CAP=2GB, with RLIMIT_AS 6 GiB as a backstop) is a finding,
printed with the op, attribute and value. The exit status is 1 when any
was found.

    .venv/bin/python scripts/attribute_sweep.py [--build build] [--forms pir,legacy]
        [--models conv,shapes,resize,yolo] [--jobs N]
"""
import argparse
import concurrent.futures as cf
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INTS = [0, -1, -5, 3, 2**31 - 1, -2**31, 10**12]
FLOATS = [0.0, -1.0, 1e30]
CAP_GB = 2
SKIP_ATTRS = {"place", "dtype", "name", "stop_gradient", "persistable", "col", "is_persistable",
              "use_mkldnn", "use_cudnn", "use_quantizer", "is_test"}

EXPORT = textwrap.dedent("""
    import os, sys, paddle
    import paddle.nn.functional as F
    paddle.enable_static()
    out, legacy = sys.argv[1], os.environ["FLAGS_enable_pir_api"] == "0"

    def save(name, build):
        main, start = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, start):
            feeds, fetches = build()
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(start)
        paddle.static.save_inference_model(f"{out}/{name}", feeds, fetches, exe, program=main)

    def conv():
        x = paddle.static.data("x", [-1, 4, 12, 12], "float32")
        a = paddle.nn.Conv2D(4, 8, 3, stride=2, padding=1, groups=2)(x)
        b = paddle.nn.Conv2DTranspose(8, 4, 3, stride=2, padding=1, output_padding=1, groups=2)(a)
        d, _ = F.max_pool2d(b, 3, 2, 1, return_mask=True)
        return [x], [F.max_pool2d(b, 2, 2), d, F.avg_pool2d(b, 3, 1, 1, exclusive=False),
                     F.adaptive_avg_pool2d(b, 3), paddle.nn.GroupNorm(2, 4)(b),
                     paddle.nn.InstanceNorm2D(4)(b), paddle.nn.BatchNorm2D(4)(b),
                     paddle.nn.LayerNorm([12, 12])(b), paddle.nn.Conv2D(4, 4, 3, padding=1, groups=4)(b)]

    def shapes():
        x = paddle.static.data("x", [-1, 4, 6], "float32")
        ids = paddle.static.data("ids", [-1, 3], "int64")
        made = [lambda: paddle.tile(x, [1, 2, 1]), lambda: paddle.expand(x[:, :1], [-1, 3, 6]),
                lambda: paddle.expand_as(x[:, :1], x), lambda: paddle.reshape(x, [-1, 24]),
                lambda: paddle.flatten(x, 1, 2), lambda: paddle.squeeze(paddle.unsqueeze(x, [1, 3]), [3]),
                lambda: paddle.transpose(x, [0, 2, 1]), lambda: paddle.concat([x, x], 1),
                lambda: paddle.split(x, 2, 1)[1], lambda: paddle.split(x, [1, 3], 1)[0],
                lambda: paddle.stack([x, x], 2), lambda: paddle.unstack(x, 1)[2], lambda: x[:, 1:3, ::2],
                lambda: paddle.strided_slice(x, [1, 2], [0, 5], [4, 0], [2, -2]),
                lambda: paddle.flip(x, [1, 2]), lambda: paddle.gather(x, paddle.to_tensor([0, 2]), axis=1),
                lambda: paddle.cumsum(x, 1), lambda: paddle.argmax(x, 2), lambda: paddle.argsort(x, 1),
                lambda: paddle.topk(x, 2, axis=2)[0], lambda: F.one_hot(ids % 5, 5),
                lambda: F.softmax(x, 1), lambda: F.log_softmax(x, 2), lambda: paddle.sum(x, [1, 2]),
                lambda: paddle.max(x, 1), lambda: paddle.mean(x, -1), lambda: paddle.prod(x, 2),
                lambda: paddle.norm(x, p=3, axis=1), lambda: paddle.arange(0, 10, 3),
                lambda: paddle.meshgrid(paddle.arange(3), paddle.arange(4))[0],
                lambda: paddle.nn.Embedding(10, 4, padding_idx=2)(ids % 10)]
        outs = []
        for make in made:
            try:  # Paddle 3's legacy static mode cannot build some of them
                outs.append(make())
            except Exception:
                if not legacy:
                    raise
        return [x, ids], outs

    def resize():
        x = paddle.static.data("x", [-1, 3, 8, 8], "float32")
        v = paddle.static.data("v", [-1, 3, 4, 4, 4], "float32")
        l = paddle.static.data("l", [-1, 3, 8], "float32")
        return [x, v, l], [F.interpolate(x, size=[5, 7], mode="nearest"),
                           F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
                           F.interpolate(x, size=[6, 6], mode="bicubic"),
                           F.interpolate(v, scale_factor=[2, 1, 2], mode="trilinear"),
                           F.interpolate(l, size=[12], mode="linear", data_format="NCW"),
                           F.pad(x, [1, 2, 0, 3], mode="constant", value=1.0),
                           F.pad(x, [1, 2, 2, 1], mode="reflect"),
                           F.pad(v, [1, 0, 1, 2, 0, 1], mode="replicate")]

    def yolo():
        x = paddle.static.data("x", [-1, 21, 4, 4], "float32")
        size = paddle.static.data("size", [-1, 2], "int32")
        return [x, size], list(paddle.vision.ops.yolo_box(
            x, size, anchors=[10, 13, 16, 30, 33, 23], class_num=2, conf_thresh=0.01,
            downsample_ratio=8))

    for name, build in [("conv", conv), ("shapes", shapes), ("resize", resize), ("yolo", yolo)]:
        save(name, build)
""")


def pir_mutations(path: Path):
    """(description, program text) for each mutation of a PIR program."""
    doc = json.loads(path.read_text())
    ops = doc["program"]["regions"][0]["blocks"][0]["ops"]
    for oi, op in enumerate(ops):
        if op["#"] in ("1.data", "1.fetch"):
            continue
        for a in op.get("A", []):
            if not isinstance(a, dict) or a.get("N") in SKIP_ATTRS or "AT" not in a:
                continue
            at, old = a["AT"], a["AT"]["D"]
            edits = []
            if at["#"] in ("0.a_i32", "0.a_i64"):
                edits = [(None, v) for v in INTS]
            elif at["#"] in ("0.a_f32", "0.a_f64"):
                edits = [(None, v) for v in FLOATS]
            elif at["#"] in ("1.a_intarray", "0.a_array") and isinstance(old, list):
                for ei, e in enumerate(old[:6]):
                    kind = e.get("#") if isinstance(e, dict) else "int"
                    if kind in ("int", "0.a_i32", "0.a_i64"):
                        edits += [(ei, v) for v in INTS]
                    elif kind in ("0.a_f32", "0.a_f64"):
                        edits += [(ei, v) for v in FLOATS]
                if old:
                    edits.append(("empty", None))
            for ei, v in edits:
                if ei is None:
                    at["D"] = v
                elif ei == "empty":
                    at["D"] = []
                else:
                    at["D"] = [dict(e) if isinstance(e, dict) else e for e in old]
                    if isinstance(at["D"][ei], dict):
                        at["D"][ei]["D"] = v
                    else:
                        at["D"][ei] = v
                yield f"{op['#'][2:]} #{oi} {a['N']}[{'' if ei is None else ei}] = {v}", json.dumps(doc)
            at["D"] = old


def legacy_mutations(path: Path):
    """(description, program bytes) for each mutation of a ProgramDesc."""
    from paddle.base.proto import framework_pb2 as fpb
    A = fpb.AttrType
    prog = fpb.ProgramDesc()
    prog.ParseFromString(path.read_bytes())
    for oi, op in enumerate(prog.blocks[0].ops):
        if op.type in ("feed", "fetch"):
            continue
        for a in op.attrs:
            if a.name in SKIP_ATTRS or a.name.startswith("op_"):
                continue
            saved = a.SerializeToString()
            edits = []
            if a.type in (A.INT, A.LONG):
                edits = [(None, v) for v in INTS]
            elif a.type == A.FLOAT:
                edits = [(None, v) for v in FLOATS]
            elif a.type in (A.INTS, A.LONGS):
                n = len(a.ints) if a.type == A.INTS else len(a.longs)
                edits = [(ei, v) for ei in range(min(n, 6)) for v in INTS]
                if n:
                    edits.append(("empty", None))
            for ei, v in edits:
                a.ParseFromString(saved)
                # An INT (INTS) stays one where the value fits in 32 bits.
                fits = lambda x: -2**31 <= x < 2**31
                if a.type == A.FLOAT:
                    a.f = v
                elif a.type == A.INT and fits(v):
                    a.i = v
                elif a.type in (A.INT, A.LONG):
                    a.ClearField("i")
                    a.type, a.l = A.LONG, v
                else:
                    vals = list(a.ints) if a.type == A.INTS else list(a.longs)
                    vals = [] if ei == "empty" else vals[:ei] + [v] + vals[ei + 1:]
                    ints = a.type == A.INTS and all(fits(x) for x in vals)
                    a.ClearField("ints")
                    a.ClearField("longs")
                    a.type = A.INTS if ints else A.LONGS
                    (a.ints if ints else a.longs).extend(vals)
                yield f"{op.type} #{oi} {a.name}[{'' if ei is None else ei}] = {v}", prog.SerializeToString()
            a.ParseFromString(saved)


def run_one(tiller: Path, program: Path, params: Path):
    """(exit status or 'timeout', peak RSS in GB, last stderr line)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))

    env = dict(os.environ, TILLER_MEMORY_CAP=f"{CAP_GB}GB", OMP_NUM_THREADS="1")
    cmd = [str(tiller), "bench", str(program), "--batch", "2", "--iters", "1", "--warmup", "0",
           "--threads", "1"]
    if params.exists():
        cmd += ["--params", str(params)]
    with tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, preexec_fn=limit)
        start, status = time.monotonic(), None
        while status is None:
            pid, st, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(st)
            elif time.monotonic() - start > 20:
                p.kill()
                _, _, usage = os.wait4(p.pid, 0)
                status = "timeout"
            else:
                time.sleep(0.01)
        err.seek(0)
        lines = err.read().strip().splitlines()
    return status, usage.ru_maxrss / 1e6, lines[-1] if lines else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--forms", default="pir,legacy")
    ap.add_argument("--models", default="conv,shapes,resize,yolo")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    tiller = (ROOT / args.build / "bin" / "tiller").resolve()
    work = Path(tempfile.mkdtemp(prefix="tiller-sweep-"))
    found = total = 0
    for form in args.forms.split(","):
        d = work / form
        d.mkdir()
        subprocess.run([sys.executable, "-c", EXPORT, str(d)], check=True, capture_output=True,
                       env={**os.environ, "FLAGS_enable_pir_api": "0" if form == "legacy" else "1"})
        jobs = []
        for model in args.models.split(","):
            src = d / (model + (".pdmodel" if form == "legacy" else ".json"))
            mutations = legacy_mutations(src) if form == "legacy" else pir_mutations(src)
            for n, (desc, program) in enumerate(mutations):
                path = d / f"{model}_{n}{src.suffix}"
                path.write_bytes(program if isinstance(program, bytes) else program.encode())
                jobs.append((f"{form} {model}: {desc}", path, d / f"{model}.pdiparams"))
        print(f"{form}: {len(jobs)} mutations", flush=True)
        outcomes = {}
        with cf.ThreadPoolExecutor(args.jobs) as pool:
            for (desc, path, _), (status, peak, last) in zip(
                    jobs, pool.map(lambda j: run_one(tiller, j[1], j[2]), jobs)):
                path.unlink()
                bad = status not in (0, 1, 2) or peak > CAP_GB * 1.1
                outcomes["finding" if bad else f"exit {status}"] = \
                    outcomes.get("finding" if bad else f"exit {status}", 0) + 1
                if bad:
                    found += 1
                    print(f"FOUND {desc}: exit {status}, peak {peak:.1f} GB: {last[:200]}",
                          flush=True)
        total += len(jobs)
        print(f"{form}: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())), flush=True)
    print(f"{total} mutations, {found} findings (signal, > 20 s, or past the {CAP_GB} GB cap)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
