"""The log inputs whose tables tests/data/log_golden/digests.json holds, and how a table is digested.

Shared by tests/test_logs.py and scripts/compare_log_tables.py (which saves, compares and re-makes them).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
from pathlib import Path
from typing import Callable, Iterator

import pandas as pd

import profkit

ROOT = Path(__file__).resolve().parents[1]
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


def tables_of(arg) -> dict[str, pd.DataFrame] | str:
    try:
        log = profkit.read_log(arg)
    except Exception as exc:  # noqa: BLE001 - the baseline records what the reader raised, whatever it was
        return re.sub(r"/tmp/[^/]+/", "<tmp>/", f"{type(exc).__name__}: {exc}")  # temporary folders differ
    found = {name: getattr(log, name) for name in TABLES}
    found["runs"] = found["runs"].assign(path=found["runs"]["path"].str.replace(r"^/tmp/[^/]+/", "<tmp>/", regex=True))
    return found
