"""Replicas across the processes of an MPI job (issue 13): `mpirun -np P`
runs ipu_scripts/train_distributed.py, BERT-tiny pre-training with Adam,
each process feeding its own replicas' micro-batches; the same script as one
process with all the replicas is the reference.

Bound: the issue asks for parameters within rel 1e-6 after 20 steps. The
collective sums every element in global replica order, as one process does,
so the states are compared for equality of bytes (stricter); the test of a
job whose processes do not talk shows the comparison fails when the
collectives do not run.
"""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parent / "ipu_scripts" / "train_distributed.py"
BUILD = Path(os.environ.get("TILLER_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
MPIRUN = shutil.which("mpirun")


def _mpi_available():
    return MPIRUN is not None and (BUILD / "lib" / "libtiller_mpi.so").is_file()


# CI installs Open MPI (scripts/setup.sh): there the tests must run, not skip.
pytestmark = pytest.mark.skipif(
    not _mpi_available() and os.environ.get("CI") != "true",
    reason="needs mpirun and build/lib/libtiller_mpi.so (apt install openmpi-bin libopenmpi-dev)")


def _run(out, global_replicas, processes=None, *args, env=None, timeout=300):
    cmd = [sys.executable, str(SCRIPT), str(out), str(global_replicas), *args]
    if processes:
        # Root in CI's containers; more processes than CPUs on 2-core machines.
        cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(processes), *cmd]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)
    return p, time.monotonic() - start


def _train(tmp_path, name, global_replicas, processes=None, *args):
    out = tmp_path / f"{name}.npz"
    p, _ = _run(out, global_replicas, processes, *args)
    assert p.returncode == 0, f"{name}: rc {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return np.load(out)


def _assert_same_model(ref, got, what):
    states = [k for k in ref.files if k.startswith("state/")]
    assert states and set(states) == {k for k in got.files if k.startswith("state/")}
    for k in states:
        a, b = ref[k], got[k]
        assert a.dtype == b.dtype and a.shape == b.shape, (what, k)
        rel = np.abs(a.astype(np.float64) - b).max() / max(np.abs(a).max(), 1e-30) if a.size else 0
        assert np.array_equal(a, b), f"{what}: '{k}' differs (max rel {rel:.3g})"
    return ref["losses"], got["losses"]


@pytest.mark.parametrize("processes, global_replicas, extra", [
    (2, 2, ()),
    (4, 4, ()),                                   # oversubscribed
    (2, 4, ()),                                   # 2 processes x 2 local replicas
    (2, 2, ("accumulate=2", "dropout=0.1")),      # masks drawn by global micro-batch
    (2, 2, ("stages=2", "pipeline=1", "accumulate=4", "updates=10")),  # 2-stage replicas
    (2, 4, ("rts=1",)),     # optimizer state sharded over the 4 replicas of 2 processes
    (4, 4, ("rts=1",)),
    # Paddle's threshold: large tensors reduce-scattered, small ones all-reduced.
    (2, 2, ("rts=1", "rts_min=8192")),
    # 2 replicas, each of 2 stages on 2 processes (processes_per_replica 2).
    (4, 2, ("stages=2", "pipeline=1", "accumulate=4", "updates=10", "spread=2")),
], ids=["np2", "np4", "np2x2", "np2-accumulate-dropout", "np2-pipelined", "np2x2-sharded-state",
        "np4-sharded-state", "np2-sharded-large-state", "np4-2-replicas-of-2-stage-processes"])
def test_job_trains_the_one_process_model(tmp_path, processes, global_replicas, extra):
    ref = _train(tmp_path, "one", global_replicas, None, *extra)
    got = _train(tmp_path, "job", global_replicas, processes, *extra)
    ref_losses, losses = _assert_same_model(ref, got, f"-np {processes} {extra}")
    # Rank 0's replicas are global replicas 0 .. local - 1: their losses are
    # the reference's in each micro-batch's place.
    spread = next((int(a.split("=")[1]) for a in extra if a.startswith("spread=")), 1)
    local = global_replicas * spread // processes
    accumulate = next((int(a.split("=")[1]) for a in extra if a.startswith("accumulate=")), 1)
    # Reference fetches per update: [accumulate, global replicas] micro-batches
    # flattened; rank 0's: [accumulate, local replicas].
    ref_mine = ref_losses.reshape(len(ref_losses), accumulate, -1)[:, :, :local]
    np.testing.assert_array_equal(losses.reshape(len(losses), accumulate, local), ref_mine)


@pytest.mark.parametrize("processes, local, memory", [
    (2, 1, "shared"), (3, 1, "shared"), (2, 1, "messages"), (3, 1, "messages"),
    (2, 2, "messages"), (3, 2, "messages")])
