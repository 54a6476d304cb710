"""How fast profkit.read_log is, next to just reading the lines of the same file.

    .venv/bin/python benchmarks/bench_read_log.py [--lines 1000000] [--log PATH ...] [--keep /tmp/mixed.log]
        [--files 8] [--floor]

Builds a log of at least ``--lines`` lines from real H200 debug logs (by default every shipped one:
``data/h200/*/debug.log.gz``, ``data/h200-moe/*/debug.log``, ``data/h200-engine-like/logs/*.log``:
fp8, bf16 and MoE tuning calls, tqdm-glued records, fallback-call runs, cuDNN warnings, prefixed
ranks), the sources in a seeded shuffled order per copy (each copy of a log is a new process to
the reader: it starts with FlashInfer's "use_global_timer" line), writes it uncompressed, then
times, in the same run and on the same file:

- bare read: ``for line in open(path)`` (text mode, as a plain script reads a log);
- bare read + split: the same, splitting each line on whitespace (the least a parser does);
- ``profkit.read_log(path)``: every line split, classified and turned into tables.

Prints wall and CPU seconds of each and read_log's speed as a fraction of both bare reads, by
wall and by CPU time (target: >= 50% of a bare read; CPU time is the steadier on a shared machine), then read_log's peak memory, measured in a fresh interpreter (its peak
resident set while reading, less what it held before) beside the file's size (target: <= 3x), and the CPU time of
read_log's stages: the bulk path's scan of the blocks (numpy, pyarrow), the reader's lines, the tables (with what the
scan and the tables alone would leave of the target); with ``--floor``, the floor of the fastest design tried (numpy
and pyarrow over the bytes: its blocks read, line ends found, plain candidates parsed, every other line decoded, the
candidates' string columns made) as a fraction of the bare read.
With ``--files N`` it also reads N logs of ``--lines / N`` lines as one list, in one process and
with the process pool read_log uses for several files, and prints the ratio of their wall times.
With ``--dask N`` it parses N such logs the way ``profkit ranks`` does (one task per log: read, then
saved as parquet; :mod:`profkit.query.distributed`), in this process and on a 2-worker LocalCluster,
and prints the cluster's start-up on its own, the parse on the started cluster, both ratios to one
process (target: at most 0.6x), the tasks' CPU seconds, the cores they got (CPU seconds per second) and the
load average (a second worker only helps when a second core is free: under Linux's autogroup scheduling
a shell's processes share one CPU share while other sessions are busy).
Each timing is the best of ``--repeat`` runs. No assertion: this is a measurement.
"""

from __future__ import annotations

import argparse
import collections
import gc
import gzip
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import profkit
from profkit.sources import logs

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("data/h200/*/debug.log.gz", "data/h200-moe/*/debug.log", "data/h200-engine-like/logs/*.log")


def _text(source: Path) -> bytes:
    data = source.read_bytes()
    data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return data if data.endswith(b"\n") else data + b"\n"


def build(sources: list[Path], lines: int, target: Path, seed: int = 0) -> int:
    """Write copies of ``sources`` (gz or text), each copy in a shuffled order, until ``target`` holds >= ``lines``
    lines; return the count."""
    texts = [_text(s) for s in sources]
    rng, written = random.Random(seed), 0
    with open(target, "wb") as f:
        while written < lines:
            for data in rng.sample(texts, len(texts)):
                f.write(data)
                written += data.count(b"\n")
    return written


def best(fn, repeat: int) -> tuple[float, float]:
    """(wall, CPU) seconds of ``fn``, each the least of ``repeat`` runs (CPU time is steadier on a shared machine)."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(wall), min(cpu)


def bare_text(path: Path) -> None:
    with open(path, encoding="utf-8", errors="replace") as f:
        for _ in f:
            pass


def bare_split(path: Path) -> None:
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line.split()


PEAK = """
import sys
import profkit

def high_water():  # the process's peak resident set, from /proc (ru_maxrss would carry the parent's over exec)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

