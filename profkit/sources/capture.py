"""Live capture of FlashInfer's AutoTuner: every candidate, every winner, the time tuning took.

``with profkit.capture() as cap:`` wraps, at class level, the AutoTuner methods every tuning
run goes through (``choose_one``, ``rank_tactics``, ``_generate_optimization_profiles``,
``_prepare_input_tensors``, ``_profile_single_kernel``, ``search_cache``), plus FlashInfer's JIT
build and ``warnings.warn``. The wrappers only read clocks and arguments: FlashInfer's decisions,
return values and exceptions pass through unchanged, no GPU work or sync is added inside a
measured window, and outside tuning mode a ``choose_one`` call pays one attribute check.

A capture collects the tuning calls of every thread of the process while it is open (tuning mode
is process-global in FlashInfer); each row carries its thread and call ids. Nested captures
share one installation of the hooks (reference-counted) and each sees the calls made while it
was open.

The default tactic (``runners[0]``, tactic -1: what runs untuned) is timed with FlashInfer's own
timing function on each profile's exact inputs, after FlashInfer's candidates for that profile
(``time_default=True``). Those rows carry ``source="default"``, their debug-log lines are kept
out of FlashInfer's log, and their cost is reported as ``default_s``, outside ``wall_s``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
import threading
import warnings
from typing import Any

from profkit import schema
from profkit.errors import ProfkitError
from profkit.sources.env import collect_env, current_rank, new_run_id, utc_now
from profkit.sources.hooks import Hook, HookSet, Layer
from profkit.sources.jit import jit_spec_class
from profkit.sources.recorder import (CallFrame, Candidate, ProfileWindow, RowBuilder, candidate_status,
                                      error_text, timing_text)

log = logging.getLogger("profkit")

# Methods every supported version (0.6.16 .. 0.7.x) has; rank_tactics is 0.7-only, detected.
_REQUIRED = ("choose_one", "_generate_optimization_profiles", "_prepare_input_tensors",
             "_profile_single_kernel", "search_cache", "_find_nearest_profile")
_SUPPORTED = "flashinfer-python 0.6.16 through 0.7.x"
_MAX_PROBLEMS = 1000  # per capture: a fault that repeats in every candidate is named, not a flood


class _State(threading.local):
    def __init__(self):
        self.frames: list[CallFrame] = []
        self.jit_s = 0.0
        self.warnings: list[str] | None = None  # collecting while a candidate is timed
        self.quiet = False  # drop this thread's FlashInfer log records (profkit's own default timing)


class _Recorder:
    """Process-wide: the hooks, the open captures, and per-thread call frames."""

    def __init__(self):
        self.state = _State()
        self.captures: list["Capture"] = []
        self.lock = threading.Lock()
        self.calls = itertools.count(1)
        self.seq = itertools.count(1)
        self.hooks: HookSet | None = None
        self.fi: dict[str, Any] = {}

    # -- installation ------------------------------------------------------------------------
    def open(self, capture: "Capture") -> None:
        if self.hooks is None:
            self.hooks = self._build_hooks()
        self.hooks.acquire()
        with self.lock:
            self.captures.append(capture)
            if len(self.captures) == 1 and self.fi["logger"] is not None:
                self.fi["logger"].addFilter(self._log_filter)

    def close(self, capture: "Capture") -> None:
        with self.lock:
            self.captures.remove(capture)
            if not self.captures and self.fi["logger"] is not None:
                self.fi["logger"].removeFilter(self._log_filter)
        self.hooks.release()

    def _build_hooks(self) -> HookSet:
        try:
            import flashinfer
            from flashinfer.autotuner import autotuner as at
        except ImportError as exc:
            raise ProfkitError(f"profkit.capture needs flashinfer-python ({_SUPPORTED}): {exc}") from None
        tuner_cls = at.AutoTuner
        version = getattr(flashinfer, "__version__", "unknown")
        for name in _REQUIRED:
            if not hasattr(tuner_cls, name):
                raise ProfkitError(f"flashinfer-python {version}: AutoTuner has no method {name!r}; "
                                   f"profkit supports {_SUPPORTED}")
        torch = __import__("torch")
        self.fi = {
            "module": at,
            "version": version,
            "oom": (torch.cuda.OutOfMemoryError, MemoryError),
            "tensor": torch.Tensor,
            "tactic_json": getattr(at, "_tactic_to_json", lambda t: t),
            # 0.7 cold-L2 timing flushes L2 and takes the median; 0.6.16 rotates inputs, mean.
            "cold_l2_median": hasattr(tuner_cls, "profile_tactic"),
            "logger": getattr(at, "logger", None),
        }
        hooks = [
            Hook(tuner_cls, "choose_one", self._wrap_choose_one),
            Hook(tuner_cls, "_generate_optimization_profiles", self._wrap_profiles),
            Hook(tuner_cls, "_prepare_input_tensors", self._wrap_prepare),
            Hook(tuner_cls, "_profile_single_kernel", self._wrap_profile_single_kernel),
            Hook(tuner_cls, "search_cache", self._wrap_search_cache),
            Hook(warnings, "warn", self._wrap_warn),
        ]
        if hasattr(tuner_cls, "rank_tactics"):
            hooks.append(Hook(tuner_cls, "rank_tactics", self._wrap_rank_tactics))
        jit_cls = jit_spec_class()
        if jit_cls is not None:
            hooks.append(Hook(jit_cls, "build", self._wrap_jit_build))
        return HookSet(hooks)

    def _log_filter(self, record: logging.LogRecord) -> bool:
        return not (self.state.quiet and record.thread == threading.get_ident())

    # -- wrappers ----------------------------------------------------------------------------
    def _wrap_choose_one(self, layer: Layer):
        def choose_one(tuner, custom_op, runners, tuning_config, inputs, **kwargs):
            if not tuner.is_tuning_mode or not self.captures:
                return layer.inner(tuner, custom_op, runners, tuning_config, inputs, **kwargs)
            return self._tuning_call(layer, "choose_one", tuner, custom_op, runners, tuning_config, inputs, (), kwargs)
        return choose_one

    def _wrap_rank_tactics(self, layer: Layer):
        def rank_tactics(tuner, custom_op, runners, tuning_config, inputs, *args, **kwargs):
            k = args[0] if args else kwargs.get("k", 1)
            # With k == 1 (or untuned) rank_tactics is choose_one, which records itself.
            if not tuner.is_tuning_mode or not self.captures or k == 1:
                return layer.inner(tuner, custom_op, runners, tuning_config, inputs, *args, **kwargs)
            return self._tuning_call(layer, "rank_tactics", tuner, custom_op, runners, tuning_config, inputs,
                                     args, kwargs)
        return rank_tactics

    def _wrap_profiles(self, layer: Layer):
        def _generate_optimization_profiles(tuner, tuning_config, inputs):
            profiles = layer.inner(tuner, tuning_config, inputs)
            self._safe("profiles", self._on_profiles, tuner, tuning_config, profiles)
            return profiles
        return _generate_optimization_profiles

    def _wrap_prepare(self, layer: Layer):
        def _prepare_input_tensors(tuner, profile, inputs):
            frame = self._frame()
            window = self._safe("profile", self._open_window, tuner, frame, profile) if frame else None
            try:
                return layer.inner(tuner, profile, inputs)
            except self.fi["oom"]:
                if frame is not None:
                    frame.saw_oom = True
                raise
            finally:
                if window is not None:
                    window.synth_s = _now() - window.started
        return _prepare_input_tensors

    def _wrap_profile_single_kernel(self, layer: Layer):
        def _profile_single_kernel(tuner, runner, inputs, tactic, tuning_config, *args, **kwargs):
            candidate = self._safe("candidate", self._candidate, tuner, runner, inputs, tactic, tuning_config) \
                if self.captures else None
            if candidate is None:
                return layer.inner(tuner, runner, inputs, tactic, tuning_config, *args, **kwargs)
            frame, state = self._frame(), self.state
            jit_before, collected = state.jit_s, state.warnings
            state.warnings = []
            error = None
            try:
                candidate.time_ms = layer.inner(tuner, runner, inputs, tactic, tuning_config, *args, **kwargs)
                return candidate.time_ms
            except BaseException as exc:
                error = exc
                raise
            finally:
                seen, state.warnings = state.warnings, collected
                self._safe("candidate", self._finish_candidate, frame, candidate, error, seen, jit_before,
                           (inputs, args, kwargs))
        return _profile_single_kernel

    def _wrap_search_cache(self, layer: Layer):
        def search_cache(tuner, *args, **kwargs):
            result = layer.inner(tuner, *args, **kwargs)
            frame = self._frame()
            if frame is not None:
                frame.lookups.append(result)
            return result
        return search_cache

    def _wrap_warn(self, layer: Layer):
        def warn(message, category=None, stacklevel=1, *args, **kwargs):
            collecting = self.state.warnings
            if collecting is not None:
                self._safe("warning", lambda: collecting.append(str(message)))
            # Two more frames (the layer and this one) between the caller and warnings.warn.
            return layer.inner(message, category, stacklevel + 2, *args, **kwargs)
        return warn

    def _wrap_jit_build(self, layer: Layer):
        def build(spec, *args, **kwargs):
            started = _now()
            try:
                return layer.inner(spec, *args, **kwargs)
            finally:
                self.state.jit_s += _now() - started
        return build

    # -- bookkeeping -------------------------------------------------------------------------
    def _frame(self) -> CallFrame | None:
        frames = self.state.frames
        return frames[-1] if frames else None

    def _tuning_call(self, layer, api, tuner, op, runners, config, inputs, args, kwargs):
        self._safe("refresh", self.hooks.refresh)  # someone may have patched the AutoTuner since we installed
        frames = self.state.frames
        frame = self._safe("call", self._new_frame, tuner, api, op, runners, config, inputs)
        if frame is None:
            return layer.inner(tuner, op, runners, config, inputs, *args, **kwargs)
        frames.append(frame)
        try:
            return layer.inner(tuner, op, runners, config, inputs, *args, **kwargs)
        except BaseException as exc:
            frame.error = exc
            raise
        finally:
            frames.pop()
            self._safe("call", self._end_frame, tuner, frame)

    def _new_frame(self, tuner, api, op, runners, config, inputs) -> CallFrame:
        frames = self.state.frames
        return CallFrame(
            call=next(self.calls), parent_call=frames[-1].call if frames else None,
            thread=threading.get_ident(), api=api, op=op, runners=list(runners), inputs=list(inputs),
            config=config, started=_now(), jit_at_start=self.state.jit_s,
            skipped=op in getattr(tuner, "_effective_skip_ops", ()),
        )

    def _end_frame(self, tuner, frame: CallFrame) -> None:
        frame.ended = self._close_window(tuner, frame)
        frame.jit_s = self.state.jit_s - frame.jit_at_start
        self._emit_frame(tuner, frame)

    def _on_profiles(self, tuner, tuning_config, profiles) -> None:
        """The call's buckets, and FlashInfer's winners so far, read under FlashInfer's lock.

        FlashInfer generates profiles holding its tuner lock, so a second thread tuning the same op
        takes its snapshot after the first one's winners are in: its lookups then count as cached.
        """
        frame = self._frame()
        if frame is not None and frame.profiles is None and isinstance(profiles, (list, tuple)):
            frame.profiles, frame.config = list(profiles), tuning_config
            frame.winners_before = [dict(c) for c in self._winner_caches(tuner)]

    def _open_window(self, tuner, frame: CallFrame, profile) -> ProfileWindow:
        started = self._close_window(tuner, frame)
        window = ProfileWindow(profile=profile, started=started, jit_at_start=self.state.jit_s)
        frame.windows.append(window)
        return window

    def _safe(self, what: str, fn, *args):
        """Run profkit's bookkeeping inside FlashInfer's code: what it raises is reported, never passed on."""
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - capture must never change what FlashInfer does
            self._fault(what, exc)
            return None

    def _fault(self, what: str, exc: Exception) -> None:
        problem = f"profkit could not record a {what}: {error_text(exc)}"
        with self.lock:
            for capture in self.captures:
                if len(capture.problems) < _MAX_PROBLEMS and problem not in capture.problems[-8:]:
                    capture.problems.append(problem)
        log.warning(problem, exc_info=exc)

    def _candidate(self, tuner, runner, inputs, tactic, config) -> Candidate:
        repeat = config.profiling_repeat if getattr(config, "profiling_repeat", None) else getattr(tuner, "repeat", None)
        tensor = self.fi["tensor"]
        return Candidate(
            seq=next(self.seq), runner=type(runner).__name__, tactic=self._tactic(tactic),
            shapes=str(tuple(tuple(t.shape) if isinstance(t, tensor) else (0,) for t in inputs)),
            timing=timing_text(config, cold_l2_median=self.fi["cold_l2_median"], repeat=repeat),
            started=_now(),
        )

    def _finish_candidate(self, frame, candidate, error, warnings_seen, jit_before, call_args) -> None:
        candidate.host_s = _now() - candidate.started
        candidate.jit_s = self.state.jit_s - jit_before
        candidate.status = candidate_status(error, candidate.time_ms, warnings_seen, self.fi["oom"])
        if error is not None:
            candidate.time_ms = math.nan
            candidate.error = error_text(error)
            if candidate.status == "oom" and frame is not None:
                frame.saw_oom = True
        elif candidate.status == "fallback":
            candidate.error = next(w for w in warnings_seen if "falling back" in w)[:2000]
        if not isinstance(candidate.time_ms, (int, float)) or not math.isfinite(candidate.time_ms):
            candidate.time_ms = math.nan
        window = frame.window if frame is not None else None
        if window is None:  # timed outside a tuning call (e.g. fused_moe's profile_tactic)
            self._emit("candidates", [{**_candidate_row(candidate), "op": None}])
            return
        window.candidates.append(candidate)
        window.last_call = call_args

    def _close_window(self, tuner, frame: CallFrame) -> float:
        """End the open profile window (if any), time its default, return the time after that."""
        ended = _now()
        window = frame.window
        if window is not None and math.isnan(window.ended):
            window.ended = ended
            window.jit_s = self.state.jit_s - window.jit_at_start
            raced = window.flashinfer_default(type(frame.runners[0]).__name__ if frame.runners else None)
            if (frame.error is None and not frame.saw_oom and raced is None
                    and any(c.time_default for c in self.captures)):
                self._time_default(tuner, frame, window)
                frame.default_s += window.default.host_s if window.default else 0.0
        return _now() if window is not None else ended

    def _time_default(self, tuner, frame: CallFrame, window: ProfileWindow) -> None:
        """Time runners[0] with tactic -1 on this profile's inputs, with FlashInfer's own timer."""
        if window.last_call is None or not frame.runners:
            return
        if getattr(self.fi["module"], "_tune_process_group", None) is not None:
            return  # timing would all-reduce across ranks that are not timing with us
        inputs, args, kwargs = window.last_call
        runner = frame.runners[0]
        config = frame.config
        candidate = self._candidate(tuner, runner, inputs, -1, config)
        candidate.source = "default"
        timer = self.hooks.hook("_profile_single_kernel")
        state = self.state
        error = None
        state.quiet, collected, state.warnings = True, state.warnings, []
        try:
            with getattr(tuner, "_lock", contextlib.nullcontext()):
                # What FlashInfer would call now (a foreign timer too), profkit's layers passing through.
                candidate.time_ms = timer.call_through(tuner, runner, inputs, -1, config, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - profkit's own extra timing must never break tuning
            error = exc
            _clear_cuda_error()
        finally:
            state.quiet = False
            seen, state.warnings = state.warnings, collected
            candidate.host_s = _now() - candidate.started
        candidate.status = candidate_status(error, candidate.time_ms, seen, self.fi["oom"])
        if error is not None:
            candidate.time_ms, candidate.error = math.nan, error_text(error)
        window.default = candidate

    def _winner_caches(self, tuner) -> list[dict]:
        """The dicts FlashInfer stores winners in: v1 profiling_cache and (0.7) the active partition."""
        caches = [tuner.profiling_cache]
        partition = getattr(tuner, "_winner_cache", None)
        if partition is not None:
            active = partition()
            if active is not tuner.profiling_cache:
                caches.append(active)
        return caches

    def _tactic(self, tactic) -> str:
        return schema.tactic_text(self.fi["tactic_json"](tactic))

    def _emit_frame(self, tuner, frame: CallFrame) -> None:
        try:
            builder = RowBuilder(tuner, frame, winner_caches=self._winner_caches,
                                 nearest_profile=type(tuner)._find_nearest_profile,
                                 tactic_json=self.fi["tactic_json"])
            rows = {"candidates": builder.candidate_rows(), "winners": builder.winner_rows(),
                    "tuning": builder.tuning_rows()}
        except Exception as exc:  # noqa: BLE001 - never let bookkeeping change what FlashInfer does
            log.exception("profkit could not record tuning call %s of %s", frame.call, frame.op)
            for capture in list(self.captures):
                capture.problems.append(f"call {frame.call} ({frame.op}): {error_text(exc)}")
            return
        for table, table_rows in rows.items():
            self._emit(table, table_rows)
        for capture in list(self.captures):
            capture._on_call_end()

    def _emit(self, table: str, rows: list[dict]) -> None:
        with self.lock:
            for capture in self.captures:
                capture._rows[table].extend(rows)


_RECORDER = _Recorder()
# A forked child has only the forking thread: a lock another thread held at the fork would stay held.
os.register_at_fork(after_in_child=lambda: setattr(_RECORDER, "lock", threading.Lock()))


def _candidate_row(c: Candidate) -> dict:
    row = {k: getattr(c, k) for k in ("seq", "runner", "tactic", "shapes", "timing", "host_s", "jit_s",
                                      "time_ms", "status", "error", "source")}
    return {**row, "thread": threading.get_ident(), "api": "profile_tactic"}


def _clear_cuda_error() -> None:
    """Clear sticky CUDA errors after a failed default timing, as FlashInfer does after a failed tactic."""
    import torch

    with contextlib.suppress(Exception):
        torch.cuda.synchronize()
    with contextlib.suppress(Exception):
        torch.cuda.cudart().cudaGetLastError()


def _now() -> float:
    import time

    return time.perf_counter()


class Capture:
    """A live capture; after the ``with`` block its frames hold every tuning call made inside it.

    Attributes:
        run_id: identifier stamped on every row.
        problems: tuning calls profkit could not record (FlashInfer itself was unaffected).
    """

    def __init__(self, *, tune: bool = False, cache: str | None = None, time_default: bool = True,
                 run_id: str | None = None, on_call_end=None, defer_env: bool = False):
        self.tune = tune
        self.cache = cache
        self.time_default = time_default
        self.run_id = run_id or new_run_id()
        self.problems: list[str] = []
        self._rows: dict[str, list[dict]] = {"candidates": [], "winners": [], "tuning": []}
        self._env: dict | None = None
        self._started_at: str | None = None
        self._defer_env = defer_env
        self._autotune = None
        self._on_call_end_hook = on_call_end

    def __enter__(self) -> "Capture":
        _RECORDER.open(self)
        self._started_at = utc_now()
        try:
            if not self._defer_env:
                self._env = collect_env(self.run_id, started_at=self._started_at)
            if self.tune:
                import flashinfer

                self._autotune = flashinfer.autotune(True, cache=self.cache)
                self._autotune.__enter__()
        except BaseException:
            _RECORDER.close(self)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self._autotune is not None:
                self._autotune.__exit__(exc_type, exc, tb)
        finally:
            _RECORDER.close(self)

    def row_count(self) -> int:
        """Rows recorded so far, all tables together."""
        return sum(self.row_counts().values())

    def row_counts(self) -> dict[str, int]:
        """Rows recorded so far per table (candidates, winners, tuning)."""
        return {table: len(rows) for table, rows in self._rows.items()}

    def restart(self) -> None:
        """Forget the rows recorded so far and start a new run (a forked child's own capture)."""
        self.run_id = new_run_id()
        self._rows = {table: [] for table in self._rows}
        self._env = None
        self._started_at = utc_now()

    def _on_call_end(self) -> None:
        if self._on_call_end_hook is not None:
            self._on_call_end_hook(self)

    # -- results -----------------------------------------------------------------------------
    def tables(self, *, since: dict[str, int] | None = None, runs: bool = True) -> schema.Tables:
        """The rows recorded so far as profkit Tables (also inside the ``with`` block).

        Args:
            since: rows per table to leave out from the start (the ones already written), so the
                cost is that of the new rows only.
            runs: include the runs row (provenance); False leaves the runs table empty.
        """
        rank = current_rank()
        frames = {}
        for table, rows in self._rows.items():
            start = (since or {}).get(table, 0)
            stamped = [{**row, "run_id": self.run_id, "rank": rank} for row in rows[start:]]
            frames[table] = schema.frame(table, stamped)
        if runs and self._env is None:  # deferred: probing CUDA at entry would break a process that forks later
            self._env = collect_env(self.run_id, started_at=self._started_at)
        frames["runs"] = schema.frame("runs", [self._env] if runs else [])
        return schema.Tables(**frames)

    @property
    def candidates(self):
        return self.tables().candidates

    @property
    def winners(self):
        return self.tables().winners

    @property
    def tuning(self):
        return self.tables().tuning

    @property
    def env(self) -> dict:
        return dict(self._env or {})

    def save(self, path) -> Any:
        """Write the capture as profkit tables (see :meth:`profkit.schema.Tables.save`)."""
        return self.tables().save(path)

    def __repr__(self) -> str:
        state = "recording" if self in _RECORDER.captures else "closed"
        env = self._env or {}  # not collected here when deferred: probing CUDA would break a later fork
        lines = [f"Capture {self.run_id} ({state})  gpu={env.get('gpu') or '?'}  "
                 f"flashinfer={env.get('flashinfer') or '?'}",
                 *schema.summary_lines(self.tables(runs=False))]
        if self.problems:
            lines.append(f"  WARNING: {len(self.problems)} tuning call(s) could not be recorded (FlashInfer was "
                         "unaffected); see .problems")
        return "\n".join(lines)


def capture(*, tune: bool = False, cache: str | None = None, time_default: bool = True,
            run_id: str | None = None) -> Capture:
    """Record FlashInfer's autotuner while the returned context is open.

    Args:
        tune: also open ``flashinfer.autotune(True, cache=cache)`` inside the capture.
        cache: FlashInfer cache JSON to load and save when ``tune`` is on.
        time_default: time ``runners[0]`` with tactic -1 on each profiled bucket, with the tuner's
            own timing function, after FlashInfer's candidates (fills ``default_time_ms``).
        run_id: identifier for the rows; default is the start time plus a random suffix.

    Returns:
        A :class:`Capture`; ``cap.candidates``, ``cap.winners``, ``cap.tuning`` and ``cap.env``
        hold what was recorded, ``cap.save(path)`` writes it.

    Raises:
        ProfkitError: when flashinfer is missing or its AutoTuner lacks a method profkit wraps.
    """
    return Capture(tune=tune, cache=cache, time_default=time_default, run_id=run_id)
