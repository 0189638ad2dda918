"""Issue 41's conformance cases, as Paddle's IPU unit tests drove the API:
each builds a program with Paddle's static API, runs it through the patched
paddle.static IPU API (IpuStrategy + IpuCompiledProgram + Executor.run, or
paddle.inference with enable_ipu) and through Paddle's CPU executor or
predictor, in this process. Prints one JSON line: case -> {"ok": bool,
"detail": str, ...numbers}; the test (ipu_conformance_test.py) judges them.

    python conformance.py OUT_DIR [CASE...]

Runs under Paddle 3.3.1 (legacy programs: FLAGS_enable_pir_api=0) and
2.6.2. Only Paddle's own API is called after the one tiller.patch_paddle().
"""
import json
import os
import sys
import traceback

import numpy as np
import paddle
import paddle.static

import tiller

tiller.patch_paddle()
paddle.enable_static()
OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def programs(seed=7):
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = seed
    return main, startup


def init(startup):
    """A fresh scope holding the startup program's values."""
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        paddle.static.Executor(paddle.CPUPlace()).run(startup)
    return scope


def raises(fn):
    """The message fn raises, or None."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        return f"{type(e).__name__}: {e}"
    return None


def fc_classifier(rows, classes=4, features=16, label_dtype="int64"):
    """x [rows, 16] -> fc -> cross entropy with y [rows, 1]; SGD 0.1."""
    main, startup = programs()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [rows, features], "float32")
        y = paddle.static.data("y", [rows, 1], label_dtype)
        logits = paddle.static.nn.fc(x, classes)
        loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, y))
        paddle.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


def compiled(main, scope, feeds, fetches, training=True, micro=1, bps=1, accumulate=1,
             options=None):
    s = paddle.static.IpuStrategy()
    s.set_graph_config(is_training=training, micro_batch_size=micro)
    s.set_pipelining_config(batches_per_step=bps, enable_gradient_accumulation=accumulate > 1,
                            accumulation_factor=accumulate)
    if options:
        s.set_options(options)
    return paddle.static.IpuCompiledProgram(main, scope=scope, ipu_strategy=s).compile(
        feeds, fetches)


def pipelined(main, scope, feeds, fetches, devices, batches_per_step, training=True):
    """A program sharded with ipu_shard_guard, compiled as a pipeline of
    `devices` devices without gradient accumulation, micro-batches of 1."""
    s = paddle.static.IpuStrategy()
    s.set_graph_config(num_ipus=devices, is_training=training, micro_batch_size=1,
                       enable_manual_shard=True)
    s.set_pipelining_config(enable_pipelining=True, batches_per_step=batches_per_step)
    s.set_options({"num_threads": 2})
    return paddle.static.IpuCompiledProgram(main, scope=scope, ipu_strategy=s).compile(
        feeds, fetches)


def batches(n, rows, seed=3, classes=4, features=16):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((rows, features)).astype(np.float32),
             "y": rng.integers(0, classes, (rows, 1)).astype(np.int64)} for _ in range(n)]


# -- 6. IpuBackend -------------------------------------------------------------
# (first: its reset() / detach() run before anything is compiled)

@case
def ipu_backend_has_every_method_with_paddles_behaviour():
    """core.IpuBackend's methods (Paddle's pybind list): reset() and
    detach() before any compile are harmless (Paddle's tests call reset()
    in tearDown); set_scope() redirects weights_to_host(); reset() drops
    the compiled program until it is compiled again; save_model_proto()
    refuses, saying why."""
    backend_cls = paddle.base.core.IpuBackend
    backend = backend_cls.get_instance()
    out = {"methods": sorted(m for m in ("get_instance", "weights_to_host", "set_scope",
                                         "set_ipu_strategy", "detach", "reset",
                                         "save_model_proto") if not hasattr(backend, m)),
           "same_instance": backend is backend_cls.get_instance(),
           "reset_before_compile": raises(backend.reset),
           "detach_before_compile": raises(backend.detach)}
    main, startup, loss = fc_classifier(-1)
    scope, other = init(startup), init(startup)
    exe = paddle.static.Executor(paddle.IPUPlace())
    feed = batches(1, 2)[0]
    with paddle.static.scope_guard(scope):
        s = paddle.static.IpuStrategy()
        s.set_graph_config(is_training=True, micro_batch_size=2)
        compiler = paddle.static.IpuCompiledProgram(main, scope=scope, ipu_strategy=s)
        prog = compiler.compile(["x", "y"], [loss.name])
        exe.run(prog, feed=feed, fetch_list=[loss])
        start = np.array(other.find_var("fc_0.w_0").get_tensor())
        backend.set_scope(other)
        backend.weights_to_host()
        trained = np.array(other.find_var("fc_0.w_0").get_tensor())
        out["set_scope_redirects"] = bool(not np.array_equal(start, trained) and np.array_equal(
            trained, np.array(other.find_var("fc_0.w_0").get_tensor())))
        out["own_scope_untouched"] = bool(np.array_equal(
            start, np.array(scope.find_var("fc_0.w_0").get_tensor())))
        out["detach_after_compile"] = raises(backend.detach)
        out["still_runs_after_detach"] = raises(lambda: exe.run(prog, feed=feed,
                                                                fetch_list=[loss]))
        out["save_model_proto"] = raises(lambda: backend.save_model_proto(
            os.path.join(OUT, "model.onnx")))
        out["reset"] = raises(backend.reset)
        out["run_after_reset"] = raises(lambda: exe.run(prog, feed=feed, fetch_list=[loss]))
        prog = compiler.compile(["x", "y"], [loss.name])
        out["run_after_compile_again"] = raises(lambda: exe.run(prog, feed=feed,
                                                                fetch_list=[loss]))
    return out


# -- 1. micro-batch-shaped feeds ----------------------------------------------

@case
def fixed_micro_batch_inference_batches_per_step():
    """Paddle's test_batchs_per_step_simple_ipu: data [1, 3, 10, 10],
    batches_per_step 5, a [5, 3, 10, 10] feed; Paddle's IPU executor
    returned [5, 1, 3, 8, 8]. The reference: Paddle's CPU executor on each
    micro-batch."""
    main, startup = programs()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        image = paddle.static.data("image", [1, 3, 10, 10], "float32")
        out = paddle.static.nn.conv2d(image, num_filters=3, filter_size=3, bias_attr=False)
    scope = init(startup)
    image_np = np.random.default_rng(0).uniform(size=[5, 3, 10, 10]).astype(np.float32)
    exe = paddle.static.Executor(paddle.IPUPlace())
    with paddle.static.scope_guard(scope):
        ref = np.stack([exe.run(main, feed={"image": image_np[i:i + 1]}, fetch_list=[out])[0]
                        for i in range(5)])
        prog = compiled(main, scope, ["image"], [out.name], training=False, bps=5)
        got = exe.run(prog, feed={"image": image_np}, fetch_list=[out])[0]
    return {"shape": list(got.shape), "ref_shape": list(ref.shape),
            "max_diff": float(np.abs(got - ref).max())}


@case
def fixed_micro_batch_training_accumulation():
    """data [2, 16] (a fixed micro-batch), accumulation 2, a [4, 16] feed
    per step, 3 steps: Paddle's IPU executor's losses (one per micro-batch)
    and weights equal Paddle's CPU training on the 4-row batch (mean
    reduction: the gradient of the mean loss over the batch)."""
    main, startup, loss = fc_classifier(2)
    ref_main, ref_startup, ref_loss = fc_classifier(-1)
    scope, ref_scope = init(startup), init(ref_startup)
    data = batches(3, 4)
    exe = paddle.static.Executor(paddle.IPUPlace())
    with paddle.static.scope_guard(ref_scope):
        ref = [float(exe.run(ref_main, feed=f, fetch_list=[ref_loss])[0]) for f in data]
        ref_w = np.array(ref_scope.find_var("fc_0.w_0").get_tensor())
    with paddle.static.scope_guard(scope):
        prog = compiled(main, scope, ["x", "y"], [loss.name], micro=2, accumulate=2)
        got = [exe.run(prog, feed=f, fetch_list=[loss])[0] for f in data]
        prog._backend.weights_to_host()
        w = np.array(scope.find_var("fc_0.w_0").get_tensor())
    return {"shape": list(np.shape(got[0])),
            "loss_rel_diff": float(np.max(np.abs(np.mean(got, axis=1) - ref) / np.abs(ref))),
            "weight_diff": float(np.abs(w - ref_w).max())}


@case
def fixed_micro_batch_enable_ipu_inference():
    """A saved model with a fixed batch of 1 under paddle.inference's
    enable_ipu(1, 1, False, 5): a [5, 8] input; the reference is Paddle's
    CPU predictor on each row."""
    main, startup = programs()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [1, 8], "float32")
        out = paddle.nn.functional.relu(paddle.static.nn.fc(x, 6))
    scope = init(startup)
    prefix = os.path.join(OUT, "fixed_batch")
    with paddle.static.scope_guard(scope):
        paddle.static.save_inference_model(prefix, [x], [out],
                                           paddle.static.Executor(paddle.CPUPlace()),
                                           program=main)
    model = prefix + (".json" if os.path.exists(prefix + ".json") else ".pdmodel")
    data = np.random.default_rng(1).standard_normal((5, 8)).astype(np.float32)

    def predict(ipu, rows):
        config = paddle.inference.Config(model, prefix + ".pdiparams")
        config.set_cpu_math_library_num_threads(1)
        if ipu:
            config.enable_ipu(1, 1, False, 5)
        predictor = paddle.inference.create_predictor(config)
        h = predictor.get_input_handle(predictor.get_input_names()[0])
        h.reshape(list(rows.shape))
        h.copy_from_cpu(rows)
        predictor.run()
        return predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()

    ref = np.concatenate([predict(False, data[i:i + 1]) for i in range(5)])
    got = predict(True, data)
    return {"shape": list(got.shape), "max_diff": float(np.abs(got - ref).max())}


# -- 2. micro_batch_size ------------------------------------------------------

@case
def micro_batch_size_is_validated_and_honoured():
    """micro_batch_size 0 and -1 are refused; with a -1 batch dimension a
    feed must hold micro_batch_size x the loop factors rows (6 rows with
    micro-batches of 2 and accumulation 2 are refused, naming the numbers);
    4 rows train as Paddle's CPU executor does."""
    out = {}
    for bad in (0, -1):
        out[f"refused_{bad}"] = raises(
            lambda: paddle.static.IpuStrategy().set_graph_config(micro_batch_size=bad))
    main, startup, loss = fc_classifier(-1)
    scope, ref_scope = init(startup), init(startup)
    exe = paddle.static.Executor(paddle.IPUPlace())
    with paddle.static.scope_guard(scope):
        prog = compiled(main, scope, ["x", "y"], [loss.name], micro=2, accumulate=2)
        out["six_rows"] = raises(lambda: exe.run(prog, feed=batches(1, 6)[0], fetch_list=[loss]))
        got = [exe.run(prog, feed=f, fetch_list=[loss])[0] for f in batches(3, 4)]
    with paddle.static.scope_guard(ref_scope):
        ref = [float(exe.run(main, feed=f, fetch_list=[loss])[0]) for f in batches(3, 4)]
    out["loss_rel_diff"] = float(np.max(np.abs(np.mean(got, axis=1) - ref) / np.abs(ref)))
    return out


