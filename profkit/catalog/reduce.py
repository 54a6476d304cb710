"""Reduce capture folders, a batch at a time, to the few rows the rank questions read: per run first.

A run is a (folder, run_id): ``run`` is their hash, so two folders that reuse a run_id (a capture
repeated on another GPU) stay apart. A batch's candidates are read once, where they lie, only the
columns named here, and reduced to four parquet parts written through profkit's one writer (each part
is independent of every other batch, so batches run anywhere: this process, or
:mod:`profkit.query.distributed`'s Dask workers):

``decisions``  one row per tuning decision (run_id, rank, call, op, profile) that timed a finite candidate:
               the winner as FlashInfer picks it (the fastest of its own candidates, the first measured on
               ties), its time (the best candidate's), the default's runner and time (profkit's timing, else
               FlashInfer's own tactic -1 candidate), as :func:`profkit.analysis.winners` computes them; for a
               run without candidates (a cache file), its winners.
``timings``    per (run, k, p): the fastest and the mean of the run's finite times, where ``k`` names an
               (op, profile) and ``p`` a (runner, tactic) by DuckDB's hash of them (the decisions carry both
               with their names; parts of one reduction are read by one DuckDB version).
``served``     per (run, rank, op, profile, runner, tactic, source): the winners the run served and how
               (profiled, cached, cache_file...), with the number of calls: the tactics each rank served.
``runs``       one row per run: ``run``, the catalogue's keys (:func:`profkit.catalog.keys.keyed_runs`: GPU,
               host, rank, process...), ``started_at`` and the folder it was read from.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from profkit.catalog import engine
from profkit.catalog.captures import table_files

PARTS = ("decisions", "timings", "served", "runs")

CANDIDATE_COLUMNS = {"run_id": "VARCHAR", "rank": "BIGINT", "call": "BIGINT", "op": "VARCHAR", "profile": "VARCHAR",
                     "bucket": "BIGINT", "runner": "VARCHAR", "tactic": "VARCHAR", "time_ms": "DOUBLE",
                     "seq": "BIGINT", "source": "VARCHAR"}
WINNER_COLUMNS = {"run_id": "VARCHAR", "rank": "BIGINT", "call": "BIGINT", "op": "VARCHAR", "profile": "VARCHAR",
                  "bucket": "BIGINT", "runner": "VARCHAR", "tactic": "VARCHAR", "time_ms": "DOUBLE", "source": "VARCHAR"}
RUN_COLUMNS = {"run_id": "VARCHAR", "source_kind": "VARCHAR", "gpu": "VARCHAR", "flashinfer": "VARCHAR",
               "cuda": "VARCHAR", "host": "VARCHAR", "pid": "VARCHAR", "rank": "VARCHAR", "sm": "VARCHAR",
               "started_at": "VARCHAR"}

# k names an (op, profile) and p a (runner, tactic) by their hash: the queries group and join on numbers.
_CANDIDATES = """
CREATE OR REPLACE TEMP TABLE c AS
SELECT hash(f.folder, p.run_id) AS run, p.run_id, coalesce(p.rank, f.name_rank) AS rank, p.call, p.op, p.profile,
       p.bucket, p.runner, p.tactic, p.time_ms, coalesce(p.seq, 9223372036854775807) AS seq,
       coalesce(p.source <> 'default', true) AS own, hash(p.op, p.profile) AS k, hash(p.runner, p.tactic) AS p
FROM {rel} p JOIN files f ON p.filename = f.file
"""
# FlashInfer's pick per decision (AT:2531: the smallest finite time, the first measured on ties) and the default.
_DECISIONS = """
SELECT run, run_id, rank, call, op, profile, k, w.bucket AS bucket, w.runner AS runner, w.tactic AS tactic, w.p AS p,
       time_ms, n_candidates,
       CASE WHEN n_default > 0 THEN own_default.runner ELSE fi_default.runner END AS default_runner,
       CASE WHEN n_default > 0 THEN own_default.t ELSE fi_default.t END AS default_ms
FROM (
  SELECT run, any_value(run_id) AS run_id, rank, call, k, any_value(op) AS op, any_value(profile) AS profile,
         arg_min({'bucket': bucket, 'runner': runner, 'tactic': tactic, 'p': p}, {'t': time_ms, 's': seq})
           FILTER (own AND isfinite(time_ms)) AS w,
         min(time_ms) FILTER (own AND isfinite(time_ms)) AS time_ms,
         count(*) FILTER (own AND isfinite(time_ms)) AS n_candidates,
         count(*) FILTER (NOT own) AS n_default,
         arg_min({'runner': runner, 't': time_ms}, seq) FILTER (NOT own) AS own_default,
         arg_min({'runner': runner, 't': time_ms}, seq) FILTER (own AND tactic = '-1') AS fi_default
  FROM c GROUP BY run, rank, call, k)
WHERE n_candidates > 0
"""
_TIMINGS = """
SELECT run, max(rank) AS rank, k, p, min(time_ms) AS min_ms, avg(time_ms) AS mean_ms
FROM c WHERE own AND isfinite(time_ms) GROUP BY run, k, p
"""
_WINNERS = """
CREATE OR REPLACE TEMP TABLE w AS
SELECT hash(f.folder, p.run_id) AS run, p.run_id, coalesce(p.rank, f.name_rank) AS rank, p.call, p.op,
       p.profile, p.bucket, p.runner, p.tactic, p.time_ms, p.source
