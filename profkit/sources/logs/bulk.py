"""The bulk path: plain candidate lines parsed a block of text at a time, with numpy and pyarrow.

Most of a debug log is candidate lines of one shape (``<timestamp> - DEBUG - autotuner.py:N -
flashinfer.jit: [Autotuner]: profiling <runner> <tactic>, shapes=<shapes>, avg_time <ms>``).
:func:`plain_candidates` finds them in a block of bytes without a Python loop over lines: line
ends, the fixed header, the runner's end, ", shapes=" and ", avg_time " are located with numpy;
runner, tactic and shapes texts become dictionary codes (each distinct text kept once) and times
are parsed by pyarrow. Every other line, and any line a test here rejects, goes to the reader's
general path, so the bulk path only ever takes lines the general path would read the same way.
:func:`feed` drives a :class:`~profkit.sources.logs.reader.Reader` over an input this way.
"""

from __future__ import annotations

import dataclasses
import re
from typing import BinaryIO, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profkit.sources import inputs
from profkit.sources.logs import grammar as g
from profkit.sources.logs.reader import Reader

BLOCK = 8 << 20  # bytes parsed at a time
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
# The candidate header after its timestamp, up to the runner's "<": learned once per block.
_HEADER = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}( - [A-Z]+ - [^ \r\n]+ - flashinfer\.jit: "
                     rb"\[Autotuner\]: profiling <)", re.M)
_TIMESTAMP_DIGITS = np.array([0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22])
_TIMESTAMP_MARKS = {4: b"-", 7: b"-", 10: b" ", 13: b":", 16: b":", 19: b","}
_TIME = r"^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]{1,3})?$"
_JIT_BYTES = g.JIT.encode()
_SHAPES_BYTES = g.SHAPES.encode()  # ", shapes="
_AVG_TIME_BYTES = g.AVG_TIME.encode()  # ", avg_time "


@dataclasses.dataclass(frozen=True)
class PlainCandidates:
    """The plain candidate lines of a block: line indices, then per line a code into each text list."""

    rows: np.ndarray  # line index in the block, increasing
    runner: np.ndarray  # codes into runners
    runners: list[str]
    tactic: np.ndarray
    tactics: list[str]
    shape: np.ndarray
    shapes: list[str]
    time_ms: np.ndarray

    @classmethod
    def none(cls) -> PlainCandidates:
        empty = np.zeros(0, dtype=np.int64)
        return cls(empty, empty, [], empty, [], empty, [], np.zeros(0))


def _gather(a: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """``width`` bytes from each position in ``at`` (rows of a 2-D array)."""
    return a[np.minimum(at[:, None] + np.arange(width), len(a) - 1)]


def _positions(a: np.ndarray, pattern: bytes, anchor: int) -> np.ndarray:
    """Start positions of ``pattern`` in ``a``, found from its byte at ``anchor`` (pick a rare one)."""
    at = np.flatnonzero(a == pattern[anchor]) - anchor
    at = at[(at >= 0) & (at + len(pattern) <= len(a))]
    return at[(_gather(a, at, len(pattern)) == np.frombuffer(pattern, np.uint8)).all(axis=1)]


def _lines_holding(at: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each position, the index of the line holding it (``ends`` are the lines' newline positions)."""
    return np.searchsorted(ends, at)


def _texts(data: bytes, spans: tuple[np.ndarray, np.ndarray]) -> pa.Array:
    """The texts data[start:end] of increasing, non-overlapping spans, as one pyarrow string array."""
    start, end = spans
    if not len(start):
        return pa.array([], pa.string())
    offsets = np.empty(2 * len(start), dtype=np.int32)
    offsets[0::2], offsets[1::2] = start, end
    # Values alternate: a span, then the text up to the next span (never read).
    every = pa.StringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data))
    return every.take(pa.array(np.arange(0, len(offsets), 2)))


def _codes(texts: pa.Array) -> tuple[np.ndarray, list[str]]:
    encoded = texts.dictionary_encode()
    return encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist()


def plain_candidates(data: bytes, ends: np.ndarray) -> PlainCandidates:
    """The lines of ``data`` (newline positions ``ends``) that are plain candidate lines, parsed.

    A plain line: ASCII, no ``\\r``, a well-formed timestamp, the block's commonest candidate header
    (one " - flashinfer.jit: " in the line), a ``<runner>`` closed by the first "> ", a tactic, then
    ", shapes=" and the last ", avg_time " followed by a decimal number.
    """
    header = _HEADER.search(data)
    if header is None or not len(ends):
        return PlainCandidates.none()
    head = header.group(1)
    a = np.frombuffer(data, np.uint8)
    starts = np.concatenate(([0], ends[:-1] + 1))
    runner_at = starts + g.TIMESTAMP_LENGTH + len(head) - 1  # the "<"
    ok = (ends - runner_at > 12) & (a[np.minimum(runner_at, len(a) - 1)] == ord("<"))
    rows = np.flatnonzero(ok)
    stamp = _gather(a, starts[rows], g.TIMESTAMP_LENGTH)
    ok = ((stamp[:, _TIMESTAMP_DIGITS] >= ord("0")) & (stamp[:, _TIMESTAMP_DIGITS] <= ord("9"))).all(axis=1)
    for at, mark in _TIMESTAMP_MARKS.items():
        ok &= stamp[:, at] == mark[0]
    rows = rows[ok]
    rows = rows[(_gather(a, starts[rows] + g.TIMESTAMP_LENGTH, len(head)) == np.frombuffer(head, np.uint8)).all(axis=1)]
    bad = np.zeros(len(ends), dtype=bool)
    bad[_lines_holding(np.flatnonzero((a == ord("\r")) | (a >= 0x80)), ends)] = True
    jit_lines = _lines_holding(_positions(a, _JIT_BYTES, 16), ends)  # anchored on the "j"
    bad[jit_lines[np.flatnonzero(np.diff(jit_lines) == 0)]] = True  # a second header in the line
    rows = rows[~bad[rows]]
    # The runner ends at the first "> " after its "<".
    closes = _positions(a, b"> ", 0)
    k = np.searchsorted(closes, runner_at[rows])
    close = closes[np.minimum(k, len(closes) - 1)] if len(closes) else np.full(len(rows), -1)
    keep = (k < len(closes)) & (close < ends[rows])
    rows, close = rows[keep], close[keep]
    # The first ", shapes=" after the runner, with a tactic before it.
    marks = _positions(a, _SHAPES_BYTES, 8)  # anchored on the "="
    k = np.searchsorted(marks, close + 2)
    shapes_at = marks[np.minimum(k, len(marks) - 1)] if len(marks) else np.full(len(rows), -1)
    # The last ", avg_time " ends at the line's last space (a time has none).
    spaces = np.flatnonzero(a == ord(" "))
    last_space = spaces[np.searchsorted(spaces, ends[rows]) - 1]
    avg_at = last_space + 1 - len(_AVG_TIME_BYTES)
    keep = (k < len(marks)) & (shapes_at > close + 2) & (avg_at > shapes_at) & (last_space + 1 < ends[rows]) \
        & (_gather(a, avg_at, len(_AVG_TIME_BYTES)) == np.frombuffer(_AVG_TIME_BYTES, np.uint8)).all(axis=1)
    rows, close, shapes_at, avg_at = rows[keep], close[keep], shapes_at[keep], avg_at[keep]
    times = _texts(data, (avg_at + len(_AVG_TIME_BYTES), ends[rows]))
    keep = pc.match_substring_regex(times, _TIME).to_numpy(zero_copy_only=False)
    rows, close, shapes_at, avg_at = rows[keep], close[keep], shapes_at[keep], avg_at[keep]
    time_ms = pc.cast(times.filter(pa.array(keep)), pa.float64()).to_numpy(zero_copy_only=False)
    runner, runners = _codes(_texts(data, (runner_at[rows], close + 1)))
    tactic, tactics = _codes(_texts(data, (close + 2, shapes_at)))
    shape, shapes = _codes(_texts(data, (shapes_at + len(_SHAPES_BYTES), avg_at)))
    return PlainCandidates(rows, runner, runners, tactic, tactics, shape, shapes, time_ms)


# -- driving a reader ------------------------------------------------------------------------------
def _blocks(stream: BinaryIO, whole_end: bool) -> Iterator[bytes]:
    """The stream in blocks that end at a line end (the last may not; ``whole_end`` adds one there)."""
    if stream.peek(2)[:2] in _UTF16_BOMS:
        text, _ = inputs.decode(stream.read(inputs.TEXT_LIMIT))
        yield text.encode("utf-8", errors="replace")
        return
    carry = b""
    while data := stream.read(BLOCK):
        data = carry + data if carry else data
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) > inputs.LINE_LIMIT:
            cut = len(data)  # a line too long to hold: handed on in pieces, each read as a cut record
        carry = data[cut:]
        if cut:
            yield data[:cut]
    if carry:
        yield carry + b"\n" if whole_end else carry