# -- 3. fetch_list by name ----------------------------------------------------

@case
def fetch_list_names_what_was_compiled():
    """exe.run(compiled, fetch_list=...) returns the named compiled targets
    in fetch_list's order; a name that was not compiled is an error naming
    the compiled ones (Paddle's IPU executor never wrote it)."""
    main, startup = programs()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [-1, 16], "float32")
        hidden = paddle.static.nn.fc(x, 8)
        out = paddle.nn.functional.relu(hidden)
        total = paddle.mean(out)
    scope = init(startup)
    data = batches(1, 2)[0]["x"]
    exe = paddle.static.Executor(paddle.IPUPlace())
    with paddle.static.scope_guard(scope):
        ref_out, ref_total = exe.run(main, feed={"x": data}, fetch_list=[out, total])
        prog = compiled(main, scope, ["x"], [out.name, total.name], training=False, micro=2)
        both = exe.run(prog, feed={"x": data}, fetch_list=[out, total])
        swapped = exe.run(prog, feed={"x": data}, fetch_list=[total.name, out.name])
        one = exe.run(prog, feed={"x": data}, fetch_list=[total])
        missing = raises(lambda: exe.run(prog, feed={"x": data}, fetch_list=["nonexistent"]))
        not_compiled = raises(lambda: exe.run(prog, feed={"x": data}, fetch_list=[hidden]))
    return {"counts": [len(both), len(swapped), len(one)],
            "max_diff": float(max(np.abs(both[0] - ref_out).max(),
                                  np.abs(swapped[1] - ref_out).max(),
                                  np.abs(np.asarray(one[0]) - ref_total).max(),
                                  np.abs(np.asarray(swapped[0]) - ref_total).max())),
            "missing": missing, "not_compiled": not_compiled,
            "compiled_names": [out.name, total.name], "hidden_name": hidden.name}


