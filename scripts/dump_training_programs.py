"""Print the facts docs/TRAINING_PROGRAMS.md states about Paddle 3.3.1 static
training programs, from programs built and run here (models/training.py).

    /work/main/.venv/bin/python scripts/dump_training_programs.py \
        [--sections a,b] [--forms pir,legacy]

Sections: roles, seed, grads, order, optimizers, lr, save, batch_norm,
dropout, no_shim, onednn. Each form runs in its own child process
(FLAGS_enable_pir_api is read when Paddle is imported); "no_shim" builds
legacy programs without models._legacy_compat in a fresh process, "onednn"
runs a training step with FLAGS_use_mkldnn=1 in a child that may crash.
About 1-2 minutes in all.
"""
from __future__ import annotations

import argparse
import collections
import os
import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

SECTIONS = ("roles", "seed", "grads", "order", "optimizers", "lr", "save", "batch_norm",
            "dropout", "no_shim", "onednn")
SKIP_ATTRS = {"op_callstack", "op_namescope", "op_device", "with_quant_attr", "op_role_var",
              "struct_name", "stop_gradient", "persistable"}


# ---------------------------------------------------------------------------
# Form-independent views of ops


def is_pir() -> bool:
    from models.training import current_format

    return current_format() == "pir"


def ops_of(prog):
    return list(prog.global_block().ops)


def op_type(op) -> str:
    return op.name() if is_pir() else op.type


def value_label(v) -> str:
    """PIR operand: its name if it has one (parameter/data), else the op making it."""
    if v is None or not v.initialized():
        return "<null>"
    if v.has_name:
        return v.name
    return f"<{v.get_defining_op().name()}>"


def pir_names(op, getter, n: int, prefix: str) -> list[str]:
    # builtin.* ops have no operand/result names (asking may even crash)
    if op.name().startswith("builtin."):
        return [f"{prefix}{i}" for i in range(n)]
    return getter()


def op_inputs(op) -> dict:
    if is_pir():
        names = pir_names(op, op.get_input_names, op.num_operands(), "operand")
        return {n: value_label(op.operand_source(i)) for i, n in enumerate(names)}
    return {n: op.input(n) for n in op.input_names}


def op_outputs(op) -> dict:
    if is_pir():
        names = pir_names(op, op.get_output_names, op.num_results(), "result")
        return {n: (op.result(i).name if op.result(i).has_name else f"%{i}")
                for i, n in enumerate(names)}
    return {n: op.output(n) for n in op.output_names}


def op_attrs(op) -> dict:
    if is_pir():
        a = op.attrs()
    else:
        a = {n: op.attr(n) for n in op.attr_names}
    return {k: v for k, v in sorted(a.items()) if k not in SKIP_ATTRS}


def op_role(op) -> int:
    return int(op.op_role) if is_pir() else int(op.attr("op_role"))


def describe(op, param: str | None = None) -> str:
    s = f"{op_type(op)}\n    inputs  {op_inputs(op)}\n    outputs {op_outputs(op)}\n" \
        f"    attrs   {op_attrs(op)}"
    return s.replace(param, "{P}") if param else s


def run_length(types: list[str], max_period: int = 6) -> str:
    """"a, (b, c) x10, d": repeated runs and repeated groups folded."""
    out, i = [], 0
    while i < len(types):
        best_p, best_k = 1, 1
        for p in range(1, max_period + 1):
            k = 1
            while types[i + k * p:i + (k + 1) * p] == types[i:i + p]:
                k += 1
            if k > 1 and p * k > best_p * best_k:
                best_p, best_k = p, k
        group = ", ".join(types[i:i + best_p])
        out.append(group if best_k == 1 else
                   f"({group}) x{best_k}" if best_p > 1 else f"{group} x{best_k}")
        i += best_p * best_k
    return ", ".join(out)


def build(kind, opt, **kw):
    from models import training as T

    return T.build(kind, None, T.OptSpec(opt, **kw), 0)


# ---------------------------------------------------------------------------
# Sections (run in a child of one form)


def sec_roles():
    for kind in ("cnn", "bert"):
        b = build(kind, "adam", weight_decay=0.01)
        by_role = collections.defaultdict(collections.Counter)
        for op in ops_of(b.main):
            by_role[op_role(op)][op_type(op)] += 1
        print(f"[{kind}, adam + L2 + clip] op_role -> op types (count):")
        if list(by_role) == [-1]:
            print(f"  every op: op_role -1 ({sum(by_role[-1].values())} ops)")
            continue
        for role in sorted(by_role):
            print(f"  {role:4d}: {dict(by_role[role])}")
        if not is_pir():
            with_var = [op for op in ops_of(b.main) if op.attr("op_role_var")]
            print(f"  ops carrying op_role_var: {len(with_var)}; e.g. "
                  f"{op_type(with_var[0])} {with_var[0].attr('op_role_var')}")


