"""What the log reader keeps while it reads: runs, tuning calls, profile groups, streams, candidates.

Each is a small named dataclass; the reader (reader.py) moves between them.
"""

from __future__ import annotations

import dataclasses
import struct
from array import array

from profkit.sources.logs.grammar import Bar


@dataclasses.dataclass(slots=True)
class Run:
    """One process's records in one file (a stream's run; a new AutoTuner singleton starts another)."""

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
class Call:
    """One tuning call (one op): its generated profiles, its profile groups, its tqdm bar."""

    run: Run
    number: int
    first_line: int
    first_ts: str | None
    op: str | None = None
    generated: list[str] = dataclasses.field(default_factory=list)  # OptimizationProfile reprs, in order
    generated_set: set[str] = dataclasses.field(default_factory=set)  # the same, for membership
    groups: list[Group] = dataclasses.field(default_factory=list)
    last_ts: str | None = None
    oom: bool = False
    closed: bool = False
    bar_n: int | None = None
    bar_total: int | None = None
    bar_elapsed_s: float | None = None

    def add_profile(self, profile: str) -> None:
        self.generated.append(profile)
        self.generated_set.add(profile)

    def settle_left_open(self) -> None:
        """A group left open whose shapes come back later in the call was interrupted (by another process
        writing unprefixed), not a rank_tactics stage: it keeps the call's op."""
        last = {group.shapes: group.gid for group in self.groups}
        for group in self.groups:
            if group.left_open and last[group.shapes] != group.gid:
                group.left_open = False

    def takes_bar(self, bar: Bar) -> bool:
        """Whether a tqdm render belongs to this call: same op and profile count, not restarted.

        A bar restarted shows a lower count or a lower elapsed time: within one bar neither goes back.
        """
        expected = len(self.generated) or self.bar_total
        return self.op in (None, bar.op) and expected in (None, bar.total) \
            and (self.bar_n is None or bar.n >= self.bar_n) \
            and (self.bar_elapsed_s is None or not bar.elapsed_s < self.bar_elapsed_s)


@dataclasses.dataclass(slots=True)
class Group:
    """One profile's records, from its first candidate to its winner line."""

    gid: int  # index in Reader.groups
    first: int  # its first candidate row
    call: Call
    shapes: str | None
    start_ts: str | None
    op: str | None = None
    profile: str | None = None
    n_skipped: int | None = None
    end_ts: str | None = None
    left_open: bool = False  # another profile's records followed its timed candidates before a winner line

    @property
    def ranked(self) -> bool:
        """A rank_tactics stage: left open, and no later winner line fits it (choose_one prints one per profile)."""
        return self.left_open and self.profile is None

    @property
    def op_name(self) -> str | None:
        """Its op: named by its own lines, else its call's (a rank_tactics stage's op is not the call's)."""
        return self.op or (None if self.ranked else self.call.op)


@dataclasses.dataclass(frozen=True, slots=True)
class PendingFailure:
    """A "Skipping tactic" line waiting for its "Failed when profiling" line (which adds the shapes)."""

    line: int
    runner: str
    tactic: str
    error: str
    api: str | None = None
    shapes: str | None = None
    op: str | None = None


@dataclasses.dataclass(slots=True)
class Stream:
    """One writer's state: the records of one line prefix (or of none)."""

    key: str
    rank: int | None
    pid: int | None
    run: Run | None = None
    call: Call | None = None
    last_call: Call | None = None
    group: Group | None = None
    in_profiles: bool = False  # the previous record was a "generated profile" line
    fallback_warning: str | None = None
    last_event: dict | None = None
    failure: PendingFailure | None = None
    fallbacks: dict[str, dict] = dataclasses.field(default_factory=dict)  # this run's fallback_call events by message


_CODE = struct.Struct("=q")  # one row of an array("q") column: native byte order


@dataclasses.dataclass(frozen=True, slots=True)
class Odd:
    """status, error and api of a candidate that is not a plain ``status="ok"`` one."""

    status: str
    error: str = ""
    api: str | None = None


class Candidates:
    """Every candidate of a source, column by column, in log order.

    Columns are C arrays (no object per value); runner reprs and tactic texts are kept once, rows hold their
    codes; rows are plain ``status="ok"`` unless ``odd`` holds an :class:`Odd` for them.
    """

    def __init__(self):
        self.group = array("q")
        self.line = array("q")
        self.runner = array("q")  # the runner's repr, as its index in ``reprs``
        self.reprs: dict[str, int] = {}
        self.tactic = array("q")  # the tactic as printed, as its index in ``tactics``
        self.tactics: dict[str, int] = {}
        self.time = array("d")
        self.odd: dict[int, Odd] = {}
        self.counts: dict[int, int] = {}  # rows per group

    def __len__(self) -> int:
        return len(self.line)

    def add(self, gid: int, line: int, runner: str, tactic: str, time_ms: float, odd: Odd | None = None) -> None:
        if odd is not None:
            self.odd[len(self.line)] = odd
        self.group.append(gid)
        self.counts[gid] = self.counts.get(gid, 0) + 1
        self.line.append(line)
        self.runner.append(self.code(runner))
        self.tactic.append(self.tactic_code(tactic))
        self.time.append(time_ms)

    def extend(self, gid: int, count: int, lines, runners, tactics, times) -> None:
        """``count`` plain rows of one group at once (the bulk path), each column as the bytes of its C values: line
        numbers, runner and tactic codes (int64), times (float64)."""
        self.group.extend(array("q", (gid,)) * count)
        self.counts[gid] = self.counts.get(gid, 0) + count
        self.line.frombytes(lines)
        self.runner.frombytes(runners)
        self.tactic.frombytes(tactics)
        self.time.frombytes(times)

    def code(self, runner: str) -> int:
        return self.reprs.setdefault(runner, len(self.reprs))

    def tactic_code(self, tactic: str) -> int:
        return self.tactics.setdefault(tactic, len(self.tactics))

    def rows(self, group: Group) -> range | list[int]:
        end = len(self.group)
        if end - group.first == self.counts.get(group.gid, 0):  # no other stream's rows in between: the common case
            return range(group.first, end)
        return [k for k in range(group.first, end) if self.group[k] == group.gid]

    def matching(self, rows: range | list[int], runner: int | None, tactic: int | None) -> list[int]:
        """The rows among ``rows`` of runner code ``runner`` and tactic code ``tactic``."""
        if type(rows) is not range:
            return [k for k in rows if self.tactic[k] == tactic and self.runner[k] == runner]
        if tactic is None:
            return []
        # The tactic's code found as bytes (at C speed, where array.index makes a Python int of every row it passes):
        # a group holds it once or a few times.
        tactics, code, found = self.tactic[rows.start:rows.stop].tobytes(), _CODE.pack(tactic), []
        at = tactics.find(code)
        while at >= 0:
            if at % _CODE.size:  # the code's bytes across two rows
                at = tactics.find(code, at + 1)
                continue
            k = rows.start + at // _CODE.size
            if self.runner[k] == runner:
                found.append(k)
            at = tactics.find(code, at + _CODE.size)
        return found

    def last_row(self, group: Group) -> int | None:
        if self.group and self.group[-1] == group.gid:  # the common case: the group is the newest
            return len(self.group) - 1
        return next((k for k in range(len(self.group) - 1, group.first - 1, -1) if self.group[k] == group.gid), None)

    def status(self, row: int) -> str:
        odd = self.odd.get(row)
        return odd.status if odd else "ok"