# -- 4. integer widths ---------------------------------------------------------

@case
def int32_ids_and_labels_feed_an_int64_program():
    """An embedding + cross-entropy program with int64 ids and labels, fed
    int32 arrays (Paddle's IPU backend converted them): the same losses as
    the int64 feeds on Paddle's CPU executor; an int64 value beyond int32
    fed to an int32 variable is refused naming the feed."""
    def build():
        main, startup = programs()
        with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
            ids = paddle.static.data("ids", [-1, 5], "int64")
            label = paddle.static.data("label", [-1, 1], "int64")
            emb = paddle.static.nn.embedding(ids, size=[20, 8])
            logits = paddle.static.nn.fc(paddle.reshape(emb, [-1, 40]), 3)
            loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
            paddle.optimizer.SGD(0.5).minimize(loss)
        return main, startup, loss

    main, startup, loss = build()
    scope, ref_scope = init(startup), init(startup)
    rng = np.random.default_rng(5)
    data = [{"ids": rng.integers(0, 20, (4, 5)), "label": rng.integers(0, 3, (4, 1))}
            for _ in range(3)]
    exe = paddle.static.Executor(paddle.IPUPlace())
    with paddle.static.scope_guard(ref_scope):
        ref = [float(exe.run(main, feed=f, fetch_list=[loss])[0]) for f in data]
    with paddle.static.scope_guard(scope):
        prog = compiled(main, scope, ["ids", "label"], [loss.name], micro=4)
        got = [float(exe.run(prog, feed={k: v.astype(np.int32) for k, v in f.items()},
                             fetch_list=[loss])[0]) for f in data]
    # An int32 variable fed an int64 array holding a value int32 cannot.
    main2, startup2 = programs()
    with paddle.static.program_guard(main2, startup2), paddle.utils.unique_name.guard():
        ids32 = paddle.static.data("ids32", [-1, 2], "int32")
        out = paddle.cast(ids32, "float32") * 2.0
    scope2 = init(startup2)
    with paddle.static.scope_guard(scope2):
        prog2 = compiled(main2, scope2, ["ids32"], [out.name], training=False, micro=1)
        fits = exe.run(prog2, feed={"ids32": np.array([[3, -4]], np.int64)}, fetch_list=[out])[0]
        too_big = raises(lambda: exe.run(prog2, feed={"ids32": np.array([[1, 2**40]], np.int64)},
                                         fetch_list=[out]))
    return {"loss_rel_diff": float(np.max(np.abs(np.subtract(got, ref)) / np.abs(ref))),
            "fits": np.asarray(fits).ravel().tolist(), "too_big": too_big}


# -- 5. non-finite feeds ------------------------------------------------------

@case
def non_finite_feed_names_the_loss_the_op_and_the_feed():
    """A NaN in x with a cross-entropy loss (and accumulation 2: the NaN in
    the second micro-batch): the error says the loss is not finite, the
    first op that went non-finite and the feed holding the NaN, and nothing
    is updated; the labels are never reported out of range."""
    out = {}
    for accumulate in (1, 2):
        main, startup, loss = fc_classifier(-1)
        scope = init(startup)
        feed = batches(1, 2 * accumulate)[0]
        feed["x"][2 * accumulate - 1, 3] = np.nan
        exe = paddle.static.Executor(paddle.IPUPlace())
        with paddle.static.scope_guard(scope):
            prog = compiled(main, scope, ["x", "y"], [loss.name], micro=2, accumulate=accumulate)
            before = np.array(scope.find_var("fc_0.w_0").get_tensor())
            out[f"message_{accumulate}"] = raises(
                lambda: exe.run(prog, feed=feed, fetch_list=[loss]))
            prog._backend.weights_to_host()
            out[f"unchanged_{accumulate}"] = bool(np.array_equal(
                before, np.array(scope.find_var("fc_0.w_0").get_tensor())))
    return out


# -- 7. options -----------------------------------------------------------------

