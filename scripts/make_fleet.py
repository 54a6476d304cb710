"""Build a fleet of N ranks from the shipped GPU captures, laid out as ``profkit capture`` leaves them.

    .venv/bin/python scripts/make_fleet.py N [--out DIR] [--seed 0] [--slow RANK=FACTOR ...] [--workers 2]

One rank is one process folder ``<host>-pid<pid>-rank<r>/`` holding, as appended segments
``seg-<n>/{candidates,winners,tuning,runs}.parquet``, every capture found under the shipped ``data/h200*``
folders (their segments in order), as one run of that process: run_id, host, pid and rank are the
rank's own, calls and measurement order are renumbered so that two shipped captures never share a
call, and every time (candidates' ``time_ms``, winners' ``time_ms`` and ``default_time_ms``) is multiplied
by ``exp(s * z)`` with ``z`` a seeded standard normal per row and ``s`` drawn per rank in [0.5%, 1%].
Each profiled winner is then the fastest of the rank's own jittered candidates (as FlashInfer picks),
so ranks disagree where the shipped timings sit within the jitter. ``--slow 7=1.05`` makes rank 7's
times 5% slower (a GPU problem, for ``profkit ranks``' slow-rank check).

The fleet goes to ``--out`` (default ``/tmp/profkit-fleet-N``), never into the repository. These are
synthetic ranks built from real timings: they measure the rank queries' speed and check their answers,
they are no measurement of a GPU.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("candidates", "winners", "tuning", "runs")
JITTER = (0.005, 0.01)  # the range of a rank's spread: each time is multiplied by exp(s * z), z ~ N(0, 1)
_SOURCE: list = []  # (capture, [segment tables]) of the shipped captures, read once per process


def shipped_captures(root: Path = ROOT / "data") -> list[Path]:
    """Every capture folder under ``root``'s ``h200*`` folders (saved tables or process folders), sorted."""
    from profkit.catalog.walk import walk

    found = []
    for top in sorted(root.glob("h200*")):
        inv = walk(top)
        found += inv.paths("capture")
    return sorted(found)


def _segments(capture: Path) -> list[Path]:
    segs = sorted((p for p in capture.iterdir() if re.fullmatch(r"seg-\d+", p.name) and p.is_dir()),
                  key=lambda p: int(p.name[4:]))
    return segs or [capture]


def load_source(captures: list[Path]) -> list[dict]:
    """The shipped segments, in capture then segment order, each with its call/seq offset in the rank's run."""
    out, call_offset, seq_offset = [], 0, 0
    for capture in captures:
        segs, top_call, top_seq = [], -1, -1
        for seg in _segments(capture):
            tables = {t: pq.read_table(seg / f"{t}.parquet") for t in TABLES if (seg / f"{t}.parquet").is_file()}
            for t in tables.values():
                if "call" in t.column_names and t.num_rows:
                    top_call = max(top_call, pc.max(t["call"]).as_py() or 0)
                if "seq" in t.column_names and t.num_rows:
                    top_seq = max(top_seq, pc.max(t["seq"]).as_py() or 0)
            segs.append({"tables": tables, "winner_of": _winner_groups(tables)})
        for s in segs:
            out.append({**s, "capture": capture, "call_offset": call_offset, "seq_offset": seq_offset})
        call_offset += top_call + 1
        seq_offset += top_seq + 1
    return out


