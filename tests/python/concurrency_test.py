"""Serving from several threads: Predictor.clone() and PredictorPool
(Paddle Inference's names). Each thread runs its own clone at the same time
as the others (run() releases the GIL); every answer must be the bytes one
thread got from the original predictor alone, and memory must stay flat once
every clone has compiled its shapes."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import tiller.inference as ti
from models import zoo as Z

THREADS = 4
REQUESTS_PER_THREAD = 500


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("preset", ["bert-tiny", "resnet-tiny"])
def test_clones_serve_four_threads_with_the_single_thread_answers(zoo, preset):
    m = zoo.export(preset, "pir")
    pool = ti.PredictorPool(ti.Config(m.model_file, m.params_file), THREADS)
    assert len(pool) == THREADS
    first = pool.retrive(0)
    names = first.get_input_names()
    # 12 requests over 3 batch sizes (and, for BERT, 2 sequence lengths):
    # every clone compiles several shapes, and runs alternate between them.
    requests = []
    for i in range(12):
        feeds = Z.make_inputs(preset, batch=1 + i % 3, seq_len=8 + 8 * (i % 2), seed=i)
        requests.append([feeds[n] for n in names])
    want = [first.run(r) for r in requests]

    warm_up = 3 * REQUESTS_PER_THREAD
    mismatches, errors = [], []
    # Main measures RSS between the warm-up and the measured requests, while
    # the serving threads wait (the same threads throughout, as in a server).
    phase = threading.Barrier(THREADS + 1)

    def serve(t):
        p = pool.retrieve(t)
        try:
            for k in range(warm_up + REQUESTS_PER_THREAD):
                if k == warm_up:
                    phase.wait()  # warm-up done
                    phase.wait()  # RSS measured
                i = (k * 5 + t * 7) % len(requests)
                got = p.run(requests[i])
                if any(not np.array_equal(g, w) for g, w in zip(got, want[i])):
                    mismatches.append((t, k, i))
        except Exception as e:  # reported below, with the thread
            errors.append(f"thread {t}: {e!r}")
            phase.abort()

    threads = [threading.Thread(target=serve, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    # Warm-up: every clone compiles every shape, and the per-thread memory
    # (malloc's arenas, oneDNN's scratchpads) grows to its working size.
    try:
        phase.wait()
        before = _rss_bytes()
        phase.wait()
    except threading.BrokenBarrierError:
        before = None
    for th in threads:
        th.join()
    assert not errors, errors
    assert not mismatches, f"{len(mismatches)} answers differ, first (thread, run, " \
                           f"request): {mismatches[:5]}"
    grown = _rss_bytes() - before
    # Flat (measured: within +-50 KB): 1 MB over the 2,000 requests is 512
    # bytes per request, so keeping a copy of every ResNet input (12-36 KB)
    # or BERT-tiny output (its hidden states, KBs) per run fails here.
    assert grown < 1 << 20, f"RSS grew {grown / 2**20:.1f} MB over " \
                            f"{THREADS * REQUESTS_PER_THREAD} requests"


def test_a_clone_keeps_working_after_its_original_is_gone(zoo):
    m = zoo.export("bert-tiny", "pir")
    original = ti.create_predictor(ti.Config(m.model_file, m.params_file))
    feeds = Z.make_inputs("bert-tiny", batch=2, seq_len=8, seed=3)
    inputs = [feeds[n] for n in original.get_input_names()]
    want = original.run(inputs)
    clone = original.clone()
    del original
    for got, w in zip(clone.run(inputs), want):
        np.testing.assert_array_equal(got, w)


def test_pool_index_out_of_range_is_refused(zoo):
    m = zoo.export("bert-tiny", "pir")
    pool = ti.PredictorPool(ti.Config(m.model_file, m.params_file), 2)
    with pytest.raises(ti.TillerError, match=r"Retrive\(2\): the pool holds 2 predictor"):
        pool.retrive(2)
    with pytest.raises(ti.TillerError, match=r"size must be >= 1"):
        ti.PredictorPool(ti.Config(m.model_file, m.params_file), 0)
