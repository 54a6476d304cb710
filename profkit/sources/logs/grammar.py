"""The line grammar of FlashInfer's autotuner debug log: patterns and pure parsing functions.

Nothing here keeps state or reads a file. A record is ``<timestamp> - <LEVEL> - <file>:<line> -
flashinfer.jit: <message>`` (flashinfer/jit/core.py's format); the message texts are FlashInfer's
(flashinfer_autotuner.md section 2).
"""

from __future__ import annotations

import datetime
import functools
import math
import re
from pathlib import Path
from typing import NamedTuple

from profkit import schema
from profkit.sources.cache import Name, key_fields, literal
from profkit.sources.inputs import as_int

JIT = " - flashinfer.jit: "
TIMESTAMP_LENGTH = 23  # "2026-12-02 21:08:33,061"
LEVEL_START = TIMESTAMP_LENGTH + len(" - ")
CANDIDATE = "profiling "  # the body of a candidate line starts so; its runner follows
WINNER = "profiling chosen runner: "
GENERATED_PROFILE = "generated profile: "
FALLBACK_CALL = "Using fallback tactic for "
GENERATED_KEY = "Generated key"
FAILED_DETAIL = "Failed when profiling "
SKIPPING = "Skipping tactic "
SHAPES, AVG_TIME = ", shapes=", ", avg_time "
ERROR_OCCURRED = ". Error occurred: "
DUE_TO_FAILURE, WHILE_RANKING = ", due to failure while profiling: ", " while ranking "

# What precedes " - flashinfer.jit: " in a record header: "<timestamp> - <LEVEL> - <file>:<line>".
HEADER_HEAD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - ([A-Z]+) - \S+")
# Line prefixes that name a process: vLLM "(Worker_TP1 pid=12) " (nested under its multiproc executor:
# "(Worker pid=12) (Worker_DP0_EP0 pid=12) ", the innermost names the worker), torchrun "[rank1]: ", compose "svc-1  | ".
PREFIX = re.compile(r"(?:\x1b\[[\d;]*m)?(?:(?:\([^()]*? ?pid=\d+\) )*\((?P<name>[^()]*?) ?pid=(?P<pid>\d+)\)"
                    r"|\[(?:rank|default)(?P<rank>\d+)\]:"
                    r"|(?P<service>[\w.-]+) +\|)(?:\x1b\[[\d;]*m)? ?")
RANK_IN_NAME = re.compile(r"(?:TP|rank|RANK)[ _=]?(\d+)")
RUNNER = re.compile(r"<(?P<qual>\S+) object at (?P<addr>0x[0-9a-fA-F]+)>")
TQDM_START = "[AutoTuner]: Tuning "  # tqdm's description of a tuning call's bar
TQDM = re.compile(r"\[AutoTuner\]: Tuning (?P<op>.+?):\s+\d+%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+) "
                  r"\[(?P<elapsed>(?:\d+:)?\d+:\d\d)<")  # tqdm's format_meter; elapsed as format_interval writes it