# Paddle's option registry (paddle/fluid/platform/device/ipu/ipu_strategy.cc,
# the last IPU release): name -> the Python type its setter took.
PADDLE_OPTIONS = {
    **{n: bool for n in (
        "is_training", "need_avg_shard", "enable_fp16", "use_no_bias_optimizer",
        "enable_distribution", "scaled_optimizer_state", "is_dynamic",
        "runtime_options.enable_eval", "enable_manual_shard", "enable_half_partial",
        "batch_serialization_settings.concat_on_virtual_graph_change",
        "batch_serialization_settings.concat_on_execution_phase_change",
        "batch_serialization_settings.concat_on_pipeline_stage_change", "strict_op_versions",
        "opx_alias_checking", "opx_modify_checking", "dot_op_names",
        "export_poplar_computation_graph", "export_poplar_vertex_graph", "separate_call_op_pdfs",
        "enable_outlining", "enable_outlining_copy_cost_pruning", "rearrange_anchors_on_host",
        "enable_prefetch_datastreams", "enable_non_stable_softmax", "enable_replicated_graphs",
        "enable_gradient_accumulation", "instrument_with_hardware_cycle_counter",
        "enable_pipelining", "disable_grad_accumulation_tensor_streams", "compile_engine",
        "constant_weights", "enable_engine_caching", "enable_merge_exchange",
        "enable_floating_point_checks", "enable_stochastic_rounding", "explicit_recomputation",
        "enable_explicit_main_loops", "use_host_copy_ops", "alias_zero_copy",
        "delay_var_updates", "enable_fully_connected_pass", "enable_serialized_matmuls",
        "enable_stable_norm", "decompose_grad_sum", "enable_distributed_replicated_graphs",
        "group_host_sync", "automatic_loss_scaling_settings.enabled",
        "enable_supported_data_type_casting", "group_norm_strided_channel_grouping",
        "schedule_non_weight_update_gradient_consumers_early",
        "create_implicit_pipelining_fwd_only_program", "enable_model_runtime_executor")},
    **{n: int for n in (
        "num_ipus", "batches_per_step", "micro_batch_size", "random_seed",
        "execution_phase_settings.phases", "execution_phase_settings.stages",
        "batch_serialization_settings.factor", "first_dot_op", "final_dot_op", "num_io_tiles",
        "merge_var_update_mem_threshold", "loose_threshold_at_peak", "replicated_graph_count",
        "accumulation_factor", "swap_limit_scheduler", "global_replication_factor",
        "global_replica_offset", "default_prefetch_buffering_depth",
        "compilation_progress_total", "transitive_closure_optimization_threshold",
        "autodiff_settings.stitch_strategy", "batch_serialization_settings.transform_context",
        "batch_serialization_settings.method", "batch_serialization_settings.batch_schedule",
        "auto_recomputation", "merge_var_update", "virtual_graph_mode", "synthetic_data_mode",
        "subgraph_copying_strategy", "accumulation_and_replication_reduction_type",
        "mean_accumulation_and_replication_reduction_strategy", "num_buffers", "tiles_per_ipu")},
    **{n: float for n in (
        "available_memory_proportion", "loss_scaling", "max_weight_norm", "lr",
        "outline_sequence_break_cost", "outline_threshold", "time_limit_scheduler",
        "automatic_loss_scaling_settings.bin_edge_location",
        "automatic_loss_scaling_settings.threshold_upper_count_proportion", "timeout_ms")},
    **{n: str for n in (
        "accl1_type", "accl2_type", "accl3_type", "onnx_dump_path", "weight_decay_mode",
        "log_dir", "cache_path", "partials_type_matmuls", "custom_codelet_compile_flags",
        "serialized_poprithms_shift_graphs_dir", "kahn_tie_breaker")},
    **{n: list for n in ("dot_checks", "hardware_instrumentations", "custom_codelets")},
    **{n: dict for n in (
        "engine_options", "report_options", "convolution_options", "lstm_options",
        "gcl_options", "location_activation", "location_weight", "location_optimizer",
        "location_accumulator", "replicated_collectives_settings",
        "accumulate_outer_fragment")},
}
# Set with the value Paddle's test_ipu_strategy_ipu.py gave (bool flipped,
# integer + 1, double + 0.5) or a valid one of the type.
VALUES = {str: {"accl1_type": "FLOAT16", "accl2_type": "FLOAT16", "accl3_type": "FLOAT16",
                "weight_decay_mode": "l2_regularization", "kahn_tie_breaker": "fifo"},
          list: {"dot_checks": ["Fwd0", "Final"], "hardware_instrumentations": ["1"]},
          dict: {"engine_options": {"debug.allowOutOfMemory": "true"},
                 "location_optimizer": {"on_chip": 1}, "location_weight": {"on_chip": 0},
                 "location_activation": {"on_chip": 1}, "location_accumulator": {"on_chip": 1},
                 "replicated_collectives_settings": {"merge_all_reduce_collectives": "1"},
                 "accumulate_outer_fragment": {0: [], 1: [0, 1]}}}