def _winner_groups(tables: dict) -> tuple | None:
    """For recomputing profiled winners: per winners row, the candidate rows it argmins over."""
    if "candidates" not in tables or "winners" not in tables:
        return None
    c, w = tables["candidates"].to_pandas(), tables["winners"].to_pandas()
    own = (c["source"].astype("string") != "default").fillna(True) if "source" in c else True
    keys = c["call"].astype(str) + "\0" + c["op"].astype(str) + "\0" + c["profile"].astype(str)
    wkeys = w["call"].astype(str) + "\0" + w["op"].astype(str) + "\0" + w["profile"].astype(str)
    profiled = (w["source"].astype("string") == "profiled").fillna(False).to_numpy() if "source" in w else \
        np.ones(len(w), bool)
    rows = np.flatnonzero(np.asarray(own) & np.isfinite(c["time_ms"].to_numpy(dtype=float)))
    codes = {k: i for i, k in enumerate(dict.fromkeys(keys.to_numpy()[rows]))}
    gid = np.array([codes[k] for k in keys.to_numpy()[rows]], dtype=np.int64)
    target = np.array([codes.get(k, -1) if p else -1 for k, p in zip(wkeys, profiled)], dtype=np.int64)
    seq = c["seq"].to_numpy(dtype=float)[rows] if "seq" in c else np.arange(len(rows), dtype=float)
    return rows, gid, seq, target


def _jitter(rng, n: int, sigma: float, slow: float) -> np.ndarray:
    return slow * np.exp(sigma * rng.standard_normal(n))


def _replace(table: pa.Table, name: str, values) -> pa.Table:
    """``table`` with column ``name`` (when it has one) set to ``values``: an array, or one value for every row."""
    if name not in table.column_names:
        return table
    field = table.schema.field(name)
    if isinstance(values, (str, int)):
        values = pa.repeat(pa.scalar(values, field.type), table.num_rows)
    elif not isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = pa.array(values, field.type)
    return table.set_column(table.column_names.index(name), field, values)


def _times(table: pa.Table, name: str, factor: np.ndarray) -> tuple[pa.Table, np.ndarray | None]:
    if name not in table.column_names:
        return table, None
    new = table[name].to_numpy(zero_copy_only=False).astype(float) * factor
    return _replace(table, name, new), new


def rank_folder(out: Path, r: int) -> Path:
    host = f"node{r // 8:04d}"
    return out / f"{host}-pid{100000 + 7 * r}-rank{r}"


def build_rank(args: tuple) -> int:
    """Write rank ``r`` under ``out``; return the candidate rows written."""
    out, r, seed, slow, jitter = args
    rng = np.random.default_rng([seed, r])
    sigma = rng.uniform(*jitter)
    folder = rank_folder(out, r)
    host, pid = folder.name.split("-pid")[0], int(folder.name.split("-pid")[1].split("-rank")[0])
    run_id = f"fleet-r{r:05d}"
    rows = 0
    for n, seg in enumerate(_SOURCE, start=1):
        target = folder / f"seg-{n:06d}"
        target.mkdir(parents=True, exist_ok=True)
        tables = dict(seg["tables"])
        for name in ("candidates", "winners", "tuning"):
            t = tables.get(name)
            if t is None:
                continue
            t = _replace(t, "run_id", run_id)
            t = _replace(t, "rank", r)
            for col in ("call", "parent_call"):
                if col in t.column_names:
                    t = _replace(t, col, pc.add(t[col], seg["call_offset"]))
            if "seq" in t.column_names:
                t = _replace(t, "seq", pc.add(t["seq"], seg["seq_offset"]))
            tables[name] = t
        cand, times = _times(tables["candidates"], "time_ms", _jitter(rng, tables["candidates"].num_rows, sigma, slow)) \
            if "candidates" in tables else (None, None)
        if cand is not None:
            tables["candidates"] = cand
            rows += cand.num_rows
        if "winners" in tables:
            w = tables["winners"]
            w, _ = _times(w, "time_ms", _jitter(rng, w.num_rows, sigma, slow))
            w, _ = _times(w, "default_time_ms", _jitter(rng, w.num_rows, sigma, slow))
            tables["winners"] = _rewin(w, cand, times, seg["winner_of"])
        if n == 1:
            tables["runs"] = _run_row(seg["tables"]["runs"], run_id, host, pid, r)
        elif "runs" in tables:
            del tables["runs"]
        for name, t in tables.items():
            pq.write_table(t, target / f"{name}.parquet")
    return rows


