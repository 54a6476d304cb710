"""DuckDB, set up once: a connection with a memory cap and a spill folder, and parquet files read as a relation.

DuckDB reads parquet where it lies, only the columns a query names, and streams it: a fleet's tables are
never loaded whole. Files of one table written by different profkit versions may differ in columns: the
files are read by name, first as one schema (fast: one footer read), and by the union of their schemas
when they differ; a column no file holds reads as NULL. A file DuckDB cannot read is set aside and named.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Callable, Sequence

from profkit.errors import ProfkitError

# Peak memory DuckDB may take before it spills to disk (the rank questions' target is 2 GB per process).
MEMORY_LIMIT = "1GB"


def connect(*, threads: int | None = None, memory_limit: str = MEMORY_LIMIT, spill: str | os.PathLike | None = None):
    """A DuckDB connection of ``threads`` (default: the cores), capped at ``memory_limit``, spilling to ``spill``."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {int(threads or os.cpu_count() or 1)}")
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET enable_progress_bar = false")
    if spill is not None:
        con.execute(f"SET temp_directory = '{_quoted(str(spill))}'")
    return con


def relation(con, files: Sequence[str], columns: dict[str, str], *, union: bool = False, filename: bool = False) -> str:
    """SQL text of a ``SELECT`` of ``columns`` ({name: SQL type}) from the parquet ``files``, for a FROM clause.

    Without ``union`` the files are read as the first one's schema, by name (when the first file lacks a
    column asked for, by the union of all); :func:`fetch` retries with ``union`` when a later file lacks one.
    A column no file holds is ``NULL`` of its type. ``filename`` adds each row's file path as ``filename``.
    """
    files = list(files)
    if not files:
        return empty_relation(columns, filename=filename)
    have = _columns(con, files[:1], False)
    union = union or not set(columns) <= have
    if union:
        have = _columns(con, files, True)
    picks = [f'TRY_CAST("{c}" AS {t}) AS "{c}"' if c in have else f'NULL::{t} AS "{c}"' for c, t in columns.items()]
    if filename:
        picks.append("filename")
    listed = ", ".join(map(repr_sql, files))
    return (f"(SELECT {', '.join(picks)} FROM read_parquet([{listed}], union_by_name = {str(union).lower()}"
            f"{', filename = true' if filename else ''}))")


def by_schemas(make_sql: Callable[[bool], str], run: Callable[[str], object]):
    """``run(make_sql(union))``: first reading files by the first one's schema, then, when a file's columns differ
    (files of another profkit version), by the union of their schemas."""
    import duckdb

    try:
        return run(make_sql(False))
    except (duckdb.InvalidInputException, duckdb.ConversionException) as exc:
        if "union_by_name" not in str(exc):  # DuckDB's own advice when files' schemas differ
            raise
    return run(make_sql(True))


def empty_relation(columns: dict[str, str], *, filename: bool = False) -> str:
    """SQL text of a relation of ``columns`` with no rows (what :func:`relation` reads from no files)."""
    picks = [f'NULL::{t} AS "{c}"' for c, t in columns.items()] + (["NULL::VARCHAR AS filename"] if filename else [])
    return f"(SELECT {', '.join(picks)} LIMIT 0)"


def readable(con, files: Sequence[str], problems: list[str]) -> list[str]:
    """The ``files`` DuckDB can read as parquet; each other one is named in ``problems``, with why."""
    import duckdb

    try:
        con.execute(f"SELECT count(*) FROM parquet_metadata([{', '.join(repr_sql(f) for f in files)}])").fetchall()
        return list(files)
    except duckdb.Error:
        pass
    good = []
    for f in files:
        try:
            con.execute(f"SELECT count(*) FROM parquet_metadata({repr_sql(f)})").fetchall()
            good.append(f)
        except duckdb.Error as exc:
            problems.append(f"{f}: not readable as parquet ({str(exc).splitlines()[0]}); skipped")
    return good


def write_parquet(table, path: Path) -> Path:
    """Write an Arrow table through profkit's one writer (whole or not at all)."""
    import pyarrow.parquet as pq

    from profkit.outputs import atomic

    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    return atomic.write_bytes(path, buffer.getvalue())


def repr_sql(text: str) -> str:
    """``text`` as a SQL string literal."""
    return f"'{_quoted(text)}'"


def _quoted(text: str) -> str:
    if "\0" in text:
        raise ProfkitError(f"{text!r}: a path with a NUL character cannot be read")
    return text.replace("'", "''")


def _columns(con, files: list[str], union: bool) -> set[str]:
    listed = ", ".join(map(repr_sql, files))
    rows = con.execute(f"DESCRIBE SELECT * FROM read_parquet([{listed}], union_by_name = {str(union).lower()})").fetchall()
    return {r[0] for r in rows}