@case
def every_paddle_option_is_known():
    """Every option of Paddle's registry is known to Tiller's IpuStrategy;
    set as Paddle's own strategy test set it, each is taken (and read back)
    or refused by name because the value would change results and Tiller
    does not do it; compilation_progress_logger takes a callable that then
    sees the compile's progress."""
    taken, refused = [], {}
    for name, kind in sorted(PADDLE_OPTIONS.items()):
        s = paddle.static.IpuStrategy()
        default = s.get_option(name)
        if kind is bool:
            value = not default
        elif kind is int:
            value = default + 1
        elif kind is float:
            value = default + 0.5
        else:
            value = VALUES.get(kind, {}).get(name, "tiller" if kind is str else
                                           (["a"] if kind is list else {"k": "v"}))
        try:
            s.set_options({name: value})
        except Exception as e:  # noqa: BLE001 - recorded
            refused[name] = str(e)
            continue
        taken.append(name)
    seen = []
    main, startup, loss = fc_classifier(-1)
    scope = init(startup)
    with paddle.static.scope_guard(scope):
        prog = compiled(main, scope, ["x", "y"], [loss.name], micro=2,
                        options={"compilation_progress_logger": lambda p, t: seen.append([p, t]),
                                 "compilation_progress_total": 40})
        paddle.static.Executor(paddle.IPUPlace()).run(prog, feed=batches(1, 2)[0],
                                                       fetch_list=[loss])
    # An inference program (Tiller's predictor) reports its compile too.
    seen_inference = []
    main, startup = programs()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [-1, 16], "float32")
        out = paddle.static.nn.fc(x, 4)
    scope = init(startup)
    with paddle.static.scope_guard(scope):
        prog = compiled(main, scope, ["x"], [out.name], training=False, micro=2,
                        options={"compilation_progress_logger":
                                 lambda p, t: seen_inference.append([p, t])})
        paddle.static.Executor(paddle.IPUPlace()).run(prog, feed={"x": batches(1, 2)[0]["x"]},
                                                       fetch_list=[out])
    return {"taken": taken, "refused": refused, "progress": seen,
            "progress_inference": seen_inference,
            "bad_logger": raises(lambda: paddle.static.IpuStrategy().set_options(
                {"compilation_progress_logger": 3}))}


@case
def synthetic_data_mode_replaces_the_feeds():
    """PopART's synthetic data: 1 trains on zeros whatever is fed (the same
    losses as Paddle's CPU executor fed zeros), 2 on standard-normal draws
    (runs repeat for a seed); inference programs refuse it, naming it."""
    main, startup, loss = fc_classifier(-1)
    data = batches(3, 2)
    zeros = [{k: np.zeros_like(v) for k, v in f.items()} for f in data]
    exe = paddle.static.Executor(paddle.IPUPlace())
    ref_scope = init(startup)
    with paddle.static.scope_guard(ref_scope):
        ref = [float(exe.run(main, feed=f, fetch_list=[loss])[0]) for f in zeros]
    got = {}
    for mode, tries in ((1, 1), (2, 2)):
        for attempt in range(tries):
            scope = init(startup)
            with paddle.static.scope_guard(scope):
                prog = compiled(main, scope, ["x", "y"], [loss.name], micro=2,
                                options={"synthetic_data_mode": mode, "random_seed": 5})
                got[f"{mode}_{attempt}"] = [float(exe.run(prog, feed=f, fetch_list=[loss])[0])
                                            for f in data]
    main2, startup2 = programs()
    with paddle.static.program_guard(main2, startup2), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [-1, 16], "float32")
        out = paddle.static.nn.fc(x, 4)
    scope = init(startup2)
    return {"zeros_rel_diff": float(np.max(np.abs(np.subtract(got["1_0"], ref)) / np.abs(ref))),
            "normal_repeats": got["2_0"] == got["2_1"],
            "normal_differs": got["2_0"] != got["1_0"],
            "inference": raises(lambda: compiled(main2, scope, ["x"], [out.name], training=False,
                                                 options={"synthetic_data_mode": 1}))}


@case
def max_weight_norm_clamps_lambs_weight_norm():
    """max_weight_norm, PopART's Lamb clamp: the trust ratio uses
    min(||w||, max_weight_norm). One Lamb step from the same state: at the
    default (65504, above every norm here) the update is Paddle's CPU
    executor's; clamped at c below ||w|| each weight's update is Paddle's
    times c / ||w|| (its start norm)."""
    main, startup = programs()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [-1, 16], "float32")
        y = paddle.static.data("y", [-1, 1], "int64")
        logits = paddle.static.nn.fc(x, 4)
        loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, y))
        paddle.optimizer.Lamb(0.01).minimize(loss)
    feed = batches(1, 2)[0]
    exe = paddle.static.Executor(paddle.IPUPlace())
    ref_scope = init(startup)
    start = np.array(ref_scope.find_var("fc_0.w_0").get_tensor()).astype(np.float64)
    with paddle.static.scope_guard(ref_scope):
        exe.run(main, feed=feed, fetch_list=[loss])
    ref_step = np.array(ref_scope.find_var("fc_0.w_0").get_tensor()) - start
    clamp = 0.25 * float(np.linalg.norm(start))
    steps = {}
    for name, options in (("default", {}), ("clamped", {"max_weight_norm": clamp})):
        scope = init(startup)
        with paddle.static.scope_guard(scope):
            prog = compiled(main, scope, ["x", "y"], [loss.name], micro=2, options=options)
            exe.run(prog, feed=feed, fetch_list=[loss])
            prog._backend.weights_to_host()
            steps[name] = np.array(scope.find_var("fc_0.w_0").get_tensor()) - start
    return {"default_diff": float(np.abs(steps["default"] - ref_step).max()),
            "clamped_diff": float(np.abs(steps["clamped"] - ref_step * 0.25).max()),
            "step": float(np.abs(ref_step).max()),
            # The steps are differences of float32 weights: each of the two
            # weights is rounded (half an ulp), the clamp's ratio too.
            "ulps": float(4 * np.spacing(np.float32(np.abs(start).max())))}


# -- 8. more devices than cores -------------------------------------------------

