"""Issue 41: Paddle IPU conformance. Each class of defect a new user hit has
a case in ipu_scripts/conformance.py, written as Paddle's IPU unit tests
drove the API (a program built with Paddle's static API, run through the
patched paddle.static IPU API or paddle.inference's enable_ipu, compared
with Paddle's CPU executor or predictor in the same process). The script
runs once per Paddle generation: 3.3.1 with legacy programs
(FLAGS_enable_pir_api=0, as the IPU era built them) and 2.6.2.

Tolerances: float32 results against Paddle's CPU run at 1e-5 (relative for
losses, absolute for activations and weights of magnitude ~1): the same
arithmetic in another summation order (micro-batch means averaged instead
of one mean over the batch, oneDNN's GEMM blocking).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from interpreters import child_env, paddle2

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "ipu_scripts" / "conformance.py"
GENERATIONS = {"3.3.1-legacy": (lambda: sys.executable, {"FLAGS_enable_pir_api": "0"}),
               "2.6.2": (paddle2, {})}


@pytest.fixture(scope="module", params=list(GENERATIONS))
def results(request, tmp_path_factory):
    """Every case's result under one Paddle generation."""
    python, env = GENERATIONS[request.param]
    out = tmp_path_factory.mktemp(request.param)
    proc = subprocess.run([python(), str(SCRIPT), str(out)], env=child_env(**env),
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.splitlines()[-1])


def _case(results, name):
    r = results[name]
    assert r["ok"], r["detail"]
    return r


def test_fixed_micro_batch_dims_take_batches_per_step_x_accumulation_x_replicas(results):
    """Point 1: data declared with the micro-batch as a fixed first dim
    takes a run's micro-batches: inference with batches_per_step 5 returns
    Paddle's IPU shape [5, 1, 3, 8, 8]; training with accumulation 2 takes
    [4, 16] for [2, 16]; enable_ipu(1, 1, False, 5) on a fixed-batch model."""
    r = _case(results, "fixed_micro_batch_inference_batches_per_step")
    assert r["shape"] == r["ref_shape"] == [5, 1, 3, 8, 8]
    assert r["max_diff"] <= 1e-5
    r = _case(results, "fixed_micro_batch_training_accumulation")
    assert r["shape"] == [2]                      # one loss per micro-batch (accumulation)
    assert r["loss_rel_diff"] <= 1e-5 and r["weight_diff"] <= 1e-5
    r = _case(results, "fixed_micro_batch_enable_ipu_inference")
    assert r["shape"] == [5, 6] and r["max_diff"] <= 1e-5


def test_micro_batch_size_is_validated_and_honoured(results):
    """Point 2: 0 / -1 refused; rows that are not micro_batch_size x the
    loop factors refused naming the numbers; right ones train as Paddle."""
    r = _case(results, "micro_batch_size_is_validated_and_honoured")
    for bad in (0, -1):
        assert "micro_batch_size' must be >= 1" in r[f"refused_{bad}"], r
    assert r["six_rows"] and "shape [6, 16]" in r["six_rows"], r
    for words in ("accumulation_factor 2", "micro_batch_size 2", "64 elements"):
        assert words in r["six_rows"], r["six_rows"]
    assert r["loss_rel_diff"] <= 1e-5


def test_fetch_list_is_checked_by_name(results):
    """Point 3: compiled targets by variable or name, any order or subset;
    anything else an error naming what was compiled."""
    r = _case(results, "fetch_list_names_what_was_compiled")
    assert r["counts"] == [2, 2, 1] and r["max_diff"] <= 1e-5
    for key, name in (("missing", "nonexistent"), ("not_compiled", r["hidden_name"])):
        msg = r[key]
        assert msg and f"'{name}' was not compiled" in msg, msg
        assert all(f"'{n}'" in msg for n in r["compiled_names"]), msg


def test_int32_feeds_of_int64_programs_are_converted_exactly(results):
    """Point 4: int32 ids and labels train an int64 program as int64 ones;
    an int64 value an int32 variable cannot hold is refused by name."""
    r = _case(results, "int32_ids_and_labels_feed_an_int64_program")
    assert r["loss_rel_diff"] <= 1e-5
    assert r["fits"] == [6.0, -8.0]
    assert r["too_big"] and "'ids32'" in r["too_big"] and "1099511627776" in r["too_big"], r