def _rewin(w: pa.Table, cand: pa.Table | None, times: np.ndarray | None, groups) -> pa.Table:
    """Profiled winners made the fastest of the rank's jittered candidates (FlashInfer's argmin, seq on ties)."""
    if cand is None or groups is None:
        return w
    rows, gid, seq, target = groups
    if not len(rows):
        return w
    order = np.lexsort((seq, times[rows], gid))
    first = order[np.r_[True, gid[order][1:] != gid[order][:-1]]]
    best = np.full(int(gid.max()) + 1, -1)
    best[gid[first]] = rows[first]
    hit = target >= 0
    pick = np.where(hit, best[np.maximum(target, 0)], -1)
    hit &= pick >= 0
    if not hit.any():
        return w
    for name in ("runner", "tactic", "time_ms"):
        old = w[name].to_pylist()
        new = cand[name].to_pylist()
        w = _replace(w, name, [new[p] if h else o for o, p, h in zip(old, pick, hit)])
    return w


def _run_row(runs: pa.Table, run_id: str, host: str, pid: int, r: int) -> pa.Table:
    t = runs.slice(0, 1)
    for name, value in (("run_id", run_id), ("host", host), ("pid", str(pid)), ("rank", str(r)),
                        ("started_at", f"20261206T{r // 3600 % 24:02d}{r // 60 % 60:02d}{r % 60:02d}-fleet")):
        if name in t.column_names:
            field = t.schema.field(name)
            typ = pa.string() if pa.types.is_null(field.type) else field.type
            t = t.set_column(t.column_names.index(name), pa.field(name, typ), pa.array([value], typ))
    return t


def _init(captures: list[Path]) -> None:
    _SOURCE[:] = load_source(captures)


def build(n: int, out: Path, *, seed: int = 0, slow: dict[int, float] | None = None, workers: int = 1,
          captures: list[Path] | None = None, jitter: tuple[float, float] = JITTER) -> int:
    """Write an ``n``-rank fleet to ``out`` (replacing a fleet there); return the candidate rows written.

    ``captures``: the capture folders one rank holds (default: every shipped one); ``jitter``: the range of
    the per-rank spread ``s`` (0, 0: every rank times exactly what the captures hold).
    """
    out = Path(out)
    if out.resolve().is_relative_to(ROOT.resolve()):
        raise SystemExit(f"--out {out}: inside the repository; a fleet goes under /tmp")
    if out.exists():
        shutil.rmtree(out)
    captures = captures if captures is not None else shipped_captures()
    jobs = [(out, r, seed, (slow or {}).get(r, 1.0), jitter) for r in range(n)]
    if workers <= 1:
        _init(captures)
        return sum(map(build_rank, jobs))
    with get_context("fork").Pool(workers, initializer=_init, initargs=(captures,)) as pool:
        return sum(pool.imap_unordered(build_rank, jobs, chunksize=4))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ranks", type=int)
    p.add_argument("--out", type=Path, default=None, help="default /tmp/profkit-fleet-N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slow", action="append", default=[], metavar="RANK=FACTOR",
                   help="multiply one rank's times (e.g. 7=1.05: 5%% slower)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--jitter", default=f"{JITTER[0]},{JITTER[1]}", metavar="LO,HI",
                   help="range of each rank's spread (default 0.005,0.01: 0.5-1%%)")
    args = p.parse_args(argv)
    slow = {int(k): float(v) for k, v in (s.split("=", 1) for s in args.slow)}
    out = args.out or Path(f"/tmp/profkit-fleet-{args.ranks}")
    start = time.perf_counter()
    jitter = tuple(float(x) for x in args.jitter.split(","))
    rows = build(args.ranks, out, seed=args.seed, slow=slow, workers=args.workers, jitter=jitter)
    print(f"{args.ranks} ranks, {rows} candidate rows, {len(shipped_captures())} shipped captures per rank -> {out} "
          f"({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
