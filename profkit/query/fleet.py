"""From the paths the user gives to the reduced parts the rank queries read: find, convert, reduce.

Captures are reduced where they lie, a batch of folders per task. Without captures, each FlashInfer
debug log (else each cache file or v2 store) is read by its own task into a saved Tables folder (its
rank from its name where its rows state none, as SGLang names ``rank_tp1_pp0_dp0.json``), which is then
reduced like a capture. Tasks run in this process or on Dask (:mod:`profkit.query.distributed`).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Sequence

import pandas as pd

from profkit.errors import ProfkitError
from profkit.catalog.captures import capture_folders
from profkit.query.distributed import Runner
from profkit.query.ranks import Reduced
from profkit.catalog.reduce import reduce_batch

# Capture folders per reduction task: few enough that a batch's candidates stay well inside DuckDB's
# memory cap (a shipped rank is 31,082 candidate rows: 32 ranks peak near 0.5 GB), enough that each task
# outlasts its scheduling.
BATCH = 32


def reduce(paths: str | os.PathLike | Sequence[str | os.PathLike], out: str | os.PathLike, *,
           scheduler: str | None = None, workers: int | None = None, processes: bool = True,
           served: bool = True) -> Reduced:
    """Reduce every capture (else debug log, else cache file) under ``paths`` into parts under ``out``.

    Args:
        paths: capture folders (``profkit capture --out``, ``Tables.save``), debug logs, cache files, or
            folders holding them.
        out: the folder the parts are written to (created; on a shared file system for a remote cluster).
        scheduler: a Dask cluster's address (else ``DASK_SCHEDULER_ADDRESS``, else a LocalCluster when there
            is more than one task).
        workers: LocalCluster workers (default: the cores); 1 runs everything in this process.
        processes: LocalCluster workers as processes (False: threads, for tests).
        served: read the winners tables for the tactics each rank served (:func:`profkit.query.ranks.served`);
            False leaves them unread where there are candidates.

    Raises:
        ProfkitError: when a path does not exist or nothing under the paths holds a capture, log or cache file.
    """
    paths = [Path(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
    out = Path(out)
    folders = capture_folders(paths)
    problems: list[str] = []
    with Runner(scheduler=scheduler, workers=workers, processes=processes) as runner:
        if folders.empty:
            folders = _converted(paths, out / "tables", problems, runner)
        size = BATCH if runner.local else max(1, min(BATCH, -(-len(folders) // (2 * runner.workers))))
        tasks = [(folders.iloc[i:i + size].reset_index(drop=True), str(out), i // size, None if runner.local else 1,
                  served) for i in range(0, len(folders), size)]
        for found in runner.map(_reduce_task, tasks):
            problems += found
    if problems:
        warnings.warn(f"{len(problems)} file(s) could not be read and were set aside: {'; '.join(problems[:5])}"
                      + (f" and {len(problems) - 5} more" if len(problems) > 5 else ""), stacklevel=2)
    return Reduced(root=out, folders=len(folders), problems=tuple(problems))


def _reduce_task(task: tuple) -> list[str]:
    folders, out, part, threads, served = task
    return reduce_batch(folders, out, part, threads=threads, served=served)


def _converted(paths: list[Path], target: Path, problems: list[str], runner: Runner) -> pd.DataFrame:
    """Each debug log (else cache file or v2 store) under ``paths`` saved as a Tables folder under ``target``."""
    from profkit.catalog.walk import walk

    found: dict[str, list[Path]] = {"log": [], "cache": []}
    for path in paths:
        inv = walk(path)
        found["log"] += inv.paths("log")
        found["cache"] += inv.paths("cache", "v2_store")
    kind = "log" if found["log"] else "cache"
    files = list(dict.fromkeys(found[kind]))
    if not files:
        raise ProfkitError(f"{', '.join(map(str, paths))}: no profkit capture, FlashInfer debug log or cache file here; "
                           "pass capture folders (profkit capture --out), debug logs or cache files")
    tasks = [(kind, str(f), str(target / f"{i:06d}")) for i, f in enumerate(files)]
    for problem in runner.map(_convert_task, tasks):
        problems.extend(problem)
    return capture_folders([target]) if target.is_dir() else capture_folders([])


def _convert_task(task: tuple) -> list[str]:
    """Read one log or cache file and save its tables (rank from its name where its rows state none)."""
    from profkit.catalog.keys import parallel_ranks
    from profkit.sources.cache import read_cache
    from profkit.sources.logs import read_log

    kind, path, target = task
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # what could not be read is in tables.problems
            tables = read_log(path) if kind == "log" else read_cache(path)
    except ProfkitError as exc:
        return [f"{path}: {exc}"]
    rank = parallel_ranks(path).get("rank")
    if rank is not None:
        filled = {t: getattr(tables, t).assign(rank=getattr(tables, t)["rank"].fillna(rank))
                  for t in ("candidates", "winners", "tuning") if "rank" in getattr(tables, t).columns}
        tables = dataclasses.replace(tables, **filled)
    tables.save(target)
    return [str(p) for p in tables.problems]
