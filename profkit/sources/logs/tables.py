"""Readers' rows into profkit's frames: candidates, winners, tuning, runs, events, report."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from profkit import schema
from profkit.sources.cache import add_buckets
from profkit.sources.logs import grammar as g
from profkit.sources.logs.reader import Reader

EVENT_COLUMNS = ["run_id", "rank", "call", "file", "line", "logged_at", "level", "kind", "op", "runner", "tactic",
                 "profile", "extras", "shapes", "count", "path", "detail", "message"]
REPORT_COLUMNS = ["file", "status", "reason", "lines", "first_line", "example"]
BUCKET_DTYPES = {"bucket": "Int64", "bucket_key": "string", "bucket_rule": "string"}  # as add_buckets makes them
_NO_TEXT = (None, None, "unknown")  # add_buckets' values of a pair without a shapes text (it judges no other by it)


def build(readers: Sequence[Reader], problems: Sequence[dict] = ()) -> dict[str, pd.DataFrame]:
    """The six frames of the readers' rows; ``problems`` are report rows of inputs that could not be read."""
    bucketed = _Buckets()
    keys = [(group.op_name, group.profile or group.shapes) for r in readers for group in r.groups]
    values, codes = bucketed([k[0] for k in keys], [k[1] for k in keys])
    offsets = np.cumsum([0] + [len(r.groups) for r in readers])
    frames = [_candidate_frame(r, values, codes[a:b]) for r, a, b in zip(readers, offsets, offsets[1:])]
    candidates = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    rows = [w for r in readers for w in r.winners]
    winners = _columns("winners", rows)
    if rows:  # a winner's bucket from its profile, or an OOM fallback's from its opt shapes
        values, codes = bucketed([w["op"] for w in rows],
                                 [w["profile"] if w["profile"] is not None else w.get("shapes") for w in rows])
        winners.update((name, _per_row(values[name], dtype, codes)) for name, dtype in BUCKET_DTYPES.items())
    events = _events(pd.DataFrame([e for r in readers for e in r.events],
                                  columns=[*EVENT_COLUMNS, "key", "_line", "_key_line"]))
    report = pd.DataFrame([*(row for r in readers for row in _report_rows(r)), *problems], columns=REPORT_COLUMNS)
    return {
        "candidates": _conform("candidates", candidates),
        "winners": _conform("winners", pd.DataFrame(winners, copy=False)),
        "tuning": _conform("tuning", pd.DataFrame(_tuning_columns([t for r in readers for t in _tuning_rows(r)],
                                                                  bucketed), copy=False)),
        "runs": _conform("runs", pd.DataFrame(_columns("runs", [row for r in readers for row in _run_rows(r)]),
                                              copy=False)),
        "events": events,
        "report": report.assign(lines=report["lines"].astype("int64"), first_line=report["first_line"].astype("int64")),
    }


class _Buckets:
    """bucket, bucket_key and bucket_rule (:func:`~profkit.sources.cache.add_buckets`) of (op, shapes text) pairs.

    add_buckets judges an op by all the texts it holds in one frame (its varying dimensions), so a table's pairs
    are bucketed as one frame; a table whose ops hold the same texts as an earlier one's (winners and tuning rows
    name the candidates' profiles) reuses that answer instead of parsing every text again.
    """

    def __init__(self):
        self.known: dict[frozenset, dict[tuple, tuple]] = {}  # per-op texts -> values of each pair bucketed so

    def __call__(self, ops: list, wheres: list) -> tuple[dict[str, list], np.ndarray]:
        """The values of each distinct pair (per column, in first-seen order) and each row's pair."""
        pairs: dict[tuple, int] = {}
        codes = np.fromiter((pairs.setdefault(p, len(pairs)) for p in zip(ops, wheres)), np.int64, len(ops))
        texts: dict = {}
        for op, text in pairs:
            if text is not None:
                texts.setdefault(op, set()).add(text)
        known = self.known.setdefault(frozenset((op, frozenset(t)) for op, t in texts.items()), {})
        if any(p not in known and p[1] is not None for p in pairs):
            distinct = pd.DataFrame(list(pairs), columns=["op", "where"], dtype=object)
            found = add_buckets(distinct, "where")
            known.update(zip(pairs, zip(*(found[name].to_numpy(object, na_value=None).tolist()
                                          for name in BUCKET_DTYPES))))
        rows = [known.get(p, _NO_TEXT) for p in pairs]
        return {name: [row[k] for row in rows] for k, name in enumerate(BUCKET_DTYPES)}, codes


