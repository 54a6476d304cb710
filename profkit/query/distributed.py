"""Per-file work on ``dask.distributed``: a LocalCluster by default, or an existing cluster by its address.

Reading a debug log or a cache file and reducing a batch of capture folders are independent of each
other: each is one task that writes parquet (through profkit's one writer) that the DuckDB queries then
read, as Nsight Systems' recipes do (``--mode dask-futures``). Without an address (``--scheduler`` or
``DASK_SCHEDULER_ADDRESS``), more than one task and more than one worker start a LocalCluster of
``workers`` processes; one task or one worker runs here, in this process. With an existing cluster, the
output folder must be one its workers can write and this process can read (a shared file system).

On Linux the LocalCluster's workers are forked from this process (Dask spawns them by default): they start
with profkit, pandas and pyarrow already imported, in about 0.4 s instead of 3-5 s on a loaded 2-core machine
(:func:`start_method`).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
from typing import Callable, Sequence

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
# A LocalCluster's background work, which takes CPU from the tasks (a shell's processes share one CPU share under
# Linux's autogroup scheduling when other sessions are busy): no statistical profiler in the workers (it samples
# every 10 ms, 5-8% of a task's CPU, for a dashboard this cluster does not serve); the event loops' health tick
# every second instead of every 20 ms and host statistics every 2 s instead of 0.5 s (both only feed dashboards and
# warnings). Idle, a 2-worker cluster then takes 0.26-0.30 s of CPU in 10 s instead of 0.57-0.66 s.
LOCAL_CONFIG = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
                "distributed.admin.system-monitor.interval": "2s"}


def start_method() -> str:
    """How LocalCluster workers start: Dask's ``distributed.worker.multiprocessing-method`` when set to other than
    its default ``spawn``; else ``fork`` on Linux (a copy of this process, imports done), ``spawn`` elsewhere
    (forking a process that holds system frameworks is not safe on macOS)."""
    import dask

    chosen = dask.config.get("distributed.worker.multiprocessing-method")
    if chosen != "spawn":
        return chosen
    return "fork" if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods() \
        else "spawn"


def scheduler_address(given: str | None) -> str | None:
    """The cluster to use: ``given`` (a flag wins), else ``DASK_SCHEDULER_ADDRESS``, else None (a local one)."""
    return given or os.environ.get(SCHEDULER_ENV) or None


class Runner:
    """Runs tasks in this process or on one Dask cluster, started by the first map that needs it and kept for
    the next ones (a LocalCluster's start costs seconds: reading logs and reducing them share one).

    Args:
        scheduler: an existing cluster's address (``tcp://host:8786``); None: ``DASK_SCHEDULER_ADDRESS``, else
            a LocalCluster.
        workers: LocalCluster workers (default: the cores); 1 runs every task in this process.
        processes: LocalCluster workers as processes (True) or threads of this process (False: for tests).
    """

    def __init__(self, *, scheduler: str | None = None, workers: int | None = None, processes: bool = True):
        self.address = scheduler_address(scheduler)
        self.workers = int(workers or os.cpu_count() or 1)
        self.processes = processes
        self._client = self._cluster = None

    @property
    def local(self) -> bool:
        """True when every task runs in this process."""
        return self.address is None and self.workers <= 1

    def start(self) -> Runner:
        """Start (or connect to) the cluster now, when there is one to use; the first map that needs it does
        otherwise."""
        if not self.local:
            self._connect()
        return self

    def map(self, fn: Callable, tasks: Sequence) -> list:
        """``[fn(t) for t in tasks]`` (``fn`` picklable, tasks independent), in task order."""
        tasks = list(tasks)
        if self._client is None and (self.local or (self.address is None and len(tasks) <= 1)):
            return [fn(t) for t in tasks]
        return self._connect().gather(self._connect().map(fn, tasks, pure=False))

    def _connect(self):
        if self._client is None:
            import dask
            from distributed import Client, LocalCluster

            if self.address is not None:
                self._client = Client(self.address)
            else:
                with dask.config.set(LOCAL_CONFIG, **{"distributed.worker.multiprocessing-method": start_method()}):
                    # The HTTP server (health, metrics) on a free local port: the default 8787 warns when taken.
                    self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1,
                                                 processes=self.processes, dashboard_address=None,
                                                 scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                                 silence_logs=logging.ERROR)
                self._client = Client(self._cluster)
        return self._client

    def close(self) -> None:
        for held in (self._client, self._cluster):
            if held is not None:
                held.close()
        self._client = self._cluster = None

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