def sec_seed():
    b = build("cnn", "sgd", clip_norm=None)
    ops = ops_of(b.main)
    if is_pir():
        loss = b.fetch_list[0]
        users = [op for op in ops if any(loss.is_same(v) for v in op.operands_source())]
        for op in users:
            print("user of the loss value:", describe(op))
            if op.name() == "pd_op.full_like":
                fill = op.operand_source(1).get_defining_op()
                print("  its fill value comes from:", describe(fill))
        print("loss value shape:", loss.shape)
    else:
        for op in ops:
            if op_role(op) & 256:
                print(f"op_role {op_role(op)}:", describe(op))
        print("loss var shape:", b.fetch_list[0].shape)


def sec_grads():
    b = build("bert", "sgd", clip_norm=None)
    ops = ops_of(b.main)
    word = "embedding_0.w_0"
    if is_pir():
        grads = [op for op in ops if op.name().endswith("_grad")]
        sums = collections.Counter(op.name() for op in ops[ops.index(grads[0]):]
                                   if op.name() in ("pd_op.add_n", "pd_op.add_", "pd_op.add"))
        print(f"{len(grads)} *_grad ops; accumulation ops after the first one: {dict(sums)}")
        sgd = [op for op in ops if op.name().startswith("pd_op.sgd") and
               op.operand_source(0).name == word][0]
        print(f"{word} (tied: lookup + MLM decoder) update: {describe(sgd)}")
        print("  its grad comes from:", describe(sgd.operand_source(2).get_defining_op()))
        return
    names = sorted({n for op in ops for n in op.output_arg_names if "@GRAD" in n})
    print(f"{len(names)} grad vars; forms: {sorted({re.sub(r'^[^@]*', 'X', n) for n in names})}")
    for op in ops:
        if op.type == "sum" and any(word + "@GRAD" == n for n in op.output_arg_names):
            print("fan-out accumulation of the tied word embedding:", describe(op))


def sec_order():
    cases = [("cnn", "adam", dict(weight_decay=0.01)), ("cnn", "momentum", dict(weight_decay=0.01)),
             ("cnn", "adamw", dict(weight_decay=0.01)), ("cnn", "lamb", dict(weight_decay=0.01)),
             ("cnn", "adam", dict(weight_decay=0.01, clip_norm=None))]
    cases.append(("cnn", "adamax", dict(clip_norm=None)))
    for kind, opt, kw in cases:
        b = build(kind, opt, **kw)
        ops = ops_of(b.main)
        last_grad = max(i for i, op in enumerate(ops) if op_type(op).endswith("_grad"))
        tail = [op_type(op) for op in ops[last_grad + 1:]]
        print(f"[{kind} {opt} {kw}] after the last *_grad op: {run_length(tail)}")
    upd = [op for op in ops if op_type(op).split(".")[-1].rstrip("_") == "adamax"]
    params = [value_label(op.operand_source(0)) if is_pir() else op.input("Param")[0] for op in upd]
    print(f"  parameter order of the update ops: {params} (sorted: {params == sorted(params)})")
    if not is_pir():
        for op in ops[ops.index(upd[-1]) + 1:][:2]:
            print("  after the update ops:", describe(op))


def sec_optimizers():
    import paddle

    from models import training as T
    from models.training import OPTIMIZERS

    for opt in OPTIMIZERS:
        kw = dict(weight_decay=0.01, use_nesterov=opt == "momentum")
        b = build("cnn", opt, **kw)
        ops = ops_of(b.main)
        first_opt = [op for op in ops if op_type(op).split(".")[-1].rstrip("_")
                     in ("sgd", "momentum", "adam", "adamw", "adamax", "lamb", "adagrad",
                         "adadelta", "rmsprop")]
        by_param = {}
        for op in first_opt:
            p = value_label(op.operand_source(0)) if is_pir() else op.input("Param")[0]
            by_param[p] = op
        print(f"[{opt} {kw}] {len(first_opt)} optimizer ops ({op_type(first_opt[0])})")
        scope = paddle.static.Scope()
        T.init_scope(b, scope)
        acc = {n: np.unique(np.array(scope.find_var(n).get_tensor())).tolist()[:3]
               for n in T.persistable_names(b) if n.startswith("linear_0.w_0_")}
        print(f"  accumulators of linear_0.w_0 after startup (distinct values): {acc}")
        for p in ("linear_0.w_0", "linear_0.b_0"):
            print(f"  param {p}: {describe(by_param[p], p)}")


