"""Checks of the paths a command line names, before anything is read or needs a GPU: one line each."""

from __future__ import annotations

import os

from profkit.errors import ProfkitError


def need_file(path, flag: str, wanted: str) -> None:
    """``flag PATH`` must be a regular file; else say what is there and ``wanted`` (what to give instead)."""
    from profkit.sources.inputs import not_regular  # the readers' own words; imported only when a path is checked

    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise ProfkitError(f"{flag} {path}: no such file; give {wanted}") from None
    kind = not_regular(mode)
    if kind is not None:
        raise ProfkitError(f"{flag} {path}: is {kind}; give {wanted}")


def need_out_dir(out, what: str = "a directory") -> None:
    """``--out OUT`` may be missing (it is created) or a directory, never a file."""
    if out is not None and os.path.exists(out) and not os.path.isdir(out):
        raise ProfkitError(f"--out {out}: is a file; give {what} (it is created if missing)")


def need_out_file(path, flag: str, wanted: str) -> None:
    """``flag PATH`` names a file to write: not a folder, and its folder exists or is one missing folder
    in a folder that exists (only that one is created: a typo never grows a tree of folders)."""
    if os.path.isdir(path):
        raise ProfkitError(f"{flag} {path}: is a directory; give a file path for {wanted}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) and not os.path.isdir(os.path.dirname(folder)):
        raise ProfkitError(f"{flag} {path}: its folder {folder} does not exist, nor the one above it; create it "
                           "first (only a last missing folder is created)")