def test_mpi_collectives_give_the_in_process_bytes(processes, local, memory):
    """Every collective (all-reduce in and out of place, reduce-scatter,
    all-gather, broadcast; float32 and float64; empty to 100003 elements;
    scaled or not) and the sparse-table rows (gather-rows and exchange-rows:
    one replica per process takes MPI's own path) over P processes x L
    threads against the in-process collective of P x L threads, which each
    process computes itself; and the process group's broadcast, Min and
    GatherParts
    (tests/mpi/collective_check.cc). With one replica per process the row
    exchanges read the other processes' bytes in shared memory (every
    process maps every process's segment), unless TILLER_MPI_SHARED_MEMORY=0
    sends them as messages; with two replicas per process they always
    travel as messages."""
    check = BUILD / "bin" / "tiller_mpi_check"
    env = dict(os.environ)
    if memory == "messages" and local == 1:
        env["TILLER_MPI_SHARED_MEMORY"] = "0"
    p = subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(processes),
                        str(check), str(local)], capture_output=True, text=True, timeout=300,
                       env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    oks = sorted(line for line in p.stdout.splitlines() if ": ok " in line)
    assert [line.split(":")[0] for line in oks] == [f"rank {r}" for r in range(processes)], p.stdout
    segments = processes if memory == "shared" else 0
    assert all(line.endswith(f"shared memory segments {segments}") for line in oks), p.stdout


@pytest.mark.parametrize("memory", ["shared", "messages"])
def test_a_row_exchange_that_a_rank_never_reaches_ends_the_job(memory):
    """Rank 0 waits at a row exchange that rank 1 never reaches: in shared
    memory (a barrier of counters, not an MPI call) as over messages, the
    wait ends the job after TILLER_COLLECTIVE_TIMEOUT, naming it."""
    env = {**os.environ, "TILLER_COLLECTIVE_TIMEOUT": "3"}
    if memory == "messages":
        env["TILLER_MPI_SHARED_MEMORY"] = "0"
    start = time.monotonic()
    p = subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2",
                        str(BUILD / "bin" / "tiller_mpi_check"), "1", "hang-rows"],
                       capture_output=True, text=True, timeout=120, env=env)
    seconds = time.monotonic() - start
    assert p.returncode != 0
    assert 3 <= seconds < 60, seconds
    out = p.stdout + p.stderr
    assert re.search(r"tiller: rank 0 of 2 waited \d+ s in gather-rows[a-z ]* #\d+", out), out[-3000:]
    assert "a rank died or stopped answering" in out
    _assert_no_process_left()
    # The segments' names went once every process had mapped them.
    assert not list(Path("/dev/shm").glob("tiller-*"))


SPARSE_SCRIPT = SCRIPT.parent / "train_sparse_distributed.py"


@pytest.mark.parametrize("form, opt", [("pir", "adagrad"), ("legacy", "adam")])
def test_tables_split_by_rows_over_processes_train_the_one_process_model(tmp_path, form, opt):
    """Sparse embedding tables split by rows over 2 replicas in 2 processes
    (shard_embedding_rows: each rank holds half of each table's rows and
    optimizer state; lookups and row updates exchange ids and rows over
    MPI) train the bytes of one process's 2 replicas, which equal
    replicated tables' bytes (a looked-up row is summed with zeros only).
    The final tables are whole: the parts gathered from both processes."""
    def train(name, processes, *extra):
        out = tmp_path / f"{name}.npz"
        cmd = [sys.executable, str(SPARSE_SCRIPT), str(out), "2", f"opt={opt}", *extra]
        if processes:
            cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(processes), *cmd]
        env = {**os.environ, "OMP_NUM_THREADS": "1",
               "FLAGS_enable_pir_api": "1" if form == "pir" else "0"}
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 0, f"{name}: rc {p.returncode}\n{p.stderr[-3000:]}"
        return np.load(out)

    replicated = train("replicated", None, "rows=0")
    split = train("split", None)
    job = train("job", 2)
    for k in replicated.files:
        if k.startswith("state/"):
            assert np.array_equal(split[k], replicated[k]), f"one process: '{k}' differs"
            assert np.array_equal(job[k], split[k]), f"-np 2: '{k}' differs"
    np.testing.assert_array_equal(split["losses"], replicated["losses"])
    np.testing.assert_array_equal(job["losses"], split["losses"][:, :1])


def test_processes_that_do_not_talk_train_other_models(tmp_path):
    """The wrong setup (no enable_distribution: every process trains alone on
    its share) ends with other parameters: the comparison above can fail."""
    ref = _train(tmp_path, "one", 2)
    alone = _train(tmp_path, "alone", 2, 2, "distribute=0")
    with pytest.raises(AssertionError, match="differs"):
        _assert_same_model(ref, alone, "alone")


