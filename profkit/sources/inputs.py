"""What every reader takes as input: paths, text, lists of them; read safely, named uniquely.

The log, cache and engine readers share this module so that damage is handled one way:

- :func:`inputs_of` turns what a user passes (a path, text, bytes, or a list of those) into one
  :class:`Input` per item. It never touches the files: a missing or unreadable file is found
  when it is opened, so one bad file in a list can be named while the others are read.
- :meth:`Input.open` opens without blocking (a FIFO or device named ``*.json`` is refused, not
  waited on), sniffs gzip by content, and streams: a read error, a cut or corrupt gzip, or the
  byte cap ends the stream cleanly and is written to :attr:`Input.damage`, so what came before
  is kept. :meth:`Input.read_bytes`, :meth:`Input.read_text` and :meth:`Input.lines` build on it.
- :func:`boundary` is the per-file (or per-entry) error boundary: inside it, the errors damaged
  input raises (:data:`READ_ERRORS`) become one :class:`~profkit.errors.ParseError` naming the
  file, which the reader turns into a problem row and then goes on with the next file.
- :func:`unique_names` gives each path the shortest path suffix no other input shares
  (``a/rank0.log`` and ``b/rank0.log``): the stable base of run ids.
- :func:`as_int` / :func:`as_float` are the one place numbers read from files are checked: a
  whole number in the Int64 range, or None.

Nothing here executes or evaluates what it reads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import json
import math
import os
import re
import stat
import zlib
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, Sequence

from profkit.errors import ParseError, ProfkitError

TEXT_NAME = "<text>"
# Caps on what a whole-file read holds in memory (decompressed bytes). Streaming (open, lines)
# has no cap unless asked: logs are hundreds of MB and stream in constant memory.
TEXT_LIMIT = 1 << 30
JSON_LIMIT = 256 << 20
LINE_LIMIT = 64 << 20  # longest line :meth:`Input.lines` hands out before cutting it
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# What damaged input raises while being opened, read, decoded or parsed (gzip.BadGzipFile is an
# OSError, UnicodeError and json.JSONDecodeError are ValueErrors; MemoryError from a huge value).
READ_ERRORS = (OSError, EOFError, zlib.error, ValueError, OverflowError, RecursionError, MemoryError)

_GZIP_MAGIC = b"\x1f\x8b"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_CHUNK = 1 << 16


# -- the error boundary ------------------------------------------------------------------------
def unreadable(exc: BaseException, path: str, line: int | None = None) -> ParseError:
    """``exc`` as a ParseError naming ``path`` (a ParseError that already names a file is kept)."""
    if isinstance(exc, ParseError) and exc.path is not None:
        return exc
    if isinstance(exc, RecursionError):
        why = "nested too deep to read"
    elif isinstance(exc, MemoryError):
        why = "a value too large to hold in memory"
    elif isinstance(exc, OSError) and exc.strerror:
        why = exc.strerror
    else:
        why = str(exc) or type(exc).__name__
    return ParseError(f"unreadable ({why})", path=path, line=line)


@contextlib.contextmanager
def boundary(path: str, line: int | None = None) -> Iterator[None]:
    """Raise any of :data:`READ_ERRORS` from the block as a ParseError naming ``path``.

    profkit's own errors pass through unchanged.

    Wrap the reading of one file (or one entry of a store) in it and catch ParseError outside
    to keep a problem row and go on::

        for item in inputs_of(paths):
            try:
                with boundary(item.where):
                    rows += parse(item.read_text())
            except ParseError as exc:
                problems.append(str(exc))
    """
    try:
        yield
    except ProfkitError:
        raise
    except READ_ERRORS as exc:
        raise unreadable(exc, path, line) from None


# -- inputs ------------------------------------------------------------------------------------
def looks_like_text(value: str) -> bool:
    """Whether a string argument is content rather than a path: it holds a line break or opens JSON."""
    return "\n" in value or "\r" in value or value.lstrip()[:1] in ("{", "[")


def inputs_of(path_or_text, *, what: str = "input") -> list[Input]:
    """One :class:`Input` per path, text or bytes given (lists flattened), names made unique.

    A ``str`` is text when :func:`looks_like_text`, else a path. Paths are not checked here:
    :meth:`Input.open` says what is wrong with each, so a reader can name one and read the rest.

    Raises:
        ParseError: for an empty list or a value that is no path, text or bytes (``what``
            names what was expected, e.g. ``"log"``).
    """
    items = _flatten(path_or_text, what)
    if not items:
        raise ParseError(f"no {what} given (an empty list)")
    texts = sum(1 for item in items if not isinstance(item, os.PathLike) and not isinstance(item, str)
                or isinstance(item, str) and looks_like_text(item))
    found, paths, count = [], [], 0
    for item in items:
        if isinstance(item, (bytes, bytearray)):
            count += 1
            found.append(Input(name=_text_name(count, texts), path=None, data=bytes(item)))
        elif isinstance(item, str) and looks_like_text(item):
            count += 1
            found.append(Input(name=_text_name(count, texts), path=None, text=item))
        else:
            found.append(Input(name="", path=os.fspath(item)))
            paths.append(os.fspath(item))
    names = iter(unique_names(paths))
    return [dataclasses.replace(i, name=next(names)) if i.path is not None else i for i in found]


def _flatten(value, what: str) -> list:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _flatten(item, what)]
    if isinstance(value, (str, bytes, bytearray, os.PathLike)):
        return [value]
    raise ParseError(f"expected a path, text, bytes or a list of them as the {what}, found {type(value).__name__}")


def _text_name(number: int, texts: int) -> str:
    return TEXT_NAME if texts == 1 else f"<text {number}>"


def unique_names(paths: Sequence[str | os.PathLike]) -> list[str]:
    """For each path, its shortest trailing part that no other path in ``paths`` ends with.

    ``["a/rank0.log", "b/rank0.log", "c/x.log"]`` -> ``["a/rank0.log", "b/rank0.log", "x.log"]``.
    Paths are compared as absolute paths (symlinks not followed), so the result depends only on
    the set of paths given together, not on their order. The same file given twice gets
    ``" (2)"``, ``" (3)"`` after its name, in order.
    """
    full = [os.path.abspath(os.fspath(p)) for p in paths]
    distinct = list(dict.fromkeys(full))
    parts = [Path(p).parts[1:] or (p,) for p in distinct]
    depth = [1] * len(parts)
    grown = True
    while grown:
        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(parts):
            groups.setdefault(p[-depth[i]:], []).append(i)
        grown = False
        for members in groups.values():
            for i in members if len(members) > 1 else ():
                if depth[i] < len(parts[i]):
                    depth[i] += 1
                    grown = True
    short = {path: "/".join(p[-d:]) for path, p, d in zip(distinct, parts, depth)}
    names, seen = [], {}
    for path in full:
        seen[path] = seen.get(path, 0) + 1
        names.append(short[path] if seen[path] == 1 else f"{short[path]} ({seen[path]})")
    return names


@dataclasses.dataclass
class Input:
    """One input: a file to read, or text (or bytes) given directly.

    Attributes:
        name: short name, unique among the inputs given together (:func:`unique_names`; for
            text ``<text>``, or ``<text N>`` when several): use it for run ids and ``file`` columns.
        path: the path as given, or None for text.
        text / data: the content given directly (str / bytes), else None.
        damage: empty, or why the data ended early (cut or corrupt gzip, a read error, the byte
            cap); set while reading, so check it after the stream is consumed.
    """

    name: str
    path: str | None
    text: str | None = None
    data: bytes | None = None
    damage: str = ""
    undecodable_line: int | None = dataclasses.field(default=None, repr=False)

    @property
    def where(self) -> str:
        """What messages and ParseError name: the path as given, or the text's name."""
        return self.path if self.path is not None else self.name

    def open(self, *, limit: int | None = None, progress: Callable[[int], object] | None = None) -> BinaryIO:
        """The input's bytes, gzip decompressed (detected by content), as a buffered stream.

        The file is opened without blocking and must be a regular file. Once open, reading never
        raises: an error, a cut or corrupt gzip stream, or more than ``limit`` bytes ends the
        stream and sets :attr:`damage`. ``progress`` is called with the file bytes (compressed
        ones for gzip) read since the last call, once per buffer fill.

        Raises:
            ParseError: naming the file, when it is missing, a directory, a FIFO or device, or
                cannot be opened.
        """
        self.damage = ""
        if self.path is None:
            content = self.data if self.data is not None else self.text.encode("utf-8", errors="surrogatepass")
            raw: io.RawIOBase = _Guarded(io.BytesIO(content), self)
        else:
            raw = _Guarded(_open_regular(self.path), self)
        if progress is not None:
            raw = _Progress(raw, progress)
        stream = io.BufferedReader(raw, 1 << 20)
        if stream.peek(2)[:2] == _GZIP_MAGIC:
            stream = io.BufferedReader(_Guarded(gzip.GzipFile(fileobj=stream, mode="rb"), self, closes=stream), 1 << 20)
        if limit is not None:
            stream = io.BufferedReader(_Capped(stream, limit, self), 1 << 20)
        return stream

    def read_bytes(self, *, limit: int = TEXT_LIMIT) -> bytes:
        """All of the input's (decompressed) bytes, at most ``limit``; see :meth:`open`."""
        if self.path is None and self.data is None and self.text is not None:
            return self.text.encode("utf-8", errors="surrogatepass")
        with self.open(limit=limit) as stream:
            return stream.read()

    def read_text(self, *, limit: int = TEXT_LIMIT) -> str:
        """The input as text: UTF-8 (BOM dropped) or UTF-16 with a BOM; bad bytes become U+FFFD.

        Text given as ``str`` comes back as given (lone surrogates included). The line of the
        first undecodable byte is in :attr:`undecodable_line` (None when all decoded).
        """
        self.undecodable_line = None
        if self.text is not None:
            return self.text
        data = self.read_bytes(limit=limit)
        text, self.undecodable_line = decode(data)
        return text

    def lines(self, *, progress: Callable[[int], object] | None = None,
              max_line: int = LINE_LIMIT) -> Iterator[bytes]:
        """The input's bytes line by line (split on ``\\n`` only, line ends kept), streamed.

        UTF-16 input (with a BOM) is re-encoded as UTF-8. A line longer than ``max_line`` is
        handed out in pieces of that size, so memory stays bounded on a file without line ends.
        Damage ends the lines; check :attr:`damage` after the loop.
        """
        with self.open(progress=progress) as stream:
            if stream.peek(2)[:2] in _UTF16_BOMS:
                text, _ = decode(stream.read(TEXT_LIMIT))
                yield from io.BytesIO(text.encode("utf-8", errors="replace"))
                return
            while line := stream.readline(max_line):
                yield line


