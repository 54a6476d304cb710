"""Checks of the paths a command line names, before anything is read or needs a GPU: one line each."""

from __future__ import annotations

import os
import stat

from profkit.errors import ProfkitError

_KINDS = ((stat.S_ISDIR, "is a directory"), (stat.S_ISFIFO, "is a FIFO (named pipe)"),
          (stat.S_ISCHR, "is a device"), (stat.S_ISBLK, "is a device"), (stat.S_ISSOCK, "is a socket"))


def need_file(path, flag: str, wanted: str) -> None:
    """``flag PATH`` must be a regular file; else say what is there and ``wanted`` (what to give instead)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise ProfkitError(f"{flag} {path}: no such file; give {wanted}") from None
    if not stat.S_ISREG(mode):
        what = next((text for test, text in _KINDS if test(mode)), "is not a regular file")
        raise ProfkitError(f"{flag} {path}: {what}; give {wanted}")


def need_out_dir(out, what: str = "a directory") -> None:
    """``--out OUT`` may be missing (it is created) or a directory, never a file."""
    if out is not None and os.path.exists(out) and not os.path.isdir(out):
        raise ProfkitError(f"--out {out}: is a file; give {what} (it is created if missing)")