def feed(reader: Reader, item: inputs.Input, progress: Callable[[int], object] | None = None) -> None:
    """Read every line of ``item`` into ``reader``: plain candidates in bulk, the rest one by one."""
    lineno = replaced = 0
    whole_end = item.text is not None  # text given is whole: its last line needs no line end
    with item.open(progress=progress) as stream:
        for data in _blocks(stream, whole_end):
            ends = np.flatnonzero(np.frombuffer(data, np.uint8) == ord("\n"))
            plain = plain_candidates(data, ends)
            starts = [0, *(ends + 1).tolist()]
            if starts[-1] < len(data):
                starts.append(len(data))  # the last line, without its line end
            lines = len(starts) - 1

            def general(first: int, stop: int) -> None:
                nonlocal replaced
                for i in range(first, stop):
                    raw = data[starts[i]:starts[i + 1]]
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError:
                        text = raw.decode("utf-8", errors="replace")
                        replaced += 1
                    reader.line(lineno + i + 1, text)

            done = 0
            for first, stop in _segments(plain):
                row = int(plain.rows[first])
                general(done, row)
                shapes = plain.shapes[plain.shape[first]]
                if not reader.continues_in_bulk(shapes):
                    general(row, row + 1)  # opens the group, or meets a pending failure or warning
                    first += 1
                    if first < stop and not reader.continues_in_bulk(shapes):
                        general(row + 1, int(plain.rows[stop - 1]) + 1)
                        first = stop
                if first < stop:
                    reader.candidate_block(
                        range(lineno + int(plain.rows[first]) + 1, lineno + int(plain.rows[stop - 1]) + 2),
                        [reader.cands.code(plain.runners[c]) for c in plain.runner[first:stop].tolist()],
                        [plain.tactics[c] for c in plain.tactic[first:stop].tolist()],
                        plain.time_ms[first:stop].tolist())
                done = int(plain.rows[stop - 1]) + 1
            general(done, lines)
            lineno += lines
    reader.finish(lineno, replaced, item.damage)


def _segments(plain: PlainCandidates) -> list[tuple[int, int]]:
    """(first, stop) ranges of consecutive plain lines with the same shapes."""
    if not len(plain.rows):
        return []
    new = np.ones(len(plain.rows), dtype=bool)
    new[1:] = (np.diff(plain.rows) != 1) | (np.diff(plain.shape) != 0)
    first = np.flatnonzero(new)
    return list(zip(first.tolist(), [*first[1:].tolist(), len(plain.rows)]))