def test_non_finite_feeds_name_the_loss_the_first_op_and_the_feed(results):
    """Point 5: with a cross-entropy loss, as with MSE: the loss is not
    finite, the first op that went non-finite, the feed holding the NaN;
    never a label "out of range" read from a stale buffer; no update."""
    r = _case(results, "non_finite_feed_names_the_loss_the_op_and_the_feed")
    for accumulate in (1, 2):
        msg = r[f"message_{accumulate}"]
        assert msg and "is not finite" in msg, msg
        assert "the first op that went non-finite" in msg and "feed 'x' holds nan" in msg, msg
        assert "outside" not in msg, msg
        assert r[f"unchanged_{accumulate}"]
    assert "micro-batch 2 of 2" in r["message_2"]


def test_ipu_backend_has_every_method_with_paddles_behaviour(results):
    """Point 6: core.IpuBackend's methods all exist; reset() / detach()
    before a compile are harmless; set_scope() redirects weights_to_host();
    reset() drops the compiled program until it is compiled again;
    save_model_proto() refuses, saying why (Tiller has no ONNX form)."""
    r = _case(results, "ipu_backend_has_every_method_with_paddles_behaviour")
    assert r["methods"] == [] and r["same_instance"]
    for key in ("reset_before_compile", "detach_before_compile", "detach_after_compile",
                "still_runs_after_detach", "reset", "run_after_compile_again"):
        assert r[key] is None, (key, r[key])
    assert r["set_scope_redirects"] and r["own_scope_untouched"]
    assert "IpuBackend.reset()" in r["run_after_reset"], r["run_after_reset"]
    assert "ONNX" in r["save_model_proto"], r["save_model_proto"]


# Options Tiller refuses off their default: each would change results and is
# not implemented (docs/MIGRATION.md says why, option by option).
REFUSED = {"enable_half_partial", "weight_decay_mode",
           "mean_accumulation_and_replication_reduction_strategy"}


def test_every_paddle_option_is_taken_or_refused_by_name(results):
    """Point 7: every option of Paddle's registry is known; set as Paddle's
    own strategy test set them, all are taken but the few that would change
    results without Tiller doing it, refused naming the option; the
    compilation_progress_logger is called from 0 to the total as the step
    compiles; a logger that is no callable is refused."""
    r = _case(results, "every_paddle_option_is_known")
    assert not [m for m in r["refused"].values() if "unknown option" in m], r["refused"]
    assert set(r["refused"]) <= REFUSED, r["refused"]
    for name, msg in r["refused"].items():
        assert f"option {name}=" in msg and "not implemented" in msg, msg
    progress = [p for p, _ in r["progress"]]
    assert progress[0] == 0 and progress[-1] == 40 and progress == sorted(progress), progress
    assert {t for _, t in r["progress"]} == {40}
    progress = [p for p, _ in r["progress_inference"]]
    assert progress[0] == 0 and progress[-1] == 100 and progress == sorted(progress), progress
    assert "takes a callable" in r["bad_logger"], r["bad_logger"]


def test_synthetic_data_mode_replaces_the_feeds(results):
    """Point 7: synthetic_data_mode 1 trains on zeros (as Paddle's CPU
    executor fed zeros, 1e-5), 2 on repeatable normal draws; an inference
    program refuses it by name."""
    r = _case(results, "synthetic_data_mode_replaces_the_feeds")
    assert r["zeros_rel_diff"] <= 1e-5 and r["normal_repeats"] and r["normal_differs"], r
    assert "synthetic_data_mode" in r["inference"], r["inference"]


def test_more_devices_than_cores_train_as_paddle(results):
    """Point 8: a 3-stage pipeline on 2 threads trains (devices sharing the
    cores) as Paddle's CPU executor does."""
    r = _case(results, "pipeline_of_more_devices_than_cores_trains")
    assert r["loss_rel_diff"] <= 1e-5


def test_pipelined_training_without_accumulation_is_popart_continuous_pipelining(results):
    """Point 8: a pipelined training program with accumulation disabled runs
    as Paddle's IPU build ran it: each micro-batch its own update inside the
    pipeline, with PopART's stale weights (the float64 replay of its
    staleness rule within float32 rounding: 1e-5; far from sequential SGD,
    which it is not); runs repeat bit for bit; batches_per_step below the
    stages is refused as PopART refused it."""
    r = _case(results, "pipelined_training_without_accumulation_runs_popart_continuous_pipeline")
    for stages in (2, 3):
        c = r[f"stages_{stages}"]
        assert c["loss_rel_diff"] <= 1e-5 and c["weight_diff"] <= 1e-5, c
        assert c["sequential_diff"] > 1e-2, c   # stale weights are not sequential SGD
        assert c["repeats"], c
    assert "batches_per_step 2 is less than the 3 pipeline stages" in r["shallow"], r["shallow"]
    assert r["tied"] and "'tied' is read on devices 0, 1" in r["tied"], r["tied"]