FROM {rel} p JOIN files f ON p.filename = f.file
"""
_SERVED = "SELECT run, run_id, rank, op, profile, bucket, runner, tactic, source, count(*) AS calls FROM w GROUP BY ALL"
# A run without candidates (a cache file, a v2 store) decided what its winners table holds.
_PICKED = """
SELECT run, run_id, rank, call, op, profile, hash(op, profile) AS k, bucket, runner, tactic, hash(runner, tactic) AS p,
       time_ms, 0::BIGINT AS n_candidates, NULL::VARCHAR AS default_runner, NULL::DOUBLE AS default_ms
FROM w WHERE NOT EXISTS (SELECT 1 FROM c WHERE c.run = w.run)
"""
_NAMES = "SELECT DISTINCT k, p, op, profile, runner, tactic FROM c WHERE own AND isfinite(time_ms)"
_RUNS = ("SELECT hash(f.folder, r.run_id) AS run, r.* EXCLUDE (filename), f.folder "
         "FROM {rel} r JOIN files f ON r.filename = f.file")


def reduce_batch(folders: pd.DataFrame, out: str | Path, part: int, *, threads: int | None = None,
                 spill: str | Path | None = None, served: bool = True) -> list[str]:
    """Reduce the capture ``folders`` (:func:`~profkit.catalog.captures.capture_folders` rows) to the four parts
    ``<out>/<part name>/part-<part>.parquet``; return the problems (files set aside, by name).

    ``served=False`` leaves the winners tables unread where there are candidates (the ``served`` part is then
    empty): a fleet's winners files are as many as its candidates files, and only provenance needs them.
    """
    out = Path(out)
    frames, problems = reduce_frames(folders, threads=threads, spill=spill or out / f".spill-{part:06d}", served=served)
    for name in PARTS:
        engine.write_parquet(frames[name], out / name / f"part-{part:06d}.parquet")
    return problems


def reduce_frames(folders: pd.DataFrame, *, threads: int | None = None, spill: str | Path | None = None,
                  served: bool = True, names: bool = False) -> tuple[dict, list[str]]:
    """The parts of :func:`reduce_batch` as Arrow tables, by name, and the problems (files set aside).

    ``names=True`` adds ``names``: the (op, profile, runner, tactic) behind each (k, p) of ``timings``.
    """
    problems: list[str] = []
    con = engine.connect(threads=threads, spill=spill)
    try:
        _select(con, folders, "candidates", CANDIDATE_COLUMNS, _CANDIDATES, problems, con.execute)
        if served or not con.execute("SELECT count(*) FROM c").fetchone()[0]:
            _select(con, folders, "winners", WINNER_COLUMNS, _WINNERS, problems, con.execute)
        else:
            none = "CROSS JOIN (SELECT NULL::VARCHAR AS folder, NULL::BIGINT AS name_rank) f"
            con.execute(_WINNERS.format(rel=engine.empty_relation(WINNER_COLUMNS, filename=True)).replace(
                "JOIN files f ON p.filename = f.file", none))
        frames = {"decisions": con.sql(f"{_DECISIONS} UNION ALL BY NAME {_PICKED}").to_arrow_table(),
                  "timings": con.sql(_TIMINGS).to_arrow_table(), "served": con.sql(_SERVED).to_arrow_table()}
        if names:
            frames["names"] = con.sql(_NAMES).to_arrow_table()
        frames["runs"] = _keyed(_select(con, folders, "runs", RUN_COLUMNS, _RUNS, problems, _arrow(con)))
    finally:
        con.close()
    return frames, problems


def _select(con, folders: pd.DataFrame, table: str, columns: dict, sql: str, problems: list[str], run):
    """``run`` the ``sql`` over the folders' ``<table>.parquet`` files (``rel``), joined to ``files``; when DuckDB
    cannot read one, again without the files it cannot read (named in ``problems``)."""
    import duckdb

    files = table_files(folders, table)
    try:
        return _over(con, files, columns, sql, run)
    except (duckdb.IOException, duckdb.InvalidInputException):
        good = set(engine.readable(con, list(files["file"]), problems))
        return _over(con, files[files["file"].isin(good).to_numpy(dtype=bool)], columns, sql, run)


def _over(con, files: pd.DataFrame, columns: dict, sql: str, run):
    con.register("files", files)
    try:
        return engine.by_schemas(lambda union: sql.format(rel=engine.relation(
            con, list(files["file"]), columns, union=union, filename=True)), run)
    finally:
        con.unregister("files")


def _arrow(con):
    return lambda sql: con.sql(sql).to_arrow_table()


def _keyed(runs):
    """One row per run with the catalogue's keys, its start and the folder read, as Arrow."""
    import pyarrow as pa

    from profkit.catalog.keys import KEY_COLUMNS, keyed_runs

    frame = runs.to_pandas().drop_duplicates("run")
    keyed = keyed_runs(frame.assign(path=frame["folder"]), {})
    keyed = keyed[["run", *KEY_COLUMNS, "started_at", "folder"]].astype({"started_at": "string", "folder": "string"})
    return pa.Table.from_pandas(keyed, preserve_index=False)