def sec_lr():
    import paddle

    from models import training as T

    b = build("cnn", "adam")
    if is_pir():
        lr = [op for op in ops_of(b.main) if op.name() == "builtin.parameter"
              and op.attrs()["parameter_name"] == "learning_rate_0"][0]
        print("main:", describe(lr), "type", lr.result(0).type())
        for op in ops_of(b.startup):
            if op.name() == "builtin.set_parameter" and \
                    op.attrs()["parameter_name"] == "learning_rate_0":
                print("startup:", describe(op))
                print("  value from:", describe(op.operand_source(0).get_defining_op()))
        print("program.lr_name:", b.main.lr_name)
    else:
        v = b.main.global_block().var("learning_rate_0")
        print(f"main var learning_rate_0: shape {v.shape} dtype {v.dtype} "
              f"persistable {v.persistable}")
        for op in ops_of(b.startup):
            if "learning_rate_0" in op.output_arg_names:
                print("startup:", describe(op))
    print("program.lr_scheduler is the optimizer's scheduler:",
          b.main.lr_scheduler is b.lr_scheduler)
    scope = paddle.static.Scope()
    exe = T.init_scope(b, scope)
    feed = T.make_batches("cnn", None, 3, 2, 0)
    for i in range(3):
        want = b.lr_scheduler()
        T.run_step(b, exe, scope, feed[i])
        got = np.array(scope.find_var("learning_rate_0").get_tensor())
        print(f"  step {i}: scheduler() = {want!r}, learning_rate_0 after the run = {got!r} "
              f"{got.dtype} shape {got.shape}")


def sec_save():
    import paddle

    from models import training as T

    b = build("cnn", "adam")
    scope = paddle.static.Scope()
    exe = T.init_scope(b, scope)
    T.run_step(b, exe, scope, T.make_batches("cnn", None, 1, 2, 0)[0])
    with tempfile.TemporaryDirectory() as d:
        with paddle.static.scope_guard(scope):
            paddle.static.save(b.main, f"{d}/ckpt")
        print("files:", sorted(os.listdir(d)))
        for ext in ("pdparams", "pdopt"):
            raw = Path(f"{d}/ckpt.{ext}").read_bytes()
            obj = pickle.loads(raw)
            kinds = collections.Counter(type(v).__name__ for v in obj.values())
            print(f"  ckpt.{ext}: pickle protocol {raw[1]}, {type(obj).__name__} of {len(obj)}, "
                  f"value types {dict(kinds)}")
            for k in sorted(obj):
                if k.startswith(("conv2d_0.w_0", "batch_norm2d_0", "learning_rate")):
                    print(f"    {k}: {obj[k].dtype} {obj[k].shape}")
        model = [f for f in os.listdir(d) if f.endswith((".json", ".pdmodel"))][0]
        head = Path(f"{d}/{model}").read_bytes()[:80]
        print(f"  {model}: starts {head!r}")


def sec_batch_norm():
    import paddle

    from models import training as T

    b = build("cnn", "sgd", clip_norm=None)
    ops = ops_of(b.main)
    bn = [op for op in ops if op_type(op).split(".")[-1].rstrip("_") == "batch_norm"][0]
    print("forward:", describe(bn))
    if not is_pir():
        print("  MeanOut is Mean:", bn.output("MeanOut") == bn.input("Mean"),
              "VarianceOut is Variance:", bn.output("VarianceOut") == bn.input("Variance"))
    grad = [op for op in ops if op_type(op).split(".")[-1] == "batch_norm_grad"][0]
    print("backward:", describe(grad))
    # Running-statistics update, checked numerically on the first batch_norm
    # (its input is conv1's output + bias, fetched alongside).
    if is_pir():
        x_in = bn.operand_source(0)
    else:
        x_in = b.main.global_block().var(bn.input("X")[0])
    scope = paddle.static.Scope()
    exe = T.init_scope(b, scope)
    feed = T.make_batches("cnn", None, 1, 4, 0)[0]
    mean0, var0 = b.init_state["batch_norm2d_0.w_1"], b.init_state["batch_norm2d_0.w_2"]
    with paddle.static.scope_guard(scope):
        x, = exe.run(b.main, feed=feed, fetch_list=[x_in])
    mean1 = np.array(scope.find_var("batch_norm2d_0.w_1").get_tensor())
    var1 = np.array(scope.find_var("batch_norm2d_0.w_2").get_tensor())
    x = x.astype(np.float64)
    bm, bv_biased = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    n = x.size / x.shape[1]
    for name, bv in (("biased (/N)", bv_biased), ("unbiased (/(N-1))", bv_biased * n / (n - 1))):
        err_v = np.abs(var1 - (0.9 * var0 + 0.1 * bv)).max()
        print(f"  running var = 0.9*var + 0.1*batch_var {name}: max err {err_v:.2e}")
    print(f"  running mean = 0.9*mean + 0.1*batch_mean: max err "
          f"{np.abs(mean1 - (0.9 * mean0 + 0.1 * bm)).max():.2e}")