def test_a_killed_rank_ends_the_job(tmp_path):
    """A rank SIGKILLed mid-run: the launcher ends the others, non-zero, and
    no process of the job is left."""
    p, seconds = _run(tmp_path / "x.npz", 2, 2, "die_at=3:1", env={"TILLER_COLLECTIVE_TIMEOUT": "20"},
                      timeout=120)
    assert p.returncode != 0
    assert seconds < 60, seconds
    assert not (tmp_path / "x.npz").exists()
    _assert_no_process_left()


def test_a_job_killed_after_a_checkpoint_resumes_on_fewer_processes(tmp_path):
    """Two processes save a checkpoint before update 10 (rank 0 writes it),
    then rank 1 is killed before update 13. One process with 2-step
    accumulation (the same global batch) resumes from the checkpoint and
    reaches the uninterrupted job's losses within rel 1e-5 (the issue's
    bound: the sums of the gradients are grouped differently, accumulation
    instead of replicas) and its state within 1e-5."""
    whole = _train(tmp_path, "whole", 2, 2)
    prefix = tmp_path / "ckpt" / "step10"
    p, _ = _run(tmp_path / "killed.npz", 2, 2, f"save_at=10:{prefix}", "die_at=13:1",
                timeout=300)
    assert p.returncode != 0 and not (tmp_path / "killed.npz").exists()
    assert prefix.with_suffix(".pdparams").is_file() and prefix.with_suffix(".pdopt").is_file()
    _assert_no_process_left()
    resumed = _train(tmp_path, "resumed", 1, None, "accumulate=2", f"resume={prefix}:10")
    assert int(resumed["first_update"]) == 10 and resumed["losses"].shape == (10, 2)
    # Rank 0's losses are global micro-batch 0 of each update; the resumed
    # run's first micro-batch is the same one.
    want, got = whole["losses"][10:, 0], resumed["losses"][:, 0]
    rel = np.abs(got - want) / np.abs(want)
    assert rel.max() <= 1e-5, rel
    assert np.abs(got[0] - whole["losses"][0, 0]) > 1e-3  # trained state, not the initial one
    for k in whole.files:
        if k.startswith("state/") and whole[k].size:
            diff = np.abs(whole[k].astype(np.float64) - resumed[k]).max()
            assert diff <= 1e-5, (k, diff)


def test_a_rank_that_stops_answering_ends_the_job_within_the_timeout(tmp_path):
    """A rank that stops (SIGSTOP) would block MPI forever: the waiting rank
    gives up after TILLER_COLLECTIVE_TIMEOUT seconds, says which rank waited
    in which collective, and ends the job."""
    p, seconds = _run(tmp_path / "x.npz", 2, 2, "hang_at=3:1",
                      env={"TILLER_COLLECTIVE_TIMEOUT": "4"}, timeout=120)
    assert p.returncode != 0
    assert 4 <= seconds < 60, seconds
    out = p.stdout + p.stderr
    # "waited 4 s" unless the machine held the waiting thread back a while.
    assert re.search(r"tiller: rank 0 of 2 waited \d+ s in all-reduce #\d+ \(\d+ bytes\)",
                     out), out[-3000:]
    assert "a rank died or stopped answering" in out
    _assert_no_process_left()


@pytest.mark.parametrize("extra", [
    ("stages=2", "pipeline=1", "accumulate=4"),
    ("stages=2", "pipeline=1", "accumulate=4", "dropout=0.1", "updates=10"),
    ("stages=2", "pipeline=1", "accumulate=6", "fill_drain=1", "updates=10"),
    ("stages=2", "accumulate=2", "updates=10"),  # not pipelined: the devices take turns
], ids=["1f1b", "1f1b-dropout", "fill-drain", "sequential"])
def test_pipeline_stages_on_two_processes_train_the_one_process_model(tmp_path, extra):
    """The replica's 2 stages on 2 ranks (processes_per_replica 2): the
    activations, gradients, the loss and the clipping's norms cross as MPI
    messages; the parameters and every micro-batch's loss equal (bytes) one
    process running both stages (the issue's bound is rel 1e-6)."""
    ref = _train(tmp_path, "one", 1, None, *extra)
    got = _train(tmp_path, "job", 1, 2, "spread=2", *extra)
    ref_losses, losses = _assert_same_model(ref, got, f"stages on 2 processes {extra}")
    np.testing.assert_array_equal(losses, ref_losses)


