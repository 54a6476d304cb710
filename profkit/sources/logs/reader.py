"""The log reader's state machine: one input's records, in order, into runs, calls, groups and rows.

:class:`Reader` takes whole physical lines (:meth:`Reader.line`) and blocks of plain candidate
lines that the bulk path (bulk.py) parsed a chunk at a time (:meth:`Reader.candidate_block`).
A block's effect is the same as feeding its lines one by one.
"""

from __future__ import annotations

import dataclasses
import math
import re

from profkit.errors import ParseError
from profkit.sources.inputs import as_int
from profkit.sources.logs import grammar as g
from profkit.sources.logs.state import Call, Candidates, Group, Odd, PendingFailure, Run, Stream
from profkit.sources.recorder import FALLBACK_WARNING

CUT_OFF = "record cut off (file truncated, or another write came in between)"
WINNER_NOT_FOUND = ("winner whose candidate is not among its profile's candidates (another process wrote "
                    "to the same log without a prefix?): time_ms left empty")


@dataclasses.dataclass(frozen=True, slots=True)
class CandidateArm:
    """After a plain candidate on the unprefixed stream: the next may continue its group in bulk."""

    group: Group


@dataclasses.dataclass(slots=True)
class RepeatArm:
    """After a fallback call: its whole line after the timestamp (and its "Generated key" line) may repeat."""

    at: int  # where " - flashinfer.jit: " starts in the line
    row: dict


@dataclasses.dataclass(slots=True)
class ProfilesArm:
    """After a "generated profile" line: the call's next distinct profiles may follow."""

    at: int
    head: str  # " - flashinfer.jit: [Autotuner]: generated profile: "
    call: Call


