"""The one way profkit writes a file: whole or not at all, never through a planted symlink.

Every output goes through :func:`write_bytes` (or its text / JSON / set forms):

- the content goes to a new temporary file in the target's own folder (``O_CREAT | O_EXCL |
  O_NOFOLLOW``, so nothing planted there is opened), is fsynced, and is renamed over the target;
  the folder is fsynced after. A reader, a second writer, a crash or a full disk therefore sees
  the old file or the new one, never a mix or a cut; a failed write leaves the old file as it was
  and removes its temporary file.
- ``rename`` replaces a symlink standing at the target instead of writing through it, so a link
  planted where an output goes never redirects the write to the link's target.
- ``inputs``: a target that is one of the command's input files (``repair --like X --out X``, by
  path or by inode: a hard link or a symlink to it) is refused before anything is written.
- :func:`write_set` writes the files of one output folder (``profkit advise --out``) under an
  exclusive lock on the folder: two writers on one folder take turns, so the folder ends up
  holding one writer's whole set, never files of both.
- :func:`whole_folder` writes a folder whole (``profkit report --out``): into a new sibling that
  then replaces the folder in one step, so no file of an earlier write stays beside the new ones;
  a folder holding files profkit did not write there is refused, never deleted.

Every failure is a :class:`~profkit.errors.ProfkitError` naming the file and the reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

from profkit.errors import ProfkitError

__all__ = ["make_folder", "refuse_inputs", "whole_folder", "write_bytes", "write_json", "write_set", "write_text"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def write_bytes(path: str | os.PathLike, data: bytes, *, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """Write ``data`` to ``path`` atomically (see the module docstring); return the path.

    Args:
        path: the file to write; missing parent folders are created.
        data: the whole content.
        inputs: files the command read; writing over one of them is refused.

    Raises:
        ProfkitError: naming ``path``, when it is a folder or one of ``inputs``, or the write fails
            (read-only or full disk, no permission).
    """
    path = Path(path)
    folder = _folder_of(path)
    refuse_inputs([path], inputs)
    _write_into(folder, path, data)
    _fsync_folder(folder)
    return path


def write_text(path: str | os.PathLike, text: str, *, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """:func:`write_bytes` of ``text`` as UTF-8 (lone surrogates are refused by the encoder)."""
    return write_bytes(path, _utf8(text, path), inputs=inputs)


def write_json(path: str | os.PathLike, document, *, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """:func:`write_text` of ``document`` as indented JSON; NaN and infinity are refused (not JSON)."""
    return write_text(path, dumps_json(document, path), inputs=inputs)


def dumps_json(document, path: str | os.PathLike = "<json>") -> str:
    """``document`` as indented JSON text with a final newline; ProfkitError for NaN or infinity."""
    try:
        return json.dumps(document, indent=2, allow_nan=False) + "\n"
    except (ValueError, TypeError) as exc:
        raise ProfkitError(f"{path}: cannot be written as JSON ({exc})") from None


def write_set(folder: str | os.PathLike, files: Mapping[str, str | bytes], *,
              inputs: Iterable[str | os.PathLike] = ()) -> list[Path]:
    """Write several files into one folder as one set: each atomically, the set under the folder's lock.

    Every file is first written to its temporary file; only when all are on disk are they renamed
    into place, while an exclusive ``flock`` on the folder keeps another :func:`write_set` on the
    same folder out. So a failure (a full disk) leaves the old set, and two writers leave one set.

    Args:
        folder: the output folder (created when missing).
        files: file name (no folder part) -> content (text is written as UTF-8).
        inputs: files the command read; writing over one of them is refused.

    Returns:
        The paths written, in the order of ``files``.

    Raises:
        ProfkitError: naming the folder or file, as :func:`write_bytes`.
    """
    folder = Path(folder)
    make_folder(folder)
    targets = []
    for name in files:
        if not name or name in (".", "..") or "/" in name or "\0" in name or os.sep in name:
            raise ProfkitError(f"{folder}: {name!r} is not a file name")
        targets.append(folder / name)
    for target in targets:
        _refuse_folder(target)
    refuse_inputs(targets, inputs)
    contents = [files[t.name] if isinstance(files[t.name], bytes) else _utf8(files[t.name], t) for t in targets]
    with _locked(folder):
        staged: list[tuple[str, Path]] = []
        try:
            for target, data in zip(targets, contents):
                staged.append((_stage(folder, target, data), target))
            for tmp, target in staged:
                _rename(tmp, target)
        finally:
            for tmp, _ in staged:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        _fsync_folder(folder)
    return targets


WRITTEN = ".profkit-written"  # in a folder written by whole_folder: the JSON list of the files it holds


@contextlib.contextmanager
def whole_folder(folder: str | os.PathLike, *,
                 earlier: Callable[[Path, set[str]], bool] | None = None) -> Iterator[Path]:
    """Write ``folder`` whole: yield a new empty sibling folder to write into; it then replaces ``folder``.

    When the block ends, the sibling gets the list of its files (:data:`WRITTEN`) and takes the
    place of ``folder`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere two renames),
    and the earlier folder is deleted: no file of an earlier write stays beside the new ones, and
    a reader sees the old folder or the new one. When the block raises, the sibling is deleted
    and ``folder`` is unchanged.

    Args:
        folder: the folder to write; it may be missing, empty, or a folder written this way before
            (every entry listed in its :data:`WRITTEN`).
        earlier: recognizes a folder an earlier profkit wrote without the list (called with the
            folder and its entry names).

    Raises:
        ProfkitError: naming ``folder``, when it holds files profkit did not write there (they are
            never deleted), is a file or a symlink, or cannot be written.
    """
    folder = Path(folder)
    _refuse_foreign(folder, earlier)
    make_folder(folder.parent)
    staged = folder.parent / f".{folder.name[:80]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        staged.mkdir()
    except OSError as exc:
        raise ProfkitError(f"{folder}: cannot create a folder beside it to write into ({exc.strerror or exc})") from None
    try:
        yield staged
        names = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if not p.is_dir())
        write_bytes(staged / WRITTEN, (json.dumps(names, indent=0) + "\n").encode())
        if not _exchange(staged, folder):
            aside = staged.with_name(staged.name + ".old")
            moved = os.path.lexists(folder)
            if moved:
                _rename(str(folder), aside)
            try:
                _rename(str(staged), folder)
            except ProfkitError:
                if moved:
                    os.rename(aside, folder)  # the earlier folder back in its place
                raise
            staged = aside
    finally:
        shutil.rmtree(staged, ignore_errors=True)  # the earlier folder after the swap; the new one on failure
    _fsync_folder(folder.parent)


def _refuse_foreign(folder: Path, earlier) -> None:
    """Raise unless ``folder`` is missing, empty, or holds only what profkit wrote there."""
    if folder.is_symlink():
        raise ProfkitError(f"{folder}: is a symlink; give the folder itself (it is replaced whole)")
    try:
        names = set(os.listdir(folder))
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise ProfkitError(f"{folder}: exists and is not a folder; give a folder to write into") from None
    except OSError as exc:
        raise ProfkitError(f"{folder}: cannot read the folder ({exc.strerror or exc})") from None
    try:
        listed = set(json.loads((folder / WRITTEN).read_text()))
        foreign = {n for n in names - {WRITTEN} if n not in listed and not any(x.startswith(n + "/") for x in listed)}
    except (OSError, ValueError, TypeError):
        foreign = set() if names and earlier is not None and earlier(folder, names) else names
    if foreign:
        shown = ", ".join(sorted(foreign)[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ProfkitError(f"{folder}: holds files profkit did not write there ({shown}); give a new or empty "
                           "folder, or one profkit wrote before (it is replaced whole)")


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux ``renameat2``); False where ``b`` is missing or it cannot."""
    if not os.path.lexists(b):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_cwd, exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE
    if renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise _failed(b, OSError(code, os.strerror(code)))


def refuse_inputs(outputs: Iterable[str | os.PathLike], inputs: Iterable[str | os.PathLike], *,
                  flag: str = "--out") -> None:
    """Raise when an output would replace one of the inputs (same path, or the same file by inode).

    A symlink standing at an output is not followed (it would be replaced, not written through),
    so only the output's own directory entry is compared.

    Raises:
        ProfkitError: naming the output, the input it would overwrite and ``flag`` (the option to change).
    """
    inputs = [Path(p) for p in inputs]
    if not inputs:
        return
    seen = {}
    for given in inputs:
        with contextlib.suppress(OSError):
            st = os.stat(given)
            seen[(st.st_dev, st.st_ino)] = given
    for out in map(Path, outputs):
        same = next((given for given in inputs if _same_name(out, given)), None)
        if same is None:
            try:
                st = os.lstat(out)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                same = seen.get((st.st_dev, st.st_ino))
        if same is not None:
            raise ProfkitError(f"{out}: the output would overwrite the input {same}; choose another {flag}")


def _same_name(a: Path, b: Path) -> bool:
    with contextlib.suppress(OSError, ValueError):
        return os.path.realpath(a.parent) == os.path.realpath(b.parent) and a.name == b.name
    return False


def _utf8(text: str, path) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ProfkitError(f"{path}: holds text that is not valid Unicode ({exc.reason}); not written") from None


def _folder_of(path: Path) -> Path:
    if not path.name or path.name in (".", ".."):
        raise ProfkitError(f"{path}: not a file name")
    folder = path.parent
    make_folder(folder)
    _refuse_folder(path)
    return folder


def _refuse_folder(path: Path) -> None:
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(os.lstat(path).st_mode):
            raise ProfkitError(f"{path}: is a folder; give a file name to write")


def make_folder(folder: str | os.PathLike) -> Path:
    """Create ``folder`` (and its parents) if missing; ProfkitError when it is a file or cannot be made."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ProfkitError(f"{folder}: exists and is not a folder; give a folder to write into") from None
    except OSError as exc:
        raise ProfkitError(f"{folder}: cannot create the folder ({exc.strerror or exc})") from None
    if not folder.is_dir():
        raise ProfkitError(f"{folder}: exists and is not a folder; give a folder to write into")
    return folder


def _write_into(folder: Path, target: Path, data: bytes) -> None:
    tmp = _stage(folder, target, data)
    try:
        _rename(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _stage(folder: Path, target: Path, data: bytes) -> str:
    """Write ``data`` to a new fsynced temporary file beside ``target``; return its path."""
    tmp = str(folder / f".{target.name[:80]}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666)
    except OSError as exc:
        raise _failed(target, exc) from None
    try:
        with open(fd, "wb", closefd=True) as f:
            view = memoryview(data)
            while view:
                view = view[f.write(view):]
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _failed(target, exc) from None
    return tmp


def _rename(tmp: str, target: Path) -> None:
    try:
        os.replace(tmp, target)
    except OSError as exc:
        raise _failed(target, exc) from None


def _failed(target: Path, exc: OSError) -> ProfkitError:
    why = {errno.ENOSPC: "no space left on the disk", errno.EROFS: "the disk is read-only",
           errno.EDQUOT: "over the disk quota"}.get(exc.errno, exc.strerror or str(exc))
    return ProfkitError(f"{target}: cannot write ({why}); the previous file, if any, is unchanged")


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive flock on the folder itself (no lock file left behind)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: each file is still atomic
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError as exc:
        raise ProfkitError(f"{folder}: cannot open the folder to write into it ({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
