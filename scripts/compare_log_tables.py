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
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import profkit  # noqa: E402
from bench_read_log import build  # noqa: E402

TABLES = ("candidates", "winners", "tuning", "runs", "events", "report")
RANKS = ROOT / "tests" / "data" / "log_interleaved_ranks"
JIT = b" - flashinfer.jit: "


def shipped(bases: tuple[str, ...] = ("data", "tests/data")) -> Iterator[tuple[str, Callable[[], object]]]:
    """(name, what to pass to read_log) of every log in data/ and tests/data/: ``*.log``, ``*.log.gz``, and
    text files holding a FlashInfer record (e.g. a verify run's ``run.txt``)."""
    for base in (ROOT / b for b in bases):
        texts = {p for p in base.rglob("*.txt") if p.is_file() and JIT in p.read_bytes()}
        for path in sorted(p for p in {*base.rglob("*.log"), *base.rglob("*.log.gz"), *texts} if p.is_file()):
            yield str(path.relative_to(ROOT)), lambda path=path: path.relative_to(ROOT)  # runs.path as given


def damaged(tmp: Path, cuts: int = 20) -> Iterator[tuple[str, Callable[[], object]]]:
    """The damaged and re-encoded variants tests/test_logs.py builds, at fixed seeds and ``cuts`` + 1 cuts."""
    excerpt = (RANKS / "rank0.log").read_bytes()
    for k in range(0, cuts + 1):
        cut = len(excerpt) * k // cuts

        def truncated(cut=cut):
            path = tmp / f"cut{cut}.log"
            path.write_bytes(excerpt[:cut])
            return path
        yield f"truncated at byte {cut}", truncated
    ranks = [(RANKS / f"rank{r}.log").read_text().splitlines(keepends=True) for r in (0, 1)]
    for seed in range(5):
        def shuffled(seed=seed):
            queues = [[f"[rank{r}]: {line}" for line in lines] for r, lines in enumerate(ranks)]
            rng, merged = random.Random(seed), []
            while any(queues):
                merged.append(rng.choice([q for q in queues if q]).pop(0))
            return "".join(merged)
        yield f"shuffled ranks, seed {seed}", shuffled

        def garbage(seed=seed):
            rng = random.Random(seed)
            lines = excerpt.decode().splitlines(keepends=True)
            for _ in range(20):
                text = "".join(rng.choice("ab ,()[]:-0123456789\u00e9\u2588") for _ in range(rng.randrange(80)))
                lines.insert(rng.randrange(len(lines) + 1), text + "\n")
            return "".join(lines)
        yield f"garbage lines, seed {seed}", garbage
    for encoding in ("utf-16-le", "utf-32", "latin-1", "cp1252", "utf-16"):
        def encoded(encoding=encoding):
            path = tmp / f"{encoding}.log"
            path.write_bytes(excerpt.decode().encode(encoding, errors="replace"))
            return path
        yield f"encoded {encoding}", encoded

    def cut_gzip():
        data = gzip.compress(excerpt)
        path = tmp / "broken.log.gz"
        path.write_bytes(data[: len(data) * 2 // 3])
        return path
    yield "cut gzip", cut_gzip
    yield "excerpt as text", lambda: excerpt.decode()
    yield "list of two", lambda: [(RANKS / f"rank{r}.log").relative_to(ROOT) for r in (0, 1)]


def big(tmp: Path, lines: int) -> Iterator[tuple[str, Callable[[], object]]]:
    if lines:
        def make():
            path = tmp / "synthetic.log"
            build(ROOT / "data" / "h200" / "fp8" / "debug.log.gz", lines, path)
            return path
        yield f"bench log, {lines} lines", make


def inputs(tmp: Path, lines: int) -> Iterator[tuple[str, Callable[[], object]]]:
    yield from shipped()
    yield from damaged(tmp)
    yield from big(tmp, lines)


def small(tmp: Path) -> Iterator[tuple[str, Callable[[], object]]]:
    """The inputs tests/test_logs.py holds golden digests of: the shipped logs, tests/data's and the damaged
    variants (with 5 cuts, not 20)."""
    yield from shipped()
    yield from damaged(tmp, cuts=5)


# The golden digests predate the winners table's reordering (op first, ids last) and its derived speedup
# column: winners are digested in the layout the digests were made with.
_DIGEST_WINNERS = ("run_id", "rank", "call", "op", "profile", "bucket", "bucket_key", "runner", "tactic", "time_ms",
                   "status", "source", "reason", "extras", "default_runner", "default_time_ms", "timing")


def _digest_layout(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    if name != "winners":
        return frame
    return frame[[*_DIGEST_WINNERS, *(c for c in frame.columns if c not in _DIGEST_WINNERS and c != "speedup")]]


def digest(result: dict[str, pd.DataFrame] | str) -> dict[str, str] | str:
    """A SHA-256 per table of its dtypes and values as CSV text (the error text when reading failed)."""
    if isinstance(result, str):
        return result
    result = {name: _digest_layout(name, frame) for name, frame in result.items()}
    return {name: hashlib.sha256((json.dumps({c: str(d) for c, d in frame.dtypes.items()}) + frame.to_csv(index=False))
                                 .encode("utf-8", errors="surrogatepass")).hexdigest() for name, frame in result.items()}


def folder(out: Path, name: str) -> Path:
    return out / "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def tables_of(arg) -> dict[str, pd.DataFrame] | str:
    try:
        log = profkit.read_log(arg)
    except Exception as exc:  # noqa: BLE001 - the baseline records what the reader raised, whatever it was
        return re.sub(r"/tmp/[^/]+/", "<tmp>/", f"{type(exc).__name__}: {exc}")  # temporary folders differ
    found = {name: getattr(log, name) for name in TABLES}
    found["runs"] = found["runs"].assign(path=found["runs"]["path"].str.replace(r"^/tmp/[^/]+/", "<tmp>/", regex=True))
    return found


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