def test_batch_norm_keeps_its_mode_when_compiled_for_inference(results):
    """Point 10: an is_test = false batch_norm compiled with
    is_training=False normalizes each micro-batch by its own statistics, as
    Paddle's IPU build and CPU executor did (it used the running ones,
    3.06 off in Paddle's own test); an is_test one by the running ones;
    dropout of either is the identity; compile() leaves the program as
    built. Tolerance 1e-5 absolute on outputs up to ~11 in magnitude (the
    running-statistics case: (x - 5) / 0.5): a few float32 ulps of the
    largest values, where the two modes differ by ~10."""
    r = _case(results, "batch_norm_keeps_its_mode_in_inference")
    assert r["modes_differ_by"] > 1.0                    # the case tells the modes apart
    for key in ("batch_stats", "is_test"):
        assert r[f"{key}_shape"] == [2, 2, 3, 8, 8]      # [batches_per_step, micro-batch...]
        assert r[f"{key}_max_diff"] <= 1e-5, (key, r)
        assert r[f"{key}_attrs_unchanged"], key


def test_lr_scheduler_is_stepped_through_the_compiled_program(results):
    """Point 10: the compiled program carries the main program's LR
    scheduler as Paddle's compile() made it (none for a float rate), so a
    script stepping `program.lr_scheduler` trains as on Paddle's CPU
    executor. 30 Lamb steps on a growing rate: losses to 1e-5 relative and
    weights to 1e-6 absolute (weights ~0.3: float32 rounding of the same
    updates; a scheduler left unstepped is 0.4 off, relative, after 30 steps)."""
    r = _case(results, "lr_scheduler_is_stepped_through_the_compiled_program")
    assert r["has_scheduler"] and r["same_scheduler"] and r["float_lr_has_none"], r
    assert r["last_lr"] == r["ref_last_lr"]
    assert r["loss_rel_diff"] <= 1e-5 and r["weight_diff"] <= 1e-6, r


def test_need_avg_shard_changes_no_arithmetic(results):
    """Point 10: need_avg_shard (1 device, and 2: a split into two stages)
    gives the bits of the unsharded compile. Against Paddle's CPU executor
    the difference is float32 rounding in another summation order, not a
    defect: Paddle's own IPU test asks 2e-6 absolute on this model at
    128x128, tighter than Paddle's CPU result is to the exact value (4.7e-6
    off there; even the exact values miss that tolerance). So both results
    are held to the exact (float64) convolution: within 1e-6 of the largest
    output (~8 float32 ulps after four 27-term sums), a bound Paddle's CPU
    result meets too, and within 2e-6 of it of each other."""
    r = _case(results, "need_avg_shard_changes_no_arithmetic")
    assert r["identical"] == [True, True, True], r
    bound = 1e-6 * r["magnitude"]
    assert r["paddle_error"] <= bound, r                 # the bound is Paddle's own rounding
    assert r["tiller_error"] <= bound, r
    assert r["max_diff"] <= 2 * bound, r


def test_idioms_of_paddles_ipu_tests(results):
    """paddle.base.compiler's IpuCompiledProgram is Tiller's; a float16 feed
    of a float32 input is the same values widened (exact: 0 difference); an
    op outside the guards after the last stage runs there (pipelined
    inference equals Paddle's CPU run, 1e-5)."""
    r = _case(results, "idioms_of_paddles_ipu_tests")
    assert r["base_compiler"]
    assert r["float16_feed_max_diff"] == 0.0
    assert r["pipelined_max_diff"] <= 1e-5


def test_max_weight_norm_clamps_lambs_weight_norm(results):
    """Point 7: max_weight_norm is PopART's Lamb clamp of ||w|| in the trust
    ratio: at the default one Lamb step is Paddle's CPU step; clamped to a
    quarter of ||w|| it is a quarter of it, to 4 float32 ulps of the largest
    weight (a step is the difference of two rounded float32 weights)."""
    r = _case(results, "max_weight_norm_clamps_lambs_weight_norm")
    assert r["default_diff"] <= r["ulps"] and r["clamped_diff"] <= r["ulps"], r
    assert r["step"] > 100 * r["ulps"], r     # the step is far above the rounding