before = high_water()
profkit.read_log(sys.argv[1])
print(high_water() - before)
"""


def peak_bytes(path: Path) -> int:
    """Peak resident memory read_log adds while reading ``path``, in a fresh interpreter (Linux)."""
    result = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, check=True)
    return int(result.stdout.split()[-1])


def _named(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def single(path: Path, n: int, sources: list[Path], repeat: int, floor_too: bool = False) -> None:
    size_mb = path.stat().st_size / 1e6
    text_s = best(lambda: bare_text(path), repeat)
    split_s = best(lambda: bare_split(path), repeat)
    tables = []
    parse_s = best(lambda: tables.append(profkit.read_log(path)), repeat)
    t = tables[-1]
    tables.clear()
    peak = peak_bytes(path)
    print(f"log: {n:,} lines, {size_mb:.0f} MB, {len(t.runs)} runs, {len(t.candidates):,} candidates, "
          f"{len(t.winners):,} winners, {len(t.events):,} events (from {len(sources)} shipped logs: "
          f"{', '.join(_named(s) for s in sources[:3])}{', ...' if len(sources) > 3 else ''})")
    for name, (wall, cpu) in (("bare read, text", text_s), ("bare read + split", split_s), ("profkit.read_log", parse_s)):
        print(f"{name:<22} {wall:7.3f} s wall {cpu:7.3f} s CPU  {n / cpu / 1e6:6.2f} M lines/s (CPU)")
    for k, unit in enumerate(("wall", "CPU")):
        print(f"read_log speed ({unit}) = {text_s[k] / parse_s[k]:.0%} of a bare text read, "
              f"{split_s[k] / parse_s[k]:.0%} of a bare read + split (target: >= 50% of the bare read)")
    print(f"read_log peak memory = {peak / 1e6:.0f} MB = {peak / (size_mb * 1e6):.2f}x the file's size")
    scan, fed, built = stages(path, repeat)
    print(f"read_log stages (CPU): blocks read and scanned by the bulk path {scan:.3f} s, lines fed to the reader "
          f"{fed - scan:.3f} s more, tables {built:.3f} s; the scan and the tables alone would read at "
          f"{text_s[1] / (scan + built):.0%} of a bare text read")
    if floor_too:
        steps = floor(path, t.candidates, repeat)
        print("the floor of the fastest design tried (numpy and pyarrow over the bytes), CPU: " + ", ".join(
            f"{name} {s:.3f} s" for name, s in steps.items()) + f"; together {sum(steps.values()):.3f} s = "
              f"{text_s[1] / sum(steps.values()):.0%} of a bare text read, before any state, winner, event or other "
              "table")


def stages(path: Path, repeat: int) -> tuple[float, float, float]:
    """CPU seconds of read_log's stages on ``path`` (garbage collector off, as read_log runs), each the least of
    ``repeat`` runs: the blocks read and scanned as the bulk path scans them (numpy and pyarrow), the same with every
    line fed to the reader, the tables built from the reader."""
    from profkit.sources import inputs
    from profkit.sources.logs import bulk, tables
    from profkit.sources.logs.reader import Reader

    item = inputs.inputs_of(path, what="log")[0]

    def scan() -> None:
        with item.open() as stream:
            free = collections.deque()
            blocks = bulk._blocks(stream, False, free)
            while (block := bulk._prepared(blocks, True)) is not None:
                free.append(block.data)

    def fed() -> None:
        readers.append(Reader(item.name, item.path, strict=False))
        bulk.feed(readers[-1], item)

    readers, built = [], []
    gc.disable()
    try:
        scan_s, fed_s = best(scan, repeat)[1], best(fed, repeat)[1]
        return scan_s, fed_s, best(lambda: built.append(tables.build(readers[-1:])), repeat)[1]
    finally:
        gc.enable()


def floor(path: Path, candidates, repeat: int) -> dict[str, float]:
    """CPU seconds of the work the fastest design tried (numpy and pyarrow over the bytes) cannot avoid on ``path``,
    each step the least of ``repeat`` runs less the steps before it: the blocks read, their line ends found, the plain
    candidate lines parsed (bulk.plain_candidates: every field found, cut and coded), every other line decoded and
    looked up once in a dict (the least a reader does with a line in Python), and the candidates' string columns made
    from one code per row (pyarrow's take, as the tables are built)."""
    import numpy as np
    import pyarrow.compute as pc

    from profkit.sources.logs import bulk

    def blocks(then=lambda data: None) -> None:
        with open(path, "rb") as f:
            free = collections.deque()
            for data in bulk._blocks(f, False, free):
                then(data)
                free.append(data)

    def ends(data) -> np.ndarray:
        return np.flatnonzero(np.frombuffer(data, np.uint8) == ord("\n"))

    def others(data) -> None:
        at, seen = ends(data), {}
        other = np.ones(len(at), dtype=bool)
        other[bulk.plain_candidates(data, at).rows] = False
        starts = np.concatenate(([0], at[:-1] + 1))
        for start, end in zip(starts[other].tolist(), at[other].tolist()):
            seen[data[start:end].decode("utf-8", errors="replace")[24:40]] = start

    coded = {name: candidates[name].array._pa_array.combine_chunks().dictionary_encode()
             for name in candidates.columns if str(candidates[name].dtype) == "string"}
    steps = {"blocks read": blocks, "line ends (numpy)": lambda: blocks(ends),
             "plain candidates parsed": lambda: blocks(lambda data: bulk.plain_candidates(data, ends(data))),
             "every other line decoded, one dict lookup each": lambda: blocks(others)}
    gc.disable()
    try:
        found, before = {}, 0.0
        for name, step in steps.items():
            took = best(step, repeat)[1]
            found[name], before = max(took - before, 0.0), took
        found[f"the candidates' {len(coded)} string columns"] = best(
            lambda: [pc.take(c.dictionary, c.indices) for c in coded.values()], repeat)[1]
    finally:
        gc.enable()
    return found


def several(sources: list[Path], lines: int, files: int, folder: Path, repeat: int) -> None:
    """Read ``files`` logs of ``lines / files`` lines each as one list: in one process, then with the pool."""
    paths = []
    for k in range(files):
        paths.append(folder / f"rank{k}.log")
        build(sources, lines // files, paths[-1], seed=k)
    one, pool = math.inf, math.inf
    for _ in range(repeat):  # interleaved: a load that comes and goes on a shared machine hits both alike
        one = min(one, best(lambda: logs.read_log(paths, workers=1), 1)[0])
        pool = min(pool, best(lambda: logs.read_log(paths), 1)[0])
    print(f"{files} logs of {lines // files:,}+ lines, {os.cpu_count()} cores: one process {one:.3f} s, "
          f"pool of {min(files, os.cpu_count() or 1)} {pool:.3f} s = {pool / one:.2f}x of one process")


def _parse(task: tuple) -> float:
    """One log read and saved as ``profkit ranks`` does it; returns the CPU seconds it took."""
    from profkit.query.fleet import _convert_task

    start = time.process_time()
    _convert_task(task)
    return time.process_time() - start


def dask(sources: list[Path], lines: int, files: int, folder: Path, repeat: int) -> None:
    """Parse ``files`` logs of ``lines / files`` lines each: in this process, then on a 2-worker LocalCluster."""
    from profkit.query.distributed import Runner

    paths = []
    for k in range(files):
        paths.append(folder / f"rank{k}.log")
        build(sources, lines // files, paths[-1], seed=k)
    tasks = [("log", str(p), str(folder / "tables" / f"{i:06d}")) for i, p in enumerate(paths)]
    # Of the fastest run each: (wall seconds, the tasks' CPU seconds), and the cluster's (wall, start-up, CPU).
    one = warm = (math.inf, 0.0)
    cold = (math.inf, 0.0, 0.0)
    for _ in range(repeat):  # interleaved, as in several()
        t = time.perf_counter()
        cpu = sum(Runner(workers=1).map(_parse, tasks))
        one = min(one, (time.perf_counter() - t, cpu))
        t = time.perf_counter()
        with Runner(workers=2).start() as runner:
            started = time.perf_counter()
            cpu = sum(runner.map(_parse, tasks))
            parsed = time.perf_counter()
            cpu_warm = sum(runner.map(_parse, tasks))  # again, on the cluster already started and warm
            warm = min(warm, (time.perf_counter() - parsed, cpu_warm))
        cold = min(cold, (parsed - t, started - t, cpu))
    ran = cold[0] - cold[1]
    print(f"{files} logs of {lines // files:,}+ lines parsed (read, saved), load average {os.getloadavg()[0]:.1f}: "
          f"one process {one[0]:.2f} s ({one[1]:.2f} s CPU in tasks, {one[1] / one[0]:.2f} cores); 2-worker "
          f"LocalCluster {cold[0]:.2f} s = {cold[0] / one[0]:.2f}x, of which start-up {cold[1]:.2f} s; on the started "
          f"cluster {ran:.2f} s = {ran / one[0]:.2f}x ({cold[2]:.2f} s CPU in tasks, {cold[2] / ran:.2f} cores), again "
          f"when warm {warm[0]:.2f} s = {warm[0] / one[0]:.2f}x ({warm[1] / warm[0]:.2f} cores; target: at most 0.6x)")
    if _autogroup():
        print("Linux autogroup scheduling is on: this shell's processes share one CPU share while other sessions are "
              "busy, so the workers together get more cores than one process only where a core is idle")


def _autogroup() -> bool:
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--log", type=Path, nargs="+", help="logs to repeat (default: every shipped H200 log)")
    parser.add_argument("--keep", type=Path, help="write the built log here and keep it (else a temporary file)")
    parser.add_argument("--files", type=int, default=0, help="also read this many logs as one list (pool vs one)")
    parser.add_argument("--dask", type=int, default=0, help="also parse this many logs on a 2-worker LocalCluster")
    parser.add_argument("--single", action=argparse.BooleanOptionalAction, default=True,
                        help="time the one big log (--no-single: only --files / --dask)")
    parser.add_argument("--floor", action="store_true",
                        help="also time the floor of the fastest design tried on the one big log")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sources = args.log or sorted(p for pattern in SHIPPED for p in ROOT.glob(pattern))
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "mixed.log"
        if not (args.keep and path.exists()):
            build(sources, args.lines, path)
        with open(path, "rb") as f:
            n = sum(1 for _ in f)
        if args.single:
            single(path, n, sources, args.repeat, args.floor)
        if args.files:
            several(sources, args.lines, args.files, Path(tmp), args.repeat)
        if args.dask:
            dask(sources, args.lines, args.dask, Path(tmp), args.repeat)


if __name__ == "__main__":
    main()
