"""Peak memory and time of ``profkit compare`` on a big verify table and ``profkit report`` on a big debug
log, each beside a bare read of the same file (issue 37, item 6).

    .venv/bin/python benchmarks/bench_big_inputs.py [--rows 3500000] [--log-mb 400] [--only compare|report]
        [--keep DIR]

Builds under a temporary folder (or ``--keep DIR``, reused when its files are there):

- ``verify.parquet`` of ``--rows`` rows: every shipped H200 verify table (``data/h200-verify``,
  7,167 rows) repeated, each copy under its own run ids (``<run_id>-c<n>``), so compare judges every
  copy as runs of their own;
- ``debug.log`` of about ``--log-mb`` MB: the shipped debug logs repeated in shuffled orders
  (``bench_read_log.build``).

Each measurement runs in a fresh interpreter that has imported pandas and pyarrow first and
prints its wall seconds and its peak resident set (``VmHWM`` from ``/proc``: ``ru_maxrss`` would
carry the parent's over exec):

- bare read: ``pd.read_parquet(verify.parquet)``; every line of ``debug.log`` (text mode);
- ``profkit compare verify.parquet`` and ``profkit report debug.log --out DIR --formats png``
  (the CLI's ``main``, in-process, its output written to ``/dev/null``, as to a file or a terminal: held in
  memory, compare's million lines would count against its peak).

Printed: seconds and peak MB of each, and the command's ratios to its bare read. Issue 37's target:
peak under ~1.5 GB on the 2-core machine. No assertion: this is a measurement.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from profkit import schema
from profkit.sources.verify import read_verify

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_read_log import SHIPPED, build  # noqa: E402 - the log builder of the log reader's own benchmark

CHILD = """
import contextlib, os, sys, time
import pandas, pyarrow.parquet

def high_water():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

start = time.perf_counter()
with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
    {work}
print(time.perf_counter() - start, high_water())
"""
WORK = {
    "read_parquet": "pandas.read_parquet(sys.argv[1])",
    "read_lines": "sum(1 for _ in open(sys.argv[1], errors='replace'))",
    "compare": "from profkit.cli import main; assert main(['compare', sys.argv[1]]) == 0",
    "report": "from profkit.cli import main; assert main(['report', sys.argv[1], '--out', sys.argv[2], "
              "'--formats', 'png', '--no-progress']) == 0",
}


def measure(work: str, *args: str) -> tuple[float, int]:
    """(seconds, peak bytes) of ``WORK[work]`` in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", CHILD.format(work=WORK[work]), *args], capture_output=True,
                          text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"{work} failed:\n{done.stderr[-2000:]}")
    seconds, peak = done.stdout.split()[-2:]
    return float(seconds), int(peak)


def build_verify(target: Path, rows: int) -> int:
    """Write the shipped verify tables, repeated under new run ids, until ``target`` holds >= ``rows`` rows."""
    base = read_verify(ROOT / "data" / "h200-verify")
    base = base[[c for c in schema.columns("verify") if c in base.columns]]
    table = pa.Table.from_pandas(base, preserve_index=False)
    where = table.schema.get_field_index("run_id")
    run_ids = base["run_id"].astype(str).tolist()
    written = 0
    with pq.ParquetWriter(target, table.schema) as writer:
        for copy in range(-(-rows // len(base))):
            writer.write_table(table.set_column(where, "run_id", pa.array([f"{r}-c{copy}" for r in run_ids],
                                                                          type=table.schema.field("run_id").type)))
            written += len(base)
    return written


def build_log(target: Path, megabytes: float) -> int:
    """A debug log of about ``megabytes`` MB from the shipped logs; return its line count."""
    sources = sorted(p for pattern in SHIPPED for p in ROOT.glob(pattern))
    sample = target.with_suffix(".sample")
    lines = build(sources, 100_000, sample)
    per_line = sample.stat().st_size / lines
    sample.unlink()
    return build(sources, int(megabytes * 1e6 / per_line), target)


def show(name: str, bare: tuple[float, int], command: tuple[float, int], what: str) -> None:
    (bs, bp), (cs, cp) = bare, command
    print(f"  bare read        {bs:8.1f} s  {bp / 1e6:8.0f} MB peak")
    print(f"  {name:16s} {cs:8.1f} s  {cp / 1e6:8.0f} MB peak")
    print(f"  {name} / bare read: {cs / bs:.1f}x the time, {cp / bp:.1f}x the peak memory ({what}); "
          f"target peak < 1500 MB: {'met' if cp < 1.5e9 else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_500_000)
    parser.add_argument("--log-mb", type=float, default=400.0)
    parser.add_argument("--only", choices=("compare", "report"), default=None)
    parser.add_argument("--keep", type=Path, default=None, help="folder for the built inputs (kept, reused)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="profkit-big-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if args.only in (None, "compare"):
            verify = folder / "verify.parquet"
            if not verify.exists() or pq.read_metadata(verify).num_rows < args.rows:
                build_verify(verify, args.rows)
            rows = pq.read_metadata(verify).num_rows
            print(f"compare: {verify} ({rows:,} rows, {verify.stat().st_size / 1e6:.0f} MB)")
            show("profkit compare", measure("read_parquet", str(verify)), measure("compare", str(verify)),
                 f"{rows:,} verify rows")
        if args.only in (None, "report"):
            log = folder / "debug.log"
            if not log.exists() or log.stat().st_size < 0.95 * args.log_mb * 1e6:
                build_log(log, args.log_mb)
            size = log.stat().st_size / 1e6
            print(f"report: {log} ({size:.0f} MB)")
            show("profkit report", measure("read_lines", str(log)), measure("report", str(log), str(folder / "report")),
                 f"a {size:.0f} MB debug log")
    print(json.dumps({"python": sys.version.split()[0], "pandas": pd.__version__}))


if __name__ == "__main__":
    main()
