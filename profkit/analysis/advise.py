"""A tuning plan: which ops, buckets and tactics FlashInfer's autotuner can leave out, and at what price.

The plan is written in FlashInfer's own switches (flashinfer-python 0.7.2.post1):

- ``autotune(True, skip_ops=...)``: ``choose_one`` returns ``(runners[0], -1)`` for the op before
  anything is profiled (autotuner.py:2205), so a skipped op saves its whole tuning time and runs
  the default at every size.
- ``autotune(True, tuning_buckets=...)``: one tuple for every op in the context; it replaces
  both the generated buckets and the mapping, but only inside the context (autotuner.py:2089-2141).
  At serving time the op's own mapping applies again (GEMMs: round up to the next hybrid bucket,
  ``map_to_hybrid_bucket_uncapped``), so a size whose own bucket was not tuned is a cache miss and
  runs the default. A dropped bucket therefore costs exactly its tuned gain over the default.
- ``FLASHINFER_TACTICS_BLOCKLIST``: ``TacticsBlocklist.filter`` runs after the runner's
  ``get_valid_tactics`` (autotuner.py:2414-2417), so a blocked tactic saves its measuring time only;
  cuDNN runners build all their plans inside ``get_valid_tactics``, and that preparation
  (``prep_s``) is paid even when every tactic of the runner is blocked.

Gains are the tuner's own timings (pick against the default), or serving timings from a verify
verdict frame when one is given. Costs are the capture's tuning table. Whether a gain, or a tactic's
gap to its decision's winner, is beyond noise is the one comparison rule's verdict
(:mod:`profkit.analysis.verdict`, docs/comparison_rule.md): serving gains with the spread calibrated
on repeated verify processes, tuner timings with the run-to-run spread where repeated runs measured
it. One tuner timing of each side in one run is not measurable by the rule; there the plan counts a
gain, and keeps a tactic, by the stated threshold ``rel_threshold`` instead, and says so.
Everything is per "pass": one call of every captured shape at every bucket, or, with a batch-size
mix, one call of every shape at the mix's sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd

from profkit.analysis._frames import conform_columns, flashinfer_rows, require, shapes_of
from profkit.analysis.cost import tuning_breakdown
from profkit.analysis.decisions import noise as estimate_noise
from profkit.analysis.decisions import speedup_vs_default, tuner_ratio_sd
from profkit.analysis.engine import assign_bucket
from profkit.analysis.verdict import VERIFY_RATIO_SD, compare_ratios, compare_values
from profkit.errors import ProfkitError

BUCKET_COLUMNS = {
    "op": "string", "shape": "string", "bucket": "Int64", "n_runs": "Int64", "tuning_s": "float64",
    "measure_s": "float64", "prep_s": "float64", "jit_s": "float64", "blocked_s": "float64",
    "default_ms": "float64", "tuned_ms": "float64", "gain_ms": "float64", "noise_pct": "float64",
    "gain_source": "string", "beyond_noise": "boolean", "effect": "float64", "effect_lo": "float64",
    "effect_hi": "float64", "verdict": "string", "detectable": "float64", "counted": "boolean",
    "weight": "float64", "value_ms": "float64", "tuned": "boolean",
}
PLAN_TACTIC_COLUMNS = {
    "op": "string", "runner": "string", "tactic": "string", "n_timed": "Int64", "n_failed": "Int64",
    "n_within_noise": "Int64", "n_won": "Int64", "measure_s": "float64", "blocked": "boolean",
    "reason": "string",
}
OP_COLUMNS = {
    "op": "string", "n_shapes": "Int64", "n_buckets": "Int64", "n_tuned_buckets": "Int64",
    "full_s": "float64", "planned_s": "float64", "saved_s": "float64", "ratio": "float64", "jit_s": "float64",
    "prep_kept_s": "float64", "pass_ms": "float64", "cost_ms": "float64", "cost_pct": "float64",
    "decision": "string", "verdict": "string",
}
# FlashInfer's _collect_metadata keys (autotuner.py:306-362) and the runs-table columns holding them.
METADATA_FROM_RUNS = {
    "flashinfer_version": ("flashinfer",), "cuda_version": ("cuda",), "cublas_version": ("cublas",),
    "cudnn_version": ("cudnn",), "cudnn_frontend_version": ("cudnn_frontend",),
    "cutlass_dsl_version": ("cutlass_dsl",), "gpu": ("flashinfer_metadata_gpu", "gpu"),
}


@dataclass(frozen=True)
class Plan:
    """What to tune, what it costs and what it risks.

    Attributes:
        ops: one row per op (OP_COLUMNS): full and planned tuning seconds, their ratio, the
            expected step cost of the plan (``cost_ms`` per pass, ``cost_pct`` of the fully
            tuned pass) and the decision: ``skip``, ``some buckets``, ``block only`` or ``full``.
        buckets: one row per (op, shape, bucket) (BUCKET_COLUMNS) with its cost, its gain, the
            rule's verdict on the gain (``verdict``, ``effect`` = tuned / default - 1 with its
            interval and ``detectable``; ``beyond_noise``: faster or slower), whether the plan
            counts the gain (``counted``: beyond noise, or not measurable and beyond
            ``rel_threshold``) and whether the plan tunes it.
        tactics: one row per (op, runner, tactic) (PLAN_TACTIC_COLUMNS): blocked or not, and why.
        skip_ops: ops for ``autotune(skip_ops=...)``.
        tuning_buckets: buckets for ``autotune(tuning_buckets=...)``; None keeps FlashInfer's own.
        blocklist: ``{"op::RunnerClass": [tactic, ...]}`` in the blocklist file's format.
        metadata: the capture's environment in FlashInfer's ``_metadata`` keys.
        budget: the constraint the plan was chosen under, as text.
        gain_source: "serving" (verify frame) or "tuner" (the tuner's own timings).
        notes: plain statements the writers print (what a switch cannot save, unpriced buckets,
            timings set aside).
        prepared: the costs and gains the plan was chosen from, so :func:`budget_frontier` can
            plan other budgets without computing them again (None on a hand-built Plan).
    """

    ops: pd.DataFrame
    buckets: pd.DataFrame
    tactics: pd.DataFrame
    skip_ops: tuple[str, ...]
    tuning_buckets: tuple[int, ...] | None
    blocklist: dict[str, list]
    metadata: dict
    budget: str
    gain_source: str
    notes: tuple[str, ...] = field(default=())
    prepared: object = field(default=None, repr=False, compare=False)  # reused by budget_frontier(plan)

    @property
    def tuned_ops(self) -> tuple[str, ...]:
        """Ops the plan still tunes."""
        return tuple(op for op in self.ops["op"] if op not in self.skip_ops)

    @property
    def full_s(self) -> float:
        return float(self.ops["full_s"].sum())

    @property
    def planned_s(self) -> float:
        return float(self.ops["planned_s"].sum())

    @property
    def cost_pct(self) -> float:
        total = float(self.ops["pass_ms"].sum())
        return 100.0 * float(self.ops["cost_ms"].sum()) / total if total > 0 else 0.0

    def __repr__(self) -> str:
        ratio = self.full_s / self.planned_s if self.planned_s > 0 else float("inf")
        return (f"Plan({len(self.ops)} op(s): tuning {self.full_s:.1f} s -> {self.planned_s:.1f} s "
                f"({ratio:.1f}x less), expected cost {self.cost_pct:+.2f}% per pass; {self.budget})")


def advise(tables, *, verify: pd.DataFrame | None = None, budget_s: float | None = None,
           max_slowdown_pct: float | None = None, mix: Mapping[int, float] | None = None,
           metadata: Mapping[str, str] | None = None, rel_threshold: float = 0.02) -> Plan:
    """Choose a tuning plan from captures (one or several runs or ranks) and optional serving verdicts.

    Without a budget the plan drops only what buys nothing beyond noise (expected cost <= 0):
    a bucket's gain counts when the comparison rule calls the tuned choice faster or slower than
    the default; where the rule cannot judge it (one tuner timing of each in one run, no repeated
    runs), when it is larger than ``rel_threshold``, a stated threshold the plan's text names.
    ``max_slowdown_pct`` then drops more, cheapest risk per saved second first, while the
    expected cost stays within that percent of the fully tuned pass; ``budget_s`` drops more until
    the planned tuning time fits, whatever it costs.

    Timings that cannot be right never become a gain or a cost: a candidate with a negative time
    counts as failed, a tuning row with negative or non-finite seconds is set aside, a bucket
    that is not a positive size is set aside; each is counted in ``plan.notes``.

    Args:
        tables: a ``profkit.Tables`` (candidates, tuning and runs tables of the captures).
        verify: per-bucket serving verdicts (``profkit.analysis.verify.bucket_verdicts``): op,
            shape (or n and k), bucket, serving_speedup (pick over default), serving_noise
            (relative half-width of the p10-p90 band: shown, never a verdict); optional
            default_ms (serving), at_bucket, and the rule's verdict with effect, effect_lo,
            effect_hi and detectable (used as they are for a bucket with one row; otherwise the
            rule is applied to serving_speedup with the calibrated one-process spread).
        budget_s: at most this many seconds of tuning.
        max_slowdown_pct: at most this many percent slower (per pass) than full tuning.
        mix: batch-size mix {M: weight}; each M counts at FlashInfer's bucket for it (round up),
            M beyond the largest tuned bucket runs the default either way. None: every bucket once.
        metadata: the capture's FlashInfer ``_metadata`` (e.g. from its cache.json); None builds it
            from the runs table (unknown fields become "*", which FlashInfer's blocklist loader accepts).
        rel_threshold: stated threshold (0.02 = 2%) for the tuner's comparisons the rule cannot
            judge (one timing of each side in one run): a gain counts, and a tactic is within
            reach of its winner, by this instead; also the band :func:`~profkit.analysis.noise`
            states for profiles without repeats.

    Raises:
        ProfkitError: both budgets given, a negative or non-finite budget, no tuned bucket to plan
            from, or no usable candidate timing for a tuned op (the plan cannot say what
            tuning it buys, so it does not plan "skip").
    """
    _check_budgets(budget_s, max_slowdown_pct)
    prepared = _prepare(tables, verify=verify, mix=mix, metadata=metadata, rel_threshold=rel_threshold)
    return _plan(prepared, budget_s, max_slowdown_pct)


def _check_budgets(budget_s, max_slowdown_pct) -> None:
    if budget_s is not None and max_slowdown_pct is not None:
        raise ProfkitError("give either budget_s or max_slowdown_pct, not both")
    for name, value in (("budget_s", budget_s), ("max_slowdown_pct", max_slowdown_pct)):
        if value is not None and not (np.isfinite(value) and value >= 0):
            raise ProfkitError(f"budgets must not be negative or non-finite: {name}={value!r}")


@dataclass(frozen=True, eq=False)
class _Prepared:
    """Everything a plan needs that does not depend on the budget: built once, planned many times.

    The matrices are per op (rows, in ``ops`` order) and bucket (columns, ``bucket_values``),
    summed over shapes: ``seconds`` (tuning seconds a kept bucket costs: wall minus JIT minus the
    blocked tactics' measuring), ``present`` (the op tuned that bucket), ``value_ms`` (step time
    the bucket's tuning buys per pass); ``fixed_s`` per op is paid once it tunes any bucket
    (JIT builds, the call's time outside its buckets).
    """

    tactics: pd.DataFrame
    blocked: pd.DataFrame
    buckets: pd.DataFrame
    overhead: dict
    gain_source: str
    metadata: dict
    set_aside: tuple[str, ...]
    ops: tuple[str, ...]
    bucket_values: tuple[int, ...]
    seconds: np.ndarray
    present: np.ndarray
    value_ms: np.ndarray
    fixed_s: np.ndarray
    pass_ms: float
    rel_threshold: float = 0.02
    basis: dict = field(default_factory=dict)  # per op: what its gain rests on (_basis), whatever the budget
    unknown_gain: frozenset = frozenset()  # ops none of whose buckets has a gain to count (no timed default)


def _prepare(tables, *, verify=None, mix=None, metadata=None, rel_threshold: float = 0.02) -> _Prepared:
    candidates, tuning = tables.candidates, tables.tuning
    require(candidates, ("run_id", "op", "profile", "bucket", "runner", "tactic", "time_ms", "host_s"), "candidates")
    require(tuning, ("run_id", "kind", "op", "wall_s", "measure_s", "jit_s", "prep_s"), "tuning")
    candidates, tuning, set_aside = _usable(candidates, tuning)
    band = estimate_noise(candidates, rel_threshold=rel_threshold)
    tactics = _tactic_verdicts(candidates, band, rel_threshold)
    blocked = tactics[tactics["blocked"].fillna(False).to_numpy(dtype=bool)]
    buckets = bucket_costs(candidates, tuning, blocked)
    if buckets.empty:
        raise ProfkitError("no tuned bucket in the captures: nothing to plan")
    _refuse_ops_without_candidates(buckets, candidates)
    buckets = _attach_gains(buckets, candidates, verify, rel_threshold, band)
    buckets = _attach_weights(buckets, mix)
    overhead = _call_overhead(tuning)
    ops = tuple(sorted(set(buckets["op"])))
    values = tuple(sorted({int(b) for b in buckets["bucket"]}))
    o = pd.Index(ops).get_indexer(buckets["op"])
    b = pd.Index(values).get_indexer(buckets["bucket"].astype("int64"))
    shape = (len(ops), len(values))
    seconds, present, value_ms = np.zeros(shape), np.zeros(shape, dtype=bool), np.zeros(shape)
    per_bucket = (buckets["tuning_s"] - buckets["jit_s"] - buckets["blocked_s"]).to_numpy(dtype=float)
    np.add.at(seconds, (o, b), per_bucket)
    np.add.at(value_ms, (o, b), buckets["value_ms"].to_numpy(dtype=float))
    present[o, b] = True
    jit = buckets.groupby("op", observed=True)["jit_s"].sum()
    fixed = np.array([float(jit.get(op, 0.0)) + overhead.get(op, 0.0) for op in ops])
    pass_ms = float((buckets["weight"] * buckets["tuned_ms"].fillna(0.0)).sum())
    return _Prepared(tactics=tactics, blocked=blocked, buckets=buckets, overhead=overhead,
                     gain_source=_source(verify),
                     metadata=dict(metadata) if metadata else metadata_from_runs(tables.runs),
                     set_aside=set_aside, ops=ops, bucket_values=values, seconds=seconds, present=present,
                     value_ms=value_ms, fixed_s=fixed, pass_ms=pass_ms, rel_threshold=rel_threshold,
                     basis={str(op): _basis(g, rel_threshold) for op, g in buckets.groupby("op", observed=True)},
                     unknown_gain=frozenset(str(op) for op, g in buckets.groupby("op", observed=True)
                                            if g["gain_ms"].isna().all()))


def _plan(p: _Prepared, budget_s, max_slowdown_pct) -> Plan:
    selection = _select(p, budget_s, max_slowdown_pct)
    tuned = ~p.buckets["op"].isin(selection.skip) & p.buckets["bucket"].isin(selection.buckets)
    buckets = p.buckets.assign(tuned=tuned.fillna(False).to_numpy(dtype=bool))
    every_op_skipped = selection.skip >= set(p.ops)
    tuning_buckets = (None if selection.buckets >= set(p.bucket_values) or every_op_skipped
                      else tuple(sorted(selection.buckets)))
    ops = _op_table(buckets, p, selection)
    budget = (f"at most {budget_s:g} s of tuning" if budget_s is not None else
              f"at most {max_slowdown_pct:g}% slower than full tuning" if max_slowdown_pct is not None else
              "no step cost beyond noise")
    return Plan(ops=ops, buckets=conform_columns(buckets, BUCKET_COLUMNS), tactics=p.tactics,
                skip_ops=tuple(sorted(selection.skip)), tuning_buckets=tuning_buckets,
                blocklist=_blocklist(p.blocked, selection.skip), budget=budget, gain_source=p.gain_source,
                metadata=dict(p.metadata), notes=p.set_aside + _notes(ops, buckets, p, selection),
                prepared=p)


def _usable(candidates: pd.DataFrame, tuning: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, ...]]:
    """Candidates and tuning rows with what cannot be right set aside, and one note per kind set aside."""
    notes = []
    time = pd.to_numeric(candidates["time_ms"], errors="coerce").to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        negative = time < 0
    if negative.any():
        candidates = candidates.assign(time_ms=np.where(negative, np.nan, time))
        notes.append(f"{int(negative.sum())} candidate(s) with a negative time counted as failed.")
    bucket = pd.to_numeric(candidates["bucket"], errors="coerce")
    off = (bucket <= 0).fillna(False).to_numpy(dtype=bool)
    if off.any():
        candidates = candidates[~off]
        notes.append(f"{int(off.sum())} candidate(s) at a bucket that is no positive size "
                     f"({', '.join(map(str, sorted(set(bucket[off].astype(int)))[:5]))}) set aside.")
    seconds = tuning[["wall_s", "measure_s", "jit_s", "prep_s"]].apply(pd.to_numeric, errors="coerce")
    arr = seconds.to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        bad = (np.isinf(arr) | (arr < 0)).any(axis=1)
    if "bucket" in tuning.columns:
        tb = pd.to_numeric(tuning["bucket"], errors="coerce")
        bad |= (tb <= 0).fillna(False).to_numpy(dtype=bool)
    if bad.any():
        tuning = tuning[~bad]
        notes.append(f"{int(bad.sum())} tuning row(s) with negative or infinite seconds, or a bucket that is "
                     "no positive size, set aside: their buckets have no cost to plan with.")
    return candidates, tuning, tuple(notes)


def _refuse_ops_without_candidates(buckets: pd.DataFrame, candidates: pd.DataFrame) -> None:
    """An op tuned (tuning rows) with no finite candidate time cannot be planned: say so, do not skip it."""
    c = flashinfer_rows(candidates)
    finite = np.isfinite(pd.to_numeric(c["time_ms"], errors="coerce").to_numpy(dtype=float))
    timed = set(c["op"][finite].dropna().unique())
    missing = sorted(set(buckets["op"]) - timed)
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        names = ", ".join(ascii(op) for op in missing[:5]) + more
        raise ProfkitError(f"cannot plan: the captures hold no usable candidate timing for {names} (the candidates "
                           "table is missing, unreadable or holds only failed tactics), so what tuning buys is "
                           "unknown; capture again or pass captures that hold the candidates")


FRONTIER_COLUMNS = {
    "max_slowdown_pct": "float64", "full_s": "float64", "planned_s": "float64", "ratio": "float64",
    "cost_pct": "float64", "skip_ops": "string", "tuning_buckets": "string", "n_blocked": "Int64",
}


def budget_frontier(tables, *, slowdowns=(0.0, 0.5, 1.0, 2.0, 5.0), **kwargs) -> pd.DataFrame:
    """What each "at most Y% slower" budget buys: one row per budget (FRONTIER_COLUMNS).

    ``tables`` is the captures' Tables (``kwargs`` go to :func:`advise`: verify, mix, metadata,
    rel_threshold), or a :class:`Plan` from :func:`advise`, whose costs and gains are reused
    instead of computed again (then give no ``kwargs``).
    """
    if isinstance(tables, Plan) and tables.prepared is not None and not kwargs:
        prepared = tables.prepared
    elif isinstance(tables, Plan):
        raise ProfkitError("budget_frontier(plan) reuses the plan's inputs: give no verify, mix or metadata")
    else:
        prepared = _prepare(tables, **kwargs)
    rows = []
    for pct in slowdowns:
        _check_budgets(None, pct)
        p = _plan(prepared, None, pct)
        rows.append({"max_slowdown_pct": pct, "full_s": p.full_s, "planned_s": p.planned_s,
                     "ratio": p.full_s / p.planned_s if p.planned_s > 0 else np.inf, "cost_pct": p.cost_pct,
                     "skip_ops": ",".join(p.skip_ops),
                     "tuning_buckets": "default" if p.tuning_buckets is None else ",".join(map(str, p.tuning_buckets)),
                     "n_blocked": sum(len(v) for v in p.blocklist.values())})
    return conform_columns(pd.DataFrame(rows), FRONTIER_COLUMNS)


def tactic_verdicts(candidates: pd.DataFrame, *, rel_threshold: float = 0.02) -> pd.DataFrame:
    """Per (op, runner, tactic): was it ever within noise of its decision's winner? Block it if not.

    A decision is one (run_id, rank, call, op, profile). A candidate is within noise of the
    decision's best time unless the comparison rule calls it slower (:func:`~profkit.analysis.verdict.compare_values`
    with the run-to-run spread :func:`~profkit.analysis.noise` measured from repeated runs). Where no
    repeated runs measured it, one timing of each is not measurable by the rule, and the stated
    ``rel_threshold`` decides instead (within when at most the best time x (1 + rel_threshold));
    ``reason`` says which. Failed, fallen-back and out-of-memory candidates have no time and are
    never within; they name the reason. The default (tactic -1) is never blocked.

    Returns:
        PLAN_TACTIC_COLUMNS, sorted by op, runner, tactic; ``n_within_noise`` counts the decisions where
        it was within (by the rule, or by the threshold where not measurable); ``measure_s`` is the
        tactic's measuring seconds per pass (host time minus JIT, summed over shapes and buckets,
        mean over runs).
    """
    return _tactic_verdicts(candidates, estimate_noise(candidates, rel_threshold=rel_threshold), rel_threshold)


def _tactic_verdicts(candidates: pd.DataFrame, band: pd.DataFrame, rel_threshold: float) -> pd.DataFrame:
    """Body of :func:`tactic_verdicts`, with the noise band computed by the caller (advise reuses it)."""
    c = flashinfer_rows(candidates).copy()
    if c.empty:
        return conform_columns(pd.DataFrame(), PLAN_TACTIC_COLUMNS)
    band = band[["op", "profile", "noise_pct", "noise_source"]]
    c = c.merge(band.drop_duplicates(["op", "profile"]), on=["op", "profile"], how="left")
    c["noise_pct"] = c["noise_pct"].fillna(100.0 * rel_threshold)
    c["noise_source"] = c["noise_source"].astype("string").fillna("threshold")
    decision = [k for k in ("run_id", "rank", "call", "op", "profile") if k in c.columns]
    keyed = c[decision].astype("string").fillna("<NA>")
    time = pd.to_numeric(c["time_ms"], errors="coerce").to_numpy(dtype=float)
    best = pd.Series(np.where(np.isfinite(time), time, np.inf)).groupby(
        [keyed[k].to_numpy() for k in decision]).transform("min").to_numpy()
    # The rule where repeated runs measured the spread; the stated threshold where one timing each is not measurable.
    ratio_sd = tuner_ratio_sd(c)
    judged = np.isfinite(time) & np.isfinite(ratio_sd)
    within = np.isfinite(time) & (time <= best * (1.0 + rel_threshold))
    if judged.any():
        rule = compare_values(time[judged], best[judged], ratio_sd=ratio_sd[judged])
        within[judged] = (rule["verdict"] != "slower").to_numpy(dtype=bool)
    c["within"] = within
    c["judged"] = judged
    c["stated"] = np.isfinite(time) & ~judged
    c["won"] = np.isfinite(time) & (time == best)
    c["failed"] = ~np.isfinite(time)
    status = c["status"].astype("string").fillna("ok") if "status" in c else pd.Series("ok", index=c.index)
    c["status_"] = np.where(c["failed"], status.replace({"ok": "failed"}), status)
    jit = pd.to_numeric(c["jit_s"], errors="coerce").fillna(0.0) if "jit_s" in c else 0.0
    c["measure_s"] = pd.to_numeric(c["host_s"], errors="coerce").fillna(0.0) - jit
    c["shape"] = shapes_of(c).to_numpy()
    n_runs = c.groupby(["op", "shape"], observed=True, dropna=False)["run_id"].transform("nunique").clip(lower=1)
    c["measure_s"] = c["measure_s"] / n_runs  # per pass: runs of one shape are repeats or ranks
    g = c.groupby(["op", "runner", "tactic"], observed=True, sort=True, dropna=False)
    out = g.agg(n_timed=("time_ms", "size"), n_failed=("failed", "sum"), n_within_noise=("within", "sum"),
                n_won=("won", "sum"), measure_s=("measure_s", "sum"), judged=("judged", "any"),
                stated=("stated", "any")).reset_index()
    not_ok = c[(c["status_"].astype("string") != "ok").fillna(True).to_numpy(dtype=bool)]
    statuses = (not_ok.groupby(["op", "runner", "tactic"], observed=True, dropna=False)["status_"]
                .agg(lambda s: sorted(set(s.astype(str)))) if len(not_ok) else pd.Series(dtype=object))
    found = dict(zip(statuses.index, statuses)) if len(statuses) else {}
    out["blocked"] = (out["n_within_noise"] == 0) & (out["tactic"].astype("string") != "-1")
    keys = zip(out["op"], out["runner"], out["tactic"])
    out["reason"] = [_reason(b, found.get(k, []), _within_words(j, st, rel_threshold))
                     for b, k, j, st in zip(out["blocked"], keys, out["judged"], out["stated"])]
    return conform_columns(out, PLAN_TACTIC_COLUMNS)


def _within_words(judged: bool, stated: bool, rel_threshold: float) -> str:
    """What "within" meant for a tactic: the rule's noise, the stated threshold, or both."""
    threshold = f"{100 * rel_threshold:g}%"
    if stated and not judged:
        return (f"within {threshold} of the winner (one timing of each in one run is not measurable by the rule: "
                "the stated threshold decides)")
    if stated:
        return f"within noise of the winner ({threshold} where not measurable)"
    return "within noise of the winner"


def _reason(blocked: bool, statuses: list, within: str = "within noise of the winner") -> str:
    if not blocked:
        return f"{within} at least once"
    words = {"failed": "failed", "fallback": "fell back to tactic -1", "oom": "ran out of memory"}
    named = [words.get(s, s) for s in statuses]
    return "; ".join([*named, f"never {within}"])


def bucket_costs(candidates: pd.DataFrame, tuning: pd.DataFrame, blocked: pd.DataFrame) -> pd.DataFrame:
    """Tuning seconds per (op, shape, bucket), mean over the runs that tuned it.

    ``blocked_s`` is the measuring time of the ``blocked`` tactics' candidates in that bucket:
    what the blocklist saves there (their preparation stays, see the module docstring).
    """
    per_run = tuning_breakdown(tuning, by="bucket")
    per_run = per_run[per_run["status"].astype("string").fillna("ok") == "ok"]
    if per_run.empty:
        return conform_columns(pd.DataFrame(), BUCKET_COLUMNS)
    keys = ["op", "shape", "bucket"]
    g = per_run.groupby(keys, observed=True, sort=True)
    out = g.agg(n_runs=("run_id", "nunique"), tuning_s=("wall_s", "sum"), measure_s=("measure_s", "sum"),
                prep_s=("prep_s", "sum"), jit_s=("jit_s", "sum")).reset_index()
    for col in ("tuning_s", "measure_s", "prep_s", "jit_s"):
        out[col] = out[col] / out["n_runs"]
    out["blocked_s"] = _blocked_seconds(candidates, blocked, out)
    return out


def _blocked_seconds(candidates: pd.DataFrame, blocked: pd.DataFrame, buckets: pd.DataFrame) -> np.ndarray:
    c = flashinfer_rows(candidates)
    if c.empty or blocked.empty:
        return np.zeros(len(buckets))
    c = c.assign(shape=shapes_of(c).to_numpy())
    hit = c.merge(blocked[["op", "runner", "tactic"]], on=["op", "runner", "tactic"], how="inner")
    jit = pd.to_numeric(hit["jit_s"], errors="coerce").fillna(0.0) if "jit_s" in hit else 0.0
    hit = hit.assign(measure_s=pd.to_numeric(hit["host_s"], errors="coerce").fillna(0.0) - jit)
    per_run = hit.groupby(["op", "shape", "bucket"], observed=True)["measure_s"].sum()
    joined = buckets.set_index(["op", "shape", "bucket"]).join(per_run.rename("s"), how="left")
    return (joined["s"].fillna(0.0) / joined["n_runs"]).to_numpy(dtype=float)


def _call_overhead(tuning: pd.DataFrame) -> dict[str, float]:
    """Per op: tuning-call seconds outside its profiled buckets (final lookup, bookkeeping), per pass."""
    calls = tuning_breakdown(tuning, by="call")
    profiles = tuning_breakdown(tuning, by="bucket")
    if calls.empty:
        return {}
    inside = profiles.groupby(["run_id", "call"], observed=True)["wall_s"].sum()
    calls = calls.set_index(["run_id", "call"]).join(inside.rename("inside"), how="left").reset_index()
    calls["rest"] = (calls["wall_s"] - calls["inside"].fillna(0.0)).clip(lower=0.0)
    per_shape = calls.groupby(["op", "shape", "run_id"], observed=True, dropna=False)["rest"].sum()
    per_shape = per_shape.groupby(level=["op", "shape"], observed=True, dropna=False).mean()
    return {str(op): float(v) for op, v in per_shape.groupby(level="op", observed=True).sum().items()}


def _source(verify) -> str:
    return "serving" if verify is not None and len(verify) else "tuner"


RULE_FIELDS = ("effect", "effect_lo", "effect_hi", "verdict", "detectable")


def _attach_gains(buckets: pd.DataFrame, candidates: pd.DataFrame, verify, rel_threshold: float,
                  band: pd.DataFrame) -> pd.DataFrame:
    """Per bucket: default and tuned times, the gain, the rule's verdict on it and whether the plan counts it."""
    s = speedup_vs_default(candidates, noise=band, rel_threshold=rel_threshold)
    keys = ["op", "shape", "bucket"]
    tuner = s.groupby(keys, observed=True).agg(default_ms=("default_ms", "mean"), tuned_ms=("time_ms", "mean"),
                                                noise_pct=("noise_pct", "mean")).reset_index()
    out = buckets.merge(tuner, on=keys, how="left")
    out = out.merge(_tuner_rule(s, keys), on=keys, how="left")
    out["gain_source"] = "tuner"
    if verify is not None and len(verify):
        out = _serving_gains(out, verify)
    for col in ("default_ms", "tuned_ms"):  # an infinite or negative time is no time to gain from
        t = pd.to_numeric(out[col], errors="coerce").astype(float)
        out[col] = t.where(np.isfinite(t) & (t >= 0))
    out["gain_ms"] = out["default_ms"] - out["tuned_ms"]
    out["verdict"] = out["verdict"].astype("string").where(out["gain_ms"].notna(), pd.NA)
    verdict = out["verdict"].fillna("not_measurable")
    out["beyond_noise"] = verdict.isin(["faster", "slower"]).to_numpy(dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = (out["gain_ms"] / out["tuned_ms"]).abs().to_numpy(dtype=float)
    stated = (verdict == "not_measurable").to_numpy(dtype=bool) & (gap > rel_threshold)
    out["counted"] = out["beyond_noise"].to_numpy(dtype=bool) | stated
    return out


def _tuner_rule(speedups: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The rule on the tuner's pick against the default per bucket: one unit per run (and rank).

    Calls of one run that tuned the bucket again are repetitions inside that unit (their median
    counts); the spread is the run-to-run one :func:`~profkit.analysis.noise` measured from
    repeated runs, else none (not measurable, unless three or more runs give a paired t).
    """
    if speedups.empty:
        return pd.DataFrame({**{k: pd.Series(dtype=speedups[k].dtype) for k in keys},
                             **{c: pd.Series(dtype="float64") for c in RULE_FIELDS if c != "verdict"},
                             "verdict": pd.Series(dtype="string")})
    unit = speedups["run_id"].astype("string").fillna("") + "#" + (
        speedups["rank"].astype("string").fillna("") if "rank" in speedups else "")
    per_unit = speedups.assign(_unit=unit.to_numpy(), _sd=tuner_ratio_sd(speedups)).groupby(
        [*keys, "_unit"], observed=True).agg(time_ms=("time_ms", "median"), default_ms=("default_ms", "median"),
                                             ratio_sd=("_sd", "mean")).reset_index()
    per_unit["log_ratio"] = np.log(per_unit["time_ms"] / per_unit["default_ms"])
    rule = compare_ratios(per_unit, by=keys, ratio_sd_col="ratio_sd")
    return rule[[*keys, *RULE_FIELDS]]


def _serving_gains(out: pd.DataFrame, verify: pd.DataFrame) -> pd.DataFrame:
    """Serving times replace the tuner's where the verify verdicts cover a bucket, with the rule's verdict on them.

    A bucket with one verdict row keeps that row's verdict (``bucket_verdicts`` applied the rule to
    its processes); otherwise the rule runs on the rows' ``serving_speedup``, one unit each, with
    the spread calibrated for one verify process (:data:`~profkit.analysis.verdict.VERIFY_RATIO_SD`).
    """
    require(verify, ("op", "bucket", "serving_speedup", "serving_noise"), "verify verdicts")
    v = verify.copy()
    if "shape" not in v.columns:
        require(v, ("n", "k"), "verify verdicts")
        v["shape"] = [f"N={int(n)} K={int(k)}" for n, k in zip(v["n"], v["k"])]
    if "at_bucket" in v.columns:
        v = v[v["at_bucket"].fillna(False).to_numpy(dtype=bool)]
    keys = ["op", "shape", "bucket"]
    v["bucket"] = v["bucket"].astype("Int64")
    speedup = pd.to_numeric(v["serving_speedup"], errors="coerce").astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        v["log_ratio"] = -np.log(speedup.where(speedup > 0))
    rule = compare_ratios(v.assign(ratio_sd=VERIFY_RATIO_SD), by=keys, ratio_sd_col="ratio_sd").set_index(keys)
    if "verdict" in v.columns:  # bucket_verdicts' own verdict (its processes as units) where one row says it all
        own = v[v.groupby(keys, observed=True)["serving_speedup"].transform("size").to_numpy() == 1]
        own = own[own["verdict"].notna().to_numpy(dtype=bool)].set_index(keys)
        for col in RULE_FIELDS:
            if col in own.columns:
                rule.loc[own.index.intersection(rule.index), col] = own[col]
        rule.loc[own.index.intersection(rule.index), "verdict"] = own["verdict"].astype("string")
    agg = {"serving_speedup": ("serving_speedup", "mean"), "serving_noise": ("serving_noise", "mean")}
    if "default_ms" in v.columns:
        agg["serving_default_ms"] = ("default_ms", "mean")
    v = v.groupby(keys, observed=True).agg(**agg).reset_index()
    v = v.merge(rule[list(RULE_FIELDS)].add_prefix("serving_").reset_index(), on=keys, how="left")
    out = out.merge(v, on=keys, how="left")
    has = out["serving_speedup"].notna()
    default = out["serving_default_ms"] if "serving_default_ms" in out else out["default_ms"]
    default = default.fillna(out["default_ms"])
    out.loc[has, "default_ms"] = default[has]
    out.loc[has, "tuned_ms"] = default[has] / out.loc[has, "serving_speedup"]
    out.loc[has, "noise_pct"] = 100.0 * out.loc[has, "serving_noise"]
    for col in RULE_FIELDS:
        out[col] = out[col].where(~has, out[f"serving_{col}"])
    out.loc[has, "gain_source"] = "serving"
    return out.drop(columns=[c for c in out.columns if c.startswith("serving_")])


def _attach_weights(buckets: pd.DataFrame, mix) -> pd.DataFrame:
    """How often a pass calls each bucket, and the step time it risks if left untuned (value_ms)."""
    out = buckets.copy()
    if mix is None:
        out["weight"] = 1.0
    else:
        sizes = {int(m): float(w) for m, w in dict(mix).items()}
        total = sum(w for w in sizes.values() if w > 0)
        if not sizes or total <= 0 or any(m <= 0 for m in sizes):
            raise ProfkitError("the batch-size mix needs positive sizes and a positive total weight")
        out["weight"] = 0.0
        for (op, shape), rows in out.groupby(["op", "shape"], observed=True, sort=False):
            edges = rows["bucket"].to_numpy(dtype=np.int64)
            for m, w in sizes.items():
                if m > edges.max():
                    continue  # beyond the tuned range the default runs, tuned or not
                b = int(assign_bucket(m, edges, round_up=True)[0])
                out.loc[rows.index[edges == b], "weight"] += w / total
    gain = out["gain_ms"].where(out["counted"], 0.0).fillna(0.0)
    out["value_ms"] = out["weight"] * gain
    return out


@dataclass
class _Selection:
    buckets: set
    skip: set


def _planned_by_op(p: _Prepared, kept: np.ndarray, skipped: np.ndarray) -> np.ndarray:
    """Planned tuning seconds per op: its kept buckets plus its fixed seconds, 0 when it tunes none."""
    tunes = (p.present & kept[None, :]).any(axis=1) & ~skipped
    return np.where(tunes, (p.seconds * kept[None, :]).sum(axis=1) + p.fixed_s, 0.0)


def _select(p: _Prepared, budget_s, max_slowdown_pct) -> _Selection:
    """Greedy: drop the bucket (for every op) or skip the op with the least risk per saved second.

    Each step prices every move at once from the op x bucket matrices (O(ops x buckets)), and
    there are at most buckets + ops steps, so a plan costs O((ops + buckets) x ops x buckets).
    Ties go to the smaller bucket, then to the op first in name order.
    """
    n_ops, n_buckets = p.seconds.shape
    kept, skipped = np.ones(n_buckets, dtype=bool), np.zeros(n_ops, dtype=bool)
    allowed = (max_slowdown_pct or 0.0) / 100.0 * p.pass_ms

    def best_move(limit):
        active = ~skipped
        planned = _planned_by_op(p, kept, skipped)
        now_s = planned.sum()
        now_cost = float(p.value_ms[skipped].sum() + p.value_ms[active][:, ~kept].sum())
        kp = p.present & kept[None, :]
        count = kp.sum(axis=1)
        base = (p.seconds * kept[None, :]).sum(axis=1) + p.fixed_s
        # drop bucket j: op i loses seconds[i, j]; an op left with no bucket costs nothing at all
        left = count[:, None] - kp
        after = np.where(active[:, None] & (left > 0), base[:, None] - p.seconds * kept[None, :], 0.0)
        saved = np.where(kept & (kept.sum() > 1), now_s - after.sum(axis=0), 0.0)
        extra = np.where(kept, (p.value_ms * active[:, None]).sum(axis=0), 0.0)
        moves = [(extra[j], saved[j], ("bucket", j)) for j in range(n_buckets) if kept[j] and kept.sum() > 1]
        op_extra = (p.value_ms * kept[None, :]).sum(axis=1)
        moves += [(op_extra[i], planned[i], ("op", i)) for i in range(n_ops) if active[i]]
        best, best_key = None, None
        for gain_lost, saved_s, move in moves:
            if saved_s <= 1e-12 or (limit is not None and now_cost + gain_lost > limit + 1e-12):
                continue
            key = (gain_lost / saved_s, -saved_s)
            if best_key is None or key < best_key:
                best, best_key = move, key
        return best

    def apply(move) -> None:
        kind, index = move
        if kind == "bucket":
            kept[index] = False
        else:
            skipped[index] = True

    while (m := best_move(allowed)) is not None:
        apply(m)
    if budget_s is not None:
        while _planned_by_op(p, kept, skipped).sum() > budget_s + 1e-9:
            m = best_move(None)
            if m is None:
                break
            apply(m)
    return _Selection(buckets={p.bucket_values[j] for j in range(n_buckets) if kept[j]},
                      skip={p.ops[i] for i in range(n_ops) if skipped[i]} - p.unknown_gain)  # no gain known: kept


def _op_table(buckets: pd.DataFrame, p: _Prepared, sel: _Selection) -> pd.DataFrame:
    kept = np.array([b in sel.buckets for b in p.bucket_values], dtype=bool)
    skipped = np.array([op in sel.skip for op in p.ops], dtype=bool)
    planned = dict(zip(p.ops, _planned_by_op(p, kept, skipped)))
    tuned = buckets["tuned"].to_numpy(dtype=bool)
    per = buckets.assign(
        pass_ms=buckets["weight"] * buckets["tuned_ms"].fillna(0.0), cost_ms=np.where(tuned, 0.0, buckets["value_ms"]),
        prep_kept_s=np.where(tuned, buckets["prep_s"], 0.0), any_blocked=(buckets["blocked_s"] > 0).to_numpy(),
        tuned_bucket=buckets["bucket"].where(tuned),
    ).groupby("op", observed=True, sort=True).agg(
        n_shapes=("shape", "nunique"), n_buckets=("bucket", "nunique"), n_tuned_buckets=("tuned_bucket", "nunique"),
        tuning_s=("tuning_s", "sum"), pass_ms=("pass_ms", "sum"), cost_ms=("cost_ms", "sum"),
        gained_ms=("value_ms", "sum"), jit_s=("jit_s", "sum"), prep_kept_s=("prep_kept_s", "sum"),
        all_tuned=("tuned", "all"), any_blocked=("any_blocked", "any"))
    rows = []
    for op, r in per.iterrows():
        full = float(r["tuning_s"]) + p.overhead.get(op, 0.0)
        pass_ms, cost = float(r["pass_ms"]), float(r["cost_ms"])
        decision = ("skip" if op in sel.skip else "some buckets" if not r["all_tuned"]
                    else "block only" if r["any_blocked"] else "full")
        rows.append({
            "op": op, "n_shapes": r["n_shapes"], "n_buckets": r["n_buckets"], "n_tuned_buckets": r["n_tuned_buckets"],
            "full_s": full, "planned_s": planned[op], "saved_s": full - planned[op],
            "ratio": full / planned[op] if planned[op] > 0 else np.inf, "jit_s": float(r["jit_s"]),
            "prep_kept_s": float(r["prep_kept_s"]), "pass_ms": pass_ms, "cost_ms": cost,
            "cost_pct": 100.0 * cost / pass_ms if pass_ms > 0 else 0.0, "decision": decision,
            "verdict": _verdict(op, decision, full, np.nan if op in p.unknown_gain else float(r["gained_ms"]),
                                pass_ms, p.gain_source,
                                p.basis.get(str(op), "")),
        })
    return conform_columns(pd.DataFrame(rows), OP_COLUMNS)


def _verdict(op: str, decision: str, full_s: float, gained_ms: float, pass_ms: float, source: str,
             basis: str = "") -> str:
    if not np.isfinite(gained_ms):
        return (f"what tuning {op} buys is unknown here: no bucket has a timed default to compare its pick with "
                f"(full tuning {full_s:.1f} s); a capture that times the default, or profkit verify, would tell")
    pct = 100.0 * gained_ms / pass_ms if pass_ms > 0 else 0.0
    bought = (f"full tuning ({full_s:.1f} s) buys {1000 * gained_ms:.1f} us per pass ({pct:+.2f}%) by {source} "
              f"timings" + (f"; {basis}" if basis else ""))
    if decision == "skip" and gained_ms <= 0:
        return f"do not tune {op} on this GPU: {bought}"
    if decision == "skip":
        return f"{op} left untuned to fit the budget: {bought}"
    return f"{op}: {bought}"


def _basis(buckets: pd.DataFrame, rel_threshold: float) -> str:
    """What an op's gain rests on: the rule's verdicts per bucket and shape, and the buckets it cannot judge."""
    verdict = buckets["verdict"].astype("string")
    counts = verdict.value_counts()
    parts = [f"{int(counts[v])} {v.replace('_', ' ')}" for v in ("faster", "slower", "within_noise") if counts.get(v)]
    unjudged = (verdict == "not_measurable").fillna(False).to_numpy(dtype=bool)
    if unjudged.any():
        counted = int(buckets["counted"].to_numpy(dtype=bool)[unjudged].sum())
        parts.append(f"{int(unjudged.sum())} not measurable (one timing of the pick and of the default, no repeated "
                     f"runs; {counted} counted for a gain above the stated {100 * rel_threshold:g}% threshold)")
    return f"per bucket and shape, by the comparison rule: {', '.join(parts)}" if parts else ""


def _blocklist(blocked: pd.DataFrame, skip: set) -> dict[str, list]:
    out: dict[str, list] = {}
    for (op, runner), rows in blocked.groupby(["op", "runner"], observed=True, sort=True):
        if op in skip:
            continue
        if ":" in str(runner) or not str(runner):
            raise ProfkitError(f"runner {ascii(runner)}: a runner class name holds no ':'; a blocklist key "
                               "\"op::runner\" for it could not be read back")
        out[f"{op}::{runner}"] = [_tactic_value(op, runner, t) for t in rows["tactic"]]
    return out


def _tactic_value(op: str, runner: str, text) -> object:
    """A tactic's JSON text as the value FlashInfer's blocklist holds; ProfkitError for text that is not JSON."""
    import json

    text = str(text)
    try:
        if len(text) > 4096:
            raise ValueError("longer than 4096 characters")
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ProfkitError(f"{ascii(op)} {ascii(runner)}: tactic {text[:60]!r} is not JSON ({exc}); a blocklist "
                           "cannot name it") from None


def split_blocklist_key(key: str) -> tuple[str, str]:
    """``"op::Runner"`` -> ``(op, runner)``; the op may hold ``::`` itself (``flashinfer::fused_moe``).

    FlashInfer looks tactics up by the exact text ``f"{custom_op}::{runner class}"``, and a class
    name never holds ``::``, so the runner is what follows the last ``::``.
    """
    op, sep, runner = str(key).rpartition("::")
    if not sep or not op or not runner:
        raise ProfkitError(f"blocklist key {ascii(key)}: expected \"op::RunnerClass\"")
    return op, runner


def _notes(ops: pd.DataFrame, buckets: pd.DataFrame, p: _Prepared, sel: _Selection) -> tuple[str, ...]:
    blocked = p.blocked
    notes = []
    gains = bool((buckets["verdict"].astype("string") == "not_measurable").fillna(False).any())
    tactics = bool(p.tactics["reason"].astype("string").str.contains("not measurable").fillna(False).any())
    if gains or tactics:
        what = " or ".join(w for w, on in (("a pick from the default", gains), ("a tactic from its winner", tactics))
                           if on)
        how = " and ".join(w for w, on in (("counts such gains", gains), ("keeps such tactics", tactics)) if on)
        notes.append(f"Tuner timings without repeated runs give one timing of each candidate: the comparison rule "
                     f"cannot tell {what} beyond run-to-run drift (not measurable, docs/comparison_rule.md). The "
                     f"plan {how} by the stated {100 * p.rel_threshold:g}% threshold instead; repeated runs of the "
                     f"capture{', or serving verdicts (profkit verify),' if gains else ''} make them measurable.")
    for row in ops.itertuples(index=False):
        if row.decision != "skip" and row.prep_kept_s > 0 and not blocked.empty:
            notes.append(f"{row.op}: blocked tactics still cost their runner's preparation "
                         f"(get_valid_tactics, cuDNN plan builds): {row.prep_kept_s:.1f} s of prep_s stays in the "
                         "tuned buckets; only choosing the backend at the call site avoids it.")
    missing = buckets["default_ms"].isna()
    if missing.any():
        unknown = sorted(p.unknown_gain)
        notes.append(f"{int(missing.sum())} bucket(s) have no timed default: their gain is unknown and counts as 0 "
                     "against the rest of their op" + (f"; an op with no timed default anywhere "
                                                       f"({', '.join(unknown)}) is kept, never skipped for it"
                                                       if unknown else "") + ".")
    return tuple(notes)


def metadata_from_runs(runs: pd.DataFrame) -> dict:
    """FlashInfer's ``_metadata`` keys for the capture's environment; "*" where the runs table does not say.

    All runs must agree on each known field; a blocklist for a mixed set would match none of them.

    Raises:
        ProfkitError: when the runs disagree on a field.
    """
    out = {}
    for key, columns in METADATA_FROM_RUNS.items():
        values = set()
        for col in columns:
            if col in runs.columns:
                values = {str(v) for v in runs[col].dropna() if str(v) not in ("", "None", "unknown")}
                if values:
                    break
        if len(values) > 1:
            raise ProfkitError(f"the captures ran in different environments ({key}: {', '.join(sorted(values))}): "
                               "advise each environment on its own")
        out[key] = values.pop() if values else "*"
    return out


def autotune_arguments(plan: Plan, blocklist_path: str | None = None) -> tuple[dict, dict]:
    """``flashinfer.autotune`` keyword arguments and the environment for a tuning run with ``plan``.

    Returns:
        ``(kwargs, env)``: ``kwargs`` for ``flashinfer.autotune(True, **kwargs)`` (``skip_ops`` when
        the plan skips ops, ``tuning_buckets`` when it drops buckets); ``env`` is
        ``{"FLASHINFER_TACTICS_BLOCKLIST": blocklist_path}`` when the plan blocks tactics and a path
        is given. FlashInfer reads that variable when it creates its AutoTuner (autotuner.py:1576),
        so set it before the process first uses FlashInfer's tuner.
    """
    kwargs: dict = {}
    if plan.skip_ops:
        kwargs["skip_ops"] = set(plan.skip_ops)
    if plan.tuning_buckets is not None:
        kwargs["tuning_buckets"] = tuple(plan.tuning_buckets)
    env = {"FLASHINFER_TACTICS_BLOCKLIST": str(blocklist_path)} if plan.blocklist and blocklist_path else {}
    return kwargs, env


VIOLATION_COLUMNS = {"op": "string", "shape": "string", "bucket": "Int64", "runner": "string", "tactic": "string",
                     "what": "string", "n": "Int64"}


def plan_violations(plan: Plan, tables) -> pd.DataFrame:
    """What a tuning run captured that ``plan`` should have left out; empty when FlashInfer followed it.

    Checks FlashInfer's own candidates: a blocked tactic timed ("blocked tactic timed"), a skipped
    op profiled ("skipped op profiled"), a bucket outside ``tuning_buckets`` profiled ("bucket not
    planned"). One row per (op, shape, bucket, runner, tactic, what) with the count.
    """
    import json

    c = flashinfer_rows(tables.candidates)
    if c.empty:
        return conform_columns(pd.DataFrame(), VIOLATION_COLUMNS)
    c = c.assign(shape=shapes_of(c).to_numpy())
    blocked = {(*split_blocklist_key(key), json.dumps(t, separators=(", ", ": ")))
               for key, ts in plan.blocklist.items() for t in ts}
    what = pd.Series(pd.NA, index=c.index, dtype="string")
    triples = list(zip(c["op"], c["runner"], c["tactic"].astype("string")))
    what[[t in blocked for t in triples]] = "blocked tactic timed"
    if plan.tuning_buckets is not None:
        outside = ~c["bucket"].isin(plan.tuning_buckets) & ~c["op"].isin(plan.skip_ops)
        what[outside.to_numpy(dtype=bool)] = "bucket not planned"
    what[c["op"].isin(plan.skip_ops).to_numpy(dtype=bool)] = "skipped op profiled"
    bad = c.assign(what=what)[what.notna().to_numpy(dtype=bool)]
    out = bad.groupby(["op", "shape", "bucket", "runner", "tactic", "what"], observed=True).size()
    return conform_columns(out.rename("n").reset_index(), VIOLATION_COLUMNS)
