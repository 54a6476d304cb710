"""The bulk path: plain candidate lines parsed a block of bytes at a time.

Most of a debug log is candidate lines of one shape (``<timestamp> - DEBUG - autotuner.py:N -
flashinfer.jit: [Autotuner]: profiling <runner> <tactic>, shapes=<shapes>, avg_time <ms>``).
:func:`plain_candidates` finds them in a block without a Python loop over lines: line ends and
single-byte tests with numpy; the runner's end, ", shapes=" and ", avg_time " tested at once in
every line at the distances a sample of lines has (:class:`_Words`: 8 bytes at a time); header and
runner, tactic and shapes texts become codes into their distinct values, and each distinct text is
checked once (the header is the block's first candidate header; no text holds the pattern that
ended it, or a record header). Every other line, and any line a test here rejects, goes to the
reader's general path, so the bulk path only ever takes lines the general path would read the same
way. Runs of lines that repeat, after their timestamp, the two lines before them
(:func:`repeat_stops`: a fallback call's message and "Generated key" line, printed on every untuned
call) are counted once the reader has read two of them as repeats. :func:`feed` drives a
:class:`~profkit.sources.logs.reader.Reader` over an input this way.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
from itertools import repeat
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
_SHAPES_BYTES = g.SHAPES.encode()  # ", shapes="
_AVG_TIME_BYTES = g.AVG_TIME.encode()  # ", avg_time "
_JIT_TEXT = g.JIT[3:]  # "flashinfer.jit: ": a second record header in a line holds it
_JIT_BYTES = g.JIT.encode()
_BAR = ("\r" + g.TQDM_START).encode()  # a line that starts with a tqdm render (the record after it is glued to it)


@dataclasses.dataclass(frozen=True)
class PlainCandidates:
    """The plain candidate lines of a block: line indices, then per line a code into each text list."""

    rows: np.ndarray  # line index in the block, increasing
    at: np.ndarray  # where each line's record starts: its line start, or after a tqdm render glued before it
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
        return cls(empty, empty, empty, [], empty, [], empty, [], np.zeros(0))


class _Words:
    """A block's bytes, with the 8 bytes at every offset readable as one number: a pattern of up to 16 bytes is
    tested at many places with two gathers instead of one per byte."""

    def __init__(self, data: bytes):
        self.data = data
        self.bytes = np.frombuffer(data, np.uint8)
        self.words = np.ndarray((max(len(data) - 7, 0),), "<u8", data, 0, (1,))

    def holds(self, pattern: bytes, at: np.ndarray) -> np.ndarray:
        """Whether ``pattern`` starts at each of ``at`` (every ``at + 16 <= len(data)``): its last byte tested
        first, the whole of it only where that byte is."""
        hit = self.bytes[at + len(pattern) - 1] == pattern[-1]
        where = at[hit]
        for start in range(0, len(pattern), 8):
            chunk = pattern[start:start + 8]
            word = self.words[where + start]
            if len(chunk) < 8:
                word &= (1 << 8 * len(chunk)) - 1
            hit[hit] = word == int.from_bytes(chunk, "little")
            where = at[hit]
        return hit

    def find(self, pattern: bytes, begins: np.ndarray, limits: np.ndarray, *, last: bool = False,
             most: int = 32) -> np.ndarray:
        """Per span [begin, limit): where ``pattern`` starts, -1 where it is not there.

        Where ``bytes.find`` (``rfind`` when ``last``) would say when the span holds the pattern once; when it holds it
        more than once, possibly a later (earlier) place: callers reject those rows by the text before (after) it.
        Spans are tested at the distances from their begin (from their limit) that a sample of them has, commonest
        first; a span none fits teaches another by ``bytes.find``; after ``most`` of those, the rest are searched one
        by one.
        """
        data, width = self.data, len(pattern)
        search = data.rfind if last else data.find
        found = np.full(len(begins), -1, dtype=np.int64)
        near_end = limits + 16 > len(data)
        todo = np.flatnonzero(~near_end)
        sample = todo[::max(1, len(todo) // 32)].tolist()
        distances = collections.Counter(
            (limits[k] - at if last else at - begins[k]) for k in sample
            if (at := search(pattern, int(begins[k]), int(limits[k]))) >= 0)
        distances = [d for d, _ in distances.most_common()]
        for _ in range(most + len(distances)):
            if not len(todo):
                break
            if distances:
                distance = int(distances.pop(0))
            else:
                k = todo[0]
                at = search(pattern, int(begins[k]), int(limits[k]))
                if at < 0:
                    todo = todo[1:]
                    continue
                distance = int(limits[k] - at if last else at - begins[k])
            at = limits[todo] - distance if last else begins[todo] + distance
            hit = (at >= begins[todo]) & (at + width <= limits[todo])
            hit[hit] = self.holds(pattern, at[hit])
            found[todo[hit]] = at[hit]
            todo = todo[~hit]
        rest = np.concatenate([todo, np.flatnonzero(near_end)])
        found[rest] = np.fromiter(map(search, repeat(pattern), begins[rest].tolist(), limits[rest].tolist()),
                                  np.int64, len(rest))
        return found


def _line_minimum(a: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per line [start, end): its smallest byte as int8, so a byte above 127 (not ASCII) reads negative.

    An empty line reads its line end (10)."""
    bounds = np.empty(2 * len(starts), dtype=np.int64)
    bounds[0::2], bounds[1::2] = starts, ends
    return np.minimum.reduceat(a.view(np.int8), bounds)[0::2]


