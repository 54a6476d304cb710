"""FlashInfer's autotuner debug log as profkit tables: candidates, winners, tuning, runs, events.

Reads what ``FLASHINFER_LOGGING_LEVEL=debug`` prints (flashinfer_autotuner.md section 2): a
process's stderr, a server log (vLLM prefixes each worker line with ``(Worker_TP1 pid=N)``,
torchrun with ``[rank1]:``; such prefixes keep interleaved ranks apart), or the logger's own
``flashinfer_jit.log``, plain or gzipped.

How the log is cut into records (autotuner_errata.md, "Logs"):

- Physical lines end at ``\\n``; within one, ``\\r`` (tqdm's non-TTY updates) and every
  ``<timestamp> - <LEVEL> - <file>:<line> - flashinfer.jit: `` header start a new piece, because
  each profile's first record is glued to a tqdm fragment. A record is whole only when it runs
  to the end of its line: one followed by anything else was cut by another write (a killed
  process, another rank) and is reported, not read.
- Candidate lines carry no op. A profile's candidates take the op, nearest profile and extras of
  the "profiling chosen runner ... ProfilingCacheKey(...)" line that closes the profile, or of a
  "Skipped N unsupported tactic(s) for {op}" line, or else of their tuning call (one call tunes
  one op; the tqdm description names it on stderr). ``flashinfer_jit.log`` has no tqdm, so this
  forward assignment is what works there.
- A tuning call starts at its run of "generated profile" lines, or at a tqdm bar when the log has
  no debug lines; "Autotuning process starts/ends" close calls. "use_global_timer" (printed when
  the AutoTuner singleton is built) starts a new run: ``flashinfer_jit.log`` appends across
  processes.

Facts the log cannot give stay missing: thread, host seconds, JIT seconds, timing method; a
profile answered from the cache leaves no line; the cuDNN fallback warning is printed once per
distinct message, so ``status="fallback"`` counts are lower bounds.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import gzip
import io
import math
import os
import re
import zlib
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from profkit import schema
from profkit.errors import ParseError
from profkit.sources.cache import Name, add_buckets, key_fields, literal
from profkit.sources.recorder import FALLBACK_WARNING

_JIT = " - flashinfer.jit: "
_JIT_CANDIDATE = _JIT + "[Autotuner]: profiling "
# What precedes " - flashinfer.jit: " in a record header: "<timestamp> - <LEVEL> - <file>:<line>".
_HEADER_HEAD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - ([A-Z]+) - \S+")
# Line prefixes that name a process: vLLM "(Worker_TP1 pid=12) ", torchrun "[rank1]: ", compose "svc-1  | ".
_PREFIX = re.compile(r"(?:\x1b\[[\d;]*m)?(?:\((?P<name>[^()]*?) ?pid=(?P<pid>\d+)\)|\[(?:rank|default)(?P<rank>\d+)\]:"
                     r"|(?P<service>[\w.-]+) +\|)(?:\x1b\[[\d;]*m)? ?")
_RANK_IN_NAME = re.compile(r"(?:TP|rank|RANK)[ _=]?(\d+)")
_RUNNER = re.compile(r"<(?P<qual>\S+) object at (?P<addr>0x[0-9a-fA-F]+)>")
_TQDM = re.compile(r"\[AutoTuner\]: Tuning (?P<op>.+?):\s+\d+%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+) "
                   r"\[(?P<elapsed>[\d:]+)<")
_WARNING = re.compile(r"\S+:\d+: (?P<category>\w*Warning): (?P<message>.*)")
_OPT_DIM = re.compile(r"StaticDim\(val=(-?\d+)\)|DynamicDim\(min=-?\d+, opt=(-?\d+)")
_SKIPPED = re.compile(r"Skipped (\d+) unsupported tactic\(s\) for (.+?) \(enable debug logs")
# Event kinds: (literal prefix of the message body, regex whose named groups become columns).
_EVENT_PATTERNS = {kind: (prefix, re.compile(re.escape(prefix) + rest)) for kind, prefix, rest in (
    ("fallback_call", "Using fallback tactic for ", r"(?P<op>\S+) with input shapes (?P<shapes>.*)"),
    ("cache_hit", "Config cache hit for ", r"(?P<op>.+?) \(runner=(?P<runner>[^,]+), source=(?P<detail>[^)]*)\)"),
    ("cache_miss", "No tuned config covers ", r"(?P<op>\S+) input_shapes=(?P<shapes>.*?); falling back to "
                                             r"runner=(?P<runner>\S+) tactic=-1"),
    ("cache_revalidation_failed", "cached tactic ", r"(?P<tactic>.*) for (?P<op>\S+) \(runner=(?P<runner>[^,]+), "
                                                    r"source=(?P<detail>[^)]*)\) failed revalidation"),
    ("cache_saved", "Saved ", r"(?P<count>\d+) configs to (?P<path>.+) \((?P<detail>\d+ new, \d+ from previous"
                              r" config)\)"),
    ("cache_loaded", "Loaded ", r"(?P<count>\d+) configs from (?P<path>.+)"),
    ("cache_env_mismatch", "Cache file ", r"(?P<path>.+?) was created in a different environment "
                                          r"\((?P<detail>.*?)\)\. Ignoring cached configs"),
    ("cache_not_saved", "Not saving configs to ", r"(?P<path>.+?): the file was created in a different "
                                                  r"environment \((?P<detail>.*?)\)"),
    ("cache_legacy_skipped", "Skipped ", r"(?P<count>\d+) legacy cuDNN config"),
    ("skip_op", "Skipping ", r"(?:autotuning|ranking) for '(?P<op>[^']*)' \(in skip_ops\)"),
    ("bundled_config", "Loading configs for ", r"(?P<detail>.*) from file"),
    ("managed_cache", "", r"(?:Managed autotune cache|Re-attaching managed|Preloaded \d+|Ignoring invalid managed"
                          r"|Failed to persist managed|Managed cache preload|autotune_v2)"),
    ("tuner_init", "use_global_timer: ", r"(?P<detail>\w+)"),
)}
# [Autotuner] messages read for nothing but counted as understood.
_KNOWN_QUIET = ("use_cold_l2_cache=", "profile-arena", "No tensor inputs", "cupti-profiling ")
_EXPECTED_CANDIDATE = '"[Autotuner]: profiling <runner> <tactic>, shapes=(...), avg_time <ms>"'


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LogTables(schema.Tables):
    """Tables read from FlashInfer logs, plus what else the log said and what could not be read.

    Attributes:
        events: one row per autotuner message that is no candidate or winner, in log order:
            run_id, rank, call, file, line, logged_at (the log's local time), level, kind
            (cache_hit, cache_miss = "No tuned config covers" warning, cache_revalidation_failed,
            fallback_call = a call outside tuning that found no tuned config, cache_saved,
            cache_loaded, cache_env_mismatch, cache_not_saved, cache_legacy_skipped, oom,
            skipped_tactics, skip_op, fallback_warning, tuning_start, tuning_end, tuner_init,
            jit_build, bundled_config, managed_cache, other), op, runner, tactic, profile,
            extras, shapes, count (tactics skipped, configs saved or loaded, or, for a
            fallback_call, how many times this run printed the same message: one row each),
            path, detail, message.
        report: per file, how its lines were used: file, status (read = turned into rows or
            events, ignored = understood but not needed, unreadable = a FlashInfer record that
            could not be read, foreign = not FlashInfer's: engine lines, tracebacks, tqdm
            continuation), reason, lines, first_line, example.
    """

    events: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    report: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)

    def __repr__(self) -> str:
        counts = self.report.groupby("status")["lines"].sum() if len(self.report) else pd.Series(dtype=int)
        lines = ", ".join(f"{status} {int(counts[status])}" for status in ("read", "ignored", "unreadable", "foreign")
                          if status in counts)
        return f"{super().__repr__()}\n  events     {len(self.events):>7} rows\n  lines      {lines or '-'}"

    def save(self, path: str | os.PathLike) -> Path:
        """Write the four tables (see :meth:`Tables.save`) plus events.parquet and report.parquet."""
        path = super().save(path)
        for name in ("events", "report"):
            schema.write_parquet(getattr(self, name), path / f"{name}.parquet")
        return path


def read_log(path_or_text, *, strict: bool = False, progress: Callable[[int], object] | None = None) -> LogTables:
    """Read FlashInfer autotuner debug logs into profkit tables.

    Args:
        path_or_text: a path (``str`` or ``PathLike``; gzip is detected by content), log text
            (a ``str`` holding a line break), or a list of paths. Each file's runs get their
            own run_id (``<file name>#<n>``).
        strict: raise at the first FlashInfer record that cannot be read instead of counting it
            in ``report``.
        progress: called with the number of file bytes (compressed bytes for gzip) read so far
            since the last call, about once per MiB (e.g. a tqdm bar's ``update``).

    Returns:
        :class:`LogTables`, every row ``source_kind="log"`` in ``runs``:

        - ``candidates``: one row per logged candidate (``source="flashinfer"``), in log order:
          the schema's columns (thread, host_s, jit_s, timing missing; ``time_ms`` exactly as
          printed; failed tactics ``status="failed"`` with the exception text; a candidate timed
          right after a cuDNN "falling back to default tactic=-1" warning ``status="fallback"``)
          plus ``file``, ``line``, ``runner_id`` (the runner object's address: one per runner
          per process) and ``bucket_rule`` (see :func:`profkit.sources.cache.add_buckets`).
        - ``winners``: one row per "profiling chosen runner" line (``source="profiled"``, time
          and status of the chosen candidate) and, after an OOM, ``source="fallback"``,
          ``reason="oom_abort"`` rows for the profiles the call never reached (``profile``
          missing, ``shapes`` = their opt shapes); plus file, line, bucket_rule.
        - ``tuning``: ``kind="call"`` rows (op, wall_s from the first to the last record of
          the call, or tqdm's elapsed when only the bar was logged; n_candidates, n_failed (failed
          or fallback),
          n_profiles generated, n_profiled, status ok / oom_abort) and ``kind="profile"`` rows
          (wall_s from the previous profile's end to this profile's winner line; shapes,
          n_skipped from "Skipped N unsupported tactic(s)").
        - ``runs``: one per process found (stream prefix and "use_global_timer" records): file,
          stream, pid, rank, started_at / ended_at (the log's local time), first_line,
          last_line, ``flashinfer`` when the path is ``.../flashinfer/<version>/.../*.log``.
        - ``events`` and ``report``: see :class:`LogTables`.

    Raises:
        ParseError: naming file and line, when no FlashInfer record can be read from any input,
            or (``strict``) at the first unreadable record.
    """
    parts = []
    for source in _sources(path_or_text):
        source.progress = progress
        reader = _Reader(source, strict=strict)
        reader.read()
        parts.append(reader)
    if not any(p.readable for p in parts):
        raise parts[0].nothing_readable()
    return _tables(parts)


# -- input -------------------------------------------------------------------------------------
class _Progress(io.RawIOBase):
    """A raw file that reports every chunk it hands out (once per buffer fill, not per line)."""

    def __init__(self, raw, report: Callable[[int], object]):
        self.raw, self.report = raw, report

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.raw.readinto(buffer)
        self.report(n or 0)
        return n


@dataclasses.dataclass
class _Source:
    name: str  # file name for run ids and messages
    path: str | None
    text: str | None = None
    progress: Callable[[int], object] | None = None

    def binary(self) -> Iterator[bytes]:
        """The log's bytes, line by line (split on \\n only): plain, gzip, or UTF-16 with a BOM re-encoded.

        A gzip stream that ends early or is corrupt ends the lines; ``damage`` then says why.
        """
        self.damage = ""
        if self.text is not None:
            text = self.text if self.text.endswith("\n") else self.text + "\n"  # text given is whole
            yield from io.BytesIO(text.encode("utf-8", errors="replace"))
            return
        with open(self.path, "rb", buffering=0) as unbuffered:
            raw = io.BufferedReader(_Progress(unbuffered, self.progress) if self.progress else unbuffered, 1 << 20)
            head = raw.peek(4)[:4]
            try:
                if head[:2] == b"\x1f\x8b":
                    raw = gzip.open(raw)
                    head = raw.peek(4)[:4]
                if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
                    yield from io.BytesIO(raw.read().decode("utf-16", errors="replace").encode("utf-8"))
                    return
                yield from raw
            except (EOFError, OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
                self.damage = f"compressed data ends early or is corrupt ({exc}); the rest is lost"


def _sources(path_or_text) -> list[_Source]:
    if isinstance(path_or_text, (list, tuple)):
        if not path_or_text:
            raise ParseError("no log given (an empty list)")
        return [s for item in path_or_text for s in _sources(item)]
    if isinstance(path_or_text, str) and ("\n" in path_or_text or "\r" in path_or_text):
        return [_Source(name="<text>", path=None, text=path_or_text)]
    if isinstance(path_or_text, (str, os.PathLike)):
        path = Path(path_or_text)
        if path.is_dir():
            raise ParseError("is a directory; pass the log files in it", path=str(path))
        if not path.is_file():
            raise ParseError("no such file (pass log text with its line breaks to read text)", path=str(path))
        return [_Source(name=path.name, path=str(path))]
    raise ParseError(f"expected a path, log text or a list of paths, found {type(path_or_text).__name__}")


# -- state -------------------------------------------------------------------------------------
@dataclasses.dataclass(slots=True)
class _Run:
    run_id: str
    stream: str
    rank: int | None
    pid: int | None
    first_line: int
    started_at: str | None = None
    ended_at: str | None = None
    last_line: int = 0
    calls: int = 0


@dataclasses.dataclass(slots=True)
class _Call:
    run: _Run
    number: int
    first_line: int
    first_ts: str | None
    op: str | None = None
    generated: list = dataclasses.field(default_factory=list)  # OptimizationProfile reprs
    groups: list = dataclasses.field(default_factory=list)
    last_ts: str | None = None
    oom: bool = False
    closed: bool = False
    bar_n: int | None = None
    bar_total: int | None = None
    bar_elapsed_s: float | None = None

    def takes_bar(self, op: str, n: int, total: int) -> bool:
        """Whether a tqdm render belongs to this call (same op and profile count, not restarted)."""
        expected = len(self.generated) or self.bar_total
        return self.op in (None, op) and expected in (None, total) and (self.bar_n is None or n >= self.bar_n)


class _Candidates:
    """Every candidate of a source, column by column, in log order (the fast path appends to the lists).

    The fast path appends only tactic and time; :meth:`fill` completes its rows before anything reads them.

    Rows are plain ``status="ok"`` unless ``odd`` holds (status, error, api) for them.
    """

    def __init__(self):
        self.group: list[int] = []
        self.line: list[int] = []
        self.runner: list[int] = []  # the runner's repr, as its index in ``reprs``
        self.reprs: dict[str, int] = {}
        self.tactic: list[str] = []  # the tactic as printed
        self.time: list[float] = []
        self.odd: dict[int, tuple[str, str, str | None]] = {}

    def add(self, gid: int, line: int, runner: str, tactic: str, time_ms: float, status: str = "ok",
            error: str = "", api: str | None = None) -> None:
        if status != "ok" or api is not None:
            self.odd[len(self.line)] = (status, error, api)
        self.group.append(gid)
        self.line.append(line)
        self.runner.append(self.code(runner))
        self.tactic.append(tactic)
        self.time.append(time_ms)

    def code(self, runner: str) -> int:
        return self.reprs.setdefault(runner, len(self.reprs))

    def fill(self, gid: int | None, runner: int | None, last_line: int) -> None:
        """Complete the fast path's rows: since the last fill they are consecutive lines, ending at
        ``last_line``, of one group and runner."""
        n = len(self.tactic) - len(self.group)
        if n:
            self.group.extend([gid] * n)
            self.runner.extend([runner] * n)
            self.line.extend(range(last_line - n + 1, last_line + 1))

    def rows(self, group: "_Group") -> list[int]:
        tail = self.group[group.first:]
        if tail.count(group.gid) == len(tail):  # no other stream's rows in between: the common case
            return list(range(group.first, len(self.group)))
        return [k for k in range(group.first, len(self.group)) if self.group[k] == group.gid]

    def last_row(self, group: "_Group") -> int | None:
        if self.group and self.group[-1] == group.gid:  # the common case: the group is the newest
            return len(self.group) - 1
        return next((k for k in range(len(self.group) - 1, group.first - 1, -1) if self.group[k] == group.gid), None)

    def status(self, row: int) -> str:
        odd = self.odd.get(row)
        return odd[0] if odd else "ok"


@dataclasses.dataclass(slots=True)
class _Group:
    """One profile's records, from its first candidate to its winner line."""

    gid: int  # index in _Reader.groups
    first: int  # its first candidate row
    call: _Call
    shapes: str | None
    start_ts: str | None
    op: str | None = None
    profile: str | None = None
    n_skipped: int | None = None
    end_ts: str | None = None
    tag: str | None = None  # ", shapes=<shapes>, avg_time ": how its candidate lines continue

    def __post_init__(self):
        self.set_shapes(self.shapes)

    def set_shapes(self, shapes: str | None) -> None:
        self.shapes = shapes
        self.tag = f", shapes={shapes}, avg_time " if shapes is not None else None


@dataclasses.dataclass(slots=True)
class _Stream:
    key: str
    rank: int | None
    pid: int | None
    run: _Run | None = None
    call: _Call | None = None
    last_call: _Call | None = None
    group: _Group | None = None
    in_profiles: bool = False  # the previous record was a "generated profile" line
    fallback_warning: str | None = None
    last_event: dict | None = None
    failure: tuple | None = None  # a "Skipping tactic" line waiting for its "Failed when profiling" line
    fallbacks: dict = dataclasses.field(default_factory=dict)  # this run's fallback_call events by message


class _Reader:
    """Read one source: split records, keep per-stream state, collect rows."""

    def __init__(self, source: _Source, *, strict: bool):
        self.source = source
        self.strict = strict
        self.streams: dict[str, _Stream] = {}
        self.runs: list[_Run] = []
        self.calls: list[_Call] = []
        self.groups: list[_Group] = []
        self.cands = _Candidates()
        self.winners: list[dict] = []
        self.events: list[dict] = []
        self.counts: dict[tuple[str, str], list] = {}
        self.readable = False
        self.lines_read = 0
        self.first_text = ""
        self._armed: tuple | None = None  # (runner repr, profile tail) after a candidate the fast path may follow
        self._runner_cache: dict[str, tuple[str, str | None]] = {}
        self._tactic_cache: dict[str, str] = {}
        self._flashinfer = _version_from_path(source.path)

    # -- reporting ---------------------------------------------------------------------------
    def _count(self, status: str, reason: str, line: int, text: str) -> None:
        entry = self.counts.get((status, reason))
        if entry is None:
            self.counts[(status, reason)] = [1, line, text[:200]]
        else:
            entry[0] += 1

    def _unreadable(self, reason: str, line: int, text: str, expected: str | None = None) -> None:
        if self.strict:
            what = f"expected {expected} line, found" if expected else f"{reason}:"
            raise ParseError(f"{what} {text[:200]!r}; pass strict=False to keep the {self._rows_so_far()} rows "
                             "read so far", path=self.source.path or self.source.name, line=line)
        self._count("unreadable", reason, line, text)

    def _rows_so_far(self) -> int:
        return len(self.cands.line) + len(self.winners)

    def nothing_readable(self) -> ParseError:
        unreadable = sum(n for (status, _), (n, _, _) in self.counts.items() if status == "unreadable")
        detail = f"; {unreadable} record(s) were cut off or garbled" if unreadable else ""
        if self.lines_read == 0 or (self.lines_read == 1 and not self.first_text):
            return ParseError("the log is empty", path=self.source.path or self.source.name, line=1)
        return ParseError(
            f"no readable FlashInfer autotuner record in {self.lines_read} line(s){detail}; expected lines like "
            f"'2026-01-01 00:00:00,000 - DEBUG - autotuner.py:3115 - flashinfer.jit: [Autotuner]: profiling ...' "
            f"(run with FLASHINFER_LOGGING_LEVEL=debug); first line: {self.first_text[:120]!r}",
            path=self.source.path or self.source.name, line=1)

    # -- reading -----------------------------------------------------------------------------
    def read(self) -> None:
        """Read every line. The loop inlines the commonest line: the next candidate of the same runner in
        the open profile, recognised by its fixed head (header, "profiling", runner repr) and the profile's
        tail (", shapes=..., avg_time "); anything else, or anything odd, takes the general path."""
        lineno = replaced = keys = generated = 0
        default = self._stream("", None, None)
        c = self.cands
        add_tactic, add_time = c.tactic.append, c.time.append
        data, fast = b"\n", None
        head = at = start = tail = tail_length = gid = runner = row = key = profiles = None
        for lineno, data in enumerate(self.source.binary(), 1):
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError:
                line = data.decode("utf-8", errors="replace")
                replaced += 1
            if fast is not None:
                same = line.startswith(head, at)
                if not same and tail is not None and line.startswith(_JIT_CANDIDATE, at) \
                        and line.startswith("<", at + 42):  # the profile's next runner: its first candidate
                    close = line.find("> ", at + 42)
                    if close > 0:
                        c.fill(gid, runner, lineno - 1)
                        runner, start = c.code(line[at + 42:close + 1]), close + 2
                        head, same = line[at:start], True
                if same:
                    if tail is not None:  # the profile's next candidate
                        i = line.find(tail, start)
                        if i > 0:
                            try:
                                time_ms = float(line[i + tail_length:])
                            except ValueError:
                                pass
                            else:
                                add_tactic(line[start:i])
                                add_time(time_ms)
                                continue
                    elif row is not None:  # the same fallback-call message again (the whole line after its time)
                        row["count"] += 1
                        continue
                    elif profiles is not None:  # the call's next "generated profile" line
                        text = line[start:-1]
                        if text not in profiles and line.endswith("\n"):
                            profiles.append(text)
                            generated += 1
                            continue
                elif key is not None and line.startswith(key, at):  # its "Generated key" line again
                    keys += 1
                    continue
            if keys or generated:
                self._add_counts(keys, generated)
                keys = generated = 0
            c.fill(gid, runner, lineno - 1)
            fast = self._line(default, lineno, line)
            if fast is not None:
                head, at, start, tail, tail_length, gid, runner, row, key, profiles = fast
        c.fill(gid, runner, lineno)
        if not data.endswith(b"\n") and fast is not None and tail is not None and self.cands.line \
                and self.cands.line[-1] == lineno:
            for column in (self.cands.group, self.cands.line, self.cands.runner, self.cands.tactic, self.cands.time):
                column.pop()  # a last line without its line end is no whole record
            self._line(default, lineno, line)
        self._add_counts(keys, generated)
        if self.source.damage:
            self._unreadable(self.source.damage, lineno + 1, "")
        self.lines_read = lineno
        if replaced:
            self._count("read", "lines with bytes that are not UTF-8 (replaced)", 1, f"{replaced} lines")
        for stream in self.streams.values():
            self._close_call(stream)

    def _add_counts(self, keys: int, generated: int) -> None:
        """Count lines the fast path read (their reasons were counted once by the general path)."""
        for reason, n in (("Generated key (of a fallback call)", keys), ("generated profile", generated)):
            if n:
                self.counts[("read", reason)][0] += n

    def _line(self, default: _Stream, lineno: int, line: str) -> tuple | None:
        """One physical line (with its line end, if it has one) by the general path.

        Returns the fast-path state when the next lines may repeat this one's shape: after a candidate
        (head up to its tactic, its offset, tactic offset, profile tail, its length, the profile's
        group id, runner repr, None, None) or after a fallback call (its whole message, offset, ...,
        the event row, the whole "Generated key" message once seen).
        """
        whole = line.endswith("\n")
        line = line[:-2] if line.endswith("\r\n") else line[:-1] if whole else line
        if lineno == 1:
            self.first_text = line
        stream = default
        if line[:2] != "20" and line[:1] != "\r":  # not a timestamp-first line nor a tqdm render: a process prefix?
            stream, line = self._split_prefix(default, line)
        self._armed = None
        if whole and "\r" not in line:
            h = line.find(_JIT)
            if h > 22 and line[19] == "," and line[23:26] == " - " and line.find(_JIT, h + 19) < 0:
                msg = line[h + 19:]
                self._record(stream, lineno, line[:23], line[26:line.find(" ", 26)], msg)
                return self._fast_state(h, msg) if stream is default else None
        # A last line without its line end: a tqdm bar still running is normal; a record there is cut off.
        armed = self._pieces(stream, line, lineno, whole=whole)
        return self._fast_state(*armed) if armed and stream is default else None

    def _fast_state(self, h: int, msg: str) -> tuple | None:
        """The fast-path state (see _line) after a record ``msg`` whose header ends ``h`` + 19 into its line."""
        if self._armed is None:
            return None
        if self._armed[0] == "repeat":
            row = self._armed[1]
            return row["_line"], h, 0, None, 0, None, None, row, row.get("_key_line"), None
        if self._armed[0] == "profiles":
            head = f"{_JIT}{msg[:msg.find('generated profile: ') + 19]}"
            return head, h, h + len(head), None, 0, None, None, None, None, self._armed[1]
        _, runner, tail, gid = self._armed
        start = h + len(_JIT) + msg.find(runner) + len(runner) + 1
        return (f"{_JIT}{msg[:start - h - len(_JIT)]}", h, start, tail, len(tail), gid, self.cands.code(runner), None,
                None, None)

    def _split_prefix(self, default: _Stream, line: str) -> tuple[_Stream, str]:
        m = _PREFIX.match(line)
        return (self._prefixed_stream(m), line[m.end():]) if m else (default, line)

    def _pieces(self, stream: _Stream, line: str, lineno: int, whole: bool = True) -> tuple[int, str] | None:
        """Split a line on \\r and record headers; a record followed by anything was cut off.

        Returns (where its header's " - flashinfer.jit: " starts, counted from the header, message) of
        the line's last record, the one a fast path may follow.
        """
        found = None
        pieces = line.split("\r")
        last = len(pieces) - 1
        for index, piece in enumerate(pieces):
            if not piece:
                continue
            headers = _headers(piece)
            start = headers[0][0] if headers else len(piece)
            if start > 0 or not headers:
                self._fragment(stream, lineno, piece[:start])
            for k, (_, body_start, level) in enumerate(headers):
                end = headers[k + 1][0] if k + 1 < len(headers) else len(piece)
                message = piece[body_start:end]
                if k + 1 < len(headers) or index < last or not whole:
                    self._unreadable("record cut off (file truncated, or another write came in between)", lineno,
                                     message)
                    continue
                self._record(stream, lineno, piece[headers[k][0]:headers[k][0] + 23], level, message)
                found = (body_start - len(_JIT) - headers[k][0], message)
        return found

    def _fragment(self, stream: _Stream, lineno: int, text: str) -> None:
        """Text outside any record: a tqdm bar, a Python warning, or someone else's line."""
        if not text.strip():
            return
        if "[AutoTuner]: Tuning " in text:
            m = _TQDM.search(text)
            if m:
                self.readable = True
                self._count("read", "tqdm progress bar", lineno, text)
                self._bar(stream, lineno, m)
                return
        if "Warning: " in text:
            m = _WARNING.search(text)
            if m and FALLBACK_WARNING in m["message"]:
                self._count("read", "cuDNN fallback warning", lineno, text)
                stream.fallback_warning = m["message"][:2000]
                self._event(stream, lineno, None, m["category"], "fallback_warning", message=m["message"])
                return
        self._count("foreign", "not a FlashInfer record", lineno, text)

    # -- streams and runs --------------------------------------------------------------------
    def _stream(self, key: str, rank: int | None, pid: int | None) -> _Stream:
        stream = self.streams.get(key)
        if stream is None:
            stream = self.streams[key] = _Stream(key=key, rank=rank, pid=pid)
        return stream

    def _prefixed_stream(self, m: re.Match) -> _Stream:
        key = m.group(0).strip()
        stream = self.streams.get(key)
        if stream is not None:
            return stream
        name = m["name"] or m["service"] or ""
        rank = m["rank"] or (_RANK_IN_NAME.search(name).group(1) if _RANK_IN_NAME.search(name) else None)
        return self._stream(key, int(rank) if rank is not None else None, int(m["pid"]) if m["pid"] else None)

    def _run(self, stream: _Stream, lineno: int, ts: str | None, *, new: bool = False) -> _Run:
        if stream.run is None or new:
            stream.run = _Run(run_id=f"{self.source.name}#{len(self.runs) + 1}", stream=stream.key,
                              rank=stream.rank, pid=stream.pid, first_line=lineno, started_at=ts)
            self.runs.append(stream.run)
            stream.last_call, stream.fallbacks = None, {}
        return stream.run

    # -- records -----------------------------------------------------------------------------
    def _record(self, stream: _Stream, lineno: int, ts: str, level: str, msg: str) -> None:
        self.readable = True
        body = msg[msg.find("]") + 1:].lstrip(": ") if msg.startswith("[Auto") else None
        # A new AutoTuner singleton after tuning calls: another process appended to the same file.
        new_run = body is not None and body.startswith("use_global_timer") and stream.run is not None \
            and stream.run.calls > 0
        if new_run:
            self._close_call(stream)
        run = stream.run
        if run is None or new_run:
            run = self._run(stream, lineno, ts, new=new_run)
        run.last_line, run.ended_at = lineno, ts
        if stream.failure is not None and not (body or "").startswith("Failed when profiling "):
            self._add_failure(stream, run, *stream.failure)
        if body is None:
            self._other_message(stream, lineno, ts, level, msg)
            return
        if body.startswith("Using fallback tactic for "):  # every untuned call outside tuning: many
            self._fallback_call(stream, lineno, ts, level, body)
            return
        if body.startswith("profiling "):
            if body.startswith("profiling chosen runner: "):
                self._winner(stream, lineno, ts, body, msg)
            else:
                self._candidate(stream, run, lineno, body, msg)
            stream.in_profiles = False
            return
        if body.startswith("generated profile: "):
            profile = body[19:]
            if not stream.in_profiles or profile in stream.call.generated:  # a call's profiles are distinct
                self._open_call(stream, lineno, ts)
            stream.call.generated.append(profile)
            stream.in_profiles = True
            self._count("read", "generated profile", lineno, msg)
            self._armed = ("profiles", stream.call.generated)
            return
        stream.in_profiles = False
        if body.startswith("Skipping tactic ") or body.startswith("Failed when profiling "):
            self._failure(stream, run, lineno, body, msg)
        elif body.startswith("Skipped ") and "unsupported tactic" in body:
            self._skipped(stream, lineno, ts, level, body, msg)
        elif body.startswith("Autotuning process "):
            self._close_call(stream)
            kind = "tuning_start" if "starts" in body else "tuning_end"
            self._event(stream, lineno, ts, level, kind, message=body)
        elif body.startswith("OOM detected"):
            call = self._ensure_call(stream, lineno, ts)
            call.oom = True
            self._event(stream, lineno, ts, level, "oom", message=body)
            self._close_call(stream)
        elif body.startswith("Generated key") and stream.last_event is not None \
                and stream.last_event["kind"] == "fallback_call":
            self._count("read", "Generated key (of a fallback call)", lineno, msg)
            event = stream.last_event
            event.setdefault("key", body[len("Generated key"):])  # parsed once per key, at the end
            event["_key_line"] = f"{_JIT}{msg}\n"
            self._armed = ("repeat", event)
        elif body.startswith(_KNOWN_QUIET):
            self._count("ignored", "cold-L2 / CUPTI detail", lineno, msg)
        else:
            self._message_event(stream, lineno, ts, level, body, msg)

    def _other_message(self, stream, lineno, ts, level, msg) -> None:
        if msg.startswith("Building JIT module "):
            module = msg[len("Building JIT module "):].split(";")[0]
            self._event(stream, lineno, ts, level, "jit_build", detail=module, message=msg)
        else:
            self._count("ignored", "other flashinfer.jit message", lineno, msg)

    def _message_event(self, stream, lineno, ts, level, body, msg) -> None:
        for kind, (prefix, pattern) in _EVENT_PATTERNS.items():
            m = pattern.match(body) if body.startswith(prefix) else None
            if m:
                fields = {k: v for k, v in m.groupdict().items() if v is not None}
                if "count" in fields:
                    fields["count"] = int(fields["count"])
                self._event(stream, lineno, ts, level, kind, message=body, **fields)
                return
        self._count("ignored", "unrecognised [Autotuner] message", lineno, msg)
        self._event(stream, lineno, ts, level, "other", message=body)

    def _fallback_call(self, stream: _Stream, lineno: int, ts, level, body: str) -> None:
        """A call outside tuning found no tuned config: one event per distinct message, ``count`` its lines."""
        stream.in_profiles = False
        row = stream.fallbacks.get(body)
        if row is None:
            self._message_event(stream, lineno, ts, level, body, body)
            stream.fallbacks[body] = row = stream.last_event
            row["count"] = 0
        row["count"] += 1
        row["_line"] = f"{_JIT}[AutoTuner]: {body}\n"  # the whole line after its timestamp, as the fast path sees it
        stream.last_event = row
        self._armed = ("repeat", row)

    def _event(self, stream: _Stream, lineno: int, ts, level, kind: str, **fields) -> None:
        if kind != "fallback_warning":
            self._count("read", kind, lineno, fields.get("message", ""))
        call = stream.call or (stream.last_call if kind in ("tuning_end", "oom") else None)
        if call is not None and call.op is None and fields.get("op") and kind in ("cache_hit", "skip_op"):
            call.op = fields["op"]  # a call answered from the cache names its op only here
        row = {"run_id": stream.run.run_id if stream.run else None, "rank": stream.rank,
               "call": call.number if call else None, "file": self.source.name, "line": lineno,
               "logged_at": ts, "level": level, "kind": kind, **fields}
        self.events.append(row)
        stream.last_event = row

    # -- calls and profiles ------------------------------------------------------------------
    def _open_call(self, stream: _Stream, lineno: int, ts: str | None) -> _Call:
        self._close_call(stream)
        run = self._run(stream, lineno, ts)
        run.calls += 1
        stream.call = _Call(run=run, number=run.calls, first_line=lineno, first_ts=ts, last_ts=ts)
        self.calls.append(stream.call)
        return stream.call

    def _ensure_call(self, stream: _Stream, lineno: int, ts: str | None) -> _Call:
        return stream.call if stream.call is not None else self._open_call(stream, lineno, ts)

    def _close_call(self, stream: _Stream) -> None:
        self._close_group(stream)
        call = stream.call
        if call is None:
            return
        call.closed = True
        if call.oom:
            self._oom_fallbacks(call)
        stream.last_call, stream.call = call, None

    def _group_for(self, stream: _Stream, lineno: int, shapes: str | None) -> _Group:
        group = stream.group
        if group is not None and shapes is not None and group.shapes is not None and group.shapes != shapes:
            self._close_group(stream)  # a new profile without a winner line for the last one
            group = None
        if group is None:
            call = self._ensure_call(stream, lineno, None)
            start = call.groups[-1].end_ts if call.groups else call.first_ts
            group = stream.group = _Group(gid=len(self.groups), first=len(self.cands.line), call=call, shapes=shapes,
                                          start_ts=start)
            call.groups.append(group)
            self.groups.append(group)
        elif group.shapes is None:
            group.set_shapes(shapes)
        return group

    def _close_group(self, stream: _Stream) -> None:
        if stream.failure is not None:
            self._add_failure(stream, stream.run, *stream.failure)
        group, stream.group = stream.group, None
        last = self.cands.last_row(group) if group is not None else None
        if last is not None:  # the fast path does not keep the run's last line
            run = group.call.run
            run.last_line = max(run.last_line, self.cands.line[last])

    def _bar(self, stream: _Stream, lineno: int, m: re.Match) -> None:
        op, n, total = m["op"], int(m["n"]), int(m["total"])
        call = stream.call if stream.call is not None and stream.call.takes_bar(op, n, total) else None
        if call is None and stream.last_call is not None and stream.last_call.takes_bar(op, n, total):
            call = stream.last_call
        if call is None:
            if stream.call is not None and stream.call.generated:
                return  # a late render of an earlier call's bar, inside a call the debug lines delimit
            call = self._open_call(stream, lineno, None)  # a log without debug lines: the bar is the call
        call.op = call.op or op
        call.bar_n, call.bar_total, call.bar_elapsed_s = n, total, _clock_seconds(m["elapsed"])

    # -- candidates, failures, winners -------------------------------------------------------
    def _runner(self, text: str) -> tuple[str, str | None]:
        """(class name, object address) of a runner's repr."""
        hit = self._runner_cache.get(text)
        if hit is None:
            m = _RUNNER.fullmatch(text)
            hit = (m["qual"].rsplit(".", 1)[-1], m["addr"]) if m else (text, None)
            self._runner_cache[text] = hit
        return hit

    def _tactic(self, text: str) -> str:
        hit = self._tactic_cache.get(text)
        if hit is None:
            try:
                value = literal(text)
            except ValueError:
                value = text
            hit = self._tactic_cache[text] = schema.tactic_text(str(value) if isinstance(value, Name) else value)
        return hit

    @staticmethod
    def _split_runner(body: str, start: int) -> tuple[str, str] | None:
        """(runner repr, rest) of text starting at ``start`` with ``<... object at 0x...>``."""
        if body.startswith("<", start):
            close = body.find("> ", start)
            if close < 0:
                return None
            return body[start:close + 1], body[close + 2:]
        space = body.find(" ", start)
        return (body[start:space], body[space + 1:]) if space > 0 else None

    def _candidate(self, stream: _Stream, run: _Run, lineno: int, body: str, msg: str) -> None:
        split = self._split_runner(body, 10)
        rest = split[1] if split else ""
        i = rest.find(", shapes=")
        j = rest.rfind(", avg_time ")
        try:
            time_ms = float(rest[j + 11:]) if i > 0 and j > i else None
        except ValueError:
            time_ms = None
        if time_ms is None:
            self._unreadable("garbled candidate line", lineno, msg, expected=_EXPECTED_CANDIDATE)
            return
        group = self._group_for(stream, lineno, rest[i + 9:j])
        status, error = ("fallback", stream.fallback_warning) if stream.fallback_warning else ("ok", "")
        stream.fallback_warning = None
        self.cands.add(group.gid, lineno, split[0], rest[:i], time_ms, status, error)
        if status == "ok" and stream.failure is None:
            self._armed = ("candidate", split[0], group.tag, group.gid)

    def _failure(self, stream: _Stream, run: _Run, lineno: int, body: str, msg: str) -> None:
        """"Skipping tactic R T, due to failure ...: e" then "Failed when profiling R T, shapes=S. Error occurred: e"."""
        detail = body.startswith("Failed when profiling ")
        split = self._split_runner(body, 22 if detail else 16)
        runner, rest = split if split else ("", "")
        if detail:
            i, j = rest.find(", shapes="), rest.find(". Error occurred: ")
            if split is None or i < 0 or j < i:
                self._unreadable("garbled failure line", lineno, msg)
                return
            pending, stream.failure = stream.failure, None
            if pending is not None and pending[1:3] != (runner, rest[:i]):
                self._add_failure(stream, run, *pending)  # an unpaired "Skipping tactic" line
            self._count("read", "failed tactic", lineno, msg)
            self._add_failure(stream, run, lineno, runner, rest[:i], rest[j + 18:], None, rest[i + 9:j])
            return
        if ", due to failure while profiling: " in rest:
            tactic, _, error = rest.partition(", due to failure while profiling: ")
            api, op = None, None
        elif " while ranking " in rest:
            tactic, _, tail = rest.partition(" while ranking ")
            op, _, error = tail.partition(": ")
            api = "rank_tactics"
        else:
            self._unreadable("garbled failure line", lineno, msg)
            return
        if split is None:
            self._unreadable("garbled failure line", lineno, msg)
            return
        if stream.failure is not None:
            self._add_failure(stream, run, *stream.failure)
        stream.failure = (lineno, runner, tactic, error, api, None, op)
        self._count("read", "failed tactic", lineno, msg)

    def _add_failure(self, stream: _Stream, run: _Run, lineno, runner, tactic, error, api, shapes, op=None) -> None:
        stream.failure = None
        group = self._group_for(stream, lineno, shapes)
        if op is not None:
            group.op = op
        stream.fallback_warning = None  # a failure that also warned is a failure
        self.cands.add(group.gid, lineno, runner, tactic, math.nan, "failed", error[:2000], api)

    def _skipped(self, stream: _Stream, lineno: int, ts, level, body: str, msg: str) -> None:
        m = _SKIPPED.match(body)
        if m is None:
            self._unreadable("garbled 'Skipped N unsupported tactic(s)' line", lineno, msg)
            return
        group = self._group_for(stream, lineno, None)
        group.op, group.n_skipped = m[2], int(m[1])
        group.call.op = group.call.op or m[2]
        self._event(stream, lineno, ts, level, "skipped_tactics", op=m[2], count=int(m[1]), message=body)

    def _winner(self, stream: _Stream, lineno: int, ts: str, body: str, msg: str) -> None:
        split = self._split_runner(body, 25)
        rest = split[1] if split else ""
        at = rest.find(" for ProfilingCacheKey(")
        at = at if at >= 0 else rest.find(" for (")
        tactic_text, key = rest[:at], _parse_key(rest[at + 5:]) if at > 0 else None
        if key is None:
            self._unreadable("garbled winner line", lineno, msg,
                             expected='"[Autotuner]: profiling chosen runner: <runner> <tactic> for <key>"')
            return
        self._count("read", "winner", lineno, msg)
        group = self._group_for(stream, lineno, None)
        if group.shapes is not None and not _fits(group.shapes, key["profile"]):
            self._close_group(stream)  # those candidates belong to another profile (or process)
            self._count("unreadable", "winner does not match the profile of the candidates before it", lineno, msg)
            group = self._group_for(stream, lineno, None)
        group.op, group.profile, group.end_ts = key["op"], key["profile"], ts
        call = group.call
        call.op, call.last_ts = call.op or key["op"], ts
        tactic = self._tactic(tactic_text)
        c = self.cands
        rows = c.rows(group)
        runner = c.reprs.get(split[0])
        chosen = [k for k in rows if c.tactic[k] == tactic_text and c.runner[k] == runner]
        if not chosen:  # the same tactic printed another way, or the runner's repr differs: compare decoded
            reprs = {code: text for text, code in c.reprs.items()}
            chosen = [k for k in rows
                      if self._tactic(c.tactic[k]) == tactic and self._runner(reprs[c.runner[k]])[0] == key["runner"]]
        chosen = [k for k in chosen if c.status(k) != "failed"]
        best = min(chosen, key=lambda k: c.time[k] if c.time[k] == c.time[k] else math.inf) if chosen else None
        self.winners.append({
            "run_id": call.run.run_id, "rank": call.run.rank, "call": call.number, "op": key["op"],
            "profile": key["profile"], "runner": key["runner"], "tactic": tactic, "extras": key["extras"],
            "time_ms": c.time[best] if best is not None else math.nan,
            "status": c.status(best) if best is not None else None,
            "source": "profiled", "reason": "", "file": self.source.name, "line": lineno,
        })
        self._close_group(stream)

    def _oom_fallbacks(self, call: _Call) -> None:
        """Winner rows for the profiles an OOM-aborted call never reached: FlashInfer returns (runners[0], -1)."""
        won = [g for g in call.groups if g.profile is not None]
        opt = [_opt_shapes(p) for p in call.generated]
        last = max((i for i, s in enumerate(opt) for g in won[-1:] if s and _fits(s, g.profile)), default=-1)
        for shapes in opt[last + 1:]:
            self.winners.append({
                "run_id": call.run.run_id, "rank": call.run.rank, "call": call.number, "op": call.op,
                "shapes": shapes, "tactic": "-1", "time_ms": math.nan, "source": "fallback", "reason": "oom_abort",
                "extras": "", "file": self.source.name, "line": None,
            })

    # -- rows --------------------------------------------------------------------------------
    def group_keys(self) -> list[tuple]:
        """(op, profile or opt shapes) of each profile group: what its candidates' bucket is read from."""
        return [(g.op or g.call.op, g.profile or g.shapes) for g in self.groups]

    def candidate_frame(self, buckets: pd.DataFrame) -> pd.DataFrame:
        """Candidates in log order; ``buckets`` has bucket, bucket_key, bucket_rule per group."""
        groups, c = self.groups, self.cands
        rows = np.asarray(c.group, dtype=np.int64)
        per_group = {
            "run_id": ([g.call.run.run_id for g in groups], "string"), "rank": ([g.call.run.rank for g in groups], "Int64"),
            "call": ([g.call.number for g in groups], "Int64"), "op": ([g.op or g.call.op for g in groups], "string"),
            "profile": ([g.profile for g in groups], "string"), "shapes": ([g.shapes for g in groups], "string"),
            "file": ([self.source.name] * len(groups), "string"),
        }
        frame = pd.DataFrame({name: pd.array(values, dtype=dtype).take(rows) for name, (values, dtype) in per_group.items()})
        for name in buckets.columns:
            frame[name] = buckets[name].array.take(rows)
        frame["line"] = np.asarray(c.line, dtype=np.int64)
        names = [self._runner(text) for text in c.reprs]  # reprs in code order
        codes = np.asarray(c.runner, dtype=np.int64)
        for k, column in enumerate(("runner", "runner_id")):
            frame[column] = pd.array([n[k] for n in names] or [None], dtype="string").take(codes)
        frame["tactic"] = _mapped(c.tactic, lambda t: (self._tactic(t),))[0]
        times = np.asarray(c.time, dtype=np.float64)
        frame["time_ms"] = np.where(np.isfinite(times), times, np.nan)  # as the capture: no inf
        for k, column in enumerate(("status", "error", "api")):
            values = pd.array([("ok", "", None)[k]], dtype="string").take(np.zeros(len(frame), dtype=np.int64))
            if c.odd:
                values[list(c.odd)] = pd.array([odd[k] for odd in c.odd.values()], dtype="string")
            frame[column] = values
        frame["seq"] = frame.groupby("run_id", sort=False).cumcount().add(1).astype("Int64")
        return frame

    def _group_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Candidates and failed-or-fallback candidates per group."""
        size = len(self.groups)
        total = np.bincount(np.asarray(self.cands.group, dtype=np.int64), minlength=size)
        odd = [self.cands.group[row] for row, (status, _, _) in self.cands.odd.items() if status != "ok"]
        return total, np.bincount(np.asarray(odd, dtype=np.int64), minlength=size)

    def tuning_rows(self) -> list[dict]:
        total, failed = (counts.tolist() for counts in self._group_counts())
        rows = []
        for call in self.calls:
            base = {"run_id": call.run.run_id, "rank": call.run.rank, "call": call.number, "op": call.op,
                    "status": "oom_abort" if call.oom else "ok", "error": ""}
            profiled = [g for g in call.groups if total[g.gid] or g.profile]
            for g in profiled:
                rows.append({**base, "op": g.op or call.op, "kind": "profile", "profile": g.profile,
                             "shapes": g.shapes, "wall_s": _span(g.start_ts, g.end_ts), "status": "ok",
                             "n_candidates": total[g.gid], "n_failed": failed[g.gid],
                             "n_skipped": g.n_skipped})
            span = _span(call.first_ts, call.last_ts)
            rows.append({**base, "kind": "call", "profile": "",
                         "wall_s": span if span == span else call.bar_elapsed_s, "bar_elapsed_s": call.bar_elapsed_s,
                         "n_candidates": sum(total[g.gid] for g in call.groups),
                         "n_failed": sum(failed[g.gid] for g in call.groups),
                         "n_profiles": len(call.generated) or call.bar_total, "n_profiled": len(profiled)})
        return rows

    def run_rows(self) -> list[dict]:
        return [{"run_id": r.run_id, "source_kind": "log", "file": self.source.name, "path": self.source.path,
                 "stream": r.stream, "pid": r.pid, "rank": r.rank, "started_at": _iso(r.started_at),
                 "ended_at": _iso(r.ended_at), "first_line": r.first_line, "last_line": r.last_line,
                 "flashinfer": self._flashinfer} for r in self.runs]

    def report_rows(self) -> list[dict]:
        timed = len(self.cands.line) - sum(status == "failed" for status, _, _ in self.cands.odd.values())
        if timed:
            self.counts[("read", "candidate")] = [timed, self.cands.line[0], ""]
        if ("read", "fallback_call") in self.counts:  # repeats are counted on their event row
            self.counts[("read", "fallback_call")][0] = sum(e["count"] for e in self.events if e["kind"] == "fallback_call")
        return [{"file": self.source.name, "status": status, "reason": reason, "lines": n, "first_line": first,
                 "example": example} for (status, reason), (n, first, example) in sorted(self.counts.items())]


# -- helpers -----------------------------------------------------------------------------------
def _headers(piece: str) -> list[tuple[int, int, str]]:
    """(start, message start, level) of each record header in ``piece``, found from " - flashinfer.jit: "."""
    found, at = [], piece.find(_JIT)
    while at >= 0:
        level_end = piece.rfind(" - ", 0, at)
        ts_end = piece.rfind(" - ", 0, level_end)
        start = ts_end - 23
        m = _HEADER_HEAD.fullmatch(piece, start, at) if start >= 0 else None
        if m and (not found or start >= found[-1][1]):
            found.append((start, at + len(_JIT), m.group(1)))
        at = piece.find(_JIT, at + 1)
    return found


_KEY_FIELDS = ("ProfilingCacheKey(custom_op='", "', runner_class_name='", "', runner_hash=", ", nearest_profile=",
               ", extras=")


def _parse_key(text: str) -> dict | None:
    """op, runner, profile and extras of a ProfilingCacheKey repr (0.6.15+) or a key tuple (older)."""
    text = text.strip()
    if text.startswith(_KEY_FIELDS[0]) and text.endswith(")"):
        at = [0]
        for field in _KEY_FIELDS[1:]:
            at.append(text.find(field, at[-1]))
            if at[-1] < 0:
                return None
        op = text[len(_KEY_FIELDS[0]):at[1]]
        runner = text[at[1] + len(_KEY_FIELDS[1]):at[2]]
        profile = text[at[3] + len(_KEY_FIELDS[3]):at[4]]
        return {"op": op, "runner": runner, "profile": profile, "extras": text[at[4] + len(_KEY_FIELDS[4]):-1]}
    try:
        return key_fields(text)
    except ValueError:
        return None


def _tokens(text: str) -> list[str]:
    return text.replace("(", " ( ").replace(")", " ) ").replace(",", " ").split()


@functools.lru_cache(maxsize=4096)
def _fits(shapes: str, profile: str) -> bool:
    """Whether candidate opt shapes belong to a nearest profile (equal except where it says -1)."""
    if shapes == profile:
        return True
    a, b = _tokens(shapes), _tokens(profile)
    return len(a) == len(b) and all(x == y or (y == "-1" and x not in "()") for x, y in zip(a, b))


def _opt_shapes(profile_repr: str) -> str | None:
    """Opt shapes text of an OptimizationProfile repr: StaticDim val / DynamicDim opt per dimension."""
    inner = profile_repr.partition("shapes=[")[2].partition("], tensor_initializers")[0]
    tensors = re.findall(r"\[([^\[\]]*)\]", inner)
    if not inner or not tensors and inner.strip():
        return None
    return str(tuple(tuple(int(a or b) for a, b in _OPT_DIM.findall(t)) for t in tensors))


_DAYS: dict[str, float] = {}


@functools.lru_cache(maxsize=1024)  # a profile's end is the next one's start
def _seconds(ts: str | None) -> float:
    """Seconds of a log timestamp ``YYYY-MM-DD HH:MM:SS,mmm`` (for differences only)."""
    if ts is None:
        return math.nan
    day = _DAYS.get(ts[:10])
    if day is None:
        try:
            day = _DAYS[ts[:10]] = datetime.date.fromisoformat(ts[:10]).toordinal() * 86400.0
        except ValueError:
            return math.nan
    return day + int(ts[11:13]) * 3600 + int(ts[14:16]) * 60 + int(ts[17:19]) + int(ts[20:23]) / 1000


def _span(start: str | None, end: str | None) -> float:
    return round(_seconds(end) - _seconds(start), 3)


@functools.lru_cache(maxsize=1024)  # tqdm renders repeat the same few elapsed texts
def _clock_seconds(text: str) -> float:
    """tqdm's elapsed ``[H:]MM:SS`` in seconds."""
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def _iso(ts: str | None) -> str | None:
    return ts.replace(" ", "T").replace(",", ".") if ts else None


def _version_from_path(path: str | None) -> str | None:
    """flashinfer version of ``.../flashinfer/<version>/<archs>/flashinfer_jit.log``."""
    if not path:
        return None
    m = re.search(r"flashinfer[/\\](\d+\.\d+[^/\\]*)[/\\]", str(Path(path).resolve()))
    return m.group(1) if m else None


def _mapped(values: tuple, fn) -> list[pd.api.extensions.ExtensionArray]:
    """Columns ``fn(value)`` for each value, computed once per distinct value (values repeat a lot)."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    results = [fn(u) for u in uniques]
    width = len(results[0]) if results else 1
    return [pd.array([r[k] for r in results], dtype="string").take(codes) for k in range(width)]


def _tables(parts: Iterable[_Reader]) -> LogTables:
    parts = list(parts)
    keys = [pd.DataFrame(p.group_keys(), columns=["op", "where"]) for p in parts]
    sizes = [len(k) for k in keys]
    bucketed = add_buckets(pd.concat(keys, ignore_index=True), "where")[["bucket", "bucket_key", "bucket_rule"]]
    offsets = np.cumsum([0] + sizes)
    candidates = pd.concat([p.candidate_frame(bucketed.iloc[a:b]) for p, a, b in zip(parts, offsets, offsets[1:])],
                           ignore_index=True)
    candidates["source"] = pd.array(["flashinfer"], dtype="string").take(np.zeros(len(candidates), dtype=np.int64))
    winners = pd.DataFrame([w for p in parts for w in p.winners])
    if len(winners):
        winners = winners.reindex(columns=list(dict.fromkeys([*winners.columns, "shapes"])))
        where = winners["profile"].where(winners["profile"].notna(), winners["shapes"])
        winners = add_buckets(winners.assign(_where=where), "_where").drop(columns="_where")
    events = _events(pd.DataFrame([e for p in parts for e in p.events],
                                  columns=[*_EVENT_COLUMNS, "key", "_line", "_key_line"]))
    report = pd.DataFrame([r for p in parts for r in p.report_rows()],
                          columns=["file", "status", "reason", "lines", "first_line", "example"])
    return LogTables(
        candidates=_conform("candidates", candidates),
        winners=_conform("winners", winners),
        tuning=_conform("tuning", _tuning_buckets(pd.DataFrame([r for p in parts for r in p.tuning_rows()]))),
        runs=_conform("runs", pd.DataFrame([r for p in parts for r in p.run_rows()])),
        events=events,
        report=report.astype({"lines": "int64", "first_line": "int64"}),
    )


def _events(events: pd.DataFrame) -> pd.DataFrame:
    """Fill runner, profile and extras of fallback calls from their "Generated key" text (once per key)."""
    keys = {k: _parse_key(k) or {} for k in events["key"].dropna().unique()}
    for field in ("runner", "profile", "extras"):
        parsed = events["key"].map(lambda k: keys.get(k, {}).get(field) if isinstance(k, str) else None)
        events[field] = events[field].where(events[field].notna(), parsed)
    return events.drop(columns=["key", "_line", "_key_line"]).astype({"line": "Int64", "call": "Int64", "rank": "Int64", "count": "Int64"})


def _tuning_buckets(tuning: pd.DataFrame) -> pd.DataFrame:
    """Bucket of each kind=profile row (from its profile, or its opt shapes when no winner named it)."""
    if tuning.empty:
        return tuning
    tuning = tuning.reindex(columns=list(dict.fromkeys([*tuning.columns, "shapes"])))
    where = tuning["profile"].where(tuning["profile"].fillna("") != "", tuning["shapes"])
    bucketed = add_buckets(tuning.assign(_where=where), "_where")
    return tuning.assign(bucket=bucketed["bucket"].where(tuning["kind"] == "profile"))


# Columns the log adds to each table, after the schema's.
_EXTRA = {
    "candidates": ["runner_id", "file", "line", "bucket_rule"],
    "winners": ["file", "line", "shapes", "bucket_rule"],
    "tuning": ["shapes", "n_skipped", "bar_elapsed_s", "n_profiles", "n_profiled"],
    "runs": ["file", "path", "stream", "pid", "rank", "ended_at", "first_line", "last_line"],
}
_INTEGERS = ("line", "n_skipped", "n_profiles", "n_profiled", "pid", "rank", "first_line", "last_line")


def _conform(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the schema's columns, then the log's extras (missing ones empty), in their dtypes."""
    dtypes = dict(schema.describe(table)[["column", "dtype"]].values)
    strings = [name for name, dtype in dtypes.items() if dtype == "string"]
    for column in _EXTRA[table]:
        dtypes[column] = "Int64" if column in _INTEGERS else "float64" if column == "bar_elapsed_s" else "string"
    # Missing columns are made empty in their dtype at once: converting an all-NaN column is slow on big frames.
    missing = {column: pd.Series(None, index=frame.index, dtype=dtype) for column, dtype in dtypes.items()
               if column not in frame.columns}
    frame = frame.assign(**missing)[list(dtypes)]
    for column in frame.columns:
        if column in _INTEGERS:
            frame[column] = frame[column].astype("Int64")
        elif column == "bar_elapsed_s":
            frame[column] = frame[column].astype("float64")
        elif (column in strings or column in _EXTRA[table]) and str(frame[column].dtype) != "string":
            frame[column] = frame[column].astype("string")  # one pass (the schema's general path takes three)
    return frame  # LogTables conforms it to the schema on construction


_EVENT_COLUMNS = ["run_id", "rank", "call", "file", "line", "logged_at", "level", "kind", "op", "runner", "tactic",
                  "profile", "extras", "shapes", "count", "path", "detail", "message"]
