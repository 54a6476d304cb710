"""Capture a whole program tree with no code change: ``profkit capture -- CMD`` or ``PROFKIT_CAPTURE``.

Engines call ``flashinfer.autotune()`` themselves, in worker processes they spawn, so nobody can
wrap them in ``with profkit.capture():``. Instead (as coverage.py measures subprocesses) every
Python process started with this module's environment runs a start-up hook
(``_bootstrap/sitecustomize.py``) that waits for FlashInfer's import and only then opens a
process-lifetime :class:`~profkit.sources.capture.Capture`. After every tuning call ends, the
rows it added are appended as a new numbered segment under ``<out>/<host>-pid<pid>[-rank<rank>]/``
(:class:`ProcessWriter`: atomic, fsynced, cost independent of the run's size), so a server that
is killed or never exits still leaves every finished call on disk.
:func:`profkit.load` reads such a directory. Processes that never import FlashInfer, or never
tune, write nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import socket
import sys
import sysconfig
import threading
from pathlib import Path

from profkit import schema
from profkit.sources._bootstrap._profkit_boot import ENV_DIR, path_first
from profkit.sources.capture import Capture
from profkit.sources.env import current_rank

ENV_TIME_DEFAULT = "PROFKIT_CAPTURE_TIME_DEFAULT"  # "0": do not time the default tactic
BOOTSTRAP_DIR = Path(__file__).resolve().parent / "_bootstrap"
PTH_NAME = "profkit-capture.pth"


def child_environment(out: str | os.PathLike, *, time_default: bool = True, base: dict | None = None) -> dict:
    """The environment under which every Python process started captures into ``out``.

    ``PYTHONPATH`` gets the bootstrap folder first, so its ``sitecustomize`` runs before any
    other (which it then runs in turn); the start-up hook keeps it first for grandchildren.
    """
    env = dict(os.environ if base is None else base)
    env[ENV_DIR] = os.path.abspath(out)
    env[ENV_TIME_DEFAULT] = "1" if time_default else "0"
    env["PYTHONPATH"] = path_first(str(BOOTSTRAP_DIR), env.get("PYTHONPATH", ""))
    return env


def pth_text() -> str:
    """A ``.pth`` line that, when PROFKIT_CAPTURE is set, puts the bootstrap folder first on sys.path.

    site.py runs ``import`` lines of .pth files before it imports ``sitecustomize``, so the
    bootstrap's sitecustomize is the one found; with the variable unset the line costs one lookup.
    """
    return (f"import os, sys; os.environ.get({ENV_DIR!r}) and sys.path.insert(0, {str(BOOTSTRAP_DIR)!r})\n")


def install_pth(site_dir: str | os.PathLike | None = None) -> Path:
    """Write :func:`pth_text` into ``site_dir`` (default: this interpreter's site-packages); return its path."""
    target = Path(site_dir or sysconfig.get_paths()["purelib"]) / PTH_NAME
    target.write_text(pth_text())
    return target


class ProcessWriter:
    """Appends one process's rows under ``out`` as numbered segments, each written atomically.

    A segment holds only the rows given to :meth:`append` (those recorded since the previous
    segment), so its cost depends on them, not on the run so far. It is written into a dot-named
    temporary folder, every file and the folder fsynced, then renamed into place and the parent
    fsynced: a crash or a reader sees a segment whole or not at all. A failed write (a full
    disk) removes its temporary folder and raises; the caller keeps the rows for the next one.
    """

    def __init__(self, out: Path):
        self.out = out
        self.folder: Path | None = None
        self.segments = 0
        self.behind = False  # rows kept in memory that a failed write could not put on disk

    def append(self, tables: schema.Tables) -> Path:
        folder = self._folder()
        final = folder / schema.segment_name(self.segments + 1)
        tmp = folder / f".{final.name}.tmp"  # readers skip dot folders
        try:
            shutil.rmtree(tmp, ignore_errors=True)  # left by an earlier failed attempt
            tmp.mkdir()
            for table in schema.TABLES:
                frame = getattr(tables, table)
                if len(frame):
                    _write_synced(frame, tmp / f"{table}.parquet")
            _fsync_path(tmp)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.segments += 1
        with contextlib.suppress(OSError):  # the segment is in place; this only makes the rename durable
            _fsync_path(folder)
        return final

    def mark_unwritten(self, behind: bool) -> None:
        """Leave (``behind``) or remove the empty :data:`~profkit.schema.UNWRITTEN` file in this process's folder.

        While it stands, rows recorded here are not on disk; if the process ends so, load names them
        lost. An empty file takes no data block, so a full disk still lets it be made.
        """
        if self.folder is None or behind == self.behind:
            return
        mark = self.folder / schema.UNWRITTEN
        with contextlib.suppress(OSError):
            if behind:
                os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644))
            else:
                mark.unlink(missing_ok=True)
            self.behind = behind

    def _folder(self) -> Path:
        """This process's folder, named at its first write (by then torch.distributed knows the rank)."""
        if self.folder is None:
            self.out.mkdir(parents=True, exist_ok=True)
            name = schema.process_dir_name(socket.gethostname(), os.getpid(), current_rank())
            for n in itertools.count():  # a pid reused by an earlier process of the same run
                folder = self.out / (name if n == 0 else f"{name}.{n}")
                try:
                    folder.mkdir()
                    break
                except FileExistsError:
                    continue
            self.folder = folder
        return self.folder


def _write_synced(frame, target: Path) -> None:
    frame.to_parquet(target, index=False)
    _fsync_path(target)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _ProcessCapture:
    """The capture of this process and where it goes; restarted in a forked child."""

    def __init__(self, out: Path, time_default: bool):
        self.out = out
        self.lock = threading.Lock()
        self.capture = Capture(time_default=time_default, on_call_end=self.flush, defer_env=True)
        self._new_writer()

    def _new_writer(self) -> None:
        self.writer = ProcessWriter(self.out)
        self.written: dict[str, int] = {}  # rows per table already on disk

    def flush(self, capture: Capture | None = None) -> None:
        """Append the rows recorded since the last segment; never raise into the program."""
        with self.lock:
            counts = self.capture.row_counts()
            if all(n == self.written.get(table, 0) for table, n in counts.items()):
                return  # nothing new (a process that never tuned writes nothing at all)
            try:
                self.writer.append(self.capture.tables(since=self.written, runs=not self.written))
                self.written = counts
                self.writer.mark_unwritten(False)
            except Exception as exc:  # noqa: BLE001 - the program must run on; say why its capture is missing
                message = (f"profkit capture: process {os.getpid()} could not write to {self.out} "
                           f"(its rows are kept for the next write): {type(exc).__name__}: {exc}")
                self.capture.problems.append(message)
                sys.stderr.write(message + "\n")
                self.writer.mark_unwritten(True)

    def restart_in_child(self) -> None:
        """A forked child inherits the parent's rows: drop them and start its own run and folder."""
        self.lock = threading.Lock()  # the parent's may have been held by another thread at fork
        self.capture.restart()
        self._new_writer()


_process: _ProcessCapture | None = None


def start(out: str | os.PathLike) -> None:
    """Record this process's FlashInfer tuning calls into ``out`` for the rest of its life.

    Called by the start-up hook once FlashInfer is imported; a second call does nothing.
    """
    global _process
    if _process is not None:
        return
    _process = _ProcessCapture(Path(out), time_default=os.environ.get(ENV_TIME_DEFAULT, "1") != "0")
    _process.capture.__enter__()
    atexit.register(_process.flush)  # rows recorded outside tuning calls (fused_moe's profile_tactic)
    os.register_at_fork(after_in_child=_process.restart_in_child)