@case
def pipeline_of_more_devices_than_cores_trains():
    """A 3-stage pipeline (ipu_shard_guard) with accumulation 3 and
    num_threads 2 (a 2-core machine's): its devices share the cores and it
    trains as Paddle's CPU executor does on the 6-row batch."""
    main, startup = programs()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [-1, 16], "float32")
        y = paddle.static.data("y", [-1, 1], "int64")
        with paddle.static.ipu_shard_guard(index=0, stage=0):
            h = paddle.nn.functional.relu(paddle.static.nn.fc(x, 16))
        with paddle.static.ipu_shard_guard(index=1, stage=1):
            h = paddle.nn.functional.relu(paddle.static.nn.fc(h, 16))
        with paddle.static.ipu_shard_guard(index=2, stage=2):
            loss = paddle.mean(paddle.nn.functional.cross_entropy(paddle.static.nn.fc(h, 4), y))
        paddle.optimizer.SGD(0.1).minimize(loss)
    scope, ref_scope = init(startup), init(startup)
    data = batches(3, 6)
    exe = paddle.static.Executor(paddle.IPUPlace())
    with paddle.static.scope_guard(ref_scope):
        ref = [float(exe.run(main, feed=f, fetch_list=[loss])[0]) for f in data]
    with paddle.static.scope_guard(scope):
        s = paddle.static.IpuStrategy()
        s.set_graph_config(num_ipus=3, is_training=True, micro_batch_size=2,
                           enable_manual_shard=True)
        s.set_pipelining_config(enable_pipelining=True, enable_gradient_accumulation=True,
                                accumulation_factor=3)
        s.set_options({"num_threads": 2})
        prog = paddle.static.IpuCompiledProgram(main, scope=scope, ipu_strategy=s).compile(
            ["x", "y"], [loss.name])
        got = [np.mean(exe.run(prog, feed=f, fetch_list=[loss])[0]) for f in data]
    return {"loss_rel_diff": float(np.max(np.abs(np.subtract(got, ref)) / np.abs(ref)))}


@case
def pipelined_training_without_accumulation_runs_popart_continuous_pipeline():
    """Pipelined training with gradient accumulation off: Paddle's IPU build
    (PopART) ran it, each micro-batch its own SGD update applied on each
    stage right after its backward there, so a forward on stage k of N sees
    the updates of micro-batches up to j - 1 - 2(N - 1 - k) and a backward
    those up to j - 1 (popart's pipeline transform and its continuous-
    pipelining tests). The reference replays that in float64 numpy on a
    chain of N bias-free linear stages with an MSE loss; runs repeat bit for
    bit; batches_per_step below the stages is refused as PopART refused it."""
    out = {}
    LR = 0.05  # small enough that stale-weight SGD stays stable on these data
    for stages in (2, 3):
        dims = [4] + [3] * (stages - 1) + [2]
        main, startup = programs()
        with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
            x = paddle.static.data("x", [-1, dims[0]], "float32")
            t = paddle.static.data("t", [-1, dims[-1]], "float32")
            h = x
            for k in range(stages):
                with paddle.static.ipu_shard_guard(index=k, stage=k):
                    h = paddle.static.nn.fc(h, dims[k + 1], bias_attr=False)
                    if k == stages - 1:
                        loss = paddle.mean(paddle.square(h - t))
            paddle.optimizer.SGD(LR).minimize(loss)
        rng = np.random.default_rng(stages)
        batch = 3 * stages
        feed = {"x": rng.standard_normal((batch, dims[0])).astype(np.float32),
                "t": rng.standard_normal((batch, dims[-1])).astype(np.float32)}
        names = [f"fc_{k}.w_0" for k in range(stages)]
        runs = []
        for _ in range(2):
            scope = init(startup)
            start = [np.array(scope.find_var(n).get_tensor()).astype(np.float64) for n in names]
            with paddle.static.scope_guard(scope):
                prog = pipelined(main, scope, ["x", "t"], [loss.name], stages, batch)
                losses = np.asarray(paddle.static.Executor(paddle.IPUPlace()).run(
                    prog, feed=feed, fetch_list=[loss])[0]).ravel()
                prog._backend.weights_to_host()
                runs.append((losses, [np.array(scope.find_var(n).get_tensor()) for n in names]))
        def sgd_step(x, t, forward_w, backward_w):
            """One micro-batch through the bias-free chain in float64: the
            loss and each stage's weight gradient, the forward reading
            forward_w[k], the backward backward_w[k]."""
            a, inputs = x.astype(np.float64), []
            for k in range(stages):
                inputs.append(a)
                a = a @ forward_w[k]
            d = 2 * (a - t) / a.size
            grads = [None] * stages
            for k in reversed(range(stages)):
                grads[k] = inputs[k].T @ d
                d = d @ backward_w[k].T
            return np.mean((a - t) ** 2), grads

        # PopART's staleness, replayed; and sequential SGD on the same
        # micro-batches, to show the difference.
        versions = [[w] for w in start]
        seq = [w.copy() for w in start]
        ref_losses = []
        for j in range(batch):
            x, t = feed["x"][j:j + 1], feed["t"][j:j + 1]
            stale = [versions[k][max(0, j - 2 * (stages - 1 - k))] for k in range(stages)]
            loss_j, grads = sgd_step(x, t, stale, [versions[k][j] for k in range(stages)])
            ref_losses.append(loss_j)
            for k in range(stages):
                versions[k].append(versions[k][j] - LR * grads[k])
            _, grads = sgd_step(x, t, seq, seq)
            seq = [w - LR * g for w, g in zip(seq, grads)]
        (losses, weights), (losses2, weights2) = runs
        out[f"stages_{stages}"] = {
            "loss_rel_diff": float(np.max(np.abs(losses - ref_losses) / np.abs(ref_losses))),
            "weight_diff": float(max(np.abs(w - versions[k][batch]).max()
                                     for k, w in enumerate(weights))),
            "sequential_diff": float(max(np.abs(w - seq[k]).max() for k, w in enumerate(weights))),
            "repeats": bool(np.array_equal(losses, losses2) and all(
                np.array_equal(a, b) for a, b in zip(weights, weights2)))}
    scope = init(startup)
    out["shallow"] = raises(lambda: pipelined(main, scope, ["x", "t"], [loss.name], 3, 2))
    # A weight both stages read (a tied embedding): PopART refused copying a
    # weight between IPUs while pipelining; its update would race the reads.
    main, startup = programs()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [-1, 4], "float32")
        with paddle.static.ipu_shard_guard(index=0, stage=0):
            h = paddle.static.nn.fc(x, 4, weight_attr=paddle.ParamAttr(name="tied"),
                                    bias_attr=False)
        with paddle.static.ipu_shard_guard(index=1, stage=1):
            y = paddle.static.nn.fc(h, 4, weight_attr=paddle.ParamAttr(name="tied"),
                                    bias_attr=False)
            loss = paddle.mean(paddle.square(y))
        paddle.optimizer.SGD(0.01).minimize(loss)
    scope = init(startup)
    with paddle.static.scope_guard(scope):
        prog = pipelined(main, scope, ["x"], [loss.name], 2, 2)
        out["tied"] = raises(lambda: paddle.static.Executor(paddle.IPUPlace()).run(
            prog, feed={"x": np.ones((2, 4), np.float32)}, fetch_list=[loss]))
    return out