def _per_row(values: list, dtype: str, rows: np.ndarray):
    """One value per group (or per code), taken for every row (strings by pyarrow: 5x pandas' take)."""
    if dtype == "string":
        # These columns are most of the tables' memory (356 of the candidates' 413 MB on the 1M-line bench log), all
        # of it new: from the system allocator its first touches cost the kernel half the time they cost from
        # pyarrow's default mimalloc (tables 1.44-1.54 -> 1.19-1.23 s CPU there); the arrays are the same.
        return pd.arrays.ArrowStringArray(pc.take(pa.array(values, pa.large_string()), rows,
                                                  memory_pool=pa.system_memory_pool()))
    return pd.array(values, dtype=dtype).take(rows)


def _candidate_frame(reader: Reader, buckets: dict[str, list], pairs: np.ndarray) -> pd.DataFrame:
    """Candidates in log order; ``buckets`` has bucket, bucket_key, bucket_rule per (op, shapes) pair, ``pairs`` the
    pair of each group."""
    groups, c = reader.groups, reader.cands
    rows = np.asarray(c.group, dtype=np.int64)
    columns = {
        "run_id": _per_row([gr.call.run.run_id for gr in groups], "string", rows),
        "rank": _per_row([gr.call.run.rank for gr in groups], "Int64", rows),
        "call": _per_row([gr.call.number for gr in groups], "Int64", rows),
        "op": _per_row([gr.op_name for gr in groups], "string", rows),
        "profile": _per_row([gr.profile for gr in groups], "string", rows),
        "shapes": _per_row([gr.shapes for gr in groups], "string", rows),
        "file": _per_row([reader.name] * len(groups), "string", rows),
    }
    for name, dtype in BUCKET_DTYPES.items():
        columns[name] = _per_row(buckets[name], dtype, pairs[rows])
    columns["line"] = np.asarray(c.line, dtype=np.int64)
    names = [g.runner_parts(text) for text in c.reprs]  # reprs in code order
    codes = np.asarray(c.runner, dtype=np.int64)
    for k, column in enumerate(("runner", "runner_id")):
        columns[column] = _per_row([n[k] for n in names] or [None], "string", codes)
    columns["tactic"] = _per_row([g.tactic_text(t) for t in c.tactics] or [None], "string",
                                 np.asarray(c.tactic, dtype=np.int64))
    times = np.asarray(c.time, dtype=np.float64)
    columns["time_ms"] = np.where(np.isfinite(times), times, np.nan)  # as the capture: no inf
    odd = np.zeros(len(rows), dtype=np.int64)  # 0: a plain row; k: the k-th odd one
    odd[list(c.odd)] = np.arange(1, len(c.odd) + 1)
    for field, plain in (("status", "ok"), ("error", ""), ("api", None)):
        columns[field] = _per_row([plain, *(getattr(o, field) for o in c.odd.values())], "string", odd)
    runs = {id(run): k for k, run in enumerate(reader.runs)}
    columns["seq"] = pd.array(_counts_within(np.asarray([runs[id(gr.call.run)] for gr in groups],
                                                        dtype=np.int64)[rows]), dtype="Int64")
    columns["source"] = _per_row(["flashinfer"], "string", np.zeros(len(rows), dtype=np.int64))
    return pd.DataFrame(columns, copy=False)


def _counts_within(codes: np.ndarray) -> np.ndarray:
    """1, 2, ... per value of ``codes``, in row order (a groupby's cumcount + 1)."""
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(codes) else np.zeros(0, dtype=np.int64)
    position = np.arange(len(codes)) - np.repeat(starts, np.diff(np.r_[starts, len(codes)]))
    counts = np.empty(len(codes), dtype=np.int64)
    counts[order] = position + 1
    return counts


def _group_counts(reader: Reader) -> tuple[np.ndarray, np.ndarray]:
    """Candidates and failed-or-fallback candidates per group."""
    size, c = len(reader.groups), reader.cands
    total = np.bincount(np.asarray(c.group, dtype=np.int64), minlength=size)
    odd = [c.group[row] for row, o in c.odd.items() if o.status != "ok"]
    return total, np.bincount(np.asarray(odd, dtype=np.int64), minlength=size)


