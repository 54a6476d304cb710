"""Save read_log's tables for every log input there is, or compare them with a saved baseline.

    .venv/bin/python scripts/compare_log_tables.py save    [--out /tmp/pk/log_baseline] [--lines 1000000]
    .venv/bin/python scripts/compare_log_tables.py compare [--out /tmp/pk/log_baseline] [--lines 1000000]
    .venv/bin/python scripts/compare_log_tables.py digests --out tests/data/log_golden/digests.json

Inputs: the shipped logs (``data/**/*.log.gz``, ``data/**/*.log``), every log under ``tests/data``,
the damaged variants tests/test_logs.py builds (truncations, shuffled and garbage-laden excerpts,
wrong encodings, a cut gzip, UTF-16, text), and the 1M-line log benchmarks/bench_read_log.py
builds (``--lines 0`` leaves it out). For each input, ``save`` writes every table of
:class:`~profkit.sources.logs.LogTables` as parquet plus its dtypes (or the error it raised);
``compare`` reads the inputs again with the current reader and reports every input whose tables
differ (values or dtypes) or whose error changed. Exit status 1 when anything differs. ``digests``
writes one SHA-256 per table of the small inputs (:func:`small`): the golden digests, made with
the reader as it was before the logs package (commit 318e49f, run with that commit's ``profkit`` first on
PYTHONPATH), that tests/test_logs.py checks the current reader against.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests")]

from bench_read_log import SHIPPED, build  # noqa: E402
from log_golden import TABLES, damaged, digest, shipped, small, tables_of  # noqa: E402


def big(tmp: Path, lines: int) -> Iterator[tuple[str, Callable[[], object]]]:
    if lines:
        def make():
            path = tmp / "synthetic.log"
            build(sorted(p for pattern in SHIPPED for p in ROOT.glob(pattern)), lines, path)  # as the benchmark
            return path
        yield f"bench log, {lines} lines", make


def inputs(tmp: Path, lines: int) -> Iterator[tuple[str, Callable[[], object]]]:
    yield from shipped()
    yield from damaged(tmp)
    yield from big(tmp, lines)


def folder(out: Path, name: str) -> Path:
    return out / "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def write(result, where: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    if isinstance(result, str):
        (where / "error.txt").write_text(result)
        return
    dtypes = {}
    for name, frame in result.items():
        frame.to_parquet(where / f"{name}.parquet")
        dtypes[name] = {column: str(dtype) for column, dtype in frame.dtypes.items()}
    (where / "dtypes.json").write_text(json.dumps(dtypes, indent=1))


def differences(saved: Path, now: Path) -> list[str]:
    """What differs between two folders ``write`` wrote (empty when identical)."""
    if (saved / "error.txt").exists() or (now / "error.txt").exists():
        a, b = ((p / "error.txt").read_text() if (p / "error.txt").exists() else "tables" for p in (saved, now))
        return [] if a == b else [f"was {a[:300]!r}, now {b[:300]!r}"]
    found = []
    old, new = (json.loads((p / "dtypes.json").read_text()) for p in (saved, now))
    for name in TABLES:
        if old[name] != new[name]:
            found.append(f"{name}: dtypes {old[name]} -> {new[name]}")
            continue
        a, b = (pd.read_parquet(p / f"{name}.parquet") for p in (saved, now))
        try:
            pd.testing.assert_frame_equal(a, b, check_exact=True)
        except AssertionError as exc:
            found.append(f"{name}: {str(exc)[:600]}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["save", "compare", "digests"])
    parser.add_argument("--out", type=Path, default=Path("/tmp/pk/log_baseline"))
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--small", action="store_true", help="only the inputs the golden tables cover (see small())")
    args = parser.parse_args()
    os.chdir(ROOT)  # inputs are given relative to the repository, so runs.path is the same in any checkout
    if args.mode == "digests":  # the golden digests tests/test_logs.py checks
        with tempfile.TemporaryDirectory() as tmp:
            found = {name: digest(tables_of(make())) for name, make in small(Path(tmp))}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        return 0
    if args.mode == "save":
        shutil.rmtree(args.out, ignore_errors=True)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        chosen = small(Path(tmp)) if args.small else inputs(Path(tmp), args.lines)
        for count, (name, make) in enumerate(chosen, 1):
            result = tables_of(make())
            if args.mode == "save":
                write(result, folder(args.out, name))
                continue
            now = Path(tmp) / "now" / str(count)
            write(result, now)
            saved = folder(args.out, name)
            found = differences(saved, now) if saved.exists() else ["no baseline saved for this input"]
            failed += bool(found)
            print(f"{'DIFFERS' if found else 'same   '} {name}")
            for line in found:
                print(f"    {line}")
    if args.mode == "compare":
        print(f"{count - failed} of {count} inputs give identical tables")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