def _texts(data: bytes, starts: np.ndarray, ends: np.ndarray, kind: pa.DataType = pa.string()) -> pa.Array:
    """The texts data[start:end] of increasing, non-overlapping spans (ASCII; any bytes for ``pa.binary()``), as one
    pyarrow array."""
    offsets = np.empty(2 * len(starts), dtype=np.int32)
    offsets[0::2], offsets[1::2] = starts, ends
    if not len(starts):
        return pa.array([], kind)
    # Values alternate: a span, then the text up to the next span (never read, never copied).
    every = pa.Array.from_buffers(kind, len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return every.take(pa.array(np.arange(0, len(offsets), 2)))


def _codes(texts: pa.Array) -> tuple[np.ndarray, list[str]]:
    """Codes into the distinct texts (each kept once)."""
    encoded = texts.dictionary_encode()
    return encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist()


def _kept(codes: np.ndarray, texts: list[str], keep: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """``codes`` of the rows ``keep`` holds, into the texts those rows use (in their order in ``texts``)."""
    codes = codes[keep]
    used = np.bincount(codes, minlength=len(texts)) > 0
    return (np.cumsum(used) - 1)[codes], [text for text, u in zip(texts, used.tolist()) if u]


def plain_candidates(data: bytes, ends: np.ndarray, low: np.ndarray | None = None,
                     starts: np.ndarray | None = None) -> PlainCandidates:
    """The lines of ``data`` (newline positions ``ends``) that are plain candidate lines, parsed.

    A plain line: printable ASCII (no ``\\r``), starts "20", the block's first candidate header, no second
    " - flashinfer.jit: ", a ``<runner>`` closed by the first "> ", a tactic, the first ", shapes=",
    the last ", avg_time " and a number Python's float reads: the general path's own tests. The places are found by
    :meth:`_Words.find`; a line whose runner, tactic or shapes text holds "> ", ", shapes=" or a record header (the
    line held a pattern twice, or another record) is left to the general path, and so is one whose time is no number.
    ``starts``: where each line's record starts, when not at its line start (:func:`bar_records`); ``low``: each
    record's :func:`_line_minimum`, when known.
    """
    header = _HEADER.search(data)
    if header is None or not len(ends):
        return PlainCandidates.none()
    head = header.group(1)
    a = np.frombuffer(data, np.uint8)
    words = _Words(data)
    starts = np.concatenate(([0], ends[:-1] + 1)) if starts is None else starts
    runner_at = starts + g.TIMESTAMP_LENGTH + len(head) - 1  # the "<"
    ok = (runner_at + 12 < ends) & (a[starts] == ord("2")) & (a[np.minimum(starts + 1, len(a) - 1)] == ord("0"))
    ok[ok] = (a[starts[ok] + 19] == ord(",")) & (a[runner_at[ok]] == ord("<"))
    ok &= (_line_minimum(a, starts, ends) if low is None else low) >= 14  # printable ASCII: no \r, \t, NUL, ...
    rows = np.flatnonzero(ok)
    line_end = ends[rows]
    close = words.find(b"> ", runner_at[rows], line_end)
    keep = close > 0
    rows, close, line_end = rows[keep], close[keep], line_end[keep]
    shapes_at = words.find(_SHAPES_BYTES, close + 2, line_end)
    avg_at = words.find(_AVG_TIME_BYTES, close + 2, line_end, last=True)
    keep = (shapes_at > close + 2) & (avg_at > shapes_at)
    rows, close, line_end, shapes_at, avg_at = rows[keep], close[keep], line_end[keep], shapes_at[keep], avg_at[keep]
    times = _texts(data, avg_at + len(_AVG_TIME_BYTES), line_end)
    try:
        time_ms = pc.cast(times, pa.float64()).to_numpy(zero_copy_only=False)
        keep = np.ones(len(rows), dtype=bool)
    except pa.ArrowInvalid:  # a time pyarrow does not read: Python's float decides, line by line
        parsed = [_float(text) for text in times.to_pylist()]
        keep = np.array([value is not None for value in parsed], dtype=bool)
        time_ms = np.array([math.nan if value is None else value for value in parsed], dtype=np.float64)
    # The header and the runner as one text: the header is checked and the runner cut once per distinct text.
    runner, runners = _codes(_texts(data, starts[rows] + g.TIMESTAMP_LENGTH, close + 1))
    tactic, tactics = _codes(_texts(data, close + 2, shapes_at))
    shape, shapes = _codes(_texts(data, shapes_at + len(_SHAPES_BYTES), avg_at))
    text_head = head.decode("utf-8", errors="replace")  # not ASCII: no printable line starts with it
    keep &= np.array([text.startswith(text_head) for text in runners], dtype=bool)[runner]
    runners = [text[len(text_head) - 1:] for text in runners]
    # A text holding what its end was found by (a first "> " or ", shapes=" later), or a record header: not plain.
    for codes, texts, held in ((runner, runners, ("> ", _JIT_TEXT)), (tactic, tactics, (g.SHAPES, _JIT_TEXT)),
                               (shape, shapes, (_JIT_TEXT,))):
        keep &= ~np.array([any(h in text for h in held) for text in texts], dtype=bool)[codes]
    runner, runners = _kept(runner, runners, keep)
    tactic, tactics = _kept(tactic, tactics, keep)
    shape, shapes = _kept(shape, shapes, keep)
    return PlainCandidates(rows[keep], starts[rows[keep]], runner, runners, tactic, tactics, shape, shapes,
                           time_ms[keep])


def bar_records(data: bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lines that are one tqdm render and then one record (``\\r[AutoTuner]: Tuning ...<record>``, no other
    ``\\r``): their indices, and where the record starts, found from its " - flashinfer.jit: " as
    :func:`~profkit.sources.logs.grammar.headers` finds it (a header it would not take leaves the line out)."""
    rows, at = [], []
    a = np.frombuffer(data, np.uint8)
    maybe = np.flatnonzero((ends - starts > len(_BAR) + g.TIMESTAMP_LENGTH) & (a[starts] == ord("\r")))
    for k, start, end in zip(maybe.tolist(), starts[maybe].tolist(), ends[maybe].tolist()):
        if not data.startswith(_BAR, start) or data.find(b"\r", start + 1, end) >= 0:
            continue
        jit = data.find(_JIT_BYTES, start, end)
        level_end = data.rfind(b" - ", start, jit)
        record = data.rfind(b" - ", start, level_end) - g.TIMESTAMP_LENGTH
        # latin-1: any byte is one character; a record that is not ASCII is no plain candidate anyway
        if jit > 0 and record > start + len(_BAR) and g.HEADER_HEAD.fullmatch(data[record:jit].decode("latin-1")):
            rows.append(k)
            at.append(record)
    return np.array(rows, dtype=np.int64), np.array(at, dtype=np.int64)


def repeat_stops(data: bytes, ends: np.ndarray, plain_rows: np.ndarray,
                 low: np.ndarray | None = None) -> dict[int, int]:
    """For each line of ``data`` (newline positions ``ends``) that starts a run of lines in which each is ASCII and,
    after its timestamp, the same as the line two before it: where that run ends (a line not in it: not there).
    ``low``: each line's :func:`_line_minimum`, when known.

    A fallback call outside tuning prints two such lines per call (the message and its "Generated key").
    """
    starts = np.concatenate(([0], ends[:-1] + 1))
    length = ends - starts
    candidate = np.zeros(len(ends), dtype=bool)
    candidate[2:] = (length[2:] == length[:-2]) & (length[2:] > g.TIMESTAMP_LENGTH)
    candidate[plain_rows] = False
    if candidate.any():
        low = _line_minimum(np.frombuffer(data, np.uint8), starts, ends) if low is None else low
        candidate &= low >= 0  # ASCII
    at = np.flatnonzero(candidate)
    same = np.zeros(len(ends), dtype=bool)
    if len(at):  # each line against the one two before it, compared by pyarrow
        same[at] = pc.equal(_texts(data, starts[at] + g.TIMESTAMP_LENGTH, ends[at], pa.binary()),
                            _texts(data, starts[at - 2] + g.TIMESTAMP_LENGTH, ends[at - 2], pa.binary())
                            ).to_numpy(zero_copy_only=False)
    breaks, repeats = np.append(np.flatnonzero(~same), len(ends)), np.flatnonzero(same)
    return dict(zip(repeats.tolist(), breaks[np.searchsorted(breaks, repeats)].tolist()))


def _float(text: str) -> float | None:
    """A time as the general path reads it, None when Python's float does not read it."""
    try:
        return float(text)
    except ValueError:
        return None


# -- driving a reader ------------------------------------------------------------------------------
def _blocks(stream: BinaryIO, whole_end: bool, free: collections.deque) -> Iterator[bytes | bytearray]:
    """The stream in blocks that end at a line end (the last may not; ``whole_end`` adds one there), read into
    buffers the caller hands back in ``free`` once done with them (fresh memory costs a page fault per 4 KiB)."""
    if stream.peek(2)[:2] in _UTF16_BOMS:
        text, _ = inputs.decode(stream.read(inputs.TEXT_LIMIT))
        yield text.encode("utf-8", errors="replace")
        return
    carry, cr_only, read = b"", None, 0
    while True:
        if free and read == BLOCK:
            data = _buffer(free, len(carry) + BLOCK)
            data[:len(carry)] = carry
            read = stream.readinto(memoryview(data)[len(carry):])
        else:  # the first block, or after a short read: read() allocates no more than it reads (a small log)
            more = stream.read(BLOCK)
            data, read = bytearray(carry + more), len(more)
        if not read:
            break
        del data[len(carry) + read:]
        if cr_only is None:  # old Mac line ends: the first 8 MiB hold CRs and no LF at all
            cr_only = b"\n" not in data and data.count(b"\r") > 1
        if cr_only:
            data = data.replace(b"\r", b"\n")
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) > inputs.LINE_LIMIT:
            cut = len(data)  # a line too long to hold: handed on in pieces, each read as a cut record
        carry = bytes(data[cut:])
        del data[cut:]
        if cut:
            yield data
    if carry:
        yield carry + b"\n" if whole_end else carry


def _buffer(free: collections.deque, size: int) -> bytearray:
    """A buffer of ``size`` bytes: one handed back, resized in place, else a new one."""
    while free:
        data = free.popleft()
        try:
            if len(data) > size:
                del data[size:]
            elif len(data) < size:
                data += memoryview(bytes(size - len(data)))
            return data
        except BufferError:  # something still holds a view of it
            continue
    return bytearray(size)


@dataclasses.dataclass
class _Block:
    """A block of lines, with what the bulk path found in it (:func:`_prepared`)."""

    data: bytes | bytearray
    starts: list[int]  # where each line starts, then where the last one ends
    stops: dict[int, int]  # repeat_stops
    plain: PlainCandidates
    segments: list[tuple[int, int, int, int, int]]  # runs of plain lines: first, stop, first line, last line, shapes
    bars: dict[int, int]  # lines that are a tqdm render and then a record (not a plain candidate): where that starts


def _prepared(blocks: Iterator[bytes | bytearray], bulk: bool) -> _Block | None:
    """The next block and what the bulk path finds in it, or None after the last one."""
    data = next(blocks, None)
    if data is None:
        return None
    a = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(a == ord("\n"))
    plain, low, bars = PlainCandidates.none(), None, {}
    if bulk and len(ends):
        line_starts = np.concatenate(([0], ends[:-1] + 1))
        low = _line_minimum(a, line_starts, ends)
        glued, at = bar_records(data, line_starts, ends)
        record_starts, record_low = line_starts, low
        if len(glued):
            record_starts, record_low = line_starts.copy(), low.copy()
            record_starts[glued] = at
            record_low[glued] = _line_minimum(a, at, ends[glued])
        plain = plain_candidates(data, ends, record_low, record_starts)
        other = ~np.isin(glued, plain.rows, assume_unique=True)
        bars = dict(zip(glued[other].tolist(), at[other].tolist()))
    starts = [0, *(ends + 1).tolist()]
    if starts[-1] < len(data):
        starts.append(len(data))  # the last line, without its line end
    stops = repeat_stops(data, ends, plain.rows, low) if bulk else {}
    return _Block(data, starts, stops, plain, _segments(plain, line_starts) if bulk and len(ends) else [], bars)


def feed(reader: Reader, item: inputs.Input, progress: Callable[[int], object] | None = None, *,
         bulk: bool = True) -> None:
    """Read every line of ``item`` into ``reader``: plain candidates in bulk (unless not ``bulk``), the rest one by one."""
    lineno = replaced = 0
    whole_end = item.text is not None  # text given is whole: its last line needs no line end
    free = collections.deque()  # buffers of blocks fed, to be filled again
    with item.open(progress=progress) as stream:
        blocks = _blocks(stream, whole_end, free)
        while (block := _prepared(blocks, bulk)) is not None:
            replaced += _feed_block(reader, block, lineno)
            lineno += len(block.starts) - 1
            if type(block.data) is bytearray:
                free.append(block.data)
            del block
    reader.finish(lineno, replaced, item.damage)


def _feed_block(reader: Reader, block: _Block, lineno: int) -> int:
    """Feed one block's lines (the first is line ``lineno + 1``); returns how many had bytes that are not UTF-8."""
    data, starts, stops, plain, bars = block.data, block.starts, block.stops, block.plain, block.bars
    replaced = 0

    def general(first: int, stop: int) -> None:
        nonlocal replaced
        i, before = first, None  # before: the previous line, when the reader read it as a repeat
        while i < stop:
            at = bars.get(i)
            if at is not None and _bar_record(reader, lineno + i + 1, data, starts[i], at, starts[i + 1] - 1):
                i, before = i + 1, None
                continue
            raw = data[starts[i]:starts[i + 1]]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("utf-8", errors="replace")
                replaced += 1
            repeated = reader.line(lineno + i + 1, text)
            i += 1
            if repeated and before is not None and i in stops:
                # lines i.. repeat the two lines before them, which the reader read as repeats: count them
                run = min(stops[i], stop) - i
                if reader.repeat(before, (run + 1) // 2) and (run < 2 or reader.repeat(text, run // 2)):
                    i, repeated = i + run, False
            before = text if repeated else None

    runners = np.array([reader.cands.code(text) for text in plain.runners], dtype=np.int64)[plain.runner]
    tactics = np.array([reader.cands.tactic_code(text) for text in plain.tactics], dtype=np.int64)[plain.tactic]
    # The rows' line numbers, runner and tactic codes and times, one column after the other, as the bytes the
    # reader's C arrays take: a run of rows is one slice per column.
    width, table = len(plain.rows) * 8, memoryview(np.concatenate(
        [plain.rows + (lineno + 1), runners, tactics, plain.time_ms.view(np.int64)]).tobytes())
    done = 0
    for first, stop, row, last, shape in block.segments:
        general(done, row)
        shapes = plain.shapes[shape]
        at = int(plain.at[first])
        # A tqdm render glued before it, or it opens a group, or meets a pending failure or warning: read alone.
        if at != starts[row] or not reader.continues_in_bulk(shapes):
            ts = data[at:at + g.TIMESTAMP_LENGTH].decode()
            parsed = g.Candidate(plain.runners[plain.runner[first]], plain.tactics[plain.tactic[first]], shapes,
                                 float(plain.time_ms[first]))
            bar = _bar_text(data, starts[row], at)
            if bar is None or not reader.opening_candidate(lineno + row + 1, ts, parsed, bar):
                general(row, row + 1)
            first += 1
            if first < stop and not reader.continues_in_bulk(shapes):
                general(row + 1, last + 1)
                first = stop
        if first < stop:
            reader.candidate_block(stop - first, *(table[at + 8 * first:at + 8 * stop]
                                                   for at in range(0, 4 * width, width)))
        done = last + 1
        if done + 1 < len(starts) and reader.winner_line(lineno + done + 1,
                                                         _text(data, starts[done], starts[done + 1])):
            done += 1  # the profile's winner line
    general(done, len(starts) - 1)
    return replaced


def _text(data: bytes | bytearray, start: int, stop: int) -> str:
    """data[start:stop] as text; "" when it is not UTF-8 (the general path reads it, counting the replacement)."""
    try:
        return data[start:stop].decode("utf-8")
    except UnicodeDecodeError:
        return ""


def _bar_record(reader: Reader, lineno: int, data: bytes | bytearray, start: int, at: int, end: int) -> bool:
    """Read a line that is a tqdm render and then a record at ``at`` (its line end at ``end``) as its two texts;
    False when they are not UTF-8 or the reader leaves the line to :meth:`Reader.line`."""
    try:
        bar, record = data[start + 1:at].decode("utf-8"), data[at:end].decode("utf-8")
    except UnicodeDecodeError:
        return False
    return reader.bar_record(lineno, bar, record)


def _bar_text(data: bytes | bytearray, start: int, at: int) -> str | None:
    """The tqdm render between a line's ``\\r`` and the record at ``at`` ("" when the record starts the line); None
    when it is not UTF-8 (the general path reads such a line)."""
    try:
        return data[start + 1:at].decode("utf-8") if at != start else ""
    except UnicodeDecodeError:
        return None


def _segments(plain: PlainCandidates, starts: np.ndarray) -> list[tuple[int, int, int, int, int]]:
    """(first, stop, first line, last line, shapes code) of each run of consecutive plain lines with the same
    shapes, where only the first may have a tqdm render before its record (``starts``: the block's line starts)."""
    if not len(plain.rows):
        return []
    new = plain.at != starts[plain.rows]
    new[0] = True
    new[1:] |= (np.diff(plain.rows) != 1) | (np.diff(plain.shape) != 0)
    first = np.flatnonzero(new)
    stop = np.append(first[1:], len(plain.rows))
    return list(zip(first.tolist(), stop.tolist(), plain.rows[first].tolist(), plain.rows[stop - 1].tolist(),
                    plain.shape[first].tolist()))
