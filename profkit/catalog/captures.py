"""The capture folders under what the user points at, and their parquet files, found once.

The catalogue's walk (:func:`profkit.catalog.walk.walk`) finds every capture folder: a saved Tables folder
(``<table>.parquet``) or a ``profkit capture`` process folder (``<host>-pid<pid>-rank<r>/seg-<n>/``). A
process folder's name states its rank where its rows do not (as :func:`profkit.schema.load` reads it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import pandas as pd

from profkit.catalog.keys import parallel_ranks
from profkit.catalog.sniff import SEGMENT
from profkit.catalog.walk import walk
from profkit.errors import ProfkitError

FOLDER_COLUMNS = {"folder": "string", "name_rank": "Int64", "segments": "Int64"}


def capture_folders(paths: Sequence[str | os.PathLike]) -> pd.DataFrame:
    """Every capture folder under ``paths``, once, in walk order: ``folder``, ``name_rank`` (the rank a process
    folder's name states; NA for saved Tables folders) and ``segments`` (0 for a saved Tables folder).

    Raises:
        ProfkitError: when a path does not exist.
    """
    found, seen = [], set()
    for path in map(Path, paths):
        if not os.path.lexists(path):
            raise ProfkitError(f"{path}: no such file or directory; pass capture folders (profkit capture --out, "
                               "Tables.save) or folders holding them")
        for folder in walk(path).paths("capture"):
            key = os.path.realpath(folder)
            if key not in seen:
                seen.add(key)
                found.append(folder)
    return folder_rows(found)


def folder_rows(folders: Sequence[str | os.PathLike]) -> pd.DataFrame:
    """:func:`capture_folders`' rows of capture folders already found (a walk's ``capture`` entries), in order."""
    rows = []
    for folder in map(Path, folders):
        segments = _segments(folder)
        rank = parallel_ranks(folder.name).get("rank") if segments else None
        rows.append({"folder": str(folder), "name_rank": rank, "segments": len(segments)})
    return pd.DataFrame(rows, columns=list(FOLDER_COLUMNS)).astype(FOLDER_COLUMNS)


def table_files(folders: pd.DataFrame, table: str) -> pd.DataFrame:
    """The ``<table>.parquet`` files of ``folders`` (segments in number order): ``file``, ``folder``, ``name_rank``."""
    rows = []
    for folder, rank, segments in folders[["folder", "name_rank", "segments"]].itertuples(index=False):
        units = _segments(Path(folder)) if segments else [Path(folder)]
        for unit in units:
            file = unit / f"{table}.parquet"
            if file.is_file():
                rows.append((str(file), folder, rank))
    return pd.DataFrame(rows, columns=["file", "folder", "name_rank"]).astype(
        {"file": "string", "folder": "string", "name_rank": "Int64"})


def _segments(folder: Path) -> list[Path]:
    """The ``seg-<n>`` folders of a process folder, in number order (hidden ``.seg-<n>.tmp`` ones are writes in
    progress and never read)."""
    try:
        names = [e.name for e in os.scandir(folder) if e.is_dir() and SEGMENT.fullmatch(e.name)]
    except OSError:
        return []
    return [folder / n for n in sorted(names, key=lambda n: int(n[4:]))]