def decode(data: bytes) -> tuple[str, int | None]:
    """(text, line of the first undecodable byte or None): UTF-8 or UTF-16 with a BOM, bad bytes as U+FFFD."""
    if data[:2] in _UTF16_BOMS:
        return data.decode("utf-16", errors="replace"), None
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        return data.decode("utf-8-sig", errors="replace"), data.count(b"\n", 0, exc.start) + 1


def regular_file(path: str | os.PathLike) -> None:
    """Raise unless ``path`` is a regular file (after symlinks), without opening it or blocking on it.

    For readers that open files themselves (pyarrow): a FIFO would block them, a device never end.

    Raises:
        ParseError: naming the file, when it is missing, a folder, a FIFO, a device or a socket.
    """
    with open_regular(path):
        pass


def open_regular(path: str | os.PathLike):
    """The file opened for reading as a raw binary stream, refused unless it is a regular file.

    Opened with ``O_NONBLOCK``, so a FIFO is refused instead of waited on.
    """
    return _open_regular(os.fspath(path))


def not_regular(mode: int) -> str | None:
    """What a ``stat`` mode is when it is not a regular file ("a directory", "a FIFO", "a device", "not a
    regular file"); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else \
        "not a regular file"


def _open_regular(path: str):
    """A raw binary file; refuses what is not a regular file before reading a byte from it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ParseError("no such file", path=path) from None
    except IsADirectoryError:
        raise ParseError("is a directory; pass the files in it", path=path) from None
    except OSError as exc:
        raise unreadable(exc, path) from None
    kind = not_regular(os.fstat(fd).st_mode)
    if kind is not None:
        os.close(fd)
        if kind == "a directory":
            raise ParseError("is a directory; pass the files in it", path=path)
        raise ParseError(f"is {kind}; not read", path=path)
    return io.FileIO(fd, "rb", closefd=True)


