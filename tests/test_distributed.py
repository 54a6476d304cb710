"""profkit.query.distributed: a LocalCluster of worker processes (forked on Linux) gives the frames one process
gives, and workers start the way Dask's configuration or the platform says."""

from __future__ import annotations

import sys

import dask
import pandas as pd
import pytest

from conftest import DATA
from profkit.query import distributed
from profkit.query import ranks as q
from profkit.query.fleet import reduce


def test_worker_processes_read_logs_into_the_parts_one_process_writes(tmp_path):
    """Two debug logs read by two worker processes, then reduced there: the same answers as in this process."""
    logs = DATA / "h200-engine-like" / "logs"
    one = reduce([logs], tmp_path / "one", workers=1)
    two = reduce([logs], tmp_path / "two", workers=2)
    assert len(two.files("decisions")) == 2 and len(one.files("decisions")) == 1  # a reduce task per log there
    for query in (q.decisions, q.spread, q.pick_stats, q.rank_speed, q.signatures):
        a, b = (query(r).drop(columns=["run", "folder"], errors="ignore") for r in (one, two))  # a hash of the path
        assert len(a)
        keys = [c for c in a.columns if a[c].dtype != float and c not in ("ranks", "first_seen")]
        a, b = (f.sort_values(keys).reset_index(drop=True) for f in (a, b))
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
def test_workers_are_forked_on_linux_unless_dask_is_told_otherwise():
    assert distributed.start_method() == "fork"
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        assert distributed.start_method() == "forkserver"


def _worker_settings(_) -> tuple:
    return tuple(dask.config.get(key) for key in distributed.LOCAL_CONFIG)


def test_local_cluster_workers_run_without_the_background_work_they_do_not_need():
    """The LocalCluster's workers start with LOCAL_CONFIG (no profiler, a slow health tick and host monitor): Dask
    reads these where each worker starts, so they must be set while the cluster is built, not only here."""
    with distributed.Runner(workers=2).start() as runner:
        found = set(runner.map(_worker_settings, range(4)))
    assert found == {tuple(distributed.LOCAL_CONFIG.values())}
    assert dask.config.get("distributed.admin.tick.interval") != "1s"  # this process's settings are left as they were
