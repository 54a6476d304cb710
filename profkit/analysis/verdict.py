"""One rule for every "faster / slower / within noise" that profkit prints: docs/comparison_rule.md.

The unit of replication is a *unit*: a pass of a state in ``profkit step`` (consecutive repetitions
of one state between other states' passes), a process in ``profkit verify``. Repetitions inside a
unit share its drift, so they are summarised by their median and never counted as units. On the
log of the unit medians the rule takes:

- *paired* (units of both sides share an id, e.g. pass 0, 1, 2 of interleaved states): Student t
  on the per-unit differences, so slow drift common to a pass pair cancels;
- *unpaired* (enough units, no shared ids, e.g. states in separate processes): Welch t;
- *calibrated* (too few units, and the caller passes ``ratio_sd``, the spread of one unit's log
  ratio measured on repeated A/A data): a normal interval of that known spread;
- else *not measurable*: one pass of A then one pass of B cannot tell a change from drift.

The effect is ``candidate / baseline - 1`` (ratio of the geometric means of the unit medians;
negative = faster for times). A verdict is ``faster`` or ``slower`` only when the interval at
``confidence`` excludes 0 *and* the effect is larger than ``floor`` (the drift floor: the order
effect seen in A/A data, below which no change is acted on). ``detectable`` is the smallest change
the point could have called: max(the interval's half-width, the floor).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Sequence

import numpy as np
import pandas as pd

from profkit.analysis._frames import require
from profkit.errors import ProfkitError

VERDICTS = ("faster", "slower", "within_noise", "not_measurable")
# Two-sided confidence of the interval. On the shipped A/A sets it gives 0 of 48 MoE points and
# 0 of 13 dense same-kernel points beyond noise (scripts/calibrate_rule.py).
CONFIDENCE = 0.95
# Fewer units per side than this, and no calibrated spread: not measurable. With 3 passes each
# (profkit step's interleaved default) the paired t has 2 degrees of freedom.
MIN_UNITS = 3
# Relative changes below this are never called. The largest systematic A/A effect among the MoE
# A/A points (identical kernels, fixed order in each pass) is 0.33% (Qwen3-30B-A3B decode 64).
DRIFT_FLOOR = 0.005
# Spread (sd of the log) of a candidate/default ratio measured in one ``profkit verify`` process,
# from the shipped verify tables' 6,780 repeats (same op, shape, M, runner, tactic and default timed
# in two processes): the 95th percentile of |log ratio difference| / (1.96 * sqrt(2)), the largest
# over the pairs of verify sets (policy~sweep: 0.0340; all pairs pooled: 0.0311), rounded up, so
# that no pair of sets differs beyond the band at more than 5%. scripts/calibrate_rule.py recomputes it.
VERIFY_RATIO_SD = 0.035

DESIGNS = ("paired", "unpaired", "calibrated", "too_few_units")
RESULT_COLUMNS = {
    "baseline": "string", "value": "float64", "baseline_value": "float64", "effect": "float64",
    "effect_lo": "float64", "effect_hi": "float64", "verdict": "string", "n": "Int64", "n_baseline": "Int64",
    "design": "string", "detectable": "float64", "note": "string",
}


@dataclass(frozen=True)
class Comparison:
    """One candidate against its baseline under the rule.

    Attributes:
        effect: candidate / baseline - 1 (negative = faster for times); NaN without data.
        effect_lo: lower end of the interval of ``effect`` (NaN when not measurable).
        effect_hi: upper end of the interval.
        verdict: one of :data:`VERDICTS`.
        n: candidate units.
        n_baseline: baseline units.
        design: one of :data:`DESIGNS`.
        detectable: smallest relative change this design could have called (NaN when not measurable).
        note: why the point is not measurable; empty otherwise.
    """

    effect: float
    effect_lo: float
    effect_hi: float
    verdict: str
    n: int
    n_baseline: int
    design: str
    detectable: float
    note: str = ""

    def __str__(self) -> str:
        units = f"{self.n} vs {self.n_baseline} units, {self.design.replace('_', ' ')}"
        if self.verdict == "not_measurable":
            return f"not measurable ({units}): {self.note}" if self.note else f"not measurable ({units})"
        return (f"{self.verdict.replace('_', ' ')}: {100 * self.effect:+.2f}% "
                f"[{100 * self.effect_lo:+.2f}%, {100 * self.effect_hi:+.2f}%] ({units}; "
                f"detectable {100 * self.detectable:.2f}%)")


def compare_two(candidate: Sequence[float], baseline: Sequence[float], *, paired: bool = False,
                ratio_sd: float | None = None, floor: float = DRIFT_FLOOR, confidence: float = CONFIDENCE,
                min_units: int = MIN_UNITS) -> Comparison:
    """Compare two samples of unit values (one value per unit, e.g. pass medians) under the rule.

    Args:
        candidate: the candidate's unit values (positive; NaN dropped).
        baseline: the baseline's unit values.
        paired: the i-th values of both come from the same block (e.g. pass i of interleaved
            states); both must then have the same length.
        ratio_sd: calibrated sd of the log ratio of one candidate unit to one baseline unit, used
            when there are too few units to estimate the spread; None: such points are not measurable.
        floor: the drift floor (relative).
        confidence: two-sided confidence of the interval.
        min_units: fewer units than this per side estimate no spread.

    Returns:
        A :class:`Comparison`.
    """
    _check_rule(floor=floor, confidence=confidence, min_units=min_units)
    a = np.asarray(candidate, dtype=float)
    b = np.asarray(baseline, dtype=float)
    if paired:
        if len(a) != len(b):
            raise ProfkitError(f"paired samples need equal lengths, found {len(a)} candidate and {len(b)} "
                               f"baseline values; pass paired=False")
        keep = np.isfinite(a) & np.isfinite(b)
        a, b = a[keep], b[keep]
    else:
        a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    _check_positive(np.concatenate([a, b]), "sample")
    row = _design(np.log(a), np.log(b), paired=paired, ratio_sd=ratio_sd, min_units=min_units)
    out = _decide(np.array([row["d"]]), np.array([row["se"]]), np.array([row["df"]]), floor=floor,
                  confidence=confidence)
    return Comparison(effect=float(out["effect"][0]), effect_lo=float(out["effect_lo"][0]),
                      effect_hi=float(out["effect_hi"][0]), verdict=str(out["verdict"][0]), n=len(a),
                      n_baseline=len(b), design=row["design"], detectable=float(out["detectable"][0]),
                      note=row["note"] if out["verdict"][0] == "not_measurable" else "")


def compare_samples(frame: pd.DataFrame, *, by: Sequence[str], label_col: str, baseline: str, value_col: str,
                    unit_col: str | None = None, paired: bool | str = "auto", ratio_sd: float | None = None,
                    floor: float = DRIFT_FLOOR, confidence: float = CONFIDENCE,
                    min_units: int = MIN_UNITS) -> pd.DataFrame:
    """Compare every label with ``baseline`` inside each ``by`` group, under the one rule.

    Rows of one (by..., label, unit) are repetitions of a unit: their median is the unit's value.
    Without ``unit_col`` every row is a unit of its own (e.g. rows that already are pass medians,
    or one process each).

    Args:
        frame: one row per measurement (positive ``value_col``; NaN rows are left out).
        by: the columns of one comparison point, e.g. model, dtype, phase, tokens.
        label_col: the column naming what is compared (a state, a run, a candidate).
        baseline: the label every other label is compared with.
        value_col: the measured value (a time: smaller is faster).
        unit_col: the unit of replication (e.g. a pass id unique within its process). Units of
            the two sides with the same id are paired (``paired="auto"``) when at least
            ``min_units`` ids are shared.
        paired: "auto", True (pair or fall back to not measurable) or False (never pair).
        ratio_sd: calibrated sd of one unit's log ratio (see :func:`compare_two`).
        floor: the drift floor (relative).
        confidence: two-sided confidence of the interval.
        min_units: fewer units than this per side estimate no spread.

    Returns:
        One row per (by..., label != baseline) whose group has baseline rows, sorted by by, label:
        the ``by`` columns, ``label_col``, ``baseline``, ``value`` and ``baseline_value`` (geometric
        means of the unit values, in ``value_col``'s unit), ``effect`` (value / baseline_value - 1),
        ``effect_lo``, ``effect_hi``, ``verdict`` (faster, slower, within_noise or not_measurable),
        ``n`` and ``n_baseline`` (units), ``design`` (paired, unpaired, calibrated or
        too_few_units), ``detectable`` (the smallest relative change the point could have
        called) and ``note`` (why a point is not measurable).
    """
    by = list(by)
    require(frame, [*by, label_col, value_col] + ([unit_col] if unit_col else []), "samples")
    _check_rule(floor=floor, confidence=confidence, min_units=min_units)
    if paired not in ("auto", True, False):
        raise ProfkitError(f"paired must be 'auto', True or False, found {paired!r}")
    columns = {**{c: frame[c].dtype for c in by}, label_col: "string", **RESULT_COLUMNS}
    rows = frame[frame[value_col].notna().to_numpy(dtype=bool)]
    _check_positive(rows[value_col].to_numpy(dtype=float), value_col)
    if rows.empty:
        return _empty(columns)
    keys = [*by, label_col]
    unit = unit_col or "_row"
    if unit_col is None:
        rows = rows.assign(_row=rows.groupby(keys, dropna=False, sort=False).cumcount())
    medians = rows.groupby([*keys, unit], dropna=False, sort=True, observed=True)[value_col].median().reset_index()
    # Sorted by point, label and unit: each (point, label) is one run of rows. Plain arrays from here on.
    values = medians[value_col].to_numpy(dtype=float)
    units = _unit_codes(medians[unit])
    label_of = medians.groupby(keys, dropna=False, sort=False, observed=True).ngroup().to_numpy()
    point_of = medians.groupby(by, dropna=False, sort=False, observed=True).ngroup().to_numpy() if by \
        else np.zeros(len(medians), dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, label_of[1:] != label_of[:-1]])
    ends = np.r_[starts[1:], len(medians)]
    labels = medians[label_col].to_numpy(dtype=object)
    point_values = medians[by].to_numpy(dtype=object) if by else np.empty((len(medians), 0), dtype=object)
    out, designs = [], []
    for first, last in _runs(point_of[starts]):
        segments = list(zip(starts[first:last], ends[first:last]))
        base = next(((i, j) for i, j in segments if _same_label(labels[i], baseline)), None)
        if base is None:
            continue
        b_units, b_values = units[base[0]:base[1]], values[base[0]:base[1]]
        for i, j in segments:
            if _same_label(labels[i], baseline):
                continue
            a_units, a_values = units[i:j], values[i:j]
            shared, ia, ib = np.intersect1d(a_units, b_units, assume_unique=True, return_indices=True)
            pair = paired is True or (paired == "auto" and unit_col is not None and len(shared) >= min_units)
            a, b = (a_values[ia], b_values[ib]) if pair else (a_values, b_values)
            row = _design(np.log(a), np.log(b), paired=pair, ratio_sd=ratio_sd, min_units=min_units)
            designs.append(row)
            out.append({**dict(zip(by, point_values[i])), label_col: labels[i], "baseline": baseline,
                        "value": float(np.exp(np.mean(np.log(a_values)))),
                        "baseline_value": float(np.exp(np.mean(np.log(b_values)))),
                        "n": len(a), "n_baseline": len(b), "design": row["design"], "note": row["note"]})
    if not out:
        return _empty(columns)
    decided = _decide(np.array([r["d"] for r in designs]), np.array([r["se"] for r in designs]),
                      np.array([r["df"] for r in designs]), floor=floor, confidence=confidence)
    result = pd.DataFrame(out).assign(**decided)
    result["note"] = result["note"].where(result["verdict"] == "not_measurable", "")
    result = result[list(columns)]
    result = result.astype({c: t for c, t in columns.items() if c not in by})
    return result.sort_values([*by, label_col], kind="stable").reset_index(drop=True)


def compare_values(candidate, baseline, *, ratio_sd, floor: float = DRIFT_FLOOR,
                   confidence: float = CONFIDENCE) -> pd.DataFrame:
    """The rule for single measurements of each side with a calibrated spread, row by row.

    For designs of one unit per side (a verify process, a tuning run) whose spread is known from
    repeated A/A data: a normal interval of ``ratio_sd`` around the log ratio.

    Args:
        candidate: the candidate's values (array-like; positive).
        baseline: the baseline's values, same length.
        ratio_sd: sd of the log ratio of one candidate to one baseline measurement: a scalar or
            one per row; NaN rows are not measurable.
        floor: the drift floor (relative).
        confidence: two-sided confidence of the interval.

    Returns:
        One row per input position (same order, a fresh RangeIndex): effect, effect_lo,
        effect_hi, verdict, detectable.
    """
    _check_rule(floor=floor, confidence=confidence, min_units=1)
    a = np.asarray(candidate, dtype=float)
    b = np.asarray(baseline, dtype=float)
    if a.shape != b.shape:
        raise ProfkitError(f"candidate and baseline need the same length, found {len(a)} and {len(b)}")
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where((a > 0) & (b > 0), np.log(np.where(a > 0, a, 1.0)) - np.log(np.where(b > 0, b, 1.0)), np.nan)
    se = np.broadcast_to(np.asarray(ratio_sd, dtype=float), d.shape)
    out = _decide(d, se, np.full(d.shape, np.inf), floor=floor, confidence=confidence)
    return pd.DataFrame(out).astype({"verdict": "string"})


RATIO_COLUMNS = {"effect": "float64", "effect_lo": "float64", "effect_hi": "float64", "verdict": "string",
                 "n": "Int64", "design": "string", "detectable": "float64", "note": "string"}


def compare_ratios(frame: pd.DataFrame, *, by: Sequence[str], log_ratio_col: str = "log_ratio",
                   ratio_sd_col: str | None = None, floor: float = DRIFT_FLOOR, confidence: float = CONFIDENCE,
                   min_units: int = MIN_UNITS) -> pd.DataFrame:
    """The rule on paired units given as log ratios, one comparison per ``by`` group.

    Each row is one unit (a tuning run, a process) that timed both sides: ``log(candidate /
    baseline)`` in that unit, repetitions inside it already summarised. This is
    :func:`compare_two` with ``paired=True`` on every group at once: ``min_units`` units or more
    give the paired t; fewer, with a calibrated ``ratio_sd``, the normal interval of that spread
    (``ratio_sd / sqrt(n)``); fewer without one, not measurable.

    Args:
        frame: one row per unit; NaN log ratios are left out.
        by: the columns of one comparison (e.g. op, shape, bucket).
        log_ratio_col: the unit's log ratio, candidate over baseline.
        ratio_sd_col: calibrated sd of one unit's log ratio (NaN: none); the group's mean is used.
        floor: the drift floor (relative).
        confidence: two-sided confidence of the interval.
        min_units: fewer units than this estimate no spread.

    Returns:
        One row per group with a finite log ratio, sorted by ``by``: the ``by`` columns and
        :data:`RATIO_COLUMNS` (effect = candidate / baseline - 1, effect_lo, effect_hi, verdict,
        n units, design (paired, calibrated or too_few_units), detectable, note).
    """
    by = list(by)
    require(frame, [*by, log_ratio_col] + ([ratio_sd_col] if ratio_sd_col else []), "log ratios")
    _check_rule(floor=floor, confidence=confidence, min_units=min_units)
    columns = {**{c: frame[c].dtype for c in by}, **RATIO_COLUMNS}
    values = pd.to_numeric(frame[log_ratio_col], errors="coerce").astype(float)
    rows = frame.assign(_d=values, _sd=(pd.to_numeric(frame[ratio_sd_col], errors="coerce").astype(float)
                                        if ratio_sd_col else np.nan))
    rows = rows[np.isfinite(values.to_numpy(dtype=float))]
    if rows.empty:
        return _empty(columns)
    g = rows.groupby(by, sort=True, observed=True, dropna=False)
    stats = g.agg(n=("_d", "size"), d=("_d", "mean"), sd=("_d", "std"), ratio_sd=("_sd", "mean")).reset_index()
    return compare_ratio_stats(stats, by=by, floor=floor, confidence=confidence, min_units=min_units)


def compare_ratio_stats(stats: pd.DataFrame, *, by: Sequence[str], floor: float = DRIFT_FLOOR,
                        confidence: float = CONFIDENCE, min_units: int = MIN_UNITS) -> pd.DataFrame:
    """The rule on paired units already summarised per group: :func:`compare_ratios` from its sufficient statistics.

    For units summarised where they lie (a DuckDB query over a fleet's runs, :mod:`profkit.query`), so
    that the units never travel: the same designs, intervals and verdicts as :func:`compare_ratios` on the
    units themselves.

    Args:
        stats: one row per comparison: the ``by`` columns, ``n`` (units), ``d`` (their mean log ratio,
            candidate over baseline), ``sd`` (its standard deviation across units, ddof 1; NaN for one unit)
            and ``ratio_sd`` (calibrated sd of one unit's log ratio; NaN: none).
        by: the columns of one comparison.
        floor: the drift floor (relative).
        confidence: two-sided confidence of the interval.
        min_units: fewer units than this estimate no spread.

    Returns:
        One row per ``stats`` row with at least one unit, in its order: the ``by`` columns and
        :data:`RATIO_COLUMNS`.
    """
    by = list(by)
    require(stats, [*by, "n", "d", "sd", "ratio_sd"], "ratio statistics")
    _check_rule(floor=floor, confidence=confidence, min_units=min_units)
    columns = {**{c: stats[c].dtype for c in by}, **RATIO_COLUMNS}
    stats = stats[pd.to_numeric(stats["n"], errors="coerce").fillna(0).to_numpy(dtype=float) >= 1]
    if stats.empty:
        return _empty(columns)
    n = stats["n"].to_numpy(dtype=float)
    paired = n >= min_units
    calibrated = ~paired & np.isfinite(stats["ratio_sd"].to_numpy(dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.where(paired, stats["sd"].to_numpy(dtype=float) / np.sqrt(n),
                      np.where(calibrated, stats["ratio_sd"].to_numpy(dtype=float) / np.sqrt(n), np.nan))
    df = np.where(paired, n - 1.0, np.where(calibrated, math.inf, np.nan))
    decided = _decide(stats["d"].to_numpy(dtype=float), se, df, floor=floor, confidence=confidence)
    design = np.where(paired, "paired", np.where(calibrated, "calibrated", "too_few_units"))
    note = [f"{int(k)} candidate and {int(k)} baseline paired units, fewer than {min_units} per side: the spread "
            f"between units (drift between passes or processes) is not sampled" if v == "not_measurable" else ""
            for k, v in zip(n, decided["verdict"])]
    out = stats[by].assign(**decided, n=n.astype(int), design=design, note=note)
    return out[list(columns)].astype({c: t for c, t in columns.items() if c not in by}).reset_index(drop=True)


def within_noise(verdict) -> np.ndarray:
    """True where a verdict is neither faster nor slower (within noise, or not measurable)."""
    v = pd.Series(verdict, dtype="string").fillna("not_measurable")
    return (~v.isin(["faster", "slower"])).to_numpy(dtype=bool)


def ratio_sd_from_repeats(differences, groups=None) -> float:
    """Calibrated ``ratio_sd`` from A/A repeats: log ratios of one comparison measured in two units.

    Each difference is (log ratio in unit 1) - (log ratio in unit 2) of the same comparison; its
    95th percentile of |difference| / (1.96 * sqrt(2)) is the sd that makes a one-unit interval at
    95% as wide as the A/A repeats require, heavy tails included. With ``groups`` (one label per
    difference, e.g. which two data sets the units came from), the largest such sd over the groups
    of 20 or more differences, so that no group is called beyond noise at more than 5%. NaN when
    no group has 20 values.
    """
    d = np.abs(np.asarray(differences, dtype=float))
    labels = np.zeros(len(d), dtype=int) if groups is None else pd.factorize(np.asarray(groups))[0]
    keep = np.isfinite(d)
    d, labels = d[keep], labels[keep]
    fitted = [np.quantile(d[labels == g], 0.95) for g in np.unique(labels) if (labels == g).sum() >= 20]
    if not fitted:
        return float("nan")
    return float(max(fitted) / (NormalDist().inv_cdf(0.975) * math.sqrt(2)))


def t_quantile(p: float, df: float) -> float:
    """Quantile of Student's t with ``df`` degrees of freedom (``df = inf``: the normal)."""
    return _t_quantile(round(float(p), 12), round(float(df), 9))


# -- A/A calibration ---------------------------------------------------------------------------
AA_STEP_COLUMNS = {
    "model": "string", "dtype": "string", "source": "string", "phase": "string", "tokens": "Int64",
    "kind": "string", "series": "string", "baseline": "string", "old_beyond_noise": "boolean", "effect": "float64",
    "effect_lo": "float64", "effect_hi": "float64", "verdict": "string", "n": "Int64", "n_baseline": "Int64",
    "design": "string", "detectable": "float64",
}
AA_VERIFY_COLUMNS = {
    "op": "string", "shape": "string", "m": "Int64", "runner": "string", "tactic": "string", "source_a": "string",
    "source_b": "string", "log_ratio_a": "float64", "log_ratio_b": "float64", "old_a": "string", "old_b": "string",
}


def old_step_rule(candidate, baseline) -> bool:
    """The step rule profkit used before this one: |median difference| > the larger max - min of the two samples."""
    a, b = np.asarray(candidate, dtype=float), np.asarray(baseline, dtype=float)
    return bool(abs(np.median(a) - np.median(b)) > max(np.ptp(a), np.ptp(b)))


def aa_step_points(bench: pd.DataFrame, *, kinds: Sequence[str] = ("series", "same_kernels", "single_pass"),
                   **rule) -> pd.DataFrame:
    """Every A/A comparison (identical kernels) in ``profkit step`` rows, by the old and by this rule.

    Kinds: ``series`` (a state given twice, ``untuned-2`` against ``untuned``: interleaved passes),
    ``same_kernels`` (a state whose recorded picks equal the untuned ones at that size, against
    untuned: the design of a real comparison) and ``single_pass`` (pass i against pass j of one
    series in one process: the one-pass-each design). ``kinds`` picks among them; ``rule`` goes to
    :func:`compare_two`.

    Returns:
        :data:`AA_STEP_COLUMNS`: one row per comparison; ``old_beyond_noise`` is :func:`old_step_rule`
        on the repetitions (pooled over passes for series and same_kernels). Sorted by source, phase,
        tokens, kind, series.
    """
    from profkit.analysis.step import UNIT_COLUMNS, step_units

    require(bench, ("model", "dtype", "phase", "tokens", "state", "step_ms"), "bench")
    used = [c for c in ("model", "dtype", "phase", "tokens", "state", "step_ms", "picks", *UNIT_COLUMNS)
            if c in bench.columns]
    rows = step_units(bench[used].dropna(subset=["step_ms"]))  # a few columns: each filter or sort takes every one
    if "source" not in rows.columns:
        rows = rows.assign(source="")
    rows = rows.reset_index(drop=True)
    cols = {c: rows[c].to_numpy(dtype=object) for c in ("model", "dtype", "series", "unit", "state")}
    ms = rows["step_ms"].to_numpy(dtype=float)
    picks = rows["picks"].fillna("").astype(str).to_numpy(dtype=object) if "picks" in rows.columns else None
    out = []
    for (source, phase, tokens), idx in rows.groupby(["source", "phase", "tokens"], sort=True).indices.items():
        where = {"model": cols["model"][idx[0]], "dtype": cols["dtype"][idx[0]], "source": source, "phase": phase,
                 "tokens": tokens}
        of_series: dict = {}
        for i in idx:
            of_series.setdefault(cols["series"][i], []).append(i)
        pairs = [(s, s.rsplit("-", 1)[0]) for s in sorted(of_series) if "series" in kinds]
        pairs = [(s, base) for s, base in pairs if s.rsplit("-", 1)[-1].isdigit() and base in of_series]
        same = _same_kernel_series(of_series, picks, cols["state"]) if "same_kernels" in kinds else []
        # Unit medians of the series compared only (most sizes have no A/A pair).
        needed = {x for pair in pairs for x in pair} | ({"untuned", *same} if same else set()) | (
            set(of_series) if "single_pass" in kinds else set())
        units = {s: _unit_medians(cols["unit"][at], ms[at]) for s, at in of_series.items() if s in needed}
        reps = {s: ms[at] for s, at in of_series.items()}
        for s, base in pairs:
            out.append(_aa_row(where, "series", s, base, units, reps, rule))
        for s in same:
            out.append(_aa_row(where, "same_kernels", s, "untuned", units, reps, rule))
        for s in sorted(units) if "single_pass" in kinds else ():
            at = np.asarray(of_series[s])
            passes = [(u, ms[at[cols["unit"][at] == u]]) for u in units[s][0]]
            for i in range(len(passes)):
                for j in range(i + 1, len(passes)):
                    (ui, a), (uj, b) = passes[i], passes[j]
                    c = compare_two([np.median(b)], [np.median(a)], **rule)
                    out.append({**where, "kind": "single_pass", "series": f"{s}@{uj}", "baseline": f"{s}@{ui}",
                                "old_beyond_noise": old_step_rule(b, a), **_fields(c)})
    if not out:
        return _empty(AA_STEP_COLUMNS)
    frame = pd.DataFrame(out)[list(AA_STEP_COLUMNS)].astype(AA_STEP_COLUMNS)
    return frame.sort_values(["source", "phase", "tokens", "kind", "series"], kind="stable").reset_index(drop=True)


def aa_verify_pairs(verify: pd.DataFrame) -> pd.DataFrame:
    """Repeats of one verify comparison: a candidate and its default, both timed in two processes.

    For every (op, shape, m, runner, tactic) other than the default that two verify files
    (``source``, one process each) timed together with the default at that M: the log ratio
    candidate / default in each, and the old verdict (non-overlapping p10-p90 bands) in each.
    :func:`ratio_sd_from_repeats` of ``log_ratio_a - log_ratio_b`` calibrates ``VERIFY_RATIO_SD``.

    Returns:
        :data:`AA_VERIFY_COLUMNS`, sorted by op, shape, m, runner, tactic, source_a, source_b.
    """
    require(verify, ("source", "op", "shape", "m", "runner", "tactic", "default", "serving_ms", "serving_p10_ms",
                     "serving_p90_ms"), "verify")
    timed = verify[verify["serving_ms"].notna().to_numpy(dtype=bool)]
    if "routing" in timed.columns:  # MoE rows: the tuner's own routing, as repair and verdicts use
        timed = timed[(timed["routing"].isna() | (timed["routing"] == "tuner")).to_numpy(dtype=bool)]
    where = ["source", "op", "shape", "m"]
    is_default = timed["default"].fillna(False).to_numpy(dtype=bool)
    defaults = timed[is_default].drop_duplicates(where)[[*where, "serving_ms", "serving_p10_ms", "serving_p90_ms"]]
    cand = timed[~is_default].drop_duplicates([*where, "runner", "tactic"]).merge(
        defaults, on=where, suffixes=("", "_d"))
    cand = cand.assign(log_ratio=np.log(cand["serving_ms"] / cand["serving_ms_d"]),
                       old=np.where(cand["serving_p90_ms"] < cand["serving_p10_ms_d"], "faster",
                                    np.where(cand["serving_p10_ms"] > cand["serving_p90_ms_d"], "slower",
                                             "within_noise")))
    out = []
    for key, g in cand.groupby(["op", "shape", "m", "runner", "tactic"], sort=True):
        g = g.sort_values("source")
        for i in range(len(g)):
            for j in range(i + 1, len(g)):
                a, b = g.iloc[i], g.iloc[j]
                out.append({**dict(zip(["op", "shape", "m", "runner", "tactic"], key)), "source_a": a["source"],
                            "source_b": b["source"], "log_ratio_a": a["log_ratio"], "log_ratio_b": b["log_ratio"],
                            "old_a": a["old"], "old_b": b["old"]})
    return pd.DataFrame(out)[list(AA_VERIFY_COLUMNS)].astype(AA_VERIFY_COLUMNS) if out else _empty(AA_VERIFY_COLUMNS)


def aa_rates(points: pd.DataFrame, *, by: Sequence[str] = ("source", "kind")) -> pd.DataFrame:
    """Per group of A/A comparisons (:func:`aa_step_points`): how often each rule calls identical kernels different.

    Returns:
        One row per group, sorted by ``by``: points, old_beyond_noise (share of points the old step
        rule called beyond noise), measurable (points with a verdict), calls (those this rule called
        faster or slower), called (calls / measurable: the A/A false-positive rate; NaN when nothing
        was measurable), not_measurable (share of points).
    """
    by = list(by)
    require(points, [*by, "old_beyond_noise", "verdict"], "A/A points")
    frame = points.assign(_calls=points["verdict"].isin(["faster", "slower"]).to_numpy(dtype=bool),
                          _measurable=(points["verdict"] != "not_measurable").fillna(False).to_numpy(dtype=bool),
                          _old=points["old_beyond_noise"].fillna(False).to_numpy(dtype=bool))
    out = frame.groupby(by, sort=True).agg(points=("verdict", "size"), old_beyond_noise=("_old", "mean"),
                                           measurable=("_measurable", "sum"), calls=("_calls", "sum"))
    out["called"] = (out["calls"] / out["measurable"].where(out["measurable"] > 0)).astype("float64")
    out["not_measurable"] = 1 - out["measurable"] / out["points"]
    return out.reset_index()[[*by, "points", "old_beyond_noise", "measurable", "calls", "called", "not_measurable"]]


def aa_sensitivity(bench: pd.DataFrame, *, confidences: Sequence[float] = (0.90, CONFIDENCE, 0.99),
                   floors: Sequence[float] = (0.0, DRIFT_FLOOR, 0.01),
                   kinds: Sequence[str] = ("series", "same_kernels")) -> pd.DataFrame:
    """The A/A false-positive rate of :func:`aa_step_points` under other confidences and drift floors.

    Returns:
        One row per (confidence, floor): measurable, calls and called (calls / measurable), as in
        :func:`aa_rates`.
    """
    points = pd.concat([aa_step_points(bench, kinds=kinds, confidence=c, floor=f).assign(confidence=c, floor=f)
                        for c in confidences for f in floors], ignore_index=True)
    rates = aa_rates(points, by=["confidence", "floor"])
    return rates[["confidence", "floor", "measurable", "calls", "called"]]


def detectable_by_size(measured: pd.DataFrame, *, by: str = "source") -> pd.DataFrame:
    """The median ``detectable`` change (percent) per step size, one column per value of ``by``.

    Args:
        measured: rule rows with phase, tokens, detectable and ``by`` (e.g. measured_step_change
            rows of several step files with their source); not measurable rows are left out.

    Returns:
        One row per (phase, tokens), sorted decode before prefill, then tokens; NaN where a column
        has no measurable comparison at that size.
    """
    require(measured, ("phase", "tokens", "detectable", by), "rule rows")
    rows = measured[measured["detectable"].notna().to_numpy(dtype=bool)]
    table = rows.assign(detectable_pct=100 * rows["detectable"].astype(float)).pivot_table(
        index=["phase", "tokens"], columns=by, values="detectable_pct", aggfunc="median")
    table.columns = [str(c) for c in table.columns]
    return table.reset_index().sort_values(["phase", "tokens"], kind="stable").reset_index(drop=True)


def aa_verify_agreement(pairs: pd.DataFrame, *, ratio_sd: float = VERIFY_RATIO_SD, **rule) -> dict:
    """How the old and this rule's one-process verify verdicts agree between two processes (:func:`aa_verify_pairs`).

    Returns:
        pairs, beyond (share of pairs whose two log ratios differ by more than a 95% band of
        two one-process measurements: the verify A/A rate), old_agree (share with the same p10-p90
        verdict in both processes) and new_agree (the same verdict of this rule in both).
    """
    require(pairs, ("log_ratio_a", "log_ratio_b", "old_a", "old_b"), "verify A/A pairs")
    if pairs.empty:
        return {"pairs": 0, "beyond": float("nan"), "old_agree": float("nan"), "new_agree": float("nan")}
    a = compare_values(np.exp(pairs["log_ratio_a"].to_numpy(float)), np.ones(len(pairs)), ratio_sd=ratio_sd, **rule)
    b = compare_values(np.exp(pairs["log_ratio_b"].to_numpy(float)), np.ones(len(pairs)), ratio_sd=ratio_sd, **rule)
    diff = (pairs["log_ratio_a"] - pairs["log_ratio_b"]).abs().to_numpy(float)
    band = t_quantile(0.975, math.inf) * math.sqrt(2) * ratio_sd
    return {"pairs": len(pairs), "beyond": float(np.mean(diff > band)),
            "old_agree": float(np.mean(pairs["old_a"].to_numpy() == pairs["old_b"].to_numpy())),
            "new_agree": float(np.mean(a["verdict"].to_numpy() == b["verdict"].to_numpy()))}


def _aa_row(where: dict, kind: str, series: str, base: str, units: dict, reps: dict, rule: dict) -> dict:
    (a_ids, a), (b_ids, b) = units[series], units[base]
    shared, ia, ib = np.intersect1d(a_ids, b_ids, assume_unique=True, return_indices=True)
    paired = len(shared) >= rule.get("min_units", MIN_UNITS)
    c = compare_two(a[ia] if paired else a, b[ib] if paired else b, paired=paired, **rule)
    return {**where, "kind": kind, "series": series, "baseline": base,
            "old_beyond_noise": old_step_rule(reps[series], reps[base]), **_fields(c)}


def _unit_medians(units: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted unit ids and the median value of each."""
    ids, inverse = np.unique(units, return_inverse=True)
    return ids, np.array([float(np.median(values[inverse == k])) for k in range(len(ids))])


def _fields(c: Comparison) -> dict:
    return {"effect": c.effect, "effect_lo": c.effect_lo, "effect_hi": c.effect_hi, "verdict": c.verdict, "n": c.n,
            "n_baseline": c.n_baseline, "design": c.design, "detectable": c.detectable}


def _same_kernel_series(of_series: dict, picks: np.ndarray | None, states: np.ndarray) -> list[str]:
    """Series of another state that ran exactly the untuned picks at this size (recorded ``picks``): each series'
    first recorded picks, from its rows' positions ``of_series``."""
    if picks is None:
        return []
    first = {}
    for s, at in of_series.items():
        recorded = [i for i in at if "=" in picks[i]]
        if recorded:
            first[s] = (picks[recorded[0]], states[recorded[0]])
    if "untuned" not in first:
        return []
    return sorted(s for s, (p, state) in first.items() if state != "untuned" and p == first["untuned"][0])


# -- the rule's parts ---------------------------------------------------------------------------
def _design(log_a: np.ndarray, log_b: np.ndarray, *, paired: bool, ratio_sd, min_units: int) -> dict:
    """Log effect, its standard error and degrees of freedom for one point, and the design used."""
    na, nb = len(log_a), len(log_b)
    nan = float("nan")
    if na == 0 or nb == 0:
        side = "candidate" if na == 0 else "baseline"
        return {"d": nan, "se": nan, "df": nan, "design": "too_few_units", "note": f"no {side} units"}
    d = float(np.mean(log_a) - np.mean(log_b))
    if paired and na >= min_units:
        diff = log_a - log_b
        return {"d": float(np.mean(diff)), "se": float(np.std(diff, ddof=1) / math.sqrt(na)), "df": na - 1.0,
                "design": "paired", "note": ""}
    if not paired and na >= min_units and nb >= min_units:
        va, vb = np.var(log_a, ddof=1) / na, np.var(log_b, ddof=1) / nb
        se = math.sqrt(va + vb)
        df = se ** 4 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1)) if se > 0 else na + nb - 2.0
        return {"d": d, "se": se, "df": float(df), "design": "unpaired", "note": ""}
    if ratio_sd is not None and np.isfinite(ratio_sd):
        return {"d": d, "se": float(ratio_sd) * math.sqrt((1 / na + 1 / nb) / 2), "df": math.inf,
                "design": "calibrated", "note": ""}
    what = "paired units" if paired else "units"
    note = (f"{na} candidate and {nb} baseline {what}, fewer than {min_units} per side: the spread between "
            f"units (drift between passes or processes) is not sampled")
    return {"d": d, "se": nan, "df": nan, "design": "too_few_units", "note": note}


def _decide(d: np.ndarray, se: np.ndarray, df: np.ndarray, *, floor: float, confidence: float) -> dict:
    """Effect, interval, verdict and detectable change from log effects, standard errors and dfs."""
    d, se, df = (np.asarray(x, dtype=float) for x in (d, se, df))
    measurable = np.isfinite(d) & np.isfinite(se) & (se >= 0) & ~np.isnan(df) & (df >= 1)
    q = np.array([t_quantile((1 + confidence) / 2, x) if ok else np.nan
                  for x, ok in zip(df.ravel(), measurable.ravel())])
    q = q.reshape(d.shape)
    hw = np.where(measurable, q * np.where(measurable, se, 0.0), np.nan)
    log_floor = math.log1p(floor)
    lo, hi = np.expm1(d - hw), np.expm1(d + hw)
    slower = measurable & (d - hw > 0) & (d > log_floor)
    faster = measurable & (d + hw < 0) & (d < -log_floor)
    verdict = np.where(~measurable, "not_measurable", np.where(slower, "slower", np.where(faster, "faster",
                                                                                           "within_noise")))
    return {"effect": np.expm1(d), "effect_lo": np.where(measurable, lo, np.nan),
            "effect_hi": np.where(measurable, hi, np.nan), "verdict": verdict,
            "detectable": np.where(measurable, np.expm1(np.maximum(hw, log_floor)), np.nan)}


@lru_cache(maxsize=256)
def _t_quantile(p: float, df: float) -> float:
    if not 0 < p < 1:
        raise ProfkitError(f"a quantile needs 0 < p < 1, found {p}")
    if math.isinf(df):
        return NormalDist().inv_cdf(p)
    if df <= 0:
        raise ProfkitError(f"Student's t needs df > 0, found {df}")
    if p < 0.5:
        return -_t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2


def _t_cdf(t: float, df: float) -> float:
    """P(T <= t) for t >= 0, through the regularized incomplete beta function."""
    x = df / (df + t * t)
    return 1.0 - 0.5 * _betainc(df / 2, 0.5, x)


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) (continued fraction, modified Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return math.exp(ln_front) * h / a


def _unit_codes(units: pd.Series) -> np.ndarray:
    """Integer codes of unit ids that keep their order (so shared units pair up in the order of the ids)."""
    try:
        return pd.factorize(units, sort=True, use_na_sentinel=False)[0]
    except TypeError:  # ids of mixed types have no order: any consistent code pairs them
        return pd.factorize(units.astype(str), sort=True)[0]


def _runs(ids: np.ndarray):
    """(first, last) index ranges of the runs of equal values in ``ids``."""
    if not len(ids):
        return
    edges = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1], True])
    yield from zip(edges[:-1], edges[1:])


def _same_label(label, wanted: str) -> bool:
    return not pd.isna(label) and str(label) == str(wanted)


def _check_rule(*, floor: float, confidence: float, min_units: int) -> None:
    if not 0 < confidence < 1:
        raise ProfkitError(f"confidence must lie between 0 and 1, found {confidence}")
    if not floor >= 0:
        raise ProfkitError(f"floor is a relative change >= 0 (0.005 = 0.5%), found {floor}")
    if int(min_units) < 1:
        raise ProfkitError(f"min_units must be at least 1, found {min_units}")


def _check_positive(values: np.ndarray, what: str) -> None:
    bad = np.isfinite(values) & (values <= 0)
    if bad.any():
        raise ProfkitError(f"{int(bad.sum())} {what} values are <= 0 (e.g. {values[bad][0]!r}); the rule compares "
                           f"ratios of positive times: drop or fix those rows")


def _empty(columns: dict) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in columns.items()})