def _tuning_rows(reader: Reader) -> list[dict]:
    total, failed = (counts.tolist() for counts in _group_counts(reader))
    rows = []
    for call in reader.calls:
        base = {"run_id": call.run.run_id, "rank": call.run.rank, "call": call.number, "op": call.op,
                "status": "oom_abort" if call.oom else "ok", "error": ""}
        profiled = [gr for gr in call.groups if total[gr.gid] or gr.profile]
        for gr in profiled:
            rows.append({**base, "op": gr.op_name, "kind": "profile", "profile": gr.profile,
                         "shapes": gr.shapes, "wall_s": g.span(gr.start_ts, gr.end_ts), "status": "ok",
                         "n_candidates": total[gr.gid], "n_failed": failed[gr.gid], "n_skipped": gr.n_skipped})
        span = g.span(call.first_ts, call.last_ts)
        rows.append({**base, "kind": "call", "profile": "",
                     "wall_s": span if span == span else call.bar_elapsed_s, "bar_elapsed_s": call.bar_elapsed_s,
                     "n_candidates": sum(total[gr.gid] for gr in call.groups),
                     "n_failed": sum(failed[gr.gid] for gr in call.groups),
                     "n_profiles": len(call.generated) or call.bar_total, "n_profiled": len(profiled)})
    return rows


def _run_rows(reader: Reader) -> list[dict]:
    return [{"run_id": r.run_id, "source_kind": "log", "file": reader.name, "path": reader.path,
             "stream": r.stream, "pid": r.pid, "rank": r.rank, "started_at": g.iso(r.started_at),
             "ended_at": g.iso(r.ended_at), "first_line": r.first_line, "last_line": r.last_line,
             "flashinfer": reader.flashinfer} for r in reader.runs]


def _report_rows(reader: Reader) -> list[dict]:
    counts, c = reader.counts, reader.cands
    timed = len(c) - sum(odd.status == "failed" for odd in c.odd.values())
    if timed:
        counts[("read", "candidate")] = [timed, c.line[0], ""]
    if ("read", "fallback_call") in counts:  # repeats are counted on their event row
        counts[("read", "fallback_call")][0] = sum(e["count"] for e in reader.events if e["kind"] == "fallback_call")
    return [{"file": reader.name, "status": status, "reason": reason, "lines": n, "first_line": first,
             "example": example} for (status, reason), (n, first, example) in sorted(counts.items())]


def _events(events: pd.DataFrame) -> pd.DataFrame:
    """Fill runner, profile and extras of fallback calls from their "Generated key" text (once per key).

    Built column by column (DataFrame.astype and drop cost a millisecond or more each on a few rows: a fleet reads
    many small logs)."""
    keys = [g.parse_key(k) or {} if isinstance(k, str) else {} for k in events["key"].tolist()]
    out = {name: events[name] for name in EVENT_COLUMNS}
    for field in ("runner", "profile", "extras"):
        out[field] = out[field].where(out[field].notna(), pd.Series([k.get(field) for k in keys]))
    for name in ("line", "call", "rank", "count"):
        out[name] = out[name].astype("Int64")
    return pd.DataFrame(out, copy=False)


def _tuning_columns(rows: list[dict], bucketed: _Buckets) -> dict:
    """The tuning rows' columns, with the bucket of each kind=profile row (from its profile, or its opt shapes when
    no winner named it)."""
    columns = _columns("tuning", rows)
    if rows:
        values, codes = bucketed([row["op"] for row in rows],
                                 [row["profile"] if row["profile"] else row.get("shapes") for row in rows])
        columns["bucket"] = pd.array([bucket if row["kind"] == "profile" else None
                                      for row, bucket in zip(rows, np.asarray(values["bucket"], object)[codes])],
                                     dtype="Int64")
    return columns


def _columns(table: str, rows: list[dict]) -> dict:
    """The columns of ``table`` (the schema's and the log's extras) that ``rows`` name, each built in its dtype from
    the rows' values (a frame of row dicts, then a conversion per column, costs milliseconds even for one row: a
    fleet reads many small logs)."""
    columns = {}
    for name, dtype in schema.dtypes_of(table, f"{table}.log").items():
        if any(name in row for row in rows):
            values = [row.get(name) for row in rows]
            columns[name] = np.array(values, dtype=np.float64) if dtype == "float64" else pd.array(values, dtype=dtype)
    return columns


def _conform(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the schema's columns, then the log's extras (missing ones empty), in their dtypes."""
    return schema.conform_columns(frame, schema.dtypes_of(table, f"{table}.log"), table)