def sec_dropout():
    import paddle
    import paddle.nn.functional as F

    from models.training import static_mode

    for seed in (0, 7):
        with static_mode():
            main, startup = paddle.static.Program(), paddle.static.Program()
            main.random_seed = startup.random_seed = seed
            with paddle.static.program_guard(main, startup):
                x = paddle.static.data("x", [4, 8], "float32")
                w = paddle.create_parameter([8, 8], "float32")
                h = F.dropout(paddle.matmul(x, w), p=0.25)
                loss = paddle.mean(h)
                paddle.optimizer.SGD(0.0).minimize(loss)
            ops = ops_of(main)
            drop = [op for op in ops if "dropout" in op_type(op) and "grad" not in op_type(op)][0]
            print(f"[program random_seed {seed}] forward:", describe(drop))
            if not is_pir():
                print("  attrs stored in the ProgramDesc:", drop.desc.attr_names())
            grad = [op for op in ops if op_type(op).split(".")[-1] == "dropout_grad"][0]
            print("  backward:", describe(grad))
            exe = paddle.static.Executor(paddle.CPUPlace())
            scope = paddle.static.Scope()
            with paddle.static.scope_guard(scope):
                exe.run(startup)
                feed = {"x": np.ones((4, 8), np.float32)}
                masks = [exe.run(main, feed=feed, fetch_list=[h])[0] != 0 for _ in range(2)]
            print(f"  two runs draw the same mask: {bool((masks[0] == masks[1]).all())}; "
                  f"kept fraction {masks[0].mean():.2f}")


def child(sections: list[str]) -> None:
    from models.training import current_format, static_mode

    print(f"######## form: {current_format()}")
    if current_format() == "legacy":   # as models.training does for every legacy build
        from models import _legacy_compat

        _legacy_compat.install()
    with static_mode():
        for s in sections:
            print(f"\n=== {s} ({current_format()})")
            globals()[f"sec_{s}"]()
            sys.stdout.flush()


# ---------------------------------------------------------------------------
# Checks that need their own processes


def no_shim() -> None:
    """Legacy programs built without models._legacy_compat."""
    from models import training as T

    cases = [("cnn", o, c) for o in T.OPTIMIZERS for c in (None, 1.0)] + \
        [("bert", "adam", None), ("bert", "adam", 1.0)]
    for kind, opt, clip in cases:
        try:
            T._build(kind, None, T.OptSpec(opt, clip_norm=clip, weight_decay=0.01), 0,
                     legacy_compat=False)
            res = "builds"
        except Exception as e:  # the point is to record what fails
            res = f"FAILS: {type(e).__name__}: {str(e).splitlines()[0][:150]}"
        print(f"  {kind:4s} {opt:16s} clip {clip}: {res}")


def onednn_step() -> None:
    """One CNN training step with FLAGS_use_mkldnn=1 (may crash the process)."""
    import paddle

    from models import training as T

    paddle.set_flags({"FLAGS_use_mkldnn": True})
    b = T.build("cnn", None, T.OptSpec("sgd", clip_norm=None), 0)
    scope = paddle.static.Scope()
    exe = T.init_scope(b, scope)
    print("loss", T.run_step(b, exe, scope, T.make_batches("cnn", None, 1, 2, 0)[0]))


def run_child(form: str, args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, FLAGS_enable_pir_api="1" if form == "pir" else "0",
               PYTHONPATH=str(REPO), GLOG_minloglevel="2", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, __file__, *args], env=env, cwd=str(REPO),
                          capture_output=True, text=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--forms", default="pir,legacy")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    sections = a.sections.split(",")
    if a.child == "sections":
        child(sections)
        return 0
    if a.child in ("no_shim", "onednn"):
        no_shim() if a.child == "no_shim" else onednn_step()
        return 0
    in_child = [s for s in sections if s not in ("no_shim", "onednn")]
    for form in a.forms.split(","):
        if in_child:
            r = run_child(form, ["--child", "sections", "--sections", ",".join(in_child)])
            print(r.stdout)
            if r.returncode:
                print(f"child ({form}) failed {r.returncode}:\n{r.stderr[-3000:]}")
                return 1
        if "onednn" in sections:
            r = run_child(form, ["--child", "onednn"])
            tail = r.stderr.strip().splitlines()[-3:] if r.returncode else []
            print(f"=== onednn ({form}): FLAGS_use_mkldnn=1 training step: exit code "
                  f"{r.returncode} {r.stdout.strip()[:200]} {' | '.join(tail)}\n")
    if "no_shim" in sections and "legacy" in a.forms:
        r = run_child("legacy", ["--child", "no_shim"])
        print("=== no_shim (legacy, models._legacy_compat not installed)")
        print(r.stdout, r.stderr[-2000:] if r.returncode else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