WARNING = re.compile(r"\S+:\d+: (?P<category>\w*Warning): (?P<message>.*)")
OPT_DIM = re.compile(r"StaticDim\(val=(-?\d+)\)|DynamicDim\(min=-?\d+, opt=(-?\d+)")
SKIPPED = re.compile(r"Skipped (\d+) unsupported tactic\(s\) for (.+?) \(enable debug logs")
# FlashInfer's JIT logger on a module compiled from scratch ("Building JIT module <name>; this can take ..."), as the
# event patterns: (literal prefix, regex whose group ``detail`` is the module).
JIT_BUILD = ("Building JIT module ", re.compile(r"Building JIT module (?P<detail>[^;\r\n]*)"))
# Event kinds: (literal prefix of the message body, regex whose named groups become columns).
EVENT_PATTERNS = {kind: (prefix, re.compile(re.escape(prefix) + rest)) for kind, prefix, rest in (
    ("fallback_call", FALLBACK_CALL, r"(?P<op>\S+) with input shapes (?P<shapes>.*)"),
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


@functools.lru_cache(maxsize=4096)  # cache hits, loads and fallback calls repeat the same few messages
def event_of(body: str) -> tuple[str, dict] | None:
    """(kind, fields) of the first event pattern an [Autotuner] message body matches (``count`` as an int), or
    None; the dict is shared between calls: read it, never change it."""
    for kind, (prefix, pattern) in EVENT_PATTERNS.items():
        m = pattern.match(body) if body.startswith(prefix) else None
        if m:
            fields = {k: v for k, v in m.groupdict().items() if v is not None}
            if "count" in fields:
                fields["count"] = as_int(fields["count"])
            return kind, fields
    return None


# [Autotuner] messages read for nothing but counted as understood.
KNOWN_QUIET = ("use_cold_l2_cache=", "profile-arena", "No tensor inputs", "cupti-profiling ")
EXPECTED_CANDIDATE = '"[Autotuner]: profiling <runner> <tactic>, shapes=(...), avg_time <ms>"'
EXPECTED_WINNER = '"[Autotuner]: profiling chosen runner: <runner> <tactic> for <key>"'


class Header(NamedTuple):
    """Where a record header sits in a piece of text: its start, its message start, its level."""

    start: int
    message: int
    level: str


def headers(piece: str) -> list[Header]:
    """Each record header in ``piece``, found from " - flashinfer.jit: "."""
    found, at = [], piece.find(JIT)
    while at >= 0:
        level_end = piece.rfind(" - ", 0, at)
        ts_end = piece.rfind(" - ", 0, level_end)
        start = ts_end - TIMESTAMP_LENGTH
        m = HEADER_HEAD.fullmatch(piece, start, at) if start >= 0 else None
        if m and (not found or start >= found[-1].message):
            found.append(Header(start, at + len(JIT), m.group(1)))
        at = piece.find(JIT, at + 1)
    return found


def whole_line_header(line: str) -> int | None:
    """Where " - flashinfer.jit: " starts in a line that is one record from its first character, else None.

    The cheap positional test of the common case: a timestamp-shaped head, one header in the line.
    """
    h = line.find(JIT)
    if h > TIMESTAMP_LENGTH - 1 and line[19] == "," and line[TIMESTAMP_LENGTH:LEVEL_START] == " - " \
            and line.find(JIT, h + len(JIT)) < 0:
        return h
    return None


def autotuner_body(msg: str) -> str | None:
    """The text after an ``[Autotuner]:`` / ``[AutoTuner]:`` / ``[Autotuner] `` prefix, or None."""
    return msg[msg.find("]") + 1:].lstrip(": ") if msg.startswith("[Auto") else None


def split_runner(body: str, start: int) -> tuple[str, str] | None:
    """(runner repr, rest) of text starting at ``start`` with ``<... object at 0x...>`` (or a bare word)."""
    if body.startswith("<", start):
        close = body.find("> ", start)
        if close < 0:
            return None
        return body[start:close + 1], body[close + 2:]
    space = body.find(" ", start)
    return (body[start:space], body[space + 1:]) if space > 0 else None


class Candidate(NamedTuple):
    """One "profiling <runner> <tactic>, shapes=<shapes>, avg_time <ms>" line."""

    runner: str
    tactic: str
    shapes: str
    time_ms: float


def parse_candidate(body: str) -> Candidate | None:
    """The candidate of a body starting "profiling ", or None when it is garbled."""
    split = split_runner(body, len(CANDIDATE))
    rest = split[1] if split else ""
    i, j = rest.find(SHAPES), rest.rfind(AVG_TIME)
    if not (i > 0 and j > i):
        return None
    try:
        time_ms = float(rest[j + len(AVG_TIME):])
    except ValueError:
        return None
    return Candidate(split[0], rest[:i], rest[i + len(SHAPES):j], time_ms)


_KEY_FIELDS = ("ProfilingCacheKey(custom_op='", "', runner_class_name='", "', runner_hash=", ", nearest_profile=",
               ", extras=")


@functools.lru_cache(maxsize=4096)  # a key is printed once per profile, and again by every process tuning it
def parse_key(text: str) -> dict | None:
    """op, runner, profile and extras of a ProfilingCacheKey repr (0.6.15+) or a key tuple (older); the dict is
    shared between calls: read it, never change it."""
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
    except (ValueError, RecursionError, MemoryError):
        return None


@functools.lru_cache(maxsize=4096)
def runner_parts(text: str) -> tuple[str, str | None]:
    """(class name, object address) of a runner's repr; a repr of another form is its own name."""
    m = RUNNER.fullmatch(text)
    return (m["qual"].rsplit(".", 1)[-1], m["addr"]) if m else (text, None)


@functools.lru_cache(maxsize=4096)
def tactic_text(text: str) -> str:
    """The canonical text (schema.tactic_text) of a tactic as the log printed it."""
    try:
        value = literal(text)
    except (ValueError, RecursionError, MemoryError):
        value = text
    return schema.tactic_text(str(value) if isinstance(value, Name) else value)


def _tokens(text: str) -> list[str]:
    return text.replace("(", " ( ").replace(")", " ) ").replace(",", " ").split()


@functools.lru_cache(maxsize=4096)
def fits(shapes: str, profile: str) -> bool:
    """Whether candidate opt shapes belong to a nearest profile (equal except where it says -1)."""
    if shapes == profile:
        return True
    a, b = _tokens(shapes), _tokens(profile)
    return len(a) == len(b) and all(x == y or (y == "-1" and x not in "()") for x, y in zip(a, b))


def opt_shapes(profile_repr: str) -> str | None:
    """Opt shapes text of an OptimizationProfile repr: StaticDim val / DynamicDim opt per dimension."""
    _, found, rest = profile_repr.partition("shapes=[")
    inner = rest.partition("], tensor_initializers")[0]
    tensors = re.findall(r"\[([^\[\]]*)\]", inner)
    if not found or not tensors and inner.strip():
        return None
    dims = [[as_int(a or b) for a, b in OPT_DIM.findall(t)] for t in tensors]
    if any(d is None for t in dims for d in t):
        return None
    return str(tuple(tuple(t) for t in dims))


_TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\d) (\d\d):(\d\d):(\d\d),(\d{3})", re.ASCII)


@functools.lru_cache(maxsize=1024)  # a profile's end is the next one's start
def seconds(ts: str | None) -> float:
    """Seconds of a log timestamp ``YYYY-MM-DD HH:MM:SS,mmm`` (for differences only); NaN if it is not one."""
    m = _TIMESTAMP.fullmatch(ts) if ts else None
    if m is None:
        return math.nan
    try:
        day = datetime.date.fromisoformat(m[1]).toordinal() * 86400.0
    except ValueError:
        return math.nan
    return day + int(m[2]) * 3600 + int(m[3]) * 60 + int(m[4]) + int(m[5]) / 1000


def span(start: str | None, end: str | None) -> float:
    """Seconds from one log timestamp to another, to the millisecond (NaN if either is missing or damaged)."""
    return round(seconds(end) - seconds(start), 3)


@functools.lru_cache(maxsize=1024)  # tqdm renders repeat the same few elapsed texts
def clock_seconds(text: str) -> float:
    """tqdm's elapsed ``[H:]MM:SS`` in seconds; NaN if it is not one."""
    if not _CLOCK.fullmatch(text):
        return math.nan
    total = 0.0
    for part in text.split(":"):
        total = total * 60 + int(part)
    return total


_CLOCK = re.compile(r"(?:\d{1,12}:)?\d{1,12}:\d\d", re.ASCII)


class Bar(NamedTuple):
    """One render of a tuning call's tqdm bar (``desc="[AutoTuner]: Tuning <op>"``, ``unit="profile"``)."""

    op: str
    n: int
    total: int
    elapsed_s: float


def parse_bar(text: str) -> Bar | None:
    """The first bar render in ``text``, or None (none there, or counts that do not fit an Int64)."""
    m = TQDM.search(text)
    if m is None:
        return None
    op, n, total, elapsed = m.group("op", "n", "total", "elapsed")
    n, total = _count(n), _count(total)
    if n is None or total is None:
        return None
    return Bar(op, n, total, clock_seconds(elapsed))


def _count(digits: str) -> int | None:
    """A count the bar printed (``\\d+``) as as_int reads it; up to 18 ASCII digits always fit an Int64."""
    return int(digits) if len(digits) <= 18 and digits.isascii() else as_int(digits)


def iso(ts: str | None) -> str | None:
    """A log timestamp as ISO text (``T`` between date and time, ``.`` before the milliseconds)."""
    return ts.replace(" ", "T").replace(",", ".") if ts else None


def version_from_path(path: str | None) -> str | None:
    """flashinfer version of ``.../flashinfer/<version>/<archs>/flashinfer_jit.log``."""
    if not path:
        return None
    m = re.search(r"flashinfer[/\\](\d+\.\d+[^/\\]*)[/\\]", str(Path(path).resolve()))
    return m.group(1) if m else None
