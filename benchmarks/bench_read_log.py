"""How fast profkit.read_log is, next to just reading the lines of the same file.

    .venv/bin/python benchmarks/bench_read_log.py [--lines 1000000] [--log data/h200/fp8/debug.log.gz]

Builds a synthetic log of at least ``--lines`` lines by repeating a real H200 debug log (each copy
is a new process to the reader: it starts with FlashInfer's "use_global_timer" line), writes it
uncompressed to a temporary file, then times, in the same run and on the same file:

- bare read: ``for line in open(path)`` (text mode, as a plain script reads a log);
- bare read, bytes: ``for line in open(path, "rb")`` (the floor: no decoding);
- ``profkit.read_log(path)``: every line split, classified and turned into tables.

Prints lines/s of each and read_log's speed as a fraction of both bare reads (target: >= 50% of
the bare text read), then read_log's peak memory, measured in a fresh interpreter (its peak
resident set while reading, less what it held before) beside the file's size (target: <= 3x).
Each timing is the best of ``--repeat`` runs. No assertion: this is a measurement.
"""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import profkit

ROOT = Path(__file__).resolve().parents[1]


def build(source: Path, lines: int, target: Path) -> int:
    """Write ``source`` (gz or text) repeated until ``target`` holds >= ``lines`` lines; return the count."""
    data = source.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if not data.endswith(b"\n"):
        data += b"\n"
    copies = -(-lines // data.count(b"\n"))
    with open(target, "wb") as f:
        for _ in range(copies):
            f.write(data)
    return copies * data.count(b"\n")


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bare_text(path: Path) -> None:
    with open(path, encoding="utf-8", errors="replace") as f:
        for _ in f:
            pass


def bare_bytes(path: Path) -> None:
    with open(path, "rb") as f:
        for _ in f:
            pass


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--log", type=Path, default=ROOT / "data" / "h200" / "fp8" / "debug.log.gz")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.log"
        n = build(args.log, args.lines, path)
        size_mb = path.stat().st_size / 1e6
        text_s = best(lambda: bare_text(path), args.repeat)
        bytes_s = best(lambda: bare_bytes(path), args.repeat)
        tables = []
        parse_s = best(lambda: tables.append(profkit.read_log(path)), args.repeat)
        t = tables[-1]
        tables.clear()
        peak = peak_bytes(path)
    print(f"synthetic log: {n:,} lines, {size_mb:.0f} MB, {len(t.runs)} runs, {len(t.candidates):,} candidates, "
          f"{len(t.winners):,} winners (from {args.log.relative_to(ROOT) if args.log.is_relative_to(ROOT) else args.log})")
    print(f"{'bare read, text':<22} {text_s:7.3f} s  {n / text_s / 1e6:6.2f} M lines/s")
    print(f"{'bare read, bytes':<22} {bytes_s:7.3f} s  {n / bytes_s / 1e6:6.2f} M lines/s")
    print(f"{'profkit.read_log':<22} {parse_s:7.3f} s  {n / parse_s / 1e6:6.2f} M lines/s")
    print(f"read_log speed = {text_s / parse_s:.0%} of a bare text read, {bytes_s / parse_s:.0%} of a bare bytes read")
    print(f"read_log peak memory = {peak / 1e6:.0f} MB = {peak / (size_mb * 1e6):.2f}x the file's size")


if __name__ == "__main__":
    main()
