"""Read ``profkit verify`` tables: every ``verify.parquet`` under a path, stacked and checked."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from profkit import schema
from profkit.errors import ParseError, ProfkitError
from profkit.sources.inputs import open_regular


def read_verify(*paths: str | os.PathLike) -> pd.DataFrame:
    """The verify table of every ``verify.parquet`` file given or found under the given folders.

    Each row gains ``source`` (the file it came from). Raises ProfkitError naming a file that is
    not a verify table, or the paths when none holds one.
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
    frames = []
    for file in files:
        try:
            with open_regular(file) as stream:  # one open; a FIFO would block pyarrow, a device never end: named
                frame = schema.conform(pd.read_parquet(stream), "verify")
        except ParseError:
            raise
        except (OSError, ValueError, ProfkitError) as exc:
            raise ProfkitError(f"{file}: not a profkit verify table ({exc})") from exc
        frames.append(frame.assign(source=str(file)))
    return pd.concat(frames, ignore_index=True)
