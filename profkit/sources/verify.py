"""Read ``profkit verify`` tables: every ``verify.parquet`` under a path, stacked and checked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import pandas as pd
import pyarrow.parquet as pq

from profkit import schema
from profkit.errors import ParseError, ProfkitError
from profkit.sources.inputs import open_regular


def read_verify(*paths: str | os.PathLike, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """The verify table of every ``verify.parquet`` file given or found under the given folders.

    Each row gains ``source`` (the file it came from). ``columns``: read only these (those the
    verify table defines typed as it says, missing ones empty), for a command that uses a few:
    ``profkit compare`` reads 15 of 22, 855 of 1,919 MB of a 3.5M-row table in memory. Raises
    ProfkitError naming a file that is not a verify table, or the paths when none holds one.
    """
    files = []
    for path in map(Path, paths):
        if not path.exists():
            raise ProfkitError(f"{path}: no such file or directory; give profkit verify's output (verify.parquet "
                               "or a folder holding it)")
        files += [path] if not path.is_dir() else sorted(path.rglob("verify.parquet"))
    if not files:
        raise ProfkitError(f"no verify.parquet under {', '.join(map(str, paths))}; run profkit verify CAPTURE "
                           "--out DIR first")
    columns = None if columns is None else set(columns)
    frames = []
    for file in files:
        try:
            with open_regular(file) as stream:  # one open; a FIFO would block pyarrow, a device never end: named
                frame = _typed(pd.read_parquet(stream, columns=_present(stream, columns)), columns)
        except ParseError:
            raise
        except (OSError, ValueError, ProfkitError) as exc:
            raise ProfkitError(f"{file}: not a profkit verify table ({exc})") from exc
        frames.append(frame.assign(source=str(file)))
    return pd.concat(frames, ignore_index=True)


def _present(stream, columns: set[str] | None) -> list[str] | None:
    """The file's columns among ``columns`` (None: all); the stream is left at its start."""
    if columns is None:
        return None
    names = pq.read_schema(stream).names
    stream.seek(0)
    return [c for c in names if c in columns]


def _typed(frame: pd.DataFrame, columns: set[str] | None) -> pd.DataFrame:
    """A whole verify table checked (``columns`` None), else the verify columns among ``columns``, checked and typed."""
    if columns is None:
        return schema.conform(frame, "verify")
    dtypes = {c: d for c, d in schema.dtypes_of("verify").items() if c in columns}
    schema.require(frame, dtypes, "verify")
    return schema.conform_columns(frame, dtypes, "verify").join(frame[[c for c in frame.columns if c not in dtypes]])
