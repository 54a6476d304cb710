"""One walk over what the user points at: every input file and folder, with its kind, found once.

The walk lists folders and sniffs file kinds (:mod:`profkit.catalog.sniff`); it reads nothing but the
first MiB of a file whose name does not say what it is. Capture folders and v2 stores are entries of
their own and are not walked into. Hidden folders (``.seg-3.tmp``, writes in progress) are skipped.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pandas as pd

from profkit.catalog.sniff import TABLE_FILES, file_kind, folder_kind

INVENTORY_COLUMNS = {"path": "string", "rel": "string", "kind": "string", "bytes": "Int64"}


@dataclasses.dataclass(frozen=True)
class Inventory:
    """The inputs under one root.

    Attributes:
        root: the path walked (a folder, or one file).
        files: one row per input (``path``, ``rel`` = relative to ``root``, ``kind``, ``bytes``), in walk order;
            ``other`` files are listed too, so nothing is silently left out.
    """

    root: Path
    files: pd.DataFrame

    def paths(self, *kinds: str) -> list[Path]:
        """The inputs of these kinds, in walk order."""
        hit = self.files[self.files["kind"].isin(kinds)]
        return [Path(p) for p in hit["path"]]

    def rel(self, path: Path) -> str:
        """``path`` relative to the root (``.`` for the root itself)."""
        return str(Path(path).relative_to(self.root)) if Path(path) != self.root else "."


def walk(root: str | os.PathLike) -> Inventory:
    """Every input under ``root`` (a folder or one file), each listed once with its kind."""
    root = Path(root)
    rows = []
    if not root.is_dir():
        rows.append(_row(root, root, file_kind(root)))
    else:
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            kind = folder_kind(here, dirnames + filenames)
            if kind != "folder":  # a capture or a store: one entry; files beside its own are still inputs
                rows.append(_row(here, root, kind))
                dirnames[:] = []
                rows += [_row(here / name, root, file_kind(here / name)) for name in sorted(filenames)
                         if kind == "capture" and name not in TABLE_FILES]
                continue
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            rows += [_row(here / name, root, file_kind(here / name)) for name in sorted(filenames)]
    files = pd.DataFrame(rows, columns=list(INVENTORY_COLUMNS)).astype(INVENTORY_COLUMNS)
    return Inventory(root=root, files=files)


def _row(path: Path, root: Path, kind: str) -> dict:
    try:
        size = path.stat().st_size if path.is_file() else None
    except OSError:
        size = None
    rel = str(path.relative_to(root)) if path != root else "."
    return {"path": str(path), "rel": rel, "kind": kind, "bytes": size}