@case
def idioms_of_paddles_ipu_tests():
    """What Paddle's own IPU tests did besides the API: they reached
    IpuCompiledProgram through paddle.base.compiler too, fed float16 arrays
    to float32 inputs in their float16 mode (widened exactly), and left ops
    outside any ipu_shard_guard after the last stage (the scale
    save_inference_model adds, a loss written after the guards), which run
    where their inputs were computed instead of flowing back to stage 0."""
    out = {"base_compiler": paddle.base.compiler.IpuCompiledProgram is
           paddle.static.IpuCompiledProgram and paddle.base.compiler.IpuStrategy is
           paddle.static.IpuStrategy}
    main, startup = programs()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [-1, 16], "float32")
        with paddle.static.ipu_shard_guard(index=0, stage=0):
            h = paddle.nn.functional.relu(paddle.static.nn.fc(x, 16))
        with paddle.static.ipu_shard_guard(index=1, stage=1):
            h = paddle.static.nn.fc(h, 8)
        y = paddle.scale(h, scale=2.0, bias=1.0)      # outside every guard
    scope = init(startup)
    data = batches(1, 4)[0]["x"]
    exe = paddle.static.Executor(paddle.IPUPlace())
    with paddle.static.scope_guard(scope):
        ref = exe.run(main, feed={"x": data}, fetch_list=[y])[0]
        prog = pipelined(main, scope, ["x"], [y.name], 2, 4, training=False)
        got = exe.run(prog, feed={"x": data}, fetch_list=[y])[0]
        out["pipelined_max_diff"] = float(np.abs(got.reshape(ref.shape) - ref).max())
        half = data.astype(np.float16)
        out["float16_feed_max_diff"] = float(np.abs(
            exe.run(prog, feed={"x": half}, fetch_list=[y])[0] -
            exe.run(prog, feed={"x": half.astype(np.float32)}, fetch_list=[y])[0]).max())
    return out


# -- 10. numerics ----------------------------------------------------------------

@case
def batch_norm_keeps_its_mode_in_inference():
    """conv -> batch_norm -> dropout (upscale_in_train), built with is_test
    False (training mode) and True, compiled with is_training=False and
    batches_per_step 2 (two micro-batches of 2 rows per run). Paddle's IPU
    build compiled each op as built: is_test False normalized each
    micro-batch by its own statistics (PopART's training-mode batch norm),
    is_test True by the running ones, and the inference session ran dropout
    as the identity. The reference: Paddle's CPU executor on each micro-batch
    with the same batch norm and no dropout. The running statistics are set
    far from the data's, so the two modes differ by ~10; the user's program
    must come back from compile() unchanged."""
    rng = np.random.default_rng(11)
    data = rng.uniform(size=[4, 3, 10, 10]).astype(np.float32)
    out, refs = {}, []
    for is_test in (False, True):
        def build(dropout):
            main, startup = programs()
            with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
                x = paddle.static.data("in_0", [2, 3, 10, 10], "float32")
                y = paddle.static.nn.conv2d(x, num_filters=3, filter_size=3, bias_attr=False)
                y = paddle.static.nn.batch_norm(y, is_test=is_test)
                if dropout:
                    y = paddle.nn.functional.dropout(y, 0.5, training=not is_test)
            return main, startup, y

        main, startup, y = build(True)
        ref_main, ref_startup, ref_y = build(False)
        scope, ref_scope = init(startup), init(ref_startup)
        for sc in (scope, ref_scope):   # running statistics far from the batch's
            for name, value in (("batch_norm_0.w_1", 5.0), ("batch_norm_0.w_2", 0.25)):
                sc.find_var(name).get_tensor().set(np.full([3], value, np.float32),
                                                   paddle.CPUPlace())
        attrs = lambda: [(op.attr("is_test"), op.attr("trainable_statistics"))  # noqa: E731
                         for op in main.global_block().ops if op.type == "batch_norm"]
        before = attrs()
        exe = paddle.static.Executor(paddle.IPUPlace())
        with paddle.static.scope_guard(ref_scope):
            ref = np.stack([exe.run(ref_main, feed={"in_0": data[i:i + 2]},
                                    fetch_list=[ref_y])[0] for i in (0, 2)])
        with paddle.static.scope_guard(scope):
            prog = compiled(main, scope, ["in_0"], [y.name], training=False, micro=2, bps=2)
            got = exe.run(prog, feed={"in_0": data}, fetch_list=[y])[0]
        key = "is_test" if is_test else "batch_stats"
        out[f"{key}_shape"] = list(np.shape(got))
        out[f"{key}_max_diff"] = float(np.abs(got - ref).max())
        out[f"{key}_attrs_unchanged"] = attrs() == before
        refs.append(ref)
    out["modes_differ_by"] = float(np.abs(refs[0] - refs[1]).max())
    return out