class _Guarded(io.RawIOBase):
    """A raw stream whose read errors end it, recorded in the input's ``damage``."""

    def __init__(self, inner, owner: Input, closes=None):
        self.inner, self.owner, self.closes, self.ended = inner, owner, closes, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.ended:
            return 0
        try:
            data = self.inner.read1(len(buffer)) if hasattr(self.inner, "read1") else self.inner.read(len(buffer))
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            what = "compressed data ends early or is corrupt" if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)) \
                else "read error"
            self.owner.damage = self.owner.damage or f"{what} ({exc}); the rest is lost"
            self.ended = True
            return 0
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError, zlib.error):
            self.inner.close()
        if self.closes is not None:
            self.closes.close()
        super().close()


class _Capped(io.RawIOBase):
    """A raw stream that ends after ``limit`` bytes, saying so in the input's ``damage``."""

    def __init__(self, inner, limit: int, owner: Input):
        self.inner, self.left, self.limit, self.owner = inner, limit, limit, owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.left <= 0:
            if not self.owner.damage and self.inner.peek(1):
                self.owner.damage = f"larger than {self.limit:,} bytes; the rest was not read"
            return 0
        data = self.inner.read1(min(len(buffer), self.left))
        self.left -= len(data)
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


class _Progress(io.RawIOBase):
    """A raw stream that reports every chunk it hands out (once per buffer fill, not per line)."""

    def __init__(self, raw, report: Callable[[int], object]):
        self.raw, self.report = raw, report

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.raw.readinto(buffer)
        self.report(n or 0)
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