def test_a_pipeline_stage_that_stops_answering_ends_the_job(tmp_path):
    """Rank 1 (the last stage) stops: rank 0, waiting for its messages,
    gives up after TILLER_COLLECTIVE_TIMEOUT seconds and ends the job."""
    p, seconds = _run(tmp_path / "x.npz", 1, 2, "spread=2", "stages=2", "pipeline=1",
                      "accumulate=4", "hang_at=3:1", env={"TILLER_COLLECTIVE_TIMEOUT": "4"},
                      timeout=120)
    assert p.returncode != 0
    assert 4 <= seconds < 60, seconds
    out = p.stdout + p.stderr
    assert re.search(r"tiller: rank 0 of 2", out), out[-3000:]
    assert "a rank died or stopped answering" in out, out[-3000:]
    _assert_no_process_left()


def _assert_no_process_left():
    for _ in range(50):
        left = subprocess.run(["pgrep", "-f", str(SCRIPT)], capture_output=True, text=True)
        if not left.stdout.strip():
            return
        time.sleep(0.2)
    raise AssertionError(f"processes left: {left.stdout}")


@pytest.mark.parametrize("option, value, message", [
    ("global_replication_factor", 4,
     "global_replication_factor 4 but the job has 2 process(es) x 1 replica(s) "
     "(replicated_graph_count) = 2: launch with mpirun -np 4"),
    ("global_replica_offset", 0,
     "global_replica_offset 0 but this process is rank 1 of 2, whose first replica is "
     "rank x replicated_graph_count = 1"),
    ("processes_per_replica", 3,
     "processes_per_replica 3 does not divide the job's 2 process(es): each replica takes "
     "that many; launch mpirun -np with a multiple of 3"),
    ("processes_per_replica", 2,
     "processes_per_replica 2 does not divide the replica's 1 devices (num_ipus)"),
])
def test_options_that_disagree_with_the_job_are_refused(tmp_path, option, value, message):
    script = tmp_path / "bad.py"
    script.write_text(f"""
import sys
sys.path[:0] = {[str(SCRIPT.parents[3] / "python"), str(SCRIPT.parents[3]), str(SCRIPT.parents[1])]!r}
import paddle, tiller
import tiller.distributed as dist
from models import training as T
with T.static_mode():
    built = T.build("cnn", None, T.OptSpec("sgd", schedule="constant"), seed=0)
    scope = paddle.static.Scope()
    T.init_scope(built, scope)
    s = tiller.IpuStrategy()
    s.set_graph_config(is_training=True, micro_batch_size=2)
    options = {{"enable_distribution": True, "global_replication_factor": dist.size(),
               "global_replica_offset": dist.rank(), "num_threads": 1}}
    options[{option!r}] = {value!r}
    s.set_options(options)
    try:
        tiller.IpuCompiledProgram(built.main, scope=scope, ipu_strategy=s).compile(
            built.feed_names, built.fetch_list)
    except tiller.TillerError as e:
        # A file per rank: the ranks' stdout lines can interleave in mpirun's.
        open({str(tmp_path)!r} + f"/refused.{{dist.rank()}}", "w").write(str(e))
""")
    p = subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable,
                        str(script)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    # Every rank refused: one with the reason, the other naming that rank.
    refused = [(tmp_path / f"refused.{r}").read_text() for r in range(2)]
    assert any(message in text for text in refused), refused
    assert all(message in text or "of the job refused its distribution options" in text
               for text in refused), refused


def test_local_batch_picks_this_process_replicas_micro_batches():
    import tiller.distributed as dist

    # 2 updates x 2 accumulation x 4 global replicas = 16 micro-batches of 3 rows.
    feed = {"x": np.arange(16 * 3 * 2).reshape(48, 2), "y": np.arange(16)}
    got = dist.local_batch(feed, 16, replicas=2, process=1, processes=2)
    # Micro-batch k goes to global replica k % 4; process 1 holds replicas 2, 3.
    mine = [k for k in range(16) if k % 4 in (2, 3)]
    np.testing.assert_array_equal(got["y"], mine)
    np.testing.assert_array_equal(got["x"], feed["x"].reshape(16, 3, 2)[mine].reshape(-1, 2))
    with pytest.raises(ValueError, match="do not divide"):
        dist.local_batch(feed, 6, replicas=2, process=0, processes=2)
    with pytest.raises(ValueError, match="process 2 of 2"):
        dist.local_batch(feed, 16, replicas=2, process=2, processes=2)


@pytest.mark.parametrize("rank, warns", [("0", True), ("1", False)])
def test_only_rank_zero_prints_notes(rank, warns):
    """Every rank of a job runs the same script: a note about an option
    without effect is printed by rank 0 alone."""
    code = ("import warnings, tiller\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    tiller.IpuStrategy().set_options({'available_memory_proportion': 0.5})\n"
            "print('NOTES', sum('no effect' in str(x.message) for x in w))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "OMPI_COMM_WORLD_RANK": rank,
                                         "OMPI_COMM_WORLD_SIZE": "2"})
    assert p.returncode == 0, p.stderr
    assert f"NOTES {1 if warns else 0}" in p.stdout, p.stdout + p.stderr
