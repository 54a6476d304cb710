"""Per-file work on ``dask.distributed``: a LocalCluster by default, or an existing cluster by its address.

Reading a debug log or a cache file and reducing a batch of capture folders are independent of each
other: each is one task that writes parquet (through profkit's one writer) that the DuckDB queries then
read, as Nsight Systems' recipes do (``--mode dask-futures``). Without an address (``--scheduler`` or
``DASK_SCHEDULER_ADDRESS``), more than one task and more than one worker start a LocalCluster of
``workers`` processes; one task or one worker runs here, in this process. With an existing cluster, the
output folder must be one its workers can write and this process can read (a shared file system).
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Sequence

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"


def scheduler_address(given: str | None) -> str | None:
    """The cluster to use: ``given`` (a flag wins), else ``DASK_SCHEDULER_ADDRESS``, else None (a local one)."""
    return given or os.environ.get(SCHEDULER_ENV) or None


def run_tasks(fn: Callable, tasks: Sequence, *, scheduler: str | None = None, workers: int | None = None,
              processes: bool = True) -> list:
    """``[fn(t) for t in tasks]``, on Dask when there is a cluster to use or more than one task and worker.

    Args:
        fn: a picklable function of one task.
        tasks: the tasks, each independent of the others.
        scheduler: an existing cluster's address (``tcp://host:8786``); None: ``DASK_SCHEDULER_ADDRESS``, else
            a LocalCluster.
        workers: LocalCluster workers (default: the cores); 1 runs every task in this process.
        processes: LocalCluster workers as processes (True) or threads of this process (False: for tests).

    Returns:
        The results, in task order.
    """
    tasks = list(tasks)
    address = scheduler_address(scheduler)
    workers = int(workers or os.cpu_count() or 1)
    if address is None and (len(tasks) <= 1 or workers <= 1):
        return [fn(t) for t in tasks]
    from distributed import Client, LocalCluster

    if address is not None:
        with Client(address) as client:
            return client.gather(client.map(fn, tasks, pure=False))
    with LocalCluster(n_workers=min(workers, len(tasks)), threads_per_worker=1, processes=processes,
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        return client.gather(client.map(fn, tasks, pure=False))
