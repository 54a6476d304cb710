"""What profkit's AutoTuner wrappers record during one tuning call, and the rows it turns into.

A :class:`CallFrame` lives while one ``choose_one`` / ``rank_tactics`` call tunes. The wrappers
in :mod:`profkit.sources.capture` feed it events (profiles generated, a profile's inputs
synthesised, a candidate timed, a cache lookup); :class:`RowBuilder` turns them into
candidates / winners / tuning rows once the call has returned or raised. Winners come from
FlashInfer's own winner cache (the entries this call added), never from an argmin of our rows,
which could disagree on ties.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from profkit.schema import tactic_text

# cuDNN runners catch a failing tactic, warn with this text and run tactic -1 instead (GB:5159).
FALLBACK_WARNING = "falling back to default tactic=-1"


@dataclasses.dataclass
class Candidate:
    """One timed (runner, tactic) inside a profile."""

    seq: int
    runner: str
    tactic: str
    shapes: str
    timing: str
    started: float
    host_s: float = math.nan
    jit_s: float = 0.0
    time_ms: float = math.nan
    status: str = "ok"
    error: str = ""
    source: str = "flashinfer"


@dataclasses.dataclass
class ProfileWindow:
    """One profiled bucket: from its input synthesis to the next one (or the call's end)."""

    profile: Any  # FlashInfer's OptimizationProfile
    started: float
    ended: float = math.nan
    synth_s: float = 0.0
    jit_at_start: float = 0.0
    jit_s: float = 0.0
    candidates: list[Candidate] = dataclasses.field(default_factory=list)
    last_call: tuple | None = None  # (inputs, args, kwargs) of its last candidate, to time the default
    default: Candidate | None = None  # profkit's own timing of the default

    def default_candidate(self, default_runner: str | None) -> Candidate | None:
        """The default's timing: FlashInfer's own when it raced (runners[0], -1), else profkit's."""
        return self.flashinfer_default(default_runner) or self.default

    def flashinfer_default(self, default_runner: str | None) -> Candidate | None:
        """FlashInfer's candidate (runners[0], -1), which autotune_v2 races as one of its own."""
        return next((c for c in self.candidates if c.runner == default_runner and c.tactic == "-1"), None)


@dataclasses.dataclass
class CallFrame:
    """Everything seen during one tuning call on one thread."""

    call: int
    parent_call: int | None
    thread: int
    api: str
    op: str
    runners: list  # runner objects; runners[0] with tactic -1 is what runs untuned
    inputs: list  # the caller's real inputs
    config: Any  # TuningConfig; replaced by the effective one (overrides applied) once profiles exist
    started: float
    jit_at_start: float
    winners_before: list[dict] = dataclasses.field(default_factory=list)  # winner caches as the call began
    profiles: list | None = None
    windows: list[ProfileWindow] = dataclasses.field(default_factory=list)
    lookups: list[tuple] = dataclasses.field(default_factory=list)  # search_cache results, in order
    saw_oom: bool = False
    skipped: bool = False
    error: BaseException | None = None
    ended: float = math.nan
    jit_s: float = 0.0
    default_s: float = 0.0

    @property
    def window(self) -> ProfileWindow | None:
        return self.windows[-1] if self.windows else None


def timing_text(config, *, cold_l2_median: bool, repeat: int | None) -> str:
    """How FlashInfer times candidates under ``config``: graph or eager, L2 state, statistic."""
    graph = "cuda_graph" if getattr(config, "use_cuda_graph", False) else "eager"
    cold = bool(getattr(config, "use_cold_l2_cache", False))
    statistic = "median" if cold and cold_l2_median else "mean"
    return f"{graph}, {'cold' if cold else 'hot'} L2, {statistic}" + (f" of {repeat}" if repeat else "")


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def candidate_status(exc: BaseException | None, time_ms: float, warnings: list[str], oom_types) -> str:
    """ok, failed, oom, or fallback (the runner warned and silently ran tactic -1)."""
    if exc is not None:
        return "oom" if isinstance(exc, oom_types) else "failed"
    if any(FALLBACK_WARNING in w for w in warnings):
        return "fallback"
    return "ok" if math.isfinite(time_ms) else "failed"


class RowBuilder:
    """Turn a finished CallFrame into table rows, reading FlashInfer's decisions from the tuner."""

    def __init__(self, tuner, frame: CallFrame, *, winner_caches: Callable, nearest_profile: Callable,
                 tactic_json: Callable):
        self.tuner = tuner
        self.frame = frame
        self._winner_caches = winner_caches
        self._nearest_profile = nearest_profile
        self._tactic_json = tactic_json

    def tactic(self, value) -> str:
        return tactic_text(self._tactic_json(value))

    def _nearest(self, profile) -> tuple:
        """FlashInfer's nearest profile (the winner key's shapes) of an OptimizationProfile."""
        try:
            return tuple(tuple(s) for s in self._nearest_profile(profile.get_opt_shapes(), self.frame.config))
        except Exception:  # noqa: BLE001 - an op-specific bucket mapper failed: keep the opt shapes
            return profile.get_opt_shapes()

    def _where(self, profile) -> dict:
        """profile (nearest-profile text), bucket and bucket_key of an OptimizationProfile."""
        nearest = self._nearest(profile)
        buckets = []
        for spec in getattr(self.frame.config, "dynamic_tensor_specs", ()) or ():
            try:
                buckets.append(int(nearest[spec.input_idx[0]][spec.dim_idx[0]]))
            except (IndexError, TypeError, ValueError):
                buckets.append(None)
        where = {"profile": str(nearest), "bucket": buckets[0] if buckets else None, "bucket_key": str(tuple(buckets))}
        if len(buckets) > 1:
            where.update({f"bucket_{i}": b for i, b in enumerate(buckets)})
        return where

    def _base(self) -> dict:
        f = self.frame
        return {"call": f.call, "thread": f.thread, "api": f.api, "op": f.op}

    def candidate_rows(self) -> list[dict]:
        rows = []
        for window in self.frame.windows:
            where = self._where(window.profile)
            timed = window.candidates + ([window.default] if window.default else [])
            for c in timed:
                row = dataclasses.asdict(c)
                del row["started"]
                rows.append({**self._base(), **where, **row})
        return rows

    def _new_winners(self) -> dict:
        """{profile opt shapes: (key, tactic)} for winners this call's profiling added or replaced.

        Entries without a profile are lookups FlashInfer promoted into the winner cache (an
        autotune_v2 store hit is stored as ``(tactic, None)``): :meth:`_cache_hits` reports those.
        """
        found = {}
        for cache, before in zip(self._winner_caches(self.tuner), self.frame.winners_before):
            for key, value in list(cache.items()):
                if (getattr(key, "custom_op", None) == self.frame.op and before.get(key) is not value
                        and value[1] is not None):
                    found[value[1].get_opt_shapes()] = (key, value[0])
        return found

    def winner_rows(self) -> list[dict]:
        f = self.frame
        decided = self._new_winners()
        hits = self._cache_hits()
        windows = {w.profile.get_opt_shapes(): w for w in f.windows}
        default_runner = type(f.runners[0]).__name__ if f.runners else None
        rows = []
        for profile in f.profiles or []:
            shapes = profile.get_opt_shapes()
            window = windows.get(shapes)
            default = window.default_candidate(default_runner) if window else None
            row = {**self._base(), **self._where(profile), "default_runner": default_runner, "reason": "",
                   "time_ms": math.nan, "status": None, "extras": "",
                   "default_time_ms": default.time_ms if default else math.nan,
                   "timing": window.candidates[0].timing if window and window.candidates else None}
            if shapes in decided:
                key, tactic = decided[shapes]
                row.update(runner=key.runner_class_name, tactic=self.tactic(tactic), extras=str(key.extras),
                           source="profiled")
                row.update(_chosen_candidate(window, row["runner"], row["tactic"]))
            elif shapes in hits:
                row.update(hits[shapes])
            elif window is not None or f.saw_oom:
                row.update(runner=default_runner, tactic="-1", source="fallback",
                           reason="oom_abort" if f.saw_oom else "no_valid_tactic")
            else:
                continue  # never reached: the call raised before this profile
            rows.append(row)
        return rows

    def _cache_hits(self) -> dict:
        """{opt shapes: winner fields} for profiles that a cache lookup answered during this call.

        ``cached``: FlashInfer's winner cache held it before this call; ``store``: the autotune_v2
        managed store answered (FlashInfer then copied it into the winner cache, without a profile);
        ``cache_file``: a v1 cache file loaded with ``autotune(cache=...)``.
        """
        f = self.frame
        lookups = list(f.lookups)
        if f.error is None and not f.saw_oom and lookups:
            lookups = lookups[:-1]  # choose_one's final lookup, on the caller's real shapes
        hits = {}
        for profile, result in zip(f.profiles or [], lookups):
            is_hit, runner_id, tactic = result[0], result[1], result[2]
            if not is_hit:
                continue
            runner = f.runners[runner_id]
            extras = _extras(runner, f.inputs)
            hits[profile.get_opt_shapes()] = {
                "runner": type(runner).__name__, "tactic": self.tactic(tactic), "extras": str(extras),
                "source": self._hit_source(profile, runner, extras),
            }
        return hits

    def _hit_source(self, profile, runner, extras) -> str:
        f = self.frame
        try:
            key = type(self.tuner)._get_cache_key(f.op, runner, profile.get_opt_shapes(), f.config, extras)
        except Exception:  # noqa: BLE001 - a key FlashInfer cannot build here: say only that it was a hit
            key = None
        if key is not None:
            if any(key in before for before in f.winners_before):
                return "cached"
            if any(key in cache for cache in self._winner_caches(self.tuner)):
                return "store"  # promoted into the winner cache by this call's lookup
        file_key = str((f.op, type(runner).__name__, self._nearest(profile), extras))
        return "cache_file" if file_key in getattr(self.tuner, "_file_configs", {}) else "cached"

    def tuning_rows(self) -> list[dict]:
        f = self.frame
        rows = []
        for w in f.windows:
            rows.append({**self._base(), **self._where(w.profile), "kind": "profile",
                         **_breakdown(w.ended - w.started, w.candidates, w.jit_s, w.started, w.synth_s),
                         "synth_s": w.synth_s, "default_s": w.default.host_s if w.default else 0.0,
                         "status": "ok", "error": ""})
        profile_rows = list(rows)
        status = "skipped" if f.skipped else "error" if f.error else "oom_abort" if f.saw_oom else "ok"
        wall_s = f.ended - f.started - f.default_s
        measure_s = sum(r["measure_s"] for r in profile_rows)
        rows.append({**self._base(), "kind": "call", "parent_call": f.parent_call, "profile": "",
                     "wall_s": wall_s, "measure_s": measure_s, "jit_s": f.jit_s,
                     "prep_s": sum(r["prep_s"] for r in profile_rows), "overhead_s": wall_s - measure_s,
                     "synth_s": sum(w.synth_s for w in f.windows), "default_s": f.default_s,
                     "n_candidates": sum(r["n_candidates"] for r in profile_rows),
                     "n_failed": sum(r["n_failed"] for r in profile_rows),
                     "n_profiles": len(f.profiles or []), "n_profiled": len(f.windows),
                     "status": status, "error": error_text(f.error) if f.error else ""})
        return rows


def _chosen_candidate(window: ProfileWindow | None, runner: str, tactic: str) -> dict:
    """time_ms and status of the candidate FlashInfer chose (first minimum if timed twice)."""
    matches = [c for c in (window.candidates if window else []) if c.runner == runner and c.tactic == tactic]
    if not matches:
        return {}
    best = min(matches, key=lambda c: c.time_ms if math.isfinite(c.time_ms) else math.inf)
    return {"time_ms": best.time_ms, "status": best.status}


def _breakdown(wall_s: float, candidates: list[Candidate], jit_s: float, started: float, synth_s: float) -> dict:
    measure_s = sum(c.host_s - c.jit_s for c in candidates)
    return {"wall_s": wall_s, "measure_s": measure_s, "jit_s": jit_s,
            "prep_s": _prep_seconds(candidates, started) - synth_s, "overhead_s": wall_s - measure_s,
            "n_candidates": len(candidates), "n_failed": sum(c.status != "ok" for c in candidates)}


def _prep_seconds(candidates: list[Candidate], started: float) -> float:
    """Host time before each runner's first candidate: get_valid_tactics (cuDNN plan builds), precompile."""
    total, previous_end, previous_runner = 0.0, started, None
    for c in candidates:
        if c.runner != previous_runner:
            total += c.started - previous_end
        previous_end, previous_runner = c.started + c.host_s, c.runner
    return total


def _extras(runner, inputs):
    try:
        return runner.get_cache_key_extras(inputs)
    except Exception:  # noqa: BLE001 - a runner's extras need inputs it could not read: unknown
        return ()