class Reader:
    """Read one input: split records, keep per-stream state, collect rows."""

    def __init__(self, name: str, path: str | None, *, strict: bool):
        self.name, self.path, self.strict = name, path, strict
        self.where = path or name
        self.streams: dict[str, Stream] = {}
        self.default = self._stream("", None, None)
        self.runs: list[Run] = []
        self.calls: list[Call] = []
        self.groups: list[Group] = []
        self.cands = Candidates()
        self.winners: list[dict] = []
        self.events: list[dict] = []
        self.counts: dict[tuple[str, str], list] = {}
        self.readable = False
        self.lines_read = 0
        self.first_text = ""
        self.arm: CandidateArm | RepeatArm | ProfilesArm | None = None
        self.fast_counts = {"Generated key (of a fallback call)": 0, "generated profile": 0}
        self.flashinfer = g.version_from_path(path)

    # -- reporting ---------------------------------------------------------------------------
    def count(self, status: str, reason: str, line: int, text: str) -> None:
        entry = self.counts.get((status, reason))
        if entry is None:
            self.counts[(status, reason)] = [1, line, text[:200]]
        else:
            entry[0] += 1

    def unreadable(self, reason: str, line: int, text: str, expected: str | None = None) -> None:
        if self.strict:
            what = f"expected {expected} line, found" if expected else f"{reason}:"
            raise ParseError(f"{what} {text[:200]!r}; pass strict=False to keep the {self._rows_so_far()} rows "
                             "read so far", path=self.where, line=line)
        self.count("unreadable", reason, line, text)

    def _rows_so_far(self) -> int:
        return len(self.cands) + len(self.winners)

    def nothing_readable(self) -> ParseError:
        unreadable = sum(n for (status, _), (n, _, _) in self.counts.items() if status == "unreadable")
        detail = f"; {unreadable} record(s) were cut off or garbled" if unreadable else ""
        if self.lines_read == 0 or (self.lines_read == 1 and not self.first_text):
            return ParseError("the log is empty", path=self.where, line=1)
        return ParseError(
            f"no readable FlashInfer autotuner record in {self.lines_read} line(s){detail}; expected lines like "
            f"'2026-01-01 00:00:00,000 - DEBUG - autotuner.py:3115 - flashinfer.jit: [Autotuner]: profiling ...' "
            f"(run with FLASHINFER_LOGGING_LEVEL=debug); first line: {self.first_text[:120]!r}",
            path=self.where, line=1)

    def finish(self, lines: int, replaced: int, damage: str) -> None:
        """After the last line: count what the fast paths read, name the damage, close every call."""
        for reason, n in self.fast_counts.items():
            if n:
                self.counts[("read", reason)][0] += n
        if damage:
            self.unreadable(damage, lines + 1, "")
        self.lines_read = lines
        if replaced:
            self.count("read", "lines with bytes that are not UTF-8 (replaced)", 1, f"{replaced} lines")
        for stream in self.streams.values():
            self._close_call(stream)

    # -- lines -------------------------------------------------------------------------------
    def line(self, lineno: int, line: str) -> bool:
        """One physical line (with its line end, if it has one); True when it repeated the armed record."""
        arm = self.arm
        if arm is not None and line.endswith("\n") and self._repeats(arm, line):
            return True  # like the bulk path, this leaves the run's last line and end time to the next record read whole
        self._line(lineno, line)
        return False

    def repeat(self, line: str, n: int) -> bool:
        """``n`` more copies of a fallback-call line (or its "Generated key" line) that :meth:`line` just read as a
        repeat: counted, not read; False (nothing counted) when the armed record is not a fallback call."""
        return type(self.arm) is RepeatArm and self._repeats(self.arm, line, n)

    def _repeats(self, arm: CandidateArm | RepeatArm | ProfilesArm, line: str, n: int = 1) -> bool:
        """Read ``line`` if it repeats the shape the last record armed (the same text after its timestamp)."""
        if type(arm) is RepeatArm:
            if line.startswith(arm.row["_line"], arm.at):  # the same fallback-call message again
                arm.row["count"] += n
                return True
            key = arm.row.get("_key_line")
            if key is not None and line.startswith(key, arm.at):  # its "Generated key" line again
                self.fast_counts["Generated key (of a fallback call)"] += n
                return True
        elif type(arm) is ProfilesArm and line.startswith(arm.head, arm.at):  # the call's next profile
            text = line[arm.at + len(arm.head):-1]
            if text not in arm.call.generated_set:
                arm.call.add_profile(text)
                self.fast_counts["generated profile"] += 1
                return True
        return False

    def _line(self, lineno: int, line: str) -> None:
        whole = line.endswith("\n")
        line = line[:-2] if line.endswith("\r\n") else line[:-1] if whole else line
        if lineno == 1:
            self.first_text = line
        stream = self.default
        if line[:2] != "20":  # not a timestamp-first line: a process prefix, or a tqdm render?
            stream, line = self._split_prefix(line)
        armed, self.arm = self.arm, None
        if whole and "\r" not in line:
            h = g.whole_line_header(line)
            if h is not None:
                self._record(stream, lineno, line[:g.TIMESTAMP_LENGTH],
                             line[g.LEVEL_START:line.find(" ", g.LEVEL_START)], line[h + len(g.JIT):], h, armed)
                return
        # A last line without its line end: a tqdm bar still running is normal; a record there is cut off.
        self._pieces(stream, line, lineno, whole=whole)

    def _split_prefix(self, line: str) -> tuple[Stream, str]:
        m = g.PREFIX.match(line) if line[:1] != "\r" else None  # a tqdm render's \r starts no prefix
        return (self._prefixed_stream(m), line[m.end():]) if m else (self._bar_writer(line), line)

    def _bar_writer(self, line: str) -> Stream:
        """The stream of an unprefixed line: a tqdm bar's (and what is glued to it) is the one process's
        when exactly one prefixed process wrote records and nothing unprefixed did; else unprefixed.

        vLLM prefixes what its workers log and print, not what tqdm writes to stderr.
        """
        if self.default.run is None and line.lstrip("\r").startswith(g.TQDM_START):
            writers = [s for s in self.streams.values() if s.run is not None]
            if len(writers) == 1:
                return writers[0]
        return self.default

    def _pieces(self, stream: Stream, line: str, lineno: int, whole: bool = True) -> None:
        """Split a line on \\r and record headers; a record followed by anything was cut off."""
        pieces = line.split("\r")
        last = len(pieces) - 1
        for index, piece in enumerate(pieces):
            if not piece:
                continue
            found = g.headers(piece)
            start = found[0].start if found else len(piece)
            if start > 0 or not found:
                self._fragment(stream, lineno, piece[:start])
            for k, header in enumerate(found):
                end = found[k + 1].start if k + 1 < len(found) else len(piece)
                message = piece[header.message:end]
                if k + 1 < len(found) or index < last or not whole:
                    self.unreadable(CUT_OFF, lineno, message)
                    continue
                self.arm = None
                self._record(stream, lineno, piece[header.start:header.start + g.TIMESTAMP_LENGTH], header.level,
                             message, header.message - len(g.JIT) - header.start)

    def _fragment(self, stream: Stream, lineno: int, text: str) -> None:
        """Text outside any record: a tqdm bar, a Python warning, or someone else's line."""
        if not text.strip():
            return
        if g.TQDM_START in text:
            bar = g.parse_bar(text)
            if bar is not None:
                self.readable = True
                self.count("read", "tqdm progress bar", lineno, text)
                self._bar(stream, lineno, bar)
                return
        if "Warning: " in text:
            m = g.WARNING.search(text)
            if m and FALLBACK_WARNING in m["message"]:
                self.count("read", "cuDNN fallback warning", lineno, text)
                stream.fallback_warning = m["message"][:2000]
                self._event(stream, lineno, None, m["category"], "fallback_warning", message=m["message"])
                return
        self.count("foreign", "not a FlashInfer record", lineno, text)

    # -- the bulk path -------------------------------------------------------------------------
    def continues_in_bulk(self, shapes: str) -> bool:
        """Whether the next plain candidate of ``shapes`` continues the open group with no state to change."""
        arm = self.arm
        return type(arm) is CandidateArm and arm.group is self.default.group and arm.group.shapes == shapes

    def opening_candidate(self, lineno: int, ts: str, parsed: g.Candidate, bar: str = "") -> bool:
        """A plain candidate line of the unprefixed stream that does not continue the open group (it opens one, or
        meets a pending failure or warning), or follows a tqdm render ``bar`` on its line (``\\r<bar><record>``),
        parsed by the bulk path: read as :meth:`line` reads it. False, with nothing done, for the first line (whose
        text :meth:`line` keeps) and for a render before this source's first record (it may be a prefixed
        process's)."""
        if lineno == 1 or bar and self.default.run is None:
            return False
        armed, self.arm = self.arm, None
        stream = self.default
        if bar:  # as _pieces reads the line: the render, then the record, with nothing armed
            armed = None
            self._fragment(stream, lineno, bar)
        _, ended_at = self._begin(stream, lineno, ts, g.CANDIDATE)
        self._timed(stream, lineno, parsed, armed, ended_at)
        stream.in_profiles = False
        return True

    def bar_record(self, lineno: int, bar: str, record: str) -> bool:
        """A line that is a tqdm render ``bar`` after its ``\\r`` and then one ``record`` to its line end, whose header
        the bulk path found where :func:`~profkit.sources.logs.grammar.headers` finds it: read as :meth:`line` reads
        it. False, with nothing done, where :meth:`line` may read it otherwise: the first line, a render before this
        source's first record (it may be a prefixed process's), a repeat armed, a second record header."""
        at = record.find(g.JIT)
        if lineno == 1 or self.default.run is None or type(self.arm) in (RepeatArm, ProfilesArm) \
                or record.find(g.JIT, at + len(g.JIT)) >= 0:
            return False
        self.arm = None
        stream = self.default
        self._fragment(stream, lineno, bar)
        self._record(stream, lineno, record[:g.TIMESTAMP_LENGTH],
                     record[g.LEVEL_START:record.find(" ", g.LEVEL_START)], record[at + len(g.JIT):], at)
        return True

    def winner_line(self, lineno: int, line: str) -> bool:
        """A line right after plain candidates read in bulk: read as :meth:`line` reads it when it is a whole winner
        record of the unprefixed stream and their group is open (nothing armed that it could repeat, no pending
        failure: :meth:`_record`'s first steps have nothing to do); False, with nothing done, for any other line."""
        stream, arm = self.default, self.arm
        if type(arm) is not CandidateArm or arm.group is not stream.group or stream.failure is not None \
                or line[:2] != "20" or line[-1:] != "\n" or "\r" in line:
            return False
        line = line[:-1]
        h = g.whole_line_header(line)
        msg = line[h + len(g.JIT):] if h is not None else ""
        body = g.autotuner_body(msg)
        if body is None or not body.startswith(g.WINNER):
            return False
        self.arm, self.readable = None, True
        ts = line[:g.TIMESTAMP_LENGTH]
        stream.run.last_line, stream.run.ended_at = lineno, ts
        self._winner(stream, lineno, ts, body, msg)
        stream.in_profiles = False
        return True

    def candidate_block(self, count: int, lines, runners, tactics, times) -> None:
        """``count`` plain candidate lines of the unprefixed stream continuing the open group (see
        :meth:`continues_in_bulk`); columns as :meth:`Candidates.extend` takes them.

        The run's last line is moved when the group closes; its end time stays that of the last record
        read one by one (as ``runs.ended_at`` always was).
        """
        self.cands.extend(self.arm.group.gid, count, lines, runners, tactics, times)

    # -- streams and runs --------------------------------------------------------------------
    def _stream(self, key: str, rank: int | None, pid: int | None) -> Stream:
        stream = self.streams.get(key)
        if stream is None:
            stream = self.streams[key] = Stream(key=key, rank=rank, pid=pid)
        return stream

    def _prefixed_stream(self, m: re.Match) -> Stream:
        key = m.group(0).strip()
        stream = self.streams.get(key)
        if stream is not None:
            return stream
        name = m["name"] or m["service"] or ""
        in_name = g.RANK_IN_NAME.search(name)
        rank = m["rank"] or (in_name.group(1) if in_name else None)
        return self._stream(key, _small_int(rank), _small_int(m["pid"]))

    def _run(self, stream: Stream, lineno: int, ts: str | None, *, new: bool = False) -> Run:
        if stream.run is None or new:
            stream.run = Run(run_id=f"{self.name}#{len(self.runs) + 1}", stream=stream.key,
                             rank=stream.rank, pid=stream.pid, first_line=lineno, started_at=ts)
            self.runs.append(stream.run)
            stream.last_call, stream.fallbacks = None, {}
        return stream.run

    # -- records -----------------------------------------------------------------------------
    def _record(self, stream: Stream, lineno: int, ts: str, level: str, msg: str, at: int,
                armed: CandidateArm | RepeatArm | ProfilesArm | None = None) -> None:
        """One whole record; ``at`` is where its " - flashinfer.jit: " starts, counted from its header;
        ``armed``: what the previous line armed."""
        body = g.autotuner_body(msg)
        run, ended_at = self._begin(stream, lineno, ts, body)
        if body is None:
            self._other_message(stream, lineno, ts, level, msg)
            return
        unprefixed = stream is self.default
        if body.startswith(g.FALLBACK_CALL):  # every untuned call outside tuning: many
            row = self._fallback_call(stream, lineno, ts, level, body)
            if unprefixed:
                self.arm = RepeatArm(at, row)
            return
        if body.startswith(g.CANDIDATE):
            if body.startswith(g.WINNER):
                self._winner(stream, lineno, ts, body, msg)
            else:
                parsed = g.parse_candidate(body)
                if parsed is None:
                    self.unreadable("garbled candidate line", lineno, msg, expected=g.EXPECTED_CANDIDATE)
                else:
                    self._timed(stream, lineno, parsed, armed, ended_at)
            stream.in_profiles = False
            return
        if body.startswith(g.GENERATED_PROFILE):
            profile = body[len(g.GENERATED_PROFILE):]
            if not stream.in_profiles or profile in stream.call.generated_set:  # a call's profiles are distinct
                self._close_group(stream, superseded=True)
                self._open_call(stream, lineno, ts)
            stream.call.add_profile(profile)
            stream.in_profiles = True
            self.count("read", "generated profile", lineno, msg)
            if unprefixed:
                self.arm = ProfilesArm(at, f"{g.JIT}{msg[:msg.find(g.GENERATED_PROFILE) + len(g.GENERATED_PROFILE)]}",
                                       stream.call)
            return
        stream.in_profiles = False
        if body.startswith(g.SKIPPING) or body.startswith(g.FAILED_DETAIL):
            self._failure(stream, lineno, body, msg)
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
        elif body.startswith(g.GENERATED_KEY) and stream.last_event is not None \
                and stream.last_event["kind"] == "fallback_call":
            self.count("read", "Generated key (of a fallback call)", lineno, msg)
            event = stream.last_event
            event.setdefault("key", body[len(g.GENERATED_KEY):])  # parsed once per key, at the end
            event["_key_line"] = f"{g.JIT}{msg}\n"
            if unprefixed:
                self.arm = RepeatArm(at, event)
        elif body.startswith(g.KNOWN_QUIET):
            self.count("ignored", "cold-L2 / CUPTI detail", lineno, msg)
        else:
            self._message_event(stream, lineno, ts, level, body, msg)

    def _begin(self, stream: Stream, lineno: int, ts: str, body: str | None) -> tuple[Run, str | None]:
        """What every whole record does first: its run (a new one after a new AutoTuner singleton), the run's last
        line and end time, a pending failure added. Returns the run and its end time before this record."""
        self.readable = True
        # A new AutoTuner singleton after tuning calls: another process appended to the same file.
        new_run = body is not None and body.startswith("use_global_timer") and stream.run is not None \
            and stream.run.calls > 0
        if new_run:
            self._close_call(stream)
        run = stream.run
        if run is None or new_run:
            run = self._run(stream, lineno, ts, new=new_run)
        ended_at, (run.last_line, run.ended_at) = run.ended_at, (lineno, ts)
        if stream.failure is not None and not (body or "").startswith(g.FAILED_DETAIL):
            self._add_failure(stream, stream.failure)
        return run, ended_at

    def _other_message(self, stream, lineno, ts, level, msg) -> None:
        built = g.JIT_BUILD[1].match(msg)
        if built:
            self._event(stream, lineno, ts, level, "jit_build", detail=built["detail"], message=msg)
        else:
            self.count("ignored", "other flashinfer.jit message", lineno, msg)

    def _message_event(self, stream, lineno, ts, level, body, msg) -> None:
        found = g.event_of(body)
        if found is None:
            self.count("ignored", "unrecognised [Autotuner] message", lineno, msg)
            self._event(stream, lineno, ts, level, "other", message=body)
            return
        kind, fields = found
        self._event(stream, lineno, ts, level, kind, message=body, **fields)

    def _fallback_call(self, stream: Stream, lineno: int, ts, level, body: str) -> dict:
        """A call outside tuning found no tuned config: one event per distinct message, ``count`` its lines."""
        stream.in_profiles = False
        row = stream.fallbacks.get(body)
        if row is None:
            self._message_event(stream, lineno, ts, level, body, body)
            stream.fallbacks[body] = row = stream.last_event
            row["count"] = 0
        row["count"] += 1
        row["_line"] = f"{g.JIT}[AutoTuner]: {body}\n"  # the whole line after its timestamp, as the fast path sees it
        stream.last_event = row
        return row

    def _event(self, stream: Stream, lineno: int, ts, level, kind: str, **fields) -> None:
        if kind != "fallback_warning":
            self.count("read", kind, lineno, fields.get("message", ""))
        call = stream.call or (stream.last_call if kind in ("tuning_end", "oom") else None)
        if call is not None and call.op is None and fields.get("op") and kind in ("cache_hit", "skip_op"):
            call.op = fields["op"]  # a call answered from the cache names its op only here
        row = {"run_id": stream.run.run_id if stream.run else None, "rank": stream.rank,
               "call": call.number if call else None, "file": self.name, "line": lineno,
               "logged_at": ts, "level": level, "kind": kind, **fields}
        self.events.append(row)
        stream.last_event = row

    # -- calls and profiles ------------------------------------------------------------------
    def _open_call(self, stream: Stream, lineno: int, ts: str | None) -> Call:
        self._close_call(stream)
        run = self._run(stream, lineno, ts)
        run.calls += 1
        stream.call = Call(run=run, number=run.calls, first_line=lineno, first_ts=ts, last_ts=ts)
        self.calls.append(stream.call)
        return stream.call

    def _ensure_call(self, stream: Stream, lineno: int, ts: str | None) -> Call:
        return stream.call if stream.call is not None else self._open_call(stream, lineno, ts)

    def _close_call(self, stream: Stream) -> None:
        self._close_group(stream)
        call = stream.call
        if call is None:
            return
        call.closed = True
        call.settle_left_open()
        if call.oom:
            self._oom_fallbacks(call)
        stream.last_call, stream.call = call, None

    def _group_for(self, stream: Stream, lineno: int, shapes: str | None) -> Group:
        group = stream.group
        if group is not None and shapes is not None and group.shapes is not None and group.shapes != shapes:
            self._close_group(stream, superseded=True)  # a new profile without a winner line for the last one
            group = None
        if group is None:
            call = self._ensure_call(stream, lineno, None)
            start = call.groups[-1].end_ts if call.groups else call.first_ts
            group = stream.group = Group(gid=len(self.groups), first=len(self.cands), call=call, shapes=shapes,
                                         start_ts=start)
            call.groups.append(group)
            self.groups.append(group)
        elif group.shapes is None:
            group.shapes = shapes
        return group

    def _close_group(self, stream: Stream, *, superseded: bool = False) -> None:
        """End the open group; ``superseded``: another profile's records follow it, with no winner line between.

        choose_one prints a winner line after every profile with a timed candidate (AT:2581);
        rank_tactics, run inside another runner's get_valid_tactics, prints none (AT:2611).
        """
        if stream.failure is not None:
            self._add_failure(stream, stream.failure)
        group, stream.group = stream.group, None
        if superseded and group is not None and group.profile is None \
                and any(self.cands.status(k) != "failed" for k in self.cands.rows(group)):
            group.left_open = True
        last = self.cands.last_row(group) if group is not None else None
        if last is not None:  # bulk and repeated lines do not move the run's last line
            run = group.call.run
            run.last_line = max(run.last_line, self.cands.line[last])

    def _bar(self, stream: Stream, lineno: int, bar: g.Bar) -> None:
        call = stream.call if stream.call is not None and stream.call.takes_bar(bar) else None
        if call is None and stream.last_call is not None and stream.last_call.takes_bar(bar):
            call = stream.last_call
        if call is None:
            if stream.call is not None and stream.call.generated:
                return  # a late render of an earlier call's bar, inside a call the debug lines delimit
            call = self._open_call(stream, lineno, None)  # a log without debug lines: the bar is the call
        call.op = call.op or bar.op
        call.bar_n, call.bar_total, call.bar_elapsed_s = bar.n, bar.total, bar.elapsed_s

    # -- candidates, failures, winners -------------------------------------------------------
    def _timed(self, stream: Stream, lineno: int, parsed: g.Candidate, armed, ended_at: str | None) -> None:
        """Add a timed candidate; arm its group when the next plain candidate may continue it in bulk."""
        group = self._group_for(stream, lineno, parsed.shapes)
        odd = Odd("fallback", stream.fallback_warning) if stream.fallback_warning else None
        stream.fallback_warning = None
        self.cands.add(group.gid, lineno, parsed.runner, parsed.tactic, parsed.time_ms, odd)
        if odd is None and stream.failure is None and stream is self.default:
            if type(armed) is CandidateArm and armed.group is group:
                stream.run.ended_at = ended_at  # a line the bulk path takes: it does not move the end time
            self.arm = CandidateArm(group)

    def _failure(self, stream: Stream, lineno: int, body: str, msg: str) -> None:
        """"Skipping tactic R T, due to failure ...: e" then "Failed when profiling R T, shapes=S. Error occurred: e"."""
        detail = body.startswith(g.FAILED_DETAIL)
        split = g.split_runner(body, len(g.FAILED_DETAIL) if detail else len(g.SKIPPING))
        runner, rest = split if split else ("", "")
        if detail:
            i, j = rest.find(g.SHAPES), rest.find(g.ERROR_OCCURRED)
            if split is None or i < 0 or j < i:
                self.unreadable("garbled failure line", lineno, msg)
                return
            pending, stream.failure = stream.failure, None
            if pending is not None and (pending.runner, pending.tactic) != (runner, rest[:i]):
                self._add_failure(stream, pending)  # an unpaired "Skipping tactic" line
            self.count("read", "failed tactic", lineno, msg)
            self._add_failure(stream, PendingFailure(lineno, runner, rest[:i], rest[j + len(g.ERROR_OCCURRED):],
                                                     shapes=rest[i + len(g.SHAPES):j]))
            return
        if g.DUE_TO_FAILURE in rest:
            tactic, _, error = rest.partition(g.DUE_TO_FAILURE)
            api, op = None, None
        elif g.WHILE_RANKING in rest:
            tactic, _, tail = rest.partition(g.WHILE_RANKING)
            op, _, error = tail.partition(": ")
            api = "rank_tactics"
        else:
            self.unreadable("garbled failure line", lineno, msg)
            return
        if split is None:
            self.unreadable("garbled failure line", lineno, msg)
            return
        if stream.failure is not None:
            self._add_failure(stream, stream.failure)
        stream.failure = PendingFailure(lineno, runner, tactic, error, api, op=op)
        self.count("read", "failed tactic", lineno, msg)

    def _add_failure(self, stream: Stream, failure: PendingFailure) -> None:
        stream.failure = None
        group = self._group_for(stream, failure.line, failure.shapes)
        if failure.op is not None:
            group.op = failure.op
        stream.fallback_warning = None  # a failure that also warned is a failure
        self.cands.add(group.gid, failure.line, failure.runner, failure.tactic, math.nan,
                       Odd("failed", failure.error[:2000], failure.api))

    def _skipped(self, stream: Stream, lineno: int, ts, level, body: str, msg: str) -> None:
        m = g.SKIPPED.match(body)
        count = _small_int(m[1]) if m else None
        if count is None:
            self.unreadable("garbled 'Skipped N unsupported tactic(s)' line", lineno, msg)
            return
        group = self._group_for(stream, lineno, None)
        group.op, group.n_skipped = m[2], count
        group.call.op = group.call.op or m[2]
        self._event(stream, lineno, ts, level, "skipped_tactics", op=m[2], count=count, message=body)

    def _winner(self, stream: Stream, lineno: int, ts: str, body: str, msg: str) -> None:
        split = g.split_runner(body, len(g.WINNER))
        rest = split[1] if split else ""
        at = rest.find(" for ProfilingCacheKey(")
        at = at if at >= 0 else rest.find(" for (")
        tactic_text, key = rest[:at], g.parse_key(rest[at + 5:]) if at > 0 else None
        if key is None:
            self.unreadable("garbled winner line", lineno, msg, expected=g.EXPECTED_WINNER)
            return
        self.count("read", "winner", lineno, msg)
        group = self._winner_group(stream, lineno, key["profile"], msg)
        group.op, group.profile, group.end_ts = key["op"], key["profile"], ts
        call = group.call
        call.op, call.last_ts = call.op or key["op"], ts
        tactic = g.tactic_text(tactic_text)
        best = self._chosen_row(group, split[0], tactic_text, tactic, key["runner"])
        if best is None and self.cands.rows(group):
            self.count("unreadable", WINNER_NOT_FOUND, lineno, msg)
        c = self.cands
        self.winners.append({
            "run_id": call.run.run_id, "rank": call.run.rank, "call": call.number, "op": key["op"],
            "profile": key["profile"], "runner": key["runner"], "tactic": tactic, "extras": key["extras"],
            "time_ms": c.time[best] if best is not None else math.nan,
            "status": c.status(best) if best is not None else None,
            "source": "profiled", "reason": "", "file": self.name, "line": lineno,
        })
        if group is stream.group:
            self._close_group(stream)

    def _winner_group(self, stream: Stream, lineno: int, profile: str, msg: str) -> Group:
        """The group a winner line ends: the open one when its candidates fit the winner's profile; else the
        call's newest group left without a winner that fits (another process wrote in between, unprefixed);
        else a new one, and the open group's candidates belong to another profile (or process)."""
        group = stream.group
        if group is not None and (group.shapes is None or g.fits(group.shapes, profile)):
            return group
        earlier = next((gr for gr in reversed(stream.call.groups) if gr is not group and gr.profile is None
                        and gr.shapes is not None and g.fits(gr.shapes, profile)), None) if stream.call else None
        if earlier is not None:
            return earlier
        if group is not None:
            self._close_group(stream)
            self.count("unreadable", "winner does not match the profile of the candidates before it", lineno, msg)
        return self._group_for(stream, lineno, None)

    def _chosen_row(self, group: Group, runner_repr: str, tactic_text: str, tactic: str, runner: str) -> int | None:
        """The group's fastest timed candidate of the winner's runner and tactic, or None."""
        c = self.cands
        rows = c.rows(group)
        chosen = c.matching(rows, c.reprs.get(runner_repr), c.tactics.get(tactic_text))
        if not chosen:  # the same tactic printed another way, or the runner's repr differs: compare decoded
            reprs = {code: text for text, code in c.reprs.items()}
            texts = {code: text for text, code in c.tactics.items()}
            chosen = [k for k in rows if g.tactic_text(texts[c.tactic[k]]) == tactic
                      and g.runner_parts(reprs[c.runner[k]])[0] == runner]
        odd, best, fastest = c.odd, None, math.inf
        for k in chosen:  # the first of the fastest; a NaN time counts as the slowest; failed rows are never chosen
            if k in odd and odd[k].status == "failed":
                continue
            time_ms = c.time[k]
            if best is None or time_ms < fastest:
                best, fastest = k, time_ms if time_ms == time_ms else math.inf
        return best

    def _oom_fallbacks(self, call: Call) -> None:
        """Winner rows for the profiles an OOM-aborted call never reached: FlashInfer returns (runners[0], -1)."""
        won = [group for group in call.groups if group.profile is not None]
        opt = [g.opt_shapes(p) for p in call.generated]
        last = max((i for i, s in enumerate(opt) for group in won[-1:] if s and g.fits(s, group.profile)), default=-1)
        for shapes in opt[last + 1:]:
            self.winners.append({
                "run_id": call.run.run_id, "rank": call.run.rank, "call": call.number, "op": call.op,
                "profile": None, "runner": None, "shapes": shapes, "tactic": "-1", "time_ms": math.nan,
                "status": None, "source": "fallback", "reason": "oom_abort", "extras": "", "file": self.name,
                "line": None,
            })


def _small_int(text: str | None) -> int | None:
    """A decimal count, pid or rank read from a line, or None when it does not fit an Int64 column."""
    return as_int(text) if text is not None else None