# -- JSON --------------------------------------------------------------------------------------
def load_json(item: Input, *, limit: int = JSON_LIMIT) -> tuple[object, str]:
    """The JSON document of an input and its text (for line look-ups), read within ``limit`` bytes.

    Lone surrogates (``"\\ud800"``, which pyarrow cannot store) in keys and strings become U+FFFD.

    Raises:
        ParseError: naming the file (and line for invalid JSON), when the input cannot be opened,
            is cut, is not JSON, is nested too deep or holds a number too large to read.
    """
    with boundary(item.where):
        text = item.read_text(limit=limit)
        if not text.strip() and not item.damage:
            raise ParseError("empty; expected a JSON document", path=item.where)
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            cut = f"; {item.damage}" if item.damage else ""
            raise ParseError(f"invalid JSON ({exc.msg}){cut}", path=item.where, line=exc.lineno) from None
    return json_without_surrogates(doc, text)[0], text


LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def without_surrogates(text: str) -> str:
    """``text`` with lone surrogates (not storable as UTF-8) as U+FFFD."""
    return LONE_SURROGATE.sub("\ufffd", text) if LONE_SURROGATE.search(text) else text


def json_without_surrogates(doc, text: str) -> tuple[object, bool]:
    """(``doc``, replaced): the JSON value parsed from ``text`` with lone surrogates (the valid JSON escape
    ``"\\udcff"``, which no UTF-8 file, terminal or pyarrow column can hold) in its strings and keys as
    U+FFFD, and whether any was; walked without recursion, and only when ``text`` could hold one."""
    if not (LONE_SURROGATE.search(text) or _SURROGATE_ESCAPE.search(text)):
        return doc, False
    clean, replaced = without_surrogates, False
    root = [doc]
    stack = [root]
    while stack:
        node = stack.pop()
        pairs = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        if isinstance(node, dict):
            node.clear()
        for key, value in pairs:
            if isinstance(value, str):
                replaced |= LONE_SURROGATE.search(value) is not None
                value = clean(value)
            elif isinstance(value, (dict, list)):
                stack.append(value)
            if isinstance(key, str):
                replaced |= LONE_SURROGATE.search(key) is not None
                key = clean(key)
            node[key] = value
    return root[0], replaced


# -- numbers -----------------------------------------------------------------------------------
_INTEGER_TEXT = re.compile(r"[+-]?\d{1,19}", re.ASCII)


def as_int(value, *, low: int = INT64_MIN, high: int = INT64_MAX) -> int | None:
    """``value`` as an int in [low, high] (the Int64 range by default), or None.

    Accepts ints (not bools), whole floats, and ASCII decimal text (``"12"``, ``"-3"``); rejects
    everything else: ``"abc"``, ``1.5``, ``"²"``, ``2**70``, a 20-digit pid. The one check every
    reader applies to numbers read from a file before they reach an Int64 column.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not _INTEGER_TEXT.fullmatch(text):
            return None
        value = int(text)
    elif isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    elif not isinstance(value, int):
        return None
    return value if low <= value <= high else None


def as_float(value) -> float | None:
    """``value`` as a float (ints within float range, finite or not floats, numeric text), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value) if abs(value) < 2**1023 else None
    if isinstance(value, float):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        special = {"inf": math.inf, "+inf": math.inf, "infinity": math.inf, "-inf": -math.inf,
                   "-infinity": -math.inf, "nan": math.nan}
        if text in special:
            return special[text]
        if re.fullmatch(r"[+-]?(\d{1,400}(\.\d{0,400})?|\.\d{1,400})([eE][+-]?\d{1,4})?", text, re.ASCII):
            return float(text)
    return None
