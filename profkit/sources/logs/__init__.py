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
  forward assignment is what works there. A profile's timed candidates that another profile's
  records follow with no winner line between, and whose shapes do not come back, are a
  ``rank_tactics`` stage run inside another runner's ``get_valid_tactics``: their op stays missing.
- A winner line ends the open profile when its candidates fit it, else the call's newest profile
  left without a winner that fits (an unprefixed process wrote in between).
- vLLM does not prefix what tqdm writes: an unprefixed bar (and a record glued to it) belongs to
  the one prefixed process, when there is one and nothing else was unprefixed. A bar whose count
  or elapsed time goes back is a new call.
- A tuning call starts at its run of "generated profile" lines, or at a tqdm bar when the log has
  no debug lines; "Autotuning process starts/ends" close calls. "use_global_timer" (printed when
  the AutoTuner singleton is built) starts a new run: ``flashinfer_jit.log`` appends across
  processes.

Facts the log cannot give stay missing: thread, host seconds, JIT seconds, timing method; a
profile answered from the cache leaves no line; the cuDNN fallback warning is printed once per
distinct message, so ``status="fallback"`` counts are lower bounds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import warnings
from pathlib import Path
from typing import Callable

import pandas as pd

from profkit import schema
from profkit.errors import ParseError
from profkit.sources import inputs
from profkit.sources.logs import tables
from profkit.sources.logs.bulk import feed
from profkit.sources.logs.parallel import Outcome, read_each
from profkit.sources.logs.reader import Reader

__all__ = ["LogTables", "read_log"]


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


def read_log(path_or_text, *, strict: bool = False, progress: Callable[[int], object] | None = None,
             workers: int | None = None) -> LogTables:
    """Read FlashInfer autotuner debug logs into profkit tables.

    Args:
        path_or_text: a path (``str`` or ``PathLike``; gzip is detected by content), log text
            (a ``str`` holding a line break), or a list of paths. Each file's runs get their
            own run_id (``<file name>#<n>``).
        strict: raise at the first FlashInfer record that cannot be read instead of counting it
            in ``report``.
        progress: called with the number of file bytes (compressed bytes for gzip) read so far
            since the last call, about once per MiB (e.g. a tqdm bar's ``update``), in the caller's thread.
        workers: processes that read the files side by side. By default one per file, up to the
            cores this process may use, once the files hold 16 MiB or more together (a pool's
            start costs more on less); 1 reads them one after another here. The tables are the
            same either way.

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

    Warns:
        UserWarning: naming each file of a list that could not be read at all (also in ``problems``
            and ``report``); the others are read.

    Raises:
        ParseError: naming file and line, when no FlashInfer record can be read from any input,
            or (``strict``) at the first unreadable record.
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"read_log: workers must be a whole number >= 1 or None, found {workers!r}")
    with _without_gc():
        return _read(path_or_text, strict=strict, progress=progress, workers=workers)


@contextlib.contextmanager
def _without_gc():
    """The cyclic garbage collector off: reading makes a few million objects and no garbage to collect, and the
    collections it triggered took about 3% of the reading time of a 1M-line log."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read(path_or_text, *, strict: bool, progress: Callable[[int], object] | None, workers: int | None) -> LogTables:
    items = inputs.inputs_of(path_or_text, what="log")
    readers, problems, lost, first_error = [], [], [], None
    outcomes = read_each(items, _read_one, strict=strict, progress=progress, workers=workers)
    for number, (item, outcome) in enumerate(zip(items, outcomes)):
        if outcome.error is not None:
            first_error = outcome.error if number == 0 else first_error
            problems.append({"file": item.name, "status": "unreadable", "reason": str(outcome.error), "lines": 0,
                             "first_line": 0, "example": ""})
            continue
        readers.append(outcome.reader)
        if outcome.damage and not outcome.reader.readable:  # opened, but its first read failed: nothing was read
            lost.append(f"{item.name}: {outcome.damage}")
    if not any(r.readable for r in readers):
        raise first_error or readers[0].nothing_readable()
    named = tuple(f"{p['file']}: {p['reason']}" for p in problems) + tuple(lost)
    if named:
        warnings.warn(f"read_log: skipped {len(named)} unreadable file(s); the rest was read: {'; '.join(named)}",
                      stacklevel=3)
    return LogTables(**tables.build(readers, problems), problems=named)


def _read_one(item: inputs.Input, strict: bool, progress: Callable[[int], object] | None) -> Outcome:
    """Read one input with a new reader; a ParseError ends it (and is raised when ``strict``)."""
    reader = Reader(item.name, item.path, strict=strict)
    try:
        with inputs.boundary(item.where):
            feed(reader, item, progress)
    except ParseError as exc:
        if strict:
            raise
        return Outcome(None, exc, item.damage)
    return Outcome(reader, None, item.damage)