class _IncreasingLR(paddle.optimizer.lr.LRScheduler):
    """A scheduler whose rate grows by 1e-4 at every step() (as Paddle's
    IPU LR test's): a script that does not step it trains differently."""

    def get_lr(self):
        self.base_lr += 1e-4
        return self.base_lr


@case
def lr_scheduler_is_stepped_through_the_compiled_program():
    """conv + mean trained by Lamb on an LRScheduler for 30 steps; the
    script steps `program.lr_scheduler` before each run when the program it
    runs has one (the compiled program, as Paddle's compile() returned it,
    carries the main program's; one whose rate is a float carries none).
    Losses and weights equal Paddle's CPU executor's stepping the main
    program's scheduler."""
    def build(lr):
        main, startup = programs()
        with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
            image = paddle.static.data("image", [1, 3, 10, 10], "float32")
            loss = paddle.mean(paddle.nn.Conv2D(3, 3, 3, bias_attr=False)(image))
            paddle.optimizer.Lamb(learning_rate=lr).minimize(loss)
        return main, startup, loss

    data = {"image": np.random.default_rng(2).uniform(size=[1, 3, 10, 10]).astype(np.float32)}
    exe = paddle.static.Executor(paddle.IPUPlace())

    def train(main, program, scope, loss):
        losses = []
        with paddle.static.scope_guard(scope):
            for _ in range(30):
                if hasattr(program, "lr_scheduler"):
                    program.lr_scheduler.step()
                losses.append(float(np.asarray(exe.run(program, feed=data,
                                                       fetch_list=[loss])[0]).ravel()[0]))
            if program is not main:
                program._backend.weights_to_host()
            return losses, np.array(scope.find_var("conv2d_0.w_0").get_tensor())

    main, startup, loss = build(_IncreasingLR(1e-5))
    ref_main, ref_startup, ref_loss = build(_IncreasingLR(1e-5))
    scope, ref_scope = init(startup), init(ref_startup)
    ref, ref_w = train(ref_main, ref_main, ref_scope, ref_loss)
    with paddle.static.scope_guard(scope):
        prog = compiled(main, scope, ["image"], [loss.name])
    got, w = train(main, prog, scope, loss)
    main2, startup2, loss2 = build(1e-3)
    scope2 = init(startup2)
    with paddle.static.scope_guard(scope2):
        prog2 = compiled(main2, scope2, ["image"], [loss2.name])
    return {"has_scheduler": hasattr(prog, "lr_scheduler"),
            "same_scheduler": getattr(prog, "lr_scheduler", None) is main.lr_scheduler,
            "float_lr_has_none": not hasattr(prog2, "lr_scheduler"),
            "last_lr": float(main.lr_scheduler()), "ref_last_lr": float(ref_main.lr_scheduler()),
            "loss_rel_diff": float(np.max(np.abs(np.subtract(got, ref)) / np.abs(ref))),
            "weight_diff": float(np.abs(w - ref_w).max())}


def _conv_valid_f64(x, w):
    """A stride-1 unpadded convolution in float64 (the exact value of the
    float32 data's arithmetic, to ~1e-16)."""
    o, c, kh, kw = w.shape
    h, wd = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((o, h, wd))
    for ci in range(c):
        for i in range(kh):
            for j in range(kw):
                out += w[:, ci, i, j, None, None].astype(np.float64) * x[ci, i:i + h, j:j + wd]
    return out


@case
def need_avg_shard_changes_no_arithmetic():
    """Four 3x3 convolutions of 3 channels on a [1, 3, 64, 64] image (the
    shape of Paddle's avg-shard IPU test, smaller), compiled for inference
    on one device and with need_avg_shard on 1 and 2 devices (the split
    into two stages): every way gives the same bits. Against Paddle's CPU
    executor the difference is float32 rounding in another summation order:
    both are compared with the exact (float64) convolution of the same
    float32 weights and data."""
    main, startup = programs()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("in_0", [1, 3, 64, 64], "float32")
        convs = [paddle.nn.Conv2D(3, 3, 3, bias_attr=False) for _ in range(4)]
        y = x
        for conv in convs:
            y = conv(y)
    scope = init(startup)
    data = np.random.default_rng(2021).uniform(size=[1, 3, 64, 64]).astype(np.float32)
    exe = paddle.static.Executor(paddle.IPUPlace())
    outs = {}
    with paddle.static.scope_guard(scope):
        ref = np.asarray(exe.run(main, feed={"in_0": data}, fetch_list=[y])[0])
        for devices, avg in ((1, False), (1, True), (2, True)):
            s = paddle.static.IpuStrategy()
            s.set_graph_config(num_ipus=devices, is_training=False)
            s.set_options({"need_avg_shard": avg})
            prog = paddle.static.IpuCompiledProgram(main, scope=scope, ipu_strategy=s).compile(
                ["in_0"], [y.name])
            outs[(devices, avg)] = np.asarray(exe.run(prog, feed={"in_0": data},
                                                      fetch_list=[y])[0])
        weights = [np.array(scope.find_var(c.weight.name).get_tensor()) for c in convs]
    exact = data[0].astype(np.float64)
    for w in weights:
        exact = _conv_valid_f64(exact, w)
    got = outs[(1, False)]
    return {"identical": [bool(np.array_equal(v, got)) for v in outs.values()],
            "max_diff": float(np.abs(got - ref).max()),
            "tiller_error": float(np.abs(got[0] - exact).max()),
            "paddle_error": float(np.abs(ref[0] - exact).max()),
            "magnitude": float(np.abs(exact).max())}


def main():
    names = sys.argv[2:] or list(CASES)
    results = {}
    for name in names:
        try:
            results[name] = {"ok": True, **CASES[name]()}
        except Exception:  # noqa: BLE001 - reported to the test
            results[name] = {"ok": False, "detail": traceback.format_exc()[-3000:]}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
