"""Reading the files of one :func:`profkit.read_log` call: in this process, or side by side in a process pool.

Each file is read by its own :class:`~profkit.sources.logs.reader.Reader` and nothing passes between
files, so a pool of processes reads them at once; the readers come back in the order of the files and
the tables are built from them here, exactly as from readers made in this process.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import gc
import multiprocessing
import os
from typing import Callable, Sequence

from profkit.errors import ParseError
from profkit.sources import inputs
from profkit.sources.logs.reader import Reader

# Files that hold less than this together are read in this process: starting a pool costs more than it saves.
POOL_BYTES = 16 << 20


@dataclasses.dataclass
class Outcome:
    """One file's result: its reader, or the error that stopped it; ``damage``: why its data ended early."""

    reader: Reader | None
    error: ParseError | None
    damage: str


ReadOne = Callable[[inputs.Input, bool, Callable[[int], object] | None], Outcome]


def read_each(items: Sequence[inputs.Input], read_one: ReadOne, *, strict: bool,
              progress: Callable[[int], object] | None, workers: int | None) -> list[Outcome]:
    """``read_one(item, strict, progress)`` of every input, in order; in a pool of processes when
    :func:`pool_size` is more than one (``read_one`` must then be a module-level function)."""
    size = pool_size(items, workers)
    if size <= 1:
        return [read_one(item, strict, progress) for item in items]
    context = multiprocessing.get_context()
    queue = context.SimpleQueue() if progress is not None else None
    pool = concurrent.futures.ProcessPoolExecutor(size, mp_context=context, initializer=_start_worker,
                                                  initargs=(queue,))
    try:
        futures = [pool.submit(_in_worker, read_one, item, strict) for item in items]
        pending = set(futures)
        while pending:  # the workers' progress is reported here, in the caller's thread
            _, pending = concurrent.futures.wait(pending, timeout=0.1, return_when=concurrent.futures.FIRST_COMPLETED)
            while queue is not None and not queue.empty():
                progress(queue.get())
        return [future.result() for future in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def pool_size(items: Sequence[inputs.Input], workers: int | None) -> int:
    """Processes to read ``items`` with: ``workers`` (at most one per input), or by default one per input up to
    the cores this process may use, and 1 for a single input or inputs under :data:`POOL_BYTES` together."""
    if workers is not None:
        return max(1, min(workers, len(items)))
    if len(items) < 2 or sum(_size(item) for item in items) < POOL_BYTES:
        return 1
    return min(len(items), _cores())


_progress = None  # a worker's queue to the caller's progress callable


def _start_worker(queue) -> None:
    global _progress
    gc.disable()  # as in read_log: a worker reads and exits, and the collections cost time for no garbage
    _progress = queue


def _in_worker(read_one: ReadOne, item: inputs.Input, strict: bool) -> Outcome:
    return read_one(item, strict, _progress.put if _progress is not None else None)


def _size(item: inputs.Input) -> int:
    if item.path is None:
        return len(item.text or item.data or "")
    try:
        return os.path.getsize(item.path)
    except OSError:
        return 0


def _cores() -> int:
    if hasattr(os, "process_cpu_count"):  # Python 3.13+
        return os.process_cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1
