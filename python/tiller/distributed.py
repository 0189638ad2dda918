"""Training across the processes of an MPI job (Paddle's IPU distribution).

Launch the same script on every process with Open MPI::

    mpirun -np 2 python train.py

and give each process's ``IpuStrategy`` the options a Paddle IPU script gives
under ``poprun``::

    import tiller.distributed as dist
    strategy.set_options({
        "enable_distribution": True,
        "enable_replicated_graphs": True,
        "replicated_graph_count": L,                 # replicas in this process
        "global_replication_factor": dist.size() * L,
        "global_replica_offset": dist.rank() * L,
    })

Each process feeds only its own replicas' micro-batches: ``local_batch``
picks them from the global batch. The job then trains the model that one
process with ``size() * L`` replicas trains on the global batch (the same
bytes: gradients are summed in global replica order). Rank 0's parameters
are broadcast to every process before the first step. The replicas'
collectives run over MPI (``libtiller_mpi.so``); a process that waits longer
than ``TILLER_COLLECTIVE_TIMEOUT`` seconds (default 300) for the others ends
the job, naming itself and the operation.

A replica's pipeline stages can also be spread over processes (Tiller's
option ``processes_per_replica`` S: each replica's ``num_ipus`` devices on S
consecutive ranks, ``size() / S`` replicas in the job); the processes of a
replica are fed alike: ``local_batch(feed, micro_batches,
processes_per_replica=S)``.
"""
from __future__ import annotations

import os

import numpy as np

# The launchers' variables for this process's rank and the job's size: Open
# MPI's mpirun, then PMI / PMIx (MPICH, Slurm's srun).
_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


def _first_int(names, default):
    for name in names:
        value = os.environ.get(name)
        if value not in (None, ""):
            return int(value)
    return default


def rank() -> int:
    """This process's rank in the job (0 outside a launcher)."""
    return _first_int(_RANK_VARS, 0)


def size() -> int:
    """The processes in the job (1 outside a launcher)."""
    return _first_int(_SIZE_VARS, 1)


def is_main_process() -> bool:
    """Whether this process is rank 0: the one that writes checkpoints and logs."""
    return rank() == 0


def local_batch(feed, micro_batches: int, replicas: int = 1, process: int | None = None,
                processes: int | None = None, processes_per_replica: int = 1):
    """This process's part of a global feed.

    ``feed`` (an array or a dict of arrays) holds ``micro_batches``
    micro-batches of the whole job, stacked along the first axis in Paddle's
    IPU order: micro-batch k goes to global replica k % (processes x
    replicas). Returns the micro-batches of this process's ``replicas``
    replicas, in the order its own run feeds them (so each array keeps
    ``micro_batches / processes`` of them). ``process`` / ``processes``
    default to the launcher's rank and size. With ``processes_per_replica``
    (Tiller's option: a replica's pipeline stages on that many consecutive
    ranks), the ranks of a replica are fed alike: its micro-batches."""
    process = rank() if process is None else process
    processes = size() if processes is None else processes
    if processes < 1 or not 0 <= process < processes:
        raise ValueError(f"process {process} of {processes}")
    if processes_per_replica < 1 or processes % processes_per_replica:
        raise ValueError(f"processes_per_replica {processes_per_replica} does not divide "
                         f"{processes} processes")
    process, processes = process // processes_per_replica, processes // processes_per_replica
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    global_replicas = processes * replicas
    if micro_batches < 1 or micro_batches % global_replicas:
        raise ValueError(f"{micro_batches} micro-batches do not divide among {processes} "
                         f"process(es) x {replicas} replica(s)")
    if isinstance(feed, dict):
        return {name: local_batch(value, micro_batches, replicas, process, processes)
                for name, value in feed.items()}  # already per replica group
    array = np.asarray(feed)
    if array.shape[0] % micro_batches:
        raise ValueError(f"{array.shape[0]} rows do not split into {micro_batches} micro-batches")
    parts = array.reshape(micro_batches // global_replicas, global_replicas,
                          array.shape[0] // micro_batches, *array.shape[1:])
    mine = parts[:, process * replicas:(process + 1) * replicas]
    return np.ascontiguousarray(mine.reshape(-1, *array.shape[1:]))
