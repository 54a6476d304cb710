"""The "why this tactic" card: one op x bucket decision, its contenders, noise, cost and environment.

Its verdicts (runner-up against the winner, winner against the default, each contender within
noise or not) are the one comparison rule's (:mod:`profkit.analysis.verdict`): each side is one
timing of one tuning run, judged with the run-to-run spread :func:`~profkit.analysis.noise`
measured from repeated runs; without repeated runs the rule cannot tell a gap from run-to-run
drift, and the card says "not measurable" instead of drawing a band.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from profkit._versions import cudnn_version
from profkit.analysis._frames import DEFAULT_NOISE_PCT, default_rows, flashinfer_rows, require, shapes_of
from profkit.analysis.decisions import noise as _noise
from profkit.analysis.decisions import tuner_ratio_sd
from profkit.analysis.tactics import decode_tactic, tactic_words
from profkit.analysis.verdict import Comparison, compare_two
from profkit.errors import ProfkitError

_ENV_FIELDS = (("gpu", ""), ("driver", "driver"), ("cuda", "CUDA"), ("torch", "torch"),
               ("flashinfer", "flashinfer"), ("cudnn", "cuDNN"), ("cublas", "cuBLAS"))


@dataclasses.dataclass(frozen=True)
class CandidateLine:
    """One timed (runner, tactic) of the card, with its decoded tactic label."""

    runner: str
    tactic: str
    time_ms: float
    desc: str
    status: str = "ok"


@dataclasses.dataclass(frozen=True)
class WinnerCard:
    """Why FlashInfer chose a tactic for one op and bucket.

    Attributes:
        op: FlashInfer custom_op.
        bucket: the bucket (tuned M).
        profile: the nearest-profile text the winner is stored under.
        shape: problem shape label ('N=.. K=..' for GEMMs).
        run_id: the run whose measurements the card shows.
        timing: how FlashInfer timed the candidates.
        top: the fastest candidates, fastest first (``top[0]`` is the winner).
        n_candidates: FlashInfer candidates with a finite time.
        n_failed: candidates without one (failed, oom).
        default_runner: runners[0], what runs untuned with tactic -1.
        default_ms: its time by FlashInfer's timer (NaN when not timed).
        noise_pct: the run-to-run noise (two relative sds of one timing, percent) where
            ``noise_source`` is "repeats"; else the stated threshold, which judges nothing.
        noise_source: "repeats" (estimated from repeated runs: the rule's spread) or "threshold"
            (stated: the card's comparisons are not measurable).
        tuning_s: wall seconds FlashInfer spent on this bucket (NaN when unknown).
        measure_s: of those, seconds measuring candidates.
        prep_s: of those, seconds preparing runners (cuDNN plan builds).
        env: (name, value) pairs of the run's environment.
        winner_words: the winner's tactic in words where its decoder has them (fused MoE tiles).
    """

    op: str
    bucket: int | None
    profile: str
    shape: str | None
    run_id: str | None
    timing: str | None
    top: tuple[CandidateLine, ...]
    n_candidates: int
    n_failed: int
    default_runner: str | None
    default_ms: float
    noise_pct: float
    noise_source: str
    tuning_s: float = math.nan
    measure_s: float = math.nan
    prep_s: float = math.nan
    env: tuple[tuple[str, str], ...] = ()
    winner_words: str = ""

    @property
    def winner(self) -> CandidateLine:
        return self.top[0]

    @property
    def runner_up(self) -> CandidateLine | None:
        return self.top[1] if len(self.top) > 1 else None

    @property
    def gap_pct(self) -> float:
        """Runner-up minus winner, percent of the winner (NaN with one candidate)."""
        up = self.runner_up
        return math.nan if up is None else 100.0 * (up.time_ms / self.winner.time_ms - 1.0)

    @property
    def speedup(self) -> float:
        """default_ms / winner time (NaN when the default was not timed)."""
        return self.default_ms / self.winner.time_ms if self.winner.time_ms > 0 else math.nan

    @property
    def ratio_sd(self) -> float:
        """The rule's spread of one timing ratio (sd of the log); NaN without repeated runs."""
        frame = pd.DataFrame({"noise_pct": [self.noise_pct], "noise_source": [self.noise_source]})
        return float(tuner_ratio_sd(frame)[0])

    @property
    def runner_up_verdict(self) -> Comparison | None:
        """The rule on the runner-up against the winner (None with one candidate)."""
        up = self.runner_up
        return None if up is None else self._compare(up.time_ms, self.winner.time_ms)

    @property
    def default_verdict(self) -> Comparison | None:
        """The rule on the winner against the default (None when the default was not timed)."""
        if math.isnan(self.default_ms) or not self.default_ms > 0:
            return None
        return self._compare(self.winner.time_ms, self.default_ms)

    @property
    def within_noise(self) -> bool:
        """True unless the rule calls the runner-up slower than the winner (within noise, or not measurable)."""
        v = self.runner_up_verdict
        return v is not None and v.verdict != "slower"

    @property
    def slower_than_default(self) -> bool:
        return bool(self.speedup < 1.0) if not math.isnan(self.speedup) else False

    def __repr__(self) -> str:
        unit, scale = _unit([c.time_ms for c in self.top])
        w, up = self.winner, self.runner_up
        lines = [f"WinnerCard {self.op}  bucket={self.bucket}  profile={self.profile}"]
        lines.append(f"  {'winner':<10} {_who(w.runner, w.tactic):<44} {w.time_ms * scale:8.3f} {unit}")
        if self.winner_words:
            lines.append(f"  {'tactic':<10} {self.winner_words}")
        if up is not None:
            lines.append(f"  {'runner-up':<10} {_who(up.runner, up.tactic):<44} {self.gap_pct:+8.2f}%"
                         + _words(self.runner_up_verdict, slower="beyond noise"))
        if self.default_runner is not None and not math.isnan(self.default_ms):
            lines.append(f"  {'default':<10} {_who(self.default_runner, '-1'):<44} speedup {self.speedup:.3f}x"
                         f"  ({self.default_ms * scale:.3f} {unit})" + _words(self.default_verdict))
        lines.append(f"  top {len(self.top)} of {self.n_candidates} candidates"
                     + (f" ({self.n_failed} failed)" if self.n_failed else "") + f", {self._noise_words()}:")
        for i, c in enumerate(self.top, 1):
            rel = 100.0 * (c.time_ms / w.time_ms - 1.0)
            tie = i > 1 and self._compare(c.time_ms, w.time_ms).verdict == "within_noise"
            mark = "  within noise" if tie else ""
            status = "" if c.status in ("ok", None) else f"  [{c.status}]"
            lines.append(f"    {i:>2}  {c.runner:<24} {c.desc[:44]:<44} {c.time_ms * scale:8.3f} {unit}"
                         + (f"  {rel:+6.2f}%" if i > 1 else "") + mark + status)
        if not math.isnan(self.tuning_s):
            lines.append(f"  {'tuning':<10} {self.tuning_s:.2f} s for this bucket: measure {self.measure_s:.2f} s, "
                         f"runner prep {self.prep_s:.2f} s")
        where = "  ".join(x for x in (self.run_id and f"run {self.run_id}", self.shape and f"shape {self.shape}",
                                      self.timing and f"timing {self.timing}") if x)
        if where:
            lines.append(f"  {'measured':<10} {where}")
        if self.env:
            lines.append(f"  {'env':<10} " + "  ".join(f"{k} {v}".strip() for k, v in self.env))
        for warning in self.warnings:
            lines.append(f"  WARNING: {warning}")
        return "\n".join(lines)

    @property
    def warnings(self) -> tuple[str, ...]:
        out = []
        if self.n_failed and self.n_candidates == 1 and self.winner.tactic == "-1":
            out.append(f"every candidate but the default failed ({self.n_failed}): the tuner kept tactic -1, "
                       "so this bucket is not tuned.")
        if self.winner.status not in ("ok", None):
            out.append(f"the winner's status is {self.winner.status!r}: it may have run tactic -1 instead.")
        default = self.default_verdict
        if self.slower_than_default and default is not None and default.verdict == "slower":
            out.append(f"the tuned choice is {100 * (1 - self.speedup):.2f}% slower than the default, beyond noise "
                       "(flashinfer#3537).")
        elif self.slower_than_default and (default is None or default.verdict == "not_measurable"):
            out.append(f"the tuned choice measured {100 * (1 - self.speedup):.2f}% slower than the default "
                       "(flashinfer#3537); one timing of each in one run: not measurable.")
        up = self.runner_up_verdict
        if up is not None and up.verdict == "within_noise":
            out.append("the gap to the runner-up is within run-to-run noise; the choice may flip between runs.")
        return tuple(out)

    def _compare(self, candidate_ms: float, baseline_ms: float) -> Comparison:
        """The rule on two timings of this run: calibrated with the run-to-run spread, else not measurable."""
        sd = self.ratio_sd
        return compare_two([candidate_ms], [baseline_ms], ratio_sd=sd if np.isfinite(sd) else None)

    def _noise_words(self) -> str:
        if self.noise_source != "repeats":
            return "one timing each in one run: the gaps are not measurable (no repeated runs measured the noise)"
        beyond = self._compare(1.0 + 1e-9, 1.0).detectable
        return (f"run-to-run noise {self.noise_pct:.2f}% (from repeated runs; a gap beyond {100 * beyond:.2f}% "
                "is beyond noise)")


def _words_beyond_desc(line: CandidateLine) -> str:
    """The winner's tactic in words, where its decoder says more than the short label (fused MoE tiles)."""
    words = tactic_words(line.runner, line.tactic)
    return "" if words in (line.desc, line.tactic) else words


def _words(comparison: Comparison | None, *, faster: str = "faster beyond noise",
           slower: str = "slower beyond noise") -> str:
    """The rule's verdict on a card line: two spaces and its words, empty without a comparison."""
    if comparison is None:
        return ""
    words = {"faster": faster, "slower": slower, "within_noise": "within noise", "not_measurable": "not measurable"}
    return f"  {words[comparison.verdict]}"


def _who(runner: str, tactic: str) -> str:
    return f"{runner} tactic={tactic}"


def _unit(times_ms) -> tuple[str, float]:
    finite = [t for t in times_ms if t is not None and np.isfinite(t)]
    if finite and max(finite) < 1.0:
        return "us", 1000.0
    return "ms", 1.0


def winner_card(candidates: pd.DataFrame, *, op: str, bucket: int, shape: str | None = None,
                profile: str | None = None, run_id: str | None = None, k: int = 5,
                tuning: pd.DataFrame | None = None, runs: pd.DataFrame | None = None,
                noise: pd.DataFrame | None = None,
                rel_threshold: float = DEFAULT_NOISE_PCT / 100) -> WinnerCard:
    """Build the "why this tactic" card for one op x bucket decision.

    Args:
        candidates: a candidates table (one or several runs; other runs of the same profile
            feed the noise estimate).
        op: FlashInfer custom_op.
        bucket: the bucket (tuned M).
        shape: problem shape ('N=4096 K=4096'), needed when the op was tuned for several.
        profile: nearest-profile text, an alternative to ``shape``.
        run_id: the run to show, needed when several runs tuned this profile.
        k: how many of the fastest candidates to list.
        tuning: the tuning table, to add the bucket's tuning time.
        runs: the runs table, to add the environment.
        noise: noise estimate from :func:`profkit.analysis.noise`.
        rel_threshold: relative band where no repeats exist (0.02 = 2%).

    Returns:
        A :class:`WinnerCard`; print it in a notebook cell.

    Raises:
        ProfkitError: when nothing matches, or the selection is ambiguous (the message lists the
            shapes or runs to choose from).
    """
    require(candidates, ("run_id", "op", "profile", "bucket", "runner", "tactic", "time_ms"), "candidates")
    if k < 1:
        raise ProfkitError(f"k must be at least 1, got {k}")
    of_op = candidates[(candidates["op"].astype("string") == op).fillna(False).to_numpy(dtype=bool)]
    at_bucket = (of_op["bucket"] == bucket).fillna(False).to_numpy(dtype=bool)
    c = of_op[at_bucket].copy()
    if c.empty:
        have = sorted(of_op["bucket"].dropna().unique().tolist())
        raise ProfkitError(f"no candidates for op {op!r} at bucket {bucket}; buckets of {op}: {have or 'none'}")
    # Labelled over all the op's buckets: a non-GEMM shape ('((*, 64), ...)', MoE) is what varies across them.
    c["shape"] = shapes_of(of_op).to_numpy()[at_bucket]
    if profile is not None:
        c = c[(c["profile"].astype("string") == profile).fillna(False).to_numpy(dtype=bool)]
    if shape is not None:
        c = c[(c["shape"].astype("string") == shape).fillna(False).to_numpy(dtype=bool)]
    profiles = c["profile"].dropna().unique()
    if len(profiles) != 1:
        shapes = sorted(c["shape"].dropna().unique()) if len(profiles) else []
        raise ProfkitError(f"{op} bucket {bucket}: {len(profiles)} profiles match"
                           + (f"; pass shape= one of {', '.join(shapes)}" if shapes else
                              f" shape={shape!r} profile={profile!r}"))
    band = noise if noise is not None else _noise(c, rel_threshold=rel_threshold)
    runs_here = c["run_id"].dropna().unique()
    if run_id is None:
        if len(runs_here) != 1:
            raise ProfkitError(f"{op} bucket {bucket}: {len(runs_here)} runs timed it; pass run_id= one of "
                               + ", ".join(sorted(runs_here)))
        run_id = str(runs_here[0])
    mine = c[(c["run_id"].astype("string") == run_id).fillna(False).to_numpy(dtype=bool)]
    if mine.empty:
        raise ProfkitError(f"{op} bucket {bucket}: run {run_id!r} did not time it; runs: {', '.join(sorted(runs_here))}")
    if "call" in mine.columns and mine["call"].nunique() > 1:
        mine = mine[mine["call"] == mine["call"].min()]
    fi = flashinfer_rows(mine)
    times = fi["time_ms"].to_numpy(dtype=float)
    finite = fi[np.isfinite(times)]
    if finite.empty:
        raise ProfkitError(f"{op} bucket {bucket} run {run_id}: no candidate has a finite time")
    seq = finite["seq"] if "seq" in finite.columns else pd.Series(np.arange(len(finite)), index=finite.index)
    ranked = finite.assign(_seq=pd.to_numeric(seq, errors="coerce").to_numpy()).sort_values(
        ["time_ms", "_seq"], kind="stable")
    top = tuple(CandidateLine(runner=str(r.runner), tactic=str(r.tactic), time_ms=float(r.time_ms),
                              desc=decode_tactic(r.runner, r.tactic)["tactic_desc"] or str(r.tactic),
                              status=str(getattr(r, "status", "ok")) if not pd.isna(getattr(r, "status", "ok")) else "ok")
                for r in ranked.head(k).itertuples(index=False))
    default = default_rows(mine)
    if default.empty:  # runners that offer -1 among their own tactics (SM90 fused MoE): FlashInfer timed it
        default = fi[(fi["tactic"].astype("string") == "-1").fillna(False).to_numpy(dtype=bool) & np.isfinite(times)]
    prof = str(profiles[0])
    n = band[(band["op"].astype("string") == op) & (band["profile"].astype("string") == prof)]
    noise_pct = float(n["noise_pct"].iloc[0]) if len(n) else 100.0 * rel_threshold
    noise_source = str(n["noise_source"].iloc[0]) if len(n) else "threshold"
    tuning_s = measure_s = prep_s = math.nan
    if tuning is not None and not tuning.empty:
        t = tuning[((tuning["run_id"].astype("string") == run_id) & (tuning["kind"].astype("string") == "profile")
                    & (tuning["op"].astype("string") == op) & (tuning["profile"].astype("string") == prof))
                   .fillna(False).to_numpy(dtype=bool)]
        if len(t):
            tuning_s, measure_s, prep_s = (float(t[col].iloc[0]) for col in ("wall_s", "measure_s", "prep_s"))
    env: tuple = ()
    if runs is not None and not runs.empty:
        r = runs[(runs["run_id"].astype("string") == run_id).fillna(False).to_numpy(dtype=bool)]
        if len(r):
            row = r.iloc[0]
            env = tuple((label, cudnn_version(row[field]) if field == "cudnn" else str(row[field]))
                        for field, label in _ENV_FIELDS
                        if field in r.columns and not pd.isna(row[field]))
    timing = mine["timing"].dropna().iloc[0] if "timing" in mine.columns and mine["timing"].notna().any() else None
    return WinnerCard(
        op=op, bucket=int(bucket), profile=prof, shape=str(c["shape"].iloc[0]) if c["shape"].notna().any() else None,
        run_id=run_id, timing=None if timing is None else str(timing), top=top, n_candidates=len(finite),
        n_failed=int(len(fi) - len(finite)),
        default_runner=str(default["runner"].iloc[0]) if len(default) else None,
        default_ms=float(default["time_ms"].iloc[0]) if len(default) else math.nan,
        noise_pct=noise_pct, noise_source=noise_source, tuning_s=tuning_s, measure_s=measure_s, prep_s=prep_s,
        env=env, winner_words=_words_beyond_desc(top[0]))
