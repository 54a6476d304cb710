"""Every number the report shows, computed once over a data directory's frames.

:func:`overview` takes what :func:`profkit.catalog.open` returns (any object with
its attributes: frames and plain mappings, no files) and returns an :class:`Overview` of frames.
Each field is the output of one public analysis function (or of a small function here built on
them), so a notebook can call the same function on its own frames; the report's sections only
format these fields.

The answer comes first: :func:`op_verdicts` gives one row per op with what tuning cost, what it
bought beyond noise in serving and at the model step (effects and intervals from the one
comparison rule, :mod:`profkit.analysis.verdict`), and the recommendation (``keep``, ``skip``,
``plan``, ``failed`` or ``unknown``); the report writes the same as ``summary.json``
(:func:`profkit.report.summary_document`).
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pandas as pd

from profkit.analysis import compare, cost, decisions, engine, op_timings, step, verdict
from profkit.analysis._frames import conform_columns, empty
from profkit.errors import ProfkitError

RECOMMENDATIONS = ("keep", "skip", "plan", "failed", "unknown")
# The rule calls identical kernels "faster" at no more than half its two-sided A/A rate
# (docs/comparison_rule.md: <= 5% of A/A points beyond noise, either way).
CHANCE_FASTER = 0.025
# A count of "faster" points is a gain only when identical kernels would reach it less often than this.
CHANCE_LEVEL = 0.05
# The step and serving states compared with untuned, in order of preference: the cache file a
# deployment loads, else the same process right after tuning.
TUNED_STATES = ("cache", "tuned")
# Small batches: decode batch (M) up to this many tokens.
SMALL_M = 8

EVIDENCE_COLUMNS = {
    "op": "string", "kind": "string", "model": "string", "shape": "string", "where": "string",
    "routing": "string", "phase": "string", "m": "Int64", "label": "string", "effect": "float64",
    "effect_lo": "float64", "effect_hi": "float64", "detectable": "float64", "verdict": "string",
    "speedup": "float64",
}
OP_VERDICT_COLUMNS = {
    "op": "string", "recommendation": "string", "basis": "string", "status": "string", "failed_runs": "Int64",
    "failure_cause": "string", "calls": "Int64", "buckets": "Int64", "call_s_min": "float64",
    "call_s_median": "float64", "call_s_max": "float64", "pass_models": "string", "pass_s_min": "float64",
    "pass_s_max": "float64",
    "serving_points": "Int64", "serving_faster": "Int64", "serving_slower": "Int64", "serving_within_noise": "Int64",
    "serving_not_measurable": "Int64", "serving_speedup_min": "float64", "serving_speedup_median": "float64",
    "serving_speedup_max": "float64", "serving_best": "float64", "serving_best_lo": "float64",
    "serving_best_hi": "float64", "serving_best_at": "string", "serving_worst": "float64",
    "serving_worst_lo": "float64", "serving_worst_hi": "float64", "serving_worst_at": "string",
    "step_points": "Int64", "step_measurable": "Int64", "step_faster": "Int64", "step_slower": "Int64",
    "step_within_noise": "Int64", "step_change_min_pct": "float64", "step_change_max_pct": "float64",
    "step_best": "float64", "step_best_lo": "float64", "step_best_hi": "float64", "step_best_at": "string",
    "step_worst": "float64", "step_worst_lo": "float64", "step_worst_hi": "float64", "step_worst_at": "string",
    "step_models": "string", "chance_faster": "Int64", "serving_detectable_min_pct": "float64",
    "serving_detectable_max_pct": "float64", "step_detectable_min_pct": "float64", "step_detectable_max_pct": "float64",
    "small_serving_points": "Int64", "small_serving_faster": "Int64", "small_serving_slower": "Int64",
    "small_step_points": "Int64", "small_step_faster": "Int64", "small_step_slower": "Int64",
    "break_even_steps": "float64", "tuner_speedup_median": "float64", "tuner_speedup_max": "float64",
    "plan_decision": "string", "plan_full_s": "float64", "plan_planned_s": "float64", "plan_buckets": "Int64",
    "plan_tuned_buckets": "Int64", "plan_cost_pct": "float64", "needs": "string",
}
CALL_COST_COLUMNS = {
    "op": "string", "buckets": "Int64", "calls": "Int64", "wall_s_min": "float64", "wall_s_median": "float64",
    "wall_s_max": "float64", "measure_share": "float64", "prep_share": "float64", "split_known": "boolean",
    "later_calls": "Int64", "later_s_min": "float64", "later_s_max": "float64",
}
SPEEDUP_SUMMARY_COLUMNS = {
    "op": "string", "shapes": "Int64", "buckets": "Int64", "buckets_per_shape": "Int64", "median_speedup": "float64",
    "max_speedup": "float64", "slower": "Int64", "slower_beyond_noise": "Int64",
}
STEP_SET_COLUMNS = {
    "where": "string", "model": "string", "dtype": "string", "state": "string", "baseline": "string",
    "sizes": "Int64", "faster": "Int64", "slower": "Int64", "within_noise": "Int64", "not_measurable": "Int64",
    "same_kernels": "Int64", "fallback": "Int64",
}


class Overview:
    """The analysis frames of one data directory, each computed on first use (empty when its input is absent).

    Attributes:
        noise: :func:`~profkit.analysis.noise` of all candidates.
        winners: :func:`~profkit.analysis.winners` of all candidates.
        first_runs: the earliest run of each (op, shape) (:func:`~profkit.analysis.first_runs`): the one
            meaning of "first run" in every figure and table.
        speedups: :func:`~profkit.analysis.speedup_vs_default` of the first runs' first calls.
        breakdown: :func:`~profkit.analysis.tuning_breakdown` per bucket, all runs.
        first_breakdown: ``breakdown`` of the first runs.
        calls: :func:`~profkit.analysis.tuning_breakdown` per call, all runs.
        value: :func:`~profkit.analysis.tuning_value` of the first runs.
        worth: :func:`~profkit.analysis.worth_tuning` of the first runs.
        stability: :func:`~profkit.analysis.winner_stability` across runs and calls.
        ranks: :func:`~profkit.analysis.rank_divergence`.
        diff: :func:`~profkit.analysis.repeat_diff` (first run vs the next run of its shapes).
        cache_diff: :func:`~profkit.analysis.cache_agreement`.
        between: :func:`~profkit.analysis.between_buckets` of the op timings.
        between_summary: :func:`between_summary` of ``between``.
        step_rows: the ``profkit step`` rows of the tuning-pass step sets.
        step_measured: :func:`~profkit.analysis.step.measured_step_change` of those rows.
        step_predicted: :func:`~profkit.analysis.step.predicted_step_changes`.
        step_tuning: :func:`~profkit.analysis.step.tuning_pass_seconds`.
        step_break_even: :func:`~profkit.analysis.step.break_even_table`.
        step_changes: :func:`comparison_changes`: every step comparison's states against untuned and the tuned cache.
        step_sets: :func:`step_set_changes` (one row per step run or set, state and baseline).
        drift: :func:`~profkit.analysis.step.pass_drift` of the step sets that repeat a state.
        drift_summary: :func:`drift_summary` of ``drift`` (per phase).
        break_even_summary: :func:`break_even_summary` (per model and dtype of the tuning-pass steps).
        predictions: :func:`prediction_agreement`.
        e2e: :func:`kernels_beside_serving`.
        serving_where: :func:`serving_provenance`: where the kernels and the serving pair ran.
        failures: :func:`~profkit.analysis.failures.tuning_failures` of every run.
        call_costs: :func:`call_costs` (one row per op).
        speedup_summary: :func:`speedup_summary` (one row per op).
        verdicts: the shipped tunings' serving verdicts (:func:`serving_verdicts`).
        verify_summary: :func:`~profkit.analysis.verify.op_summary` of ``verdicts``.
        policies: :func:`~profkit.analysis.verify.policy_table` of the policy study.
        moe_summary: :func:`~profkit.analysis.moe.model_summary` of the MoE runs.
        moe_sensitivity: :func:`~profkit.analysis.moe.routing_sensitivity` of the MoE verify tables
            (``model``; the tuner routing's rows with the rule's effect and interval).
        moe_changes: :func:`~profkit.analysis.moe.step_changes` of each MoE step set (``model``, ``source``).
        moe_predictions: :func:`~profkit.analysis.moe.step_predictions` (cache and repaired) per MoE step set.
        moe_parts: :func:`~profkit.analysis.moe.tactic_parts` of the MoE captures.
        moe_across: :func:`~profkit.analysis.moe.picks_across_runs` per MoE model (``model``).
        moe_tuning: :func:`~profkit.analysis.tuning_breakdown` per bucket of each MoE model's first tuning (``model``).
        moe_ops: the fused-MoE ops of the MoE runs.
        plan: :func:`~profkit.analysis.advise.advise` of the captures (serving gains where verified);
            None when it cannot plan (``plan_error`` says why).
        frontier: :func:`~profkit.analysis.advise.budget_frontier` of ``plan``.
        moe_models: :func:`moe_models`: one row per MoE model, the one with the most evidence first.
        evidence: :func:`verdict_evidence`: every serving and step comparison behind the verdicts.
        evidence_summary: :func:`evidence_summary` of ``evidence`` (per op, kind and model).
        op_verdicts: :func:`op_verdicts`: one row per op, the recommendation first.
        environment: :func:`environment` of the runs.
        idle_caches: :func:`~profkit.analysis.caches.idle_caches` of the logs' cache events and the step rows.
    """

    def __init__(self, data):
        self.data = data

    def __repr__(self) -> str:
        return f"Overview({getattr(self.data, 'root', '?')})"

    # -- decisions and cost (the captures) --
    @functools.cached_property
    def noise(self) -> pd.DataFrame:
        return decisions.noise(self.data.tables.candidates)

    @functools.cached_property
    def winners(self) -> pd.DataFrame:
        return decisions.winners(self.data.tables.candidates, noise=self.noise)

    @functools.cached_property
    def first_runs(self) -> list:
        return compare.first_runs(self.winners, self.data.tables.runs)

    @functools.cached_property
    def speedups(self) -> pd.DataFrame:
        # One decision per bucket for the headline figures: the first call of the first run.
        won = self.winners
        prim = won[won["run_id"].isin(self.first_runs).to_numpy(dtype=bool)].sort_values("call", kind="stable")
        return decisions.speedup_vs_default(prim.drop_duplicates(["run_id", "op", "profile"]))

    @functools.cached_property
    def _first_tuning(self) -> pd.DataFrame:
        t = self.data.tables.tuning
        return t[t["run_id"].isin(self.first_runs).to_numpy(dtype=bool)]

    @functools.cached_property
    def breakdown(self) -> pd.DataFrame:
        return cost.tuning_breakdown(self.data.tables.tuning)

    @functools.cached_property
    def first_breakdown(self) -> pd.DataFrame:
        b = self.breakdown
        return b[b["run_id"].isin(self.first_runs).to_numpy(dtype=bool)] if len(b) else b

    @functools.cached_property
    def calls(self) -> pd.DataFrame:
        return cost.tuning_breakdown(self.data.tables.tuning, by="call")

    @functools.cached_property
    def value(self) -> pd.DataFrame:
        return cost.tuning_value(self.speedups, self._first_tuning)

    @functools.cached_property
    def worth(self) -> pd.DataFrame:
        return cost.worth_tuning(self.speedups, self._first_tuning)

    @functools.cached_property
    def stability(self) -> pd.DataFrame:
        return compare.winner_stability(self.winners, candidates=self.data.tables.candidates)

    @functools.cached_property
    def ranks(self) -> pd.DataFrame:
        return compare.rank_divergence(self.data.tables.candidates, noise=self.noise)

    @functools.cached_property
    def diff(self) -> pd.DataFrame:
        return compare.repeat_diff(self.winners, first=self.first_runs, candidates=self.data.tables.candidates)

    @functools.cached_property
    def cache_diff(self) -> pd.DataFrame:
        return compare.cache_agreement(self.winners, self.data.cache_winners)

    @functools.cached_property
    def between(self) -> pd.DataFrame:
        timings = self.data.op_timings
        return op_timings.between_buckets(timings, speedups=self.speedups) if len(timings) else pd.DataFrame()

    @functools.cached_property
    def between_summary(self) -> pd.DataFrame:
        return between_summary(self.between)

    @functools.cached_property
    def failures(self) -> pd.DataFrame:
        from profkit.analysis.failures import tuning_failures

        t = self.data.tables
        return tuning_failures(t.winners, t.candidates, t.tuning) if len(t.winners) else pd.DataFrame()

    @functools.cached_property
    def call_costs(self) -> pd.DataFrame:
        return call_costs(self.breakdown, self.calls, self.data.tables.tuning, self.first_runs)

    @functools.cached_property
    def speedup_summary(self) -> pd.DataFrame:
        return speedup_summary(self.speedups)

    @functools.cached_property
    def environment(self) -> pd.DataFrame:
        return environment(self.data.tables.runs)

    # -- the step --
    @functools.cached_property
    def step_rows(self) -> pd.DataFrame:
        rows = self.data.step
        return rows if len(rows) and {"state", "step_ms", "tokens"} <= set(rows.columns) else pd.DataFrame()

    @functools.cached_property
    def step_measured(self) -> pd.DataFrame:
        return step.measured_step_change(self.step_rows) if len(self.step_rows) else pd.DataFrame()

    @functools.cached_property
    def step_predicted(self) -> pd.DataFrame:
        if self.step_rows.empty:
            return pd.DataFrame()
        return step.predicted_step_changes(self.data.tables.winners, self.step_rows,
                                           captures=self.data.step_captures, linears=self.data.linears)

    @functools.cached_property
    def step_tuning(self) -> pd.DataFrame:
        return step.tuning_pass_seconds(self.data.tables.tuning, captures=self.data.step_captures)

    @functools.cached_property
    def step_break_even(self) -> pd.DataFrame:
        if self.step_measured.empty:
            return pd.DataFrame()
        return step.break_even_table(self.step_measured, self.step_tuning)

    @functools.cached_property
    def _all_steps(self) -> pd.DataFrame:
        return _all_step_rows(self.data)

    @functools.cached_property
    def step_comparisons(self) -> list:
        """:func:`~profkit.analysis.step.step_comparisons` of every step row: (where, model, dtype, rows)."""
        return step.step_comparisons(self._all_steps) if len(self._all_steps) else []

    @functools.cached_property
    def step_changes(self) -> pd.DataFrame:
        return comparison_changes(self._all_steps)

    @functools.cached_property
    def step_sets(self) -> pd.DataFrame:
        return step_set_changes(self._all_steps, changes=self.step_changes)

    @functools.cached_property
    def drift(self) -> pd.DataFrame:
        return _drift(self._all_steps)

    @functools.cached_property
    def drift_summary(self) -> pd.DataFrame:
        return drift_summary(self.drift)

    @functools.cached_property
    def break_even_summary(self) -> pd.DataFrame:
        return break_even_summary(self.step_measured, self.step_break_even, self.step_tuning)

    @functools.cached_property
    def predictions(self) -> pd.DataFrame:
        return prediction_agreement(self.data.verify, self.step_measured, self.step_predicted, self.step_changes,
                                    step_rows=self.step_rows, captures=self.data.step_captures,
                                    caches=getattr(self.data, "step_caches", {}), linears=self.data.linears)

    # -- serving --
    @functools.cached_property
    def e2e(self) -> pd.DataFrame:
        return kernels_beside_serving(self.speedups, self.data.bench, labels=self.data.labels)

    @functools.cached_property
    def serving_where(self) -> dict:
        return serving_provenance(self.data.tables.runs, self.data.bench, self.speedups) if len(self.e2e) else {}

    @functools.cached_property
    def _serving(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return serving_verdicts(getattr(self.data, "verify", pd.DataFrame()), getattr(self.data, "policy_tuning", None),
                                noise=self.noise)

    @property
    def verdicts(self) -> pd.DataFrame:
        return self._serving[0]

    @property
    def policies(self) -> pd.DataFrame:
        return self._serving[1]

    @functools.cached_property
    def verify_summary(self) -> pd.DataFrame:
        from profkit.analysis.verify import op_summary

        return op_summary(self.verdicts) if len(self.verdicts) else pd.DataFrame()

    # -- MoE --
    @functools.cached_property
    def _moe(self) -> dict:
        return _moe_frames(getattr(self.data, "moe", None), self.verdicts)

    moe_summary = property(lambda self: self._moe["summary"])
    moe_sensitivity = property(lambda self: self._moe["sensitivity"])
    moe_changes = property(lambda self: self._moe["changes"])
    moe_predictions = property(lambda self: self._moe["predictions"])
    moe_parts = property(lambda self: self._moe["parts"])
    moe_across = property(lambda self: self._moe["across"])
    moe_tuning = property(lambda self: self._moe["tuning"])
    moe_ops = property(lambda self: self._moe["ops"])

    @functools.cached_property
    def moe_models(self) -> pd.DataFrame:
        return moe_models(self._moe["runs"], self.moe_sensitivity, self.moe_changes)

    @functools.cached_property
    def idle_caches(self) -> pd.DataFrame:
        """:func:`~profkit.analysis.caches.idle_caches`: cache files FlashInfer ignored, or that changed no tactic."""
        from profkit.analysis.caches import idle_caches

        return idle_caches(getattr(self.data, "cache_events", None), self._all_steps)

    @functools.cached_property
    def aa(self) -> pd.DataFrame:
        """The rule on identical kernels in this data's step rows (:func:`~profkit.analysis.verdict.aa_rates` per kind:
        a state timed twice, a state that ran untuned's kernels); empty without such pairs."""
        points = verdict.aa_step_points(self._all_steps, kinds=("series", "same_kernels")) if len(self._all_steps) \
            else pd.DataFrame()
        return verdict.aa_rates(points, by=["kind"]) if len(points) else pd.DataFrame()

    @functools.cached_property
    def evidence_summary(self) -> pd.DataFrame:
        return evidence_summary(self.evidence)

    # -- the plan and the verdicts --
    @functools.cached_property
    def _plan(self) -> tuple:
        return _plan(self.data.tables, self.verdicts)

    plan = property(lambda self: self._plan[0])
    plan_error = property(lambda self: self._plan[1])
    frontier = property(lambda self: self._plan[2])

    @functools.cached_property
    def evidence(self) -> pd.DataFrame:
        return verdict_evidence(self.verdicts, self.step_changes, self.moe_sensitivity, self.moe_changes,
                                captures=self.data.step_captures, winners=self.data.tables.winners,
                                moe_ops=self.moe_ops)

    @functools.cached_property
    def op_verdicts(self) -> pd.DataFrame:
        ops = sorted(set(self.data.tables.winners["op"].dropna().astype(str)) | set(self.moe_ops))
        return op_verdicts(self.evidence, self.call_costs, tuning_pass=self.step_tuning,
                           captures=self.data.step_captures, tuning=self.data.tables.tuning, speedups=self.speedups,
                           failures=self.failures, plan=self.plan, break_even=self.step_break_even,
                           moe_summary=self.moe_summary, moe_runs=self._moe["runs"], ops=ops)


def overview(data) -> Overview:
    """Every analysis the report shows over ``data``'s frames (pure; nothing is read), each computed on first use.

    Args:
        data: a :class:`profkit.catalog.Catalog` (or any object with its attributes).

    Returns:
        An :class:`Overview`.
    """
    return Overview(data)


# -- serving ----------------------------------------------------------------------------------------
def serving_verdicts(verify: pd.DataFrame, policy_tuning: pd.DataFrame | None = None, *,
                     noise: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The verify verdicts of the shipped tunings (the tuner's side judged with ``noise``), and the policy study's table.

    Returns:
        :func:`~profkit.analysis.verify.bucket_verdicts` of every verify row without a ``policy``
        (MoE tables under the tuner's routing: other routings are :func:`~profkit.analysis.moe.routing_sensitivity`'s),
        and :func:`~profkit.analysis.verify.policy_table` of the rows with one (each verify table's
        folder is one tuning); each empty when there are no such rows.
    """
    from profkit.analysis.verify import bucket_verdicts, policy_table

    if verify is None or verify.empty:
        return pd.DataFrame(), pd.DataFrame()
    is_policy = verify["policy"].notna().to_numpy(dtype=bool) if "policy" in verify.columns else \
        np.zeros(len(verify), dtype=bool)
    shipped = verify[~is_policy]
    if "routing" in shipped.columns:
        routing = shipped["routing"].astype("string")
        shipped = shipped[(routing.isna() | (routing == "tuner")).fillna(True).to_numpy(dtype=bool)]
    verdicts = bucket_verdicts(shipped, noise=noise) if len(shipped) else pd.DataFrame()
    policies = pd.DataFrame()
    if is_policy.any():
        study = verify[is_policy]
        if "folder" in study.columns:  # one tuning per verify table: the study names runs by policy and layer
            study = study.assign(run_id=study["folder"])
        policies = policy_table(study, policy_tuning)
    return verdicts, policies


# -- the step -------------------------------------------------------------------------------------
def _all_step_rows(data) -> pd.DataFrame:
    frames = [f for f in (data.step, data.step_other) if len(f) and {"state", "source"} <= set(f.columns)]
    if not frames:
        return pd.DataFrame()
    rows = pd.concat(frames, ignore_index=True)
    if "step_set" not in rows.columns:  # frames built by hand: the set is the folder holding the run
        rows = rows.assign(step_set=rows["source"].astype(str).str.rpartition("/")[0])
    return rows


NEW_STATES = ("repaired", "advised", "planned", "ported", "blind", "v2-graph", "v2-eager")


def comparison_changes(rows: pd.DataFrame) -> pd.DataFrame:
    """Every step comparison's states measured against untuned, and against the tuned cache.

    Per :func:`~profkit.analysis.step.step_comparisons` (a run, or a set of runs in separate
    processes): :func:`~profkit.analysis.step.measured_step_change` of every state against
    ``untuned``, and of the states of :data:`NEW_STATES` (repaired, advised, planned, ported, blind, v2 policies)
    against the tuned cache (``cache``, else ``tuned``).

    Returns:
        The measured rows with ``where`` (the run's or set's folder), ``baseline`` and
        ``loaded_cache`` (the cache file the state loaded; "" when none). Sorted by where, model,
        dtype, baseline, then as measured.
    """
    if rows.empty:
        return pd.DataFrame()
    out = []
    for where, model, dtype, g in step.step_comparisons(rows):
        states = set(g["state"].astype(str))
        loaded = {}
        if "loaded_cache" in g.columns:  # the file each state loaded (one per state in a comparison)
            files = g[g["loaded_cache"].fillna("").astype(str) != ""].drop_duplicates("state")
            loaded = dict(zip(files["state"].astype(str), files["loaded_cache"].astype(str)))
        tuned = next((s for s in TUNED_STATES if s in states), None)
        for baseline in [b for b in ("untuned", tuned) if b is not None and b in states]:
            m = step.measured_step_change(g, baseline=baseline)
            if baseline != "untuned":
                m = m[m["state"].isin(NEW_STATES).to_numpy(dtype=bool)]
            if len(m):
                out.append(m.assign(where=where, baseline=baseline, loaded_cache=[loaded.get(str(x), "") for x in m["state"]]))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def step_set_changes(rows: pd.DataFrame, *, changes: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per step comparison, state and baseline (:func:`comparison_changes`): the sizes' verdicts under the rule.

    Returns:
        :data:`STEP_SET_COLUMNS`: where (the run's or set's folder), sizes, faster / slower /
        within_noise / not_measurable counts, same_kernels (sizes where the state ran untuned's
        kernels at every linear, by the recorded ``picks``) and fallback (sizes where every linear
        ran tactic -1), both NA without picks. Sorted by where, model, dtype, state, baseline.
    """
    changes = comparison_changes(rows) if changes is None else changes
    if rows.empty or changes.empty:
        return empty(STEP_SET_COLUMNS)
    picks = {}
    for where, model, dtype, g in step.step_comparisons(rows):
        states = set(g["state"].astype(str))
        same = step.same_kernels(g) if "untuned" in states else pd.DataFrame(columns=["state", "same"])
        picks[(where, model, dtype)] = (same, step.fallback_sizes(g))
    out = []
    for (where, model, dtype, state, baseline), h in changes.groupby(["where", "model", "dtype", "state", "baseline"],
                                                                    sort=True):
        counts = h["verdict"].value_counts()
        same, fallback = picks.get((where, model, dtype), (pd.DataFrame(columns=["state", "same"]), pd.DataFrame()))
        mine = same[same["state"] == state]
        fb = fallback[fallback["state"] == state] if len(fallback) else fallback
        out.append({"where": where, "model": model, "dtype": dtype, "state": state, "baseline": baseline,
                    "sizes": len(h), "faster": int(counts.get("faster", 0)), "slower": int(counts.get("slower", 0)),
                    "within_noise": int(counts.get("within_noise", 0)),
                    "not_measurable": int(counts.get("not_measurable", 0)),
                    "same_kernels": int(mine["same"].sum()) if len(mine) else pd.NA,
                    "fallback": int(fb["fallback"].sum()) if len(fb) else pd.NA})
    return conform_columns(pd.DataFrame(out), STEP_SET_COLUMNS) if out else empty(STEP_SET_COLUMNS)


def drift_summary(drift: pd.DataFrame) -> pd.DataFrame:
    """Per phase of :func:`~profkit.analysis.step.pass_drift`: step runs, the median and largest drift of a
    state's pass median between passes (percent), and the median spread inside one pass (percent)."""
    columns = ["phase", "runs", "drift_pct_median", "drift_pct_max", "within_pct_median"]
    if drift is None or drift.empty:
        return pd.DataFrame(columns=columns)
    rows = [{"phase": phase, "runs": d["source"].nunique(), "drift_pct_median": d["drift_pct"].median(),
             "drift_pct_max": d["drift_pct"].max(), "within_pct_median": (100 * d["within_ms"] / d["step_ms"]).median()}
            for phase, d in drift.groupby("phase", sort=True)]
    return pd.DataFrame(rows, columns=columns)


BREAK_EVEN_SUMMARY_COLUMNS = {
    "model": "string", "dtype": "string", "sizes": "Int64", "saving_sizes": "Int64", "slower": "Int64",
    "tuning_s": "float64", "steps_min": "float64", "steps_max": "float64", "serving_s_min": "float64",
    "serving_s_max": "float64",
}


def break_even_summary(measured: pd.DataFrame, break_even: pd.DataFrame, tuning_pass: pd.DataFrame) -> pd.DataFrame:
    """Per (model, dtype) of the tuned step: sizes, those saving time beyond noise, those slower, and the
    fewest and most steps (and seconds of serving) before the tuning pass pays for itself."""
    if measured is None or measured.empty:
        return empty(BREAK_EVEN_SUMMARY_COLUMNS)
    tuned = measured[(measured["state"] == "tuned").to_numpy(dtype=bool)]
    rows = []
    for (model, dtype), g in tuned.groupby(["model", "dtype"], sort=True):
        mine = break_even[((break_even["model"] == model) & (break_even["dtype"] == dtype)).to_numpy(dtype=bool)] \
            if len(break_even) else break_even
        spent = tuning_pass[((tuning_pass["model"] == model) & (tuning_pass["dtype"] == dtype)).to_numpy(dtype=bool)] \
            if len(tuning_pass) else tuning_pass
        rows.append({"model": model, "dtype": dtype, "sizes": len(g), "saving_sizes": len(mine),
                     "slower": int(g["slower"].sum()), "tuning_s": spent["tuning_s"].iloc[0] if len(spent) else np.nan,
                     "steps_min": mine["steps_to_break_even"].min() if len(mine) else np.nan,
                     "steps_max": mine["steps_to_break_even"].max() if len(mine) else np.nan,
                     "serving_s_min": mine["serving_s_to_break_even"].min() if len(mine) else np.nan,
                     "serving_s_max": mine["serving_s_to_break_even"].max() if len(mine) else np.nan})
    if not rows:
        return empty(BREAK_EVEN_SUMMARY_COLUMNS)
    return conform_columns(pd.DataFrame(rows), BREAK_EVEN_SUMMARY_COLUMNS)


def _drift(rows: pd.DataFrame) -> pd.DataFrame:
    if rows.empty:
        return pd.DataFrame()
    parts = [g for *_, g in step.step_comparisons(rows)]
    return step.pass_drift(pd.concat(parts, ignore_index=True)) if parts else pd.DataFrame()


PREDICTION_AGREEMENT_COLUMNS = {
    "model": "string", "dtype": "string", "against": "string", "where": "string", "sizes": "Int64",
    "agree": "Int64", "beyond_noise": "Int64", "agree_beyond_noise": "Int64",
}


def prediction_agreement(verify: pd.DataFrame, measured: pd.DataFrame, predicted: pd.DataFrame,
                         changes: pd.DataFrame, *, step_rows: pd.DataFrame, captures, caches, linears) -> pd.DataFrame:
    """How often the predicted step change has the measured sign, per model and dtype.

    Rows with ``against`` = ``verify`` (predicted from the serving timings, against the tuning-pass
    step's tuned state), ``capture`` (predicted from the tuner's own timings, same measurement) and
    ``verify_cache`` (predicted from serving, against the ``cache`` state of each other step run or
    set (:func:`comparison_changes`) whose cache state loaded that tuning pass's own cache.json:
    ``where`` names it).

    Returns:
        :data:`PREDICTION_AGREEMENT_COLUMNS` (:func:`~profkit.analysis.step.sign_agreement` counts).
    """
    from profkit.analysis.verify import verify_step_changes

    if verify is None or verify.empty or measured.empty or step_rows.empty:
        return empty(PREDICTION_AGREEMENT_COLUMNS)
    from_verify = verify_step_changes(verify, step_rows, captures=captures, linears=linears)
    if from_verify.empty:
        return empty(PREDICTION_AGREEMENT_COLUMNS)
    parts = [step.sign_agreement(measured, from_verify).assign(against="verify", where=""),
             step.sign_agreement(measured, predicted).assign(against="capture", where="")
             if len(predicted) else pd.DataFrame()]
    if len(changes) and "loaded_cache" in changes.columns:
        cache = changes[((changes["state"] == "cache") & (changes["baseline"] == "untuned")).to_numpy(dtype=bool)]
        for (where, model, dtype), g in cache.groupby(["where", "model", "dtype"], sort=True):
            if where in set(step_rows["step_set"].astype(str)) | set(step_rows["source"].astype(str)):
                continue  # the tuning-pass sets themselves: the 'verify' rows
            own = caches.get((model, dtype))
            if own is None or not (g["loaded_cache"].astype(str) == own).all():
                continue
            a = step.sign_agreement(g, from_verify, state="cache")
            a = a[(a["model"] == model) & (a["dtype"] == dtype)]
            if len(a):
                parts.append(a.assign(against="verify_cache", where=where))
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty(PREDICTION_AGREEMENT_COLUMNS)
    return conform_columns(pd.concat(parts, ignore_index=True), PREDICTION_AGREEMENT_COLUMNS)


# -- MoE ------------------------------------------------------------------------------------------
def _moe_frames(runs, verdicts: pd.DataFrame | None = None) -> dict:
    """The MoE analyses (profkit.analysis.moe) of the MoE runs, as notebook 07 calls them; empty frames without runs."""
    out = {"summary": pd.DataFrame(), "sensitivity": pd.DataFrame(), "changes": pd.DataFrame(),
           "predictions": pd.DataFrame(), "parts": pd.DataFrame(), "across": pd.DataFrame(),
           "tuning": pd.DataFrame(), "ops": [], "runs": pd.DataFrame()}
    if runs is None or runs.runs.empty:
        return out
    from profkit.analysis import moe

    t = runs.tables
    out["runs"] = runs.runs
    out["ops"] = sorted(set(moe.moe_rows(t.winners)["op"].dropna().astype(str))) if len(t.winners) else []
    out["summary"] = moe.model_summary(t.winners, t.candidates, runs.verify, runs.step, runs.runs)
    if len(runs.verify):
        out["sensitivity"] = _with_intervals(moe.routing_sensitivity(runs.verify), verdicts)
    model_of = dict(zip(runs.runs["run_id"], runs.runs["model"]))
    if len(out["sensitivity"]):
        out["sensitivity"] = out["sensitivity"].assign(model=out["sensitivity"]["run_id"].map(model_of))
    changes, predictions = [], []
    for source, rows in (runs.step.groupby("source", sort=True) if len(runs.step) else []):
        model = str(rows["model"].dropna().iloc[0]) if rows["model"].notna().any() else ""
        changed = moe.step_changes(rows)
        changes.append(changed.assign(source=str(source), model=model))
        verified = runs.verify[runs.verify["run_id"].map(model_of) == model] if len(runs.verify) else runs.verify
        if len(verified):
            run = sorted(verified["run_id"].unique())[0]
            won = t.winners[t.winners["run_id"] == run]
            predictions += [moe.step_predictions(rows, won, verified[verified["run_id"] == run], state=s,
                                                 changes=changed).assign(source=str(source))
                            for s in ("cache", "repaired")]
    out["changes"] = pd.concat(changes, ignore_index=True) if changes else pd.DataFrame()
    out["predictions"] = pd.concat([p for p in predictions if len(p)], ignore_index=True) \
        if any(len(p) for p in predictions) else pd.DataFrame()
    out["parts"] = moe.tactic_parts(t.winners) if len(t.winners) else pd.DataFrame()
    across, tuning = [], []
    for model, mine in runs.runs.dropna(subset=["model"]).groupby("model", sort=True):
        ids = set(mine["run_id"].dropna())
        w, c = t.winners[t.winners["run_id"].isin(ids)], t.candidates[t.candidates["run_id"].isin(ids)]
        a = moe.picks_across_runs(w, c)
        if len(a):
            across.append(a.assign(model=model))
        first_run = mine.sort_values("folder")["run_id"].dropna()
        if len(first_run):
            b = cost.tuning_breakdown(t.tuning[t.tuning["run_id"] == first_run.iloc[0]], by="bucket")
            if len(b):
                tuning.append(b.assign(model=model))
    out["across"] = pd.concat(across, ignore_index=True) if across else pd.DataFrame()
    out["tuning"] = pd.concat(tuning, ignore_index=True) if tuning else pd.DataFrame()
    return out


def _with_intervals(sensitivity: pd.DataFrame, verdicts: pd.DataFrame | None) -> pd.DataFrame:
    """``sensitivity`` with the rule's effect, interval and detectable change where ``verdicts`` (the
    tuner routing's :func:`~profkit.analysis.verify.bucket_verdicts`) has them; other routings keep the
    verdict of :func:`~profkit.analysis.moe.routing_sensitivity` and an effect of 1 / speedup - 1."""
    keys = ["run_id", "shape", "m"]
    out = sensitivity.assign(effect=1.0 / sensitivity["serving_speedup"] - 1.0)
    if verdicts is None or verdicts.empty:
        return out.assign(effect_lo=np.nan, effect_hi=np.nan, detectable=np.nan)
    v = verdicts[keys + ["effect", "effect_lo", "effect_hi", "detectable"]].assign(routing="tuner")
    out = out.merge(v, on=keys + ["routing"], how="left", suffixes=("", "_rule"))
    out["effect"] = out["effect_rule"].fillna(out["effect"])
    return out.drop(columns="effect_rule")


MOE_MODEL_COLUMNS = {"model": "string", "shape": "string", "run_id": "string", "runs": "string",
                     "step_source": "string", "tunings": "Int64", "step_sets": "Int64"}


def moe_models(runs: pd.DataFrame, sensitivity: pd.DataFrame, changes: pd.DataFrame) -> pd.DataFrame:
    """One row per MoE model, the one with the most evidence first (most tunings, then step sets, then name).

    Returns:
        :data:`MOE_MODEL_COLUMNS`: run_id (its verified run, else its first run by folder), runs
        (every run id, comma-joined), step_source (the step set with an A/A series, else its first),
        tunings and step_sets.
    """
    if runs is None or runs.empty:
        return empty(MOE_MODEL_COLUMNS)
    rows = []
    for model, mine in runs.dropna(subset=["model"]).groupby("model", sort=True):
        ordered = mine.sort_values("folder")["run_id"].dropna().astype(str).tolist()
        verified = sorted(set(sensitivity["run_id"].astype(str)) & set(ordered)) if len(sensitivity) else []
        sets = changes[(changes["model"] == model).to_numpy(dtype=bool)] if len(changes) else changes
        sources = sorted(sets["source"].astype(str).unique()) if len(sets) else []
        aa = [src for src in sources if (sets[sets["source"] == src]["state"].astype(str).str.startswith("untuned-")).any()]
        rows.append({"model": model, "shape": str(mine["shape"].dropna().iloc[0]) if mine["shape"].notna().any() else "",
                     "run_id": (verified or ordered or [""])[0], "runs": ", ".join(ordered),
                     "step_source": (aa or sources or [""])[0], "tunings": len(ordered), "step_sets": len(sources)})
    out = pd.DataFrame(rows).sort_values(["tunings", "step_sets", "model"], ascending=[False, False, True],
                                         kind="stable")
    return conform_columns(out.reset_index(drop=True), MOE_MODEL_COLUMNS)


EVIDENCE_SUMMARY_COLUMNS = {
    "op": "string", "kind": "string", "model": "string", "points": "Int64", "faster": "Int64", "slower": "Int64",
    "within_noise": "Int64", "not_measurable": "Int64", "effect_min": "float64", "effect_max": "float64",
}


def evidence_summary(evidence: pd.DataFrame) -> pd.DataFrame:
    """Per (op, kind, model) of :func:`verdict_evidence`: the verdict counts and the measured effects' range.

    ``model`` is "" for serving points of dense ops (one row per op); effects span the measurable points.
    """
    if evidence.empty:
        return empty(EVIDENCE_SUMMARY_COLUMNS)
    e = evidence.assign(model=evidence["model"].fillna(""))
    rows = []
    for (op, kind, model), g in e.groupby(["op", "kind", "model"], sort=True):
        counts = g["verdict"].value_counts()
        measurable = g[(g["verdict"] != "not_measurable").to_numpy(dtype=bool)]
        rows.append({"op": op, "kind": kind, "model": model, "points": len(g),
                     "faster": int(counts.get("faster", 0)), "slower": int(counts.get("slower", 0)),
                     "within_noise": int(counts.get("within_noise", 0)),
                     "not_measurable": int(counts.get("not_measurable", 0)),
                     "effect_min": measurable["effect"].min() if len(measurable) else np.nan,
                     "effect_max": measurable["effect"].max() if len(measurable) else np.nan})
    return conform_columns(pd.DataFrame(rows), EVIDENCE_SUMMARY_COLUMNS)


# -- the plan -------------------------------------------------------------------------------------
def _plan(tables, verdicts: pd.DataFrame):
    """profkit advise over the captures (serving gains where verified): (plan, why not, frontier)."""
    from profkit.analysis.advise import advise, budget_frontier

    if tables.tuning.empty or tables.candidates.empty:
        return None, "no tuning rows with candidates to plan from", pd.DataFrame()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            plan = advise(tables, **({"verify": verdicts} if len(verdicts) else {}))
            return plan, "", budget_frontier(plan)
    except ProfkitError as exc:
        return None, " ".join(str(exc).split()), pd.DataFrame()


# -- what the verdicts rest on --------------------------------------------------------------------
def verdict_evidence(verdicts: pd.DataFrame, changes: pd.DataFrame, moe_sensitivity: pd.DataFrame,
                     moe_changes: pd.DataFrame, *, captures, winners: pd.DataFrame, moe_ops=()) -> pd.DataFrame:
    """Every comparison the per-op verdicts rest on, one row each.

    - ``kind="serving"``: the tuner's pick against FlashInfer's default in serving (``profkit
      verify``): each bucket once at its own M (:func:`~profkit.analysis.verify.bucket_verdicts`);
      for MoE ops every verified M under every routing (:func:`~profkit.analysis.moe.routing_sensitivity`).
    - ``kind="step"``: the model step with the tuned cache (``cache``; else ``tuned``) against
      untuned, per size, in every step comparison (:func:`~profkit.analysis.step.step_comparisons`);
      for MoE models each step set's ``cache`` series (:func:`~profkit.analysis.moe.step_changes`).
      ``changes`` is :func:`comparison_changes` of the step rows.
      A dense step model's op is the op its tuning-pass capture tuned.

    Returns:
        :data:`EVIDENCE_COLUMNS`: effect (tuned / untuned time - 1: negative is faster), its
        interval, detectable and verdict from the comparison rule; speedup (untuned / tuned).
        Sorted by op, kind, model, shape, where, m.
    """
    parts = []
    moe_ops = set(moe_ops)
    if len(verdicts):
        v = verdicts[verdicts["at_bucket"].fillna(False).to_numpy(dtype=bool)]
        v = v[~v["op"].isin(moe_ops).to_numpy(dtype=bool)]
        parts.append(pd.DataFrame({
            "op": v["op"], "kind": "serving", "shape": v["shape"], "where": v["run_id"], "m": v["m"],
            "label": "M=" + v["m"].astype(str), "effect": v["effect"], "effect_lo": v["effect_lo"],
            "effect_hi": v["effect_hi"], "detectable": v["detectable"], "verdict": v["verdict"],
            "speedup": v["serving_speedup"]}))
    if len(moe_sensitivity):
        s = moe_sensitivity
        op = _moe_op(winners, moe_ops)
        effect = 1.0 / s["serving_speedup"] - 1.0
        parts.append(pd.DataFrame({
            "op": op, "kind": "serving", "model": s.get("model"), "shape": s["shape"], "where": s["run_id"],
            "routing": s["routing"], "m": s["m"], "label": "M=" + s["m"].astype(str) + " (" + s["routing"].astype(str) + " routing)",
            "effect": s["effect"] if "effect" in s.columns else effect,
            "effect_lo": s["effect_lo"] if "effect_lo" in s.columns else np.nan,
            "effect_hi": s["effect_hi"] if "effect_hi" in s.columns else np.nan,
            "detectable": s["detectable"] if "detectable" in s.columns else np.nan,
            "verdict": s["verdict"], "speedup": s["serving_speedup"]}))
    moe_models = set(moe_changes["model"].dropna().astype(str)) if len(moe_changes) else set()
    if len(changes):
        ops_of = _ops_of_step_models(captures, winners)
        c = changes[(changes["baseline"] == "untuned").to_numpy(dtype=bool)]
        for (where, model, dtype), m in c.groupby(["where", "model", "dtype"], sort=True):
            if model in moe_models:
                continue
            state = next((s for s in TUNED_STATES if (m["state"] == s).any()), None)
            if state is None:
                continue
            m = m[(m["state"] == state).to_numpy(dtype=bool)]
            for op in ops_of.get((model, dtype), ()):
                parts.append(_step_evidence(m, op=op, model=f"{model} {dtype}", where=where))
    if len(moe_changes):
        op = _moe_op(winners, moe_ops)
        c = moe_changes[(moe_changes["state"] == "cache").to_numpy(dtype=bool)]
        for (model, source), g in c.groupby(["model", "source"], sort=True):
            parts.append(_step_evidence(g, op=op, model=str(model), where=str(source)))
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty(EVIDENCE_COLUMNS)
    out = conform_columns(pd.concat(parts, ignore_index=True), EVIDENCE_COLUMNS)
    return out.sort_values(["op", "kind", "model", "shape", "where", "m"], kind="stable").reset_index(drop=True)


def _step_evidence(m: pd.DataFrame, *, op: str, model: str, where: str) -> pd.DataFrame:
    return pd.DataFrame({
        "op": op, "kind": "step", "model": model, "where": where, "phase": m["phase"], "m": m["tokens"],
        "label": m["phase"].astype(str) + " " + m["tokens"].astype(str), "effect": m["effect"],
        "effect_lo": m["effect_lo"], "effect_hi": m["effect_hi"], "detectable": m["detectable"],
        "verdict": m["verdict"], "speedup": m["baseline_ms"] / m["step_ms"]})


def _moe_op(winners: pd.DataFrame, moe_ops) -> str:
    return sorted(moe_ops)[0] if moe_ops else "fused MoE"


def _ops_of_step_models(captures, winners: pd.DataFrame) -> dict:
    """{(model, dtype): ops its tuning-pass capture tuned}."""
    out = {}
    for key, run in captures.items():
        ops = winners.loc[(winners["run_id"] == run).fillna(False).to_numpy(dtype=bool), "op"].dropna().unique()
        out[key] = tuple(sorted(str(o) for o in ops))
    return out


def chance_count(n: int, *, p: float = CHANCE_FASTER, level: float = CHANCE_LEVEL) -> int:
    """The fewest "faster" points of ``n`` that identical kernels reach with probability below ``level``.

    Under the rule, identical kernels are called faster at a rate of at most ``p`` per point; a
    count below this one is what chance alone gives (binomial tail).
    """
    if n <= 0:
        return 1
    tail = 1.0
    for k in range(n + 1):
        if tail < level:
            return k
        tail -= math.comb(n, k) * p ** k * (1 - p) ** (n - k)
    return n + 1


# -- per op ---------------------------------------------------------------------------------------
def call_costs(breakdown: pd.DataFrame, calls: pd.DataFrame, tuning: pd.DataFrame, first_runs) -> pd.DataFrame:
    """Per op: the wall time of a tuning call that profiled every bucket of its shape.

    Returns:
        :data:`CALL_COST_COLUMNS`: the first runs' full calls (min, median, max seconds), the
        shares of measuring and runner preparation in them (NaN when the tuning rows carry no
        phase times: ``split_known``), and the later runs' full calls of the same ops (repeats,
        other ranks). Sorted by op.
    """
    if breakdown.empty or calls.empty:
        return empty(CALL_COST_COLUMNS)
    per_call = breakdown.groupby(["run_id", "call"], observed=True).size().rename("n_buckets").reset_index()
    every = calls.merge(per_call, on=["run_id", "call"], how="inner")
    timed = tuning[tuning["kind"].eq("profile").fillna(False).to_numpy(dtype=bool)].groupby(["run_id", "call"])
    known = timed["measure_s"].apply(lambda s: bool(s.notna().any())).rename("split_known").reset_index()
    every = every.merge(known, on=["run_id", "call"], how="left")
    every["first_run"] = every["run_id"].isin(first_runs).to_numpy(dtype=bool)
    top = every.groupby("op")["n_buckets"].transform("max")
    full = every[(every["n_buckets"] == top).to_numpy(dtype=bool)]
    rows = []
    for op, g in full.groupby("op", sort=True):
        first = g[g["first_run"].to_numpy(dtype=bool)]
        later = g[~g["first_run"].to_numpy(dtype=bool)]
        shown = first if len(first) else g
        split = bool(shown["split_known"].fillna(False).all())
        wall = float(shown["wall_s"].sum())
        rows.append({"op": op, "buckets": int(shown["n_buckets"].max()), "calls": len(shown),
                     "wall_s_min": shown["wall_s"].min(), "wall_s_median": shown["wall_s"].median(),
                     "wall_s_max": shown["wall_s"].max(),
                     "measure_share": shown["measure_s"].sum() / wall if split and wall else np.nan,
                     "prep_share": shown["prep_s"].sum() / wall if split and wall else np.nan, "split_known": split,
                     "later_calls": len(later) if len(first) else 0,
                     "later_s_min": later["wall_s"].min() if len(first) and len(later) else np.nan,
                     "later_s_max": later["wall_s"].max() if len(first) and len(later) else np.nan})
    return conform_columns(pd.DataFrame(rows), CALL_COST_COLUMNS) if rows else empty(CALL_COST_COLUMNS)


def speedup_summary(speedups: pd.DataFrame) -> pd.DataFrame:
    """Per op: the winner against FlashInfer's default by the tuner's own timer (first run each)."""
    rows = []
    for op, g in (speedups.groupby("op", sort=True) if len(speedups) else []):
        slow = g["slower_than_default"].fillna(False).to_numpy(dtype=bool)
        per = g.groupby("shape")["bucket"].nunique()
        rows.append({"op": op, "shapes": g["shape"].nunique(), "buckets": len(g),
                     "buckets_per_shape": int(per.iloc[0]) if per.nunique() == 1 and len(per) else pd.NA,
                     "median_speedup": g["speedup"].median(), "max_speedup": g["speedup"].max(),
                     "slower": int(slow.sum()),
                     "slower_beyond_noise": int((slow & ~g["within_noise"].fillna(False).to_numpy(dtype=bool)).sum())})
    return conform_columns(pd.DataFrame(rows), SPEEDUP_SUMMARY_COLUMNS) if rows else empty(SPEEDUP_SUMMARY_COLUMNS)


def between_summary(between: pd.DataFrame) -> pd.DataFrame:
    """Per (op, at_bucket): median, min and max of tuned-vs-untuned op timings, and how many (shape, M)."""
    if between.empty:
        return pd.DataFrame(columns=["op", "at_bucket", "median_speedup", "min_speedup", "max_speedup", "n"])
    g = between.groupby(["op", "at_bucket"])["speedup"].agg(["median", "min", "max", "count"]).reset_index()
    return g.rename(columns={"median": "median_speedup", "min": "min_speedup", "max": "max_speedup", "count": "n"})


def op_verdicts(evidence: pd.DataFrame, costs: pd.DataFrame, *, tuning_pass: pd.DataFrame, captures,
                tuning: pd.DataFrame, speedups: pd.DataFrame, failures: pd.DataFrame, plan=None,
                break_even: pd.DataFrame | None = None, moe_summary: pd.DataFrame | None = None,
                moe_runs: pd.DataFrame | None = None, ops=()) -> pd.DataFrame:
    """One row per op: what tuning cost, what it bought beyond noise, and what to do.

    The recommendation rests on the best evidence the data has: the model step (the tuned cache
    against untuned, per size) where any size is measurable, else serving (``profkit verify``: the
    pick against the default), else nothing (``unknown``; ``needs`` names the input that would
    answer). With ``f`` points faster and ``s`` slower beyond noise of ``n`` measured:

    - ``failed``: every tuning of the op did nothing (:func:`~profkit.analysis.failures.tuning_failures`
      status ``not tuned``);
    - ``skip``: ``s > f``, or ``f`` below :func:`chance_count` of ``n`` (what identical kernels give);
    - ``keep``: ``s == 0`` and ``f >= n / 2``;
    - ``plan``: a gain at some points only: tune what ``profkit advise`` plans (its decision is not
      ``full``), else ``keep``.

    Returns:
        :data:`OP_VERDICT_COLUMNS`, sorted by op. Effects are relative (tuned / untuned - 1; negative
        is faster); ``*_best`` is the largest gain called faster, ``*_worst`` the largest loss
        called slower, each with its interval and where it was measured; the costs are the first
        runs' full tuning calls and the tuning passes of the step models whose capture tuned the op.
    """
    ops = sorted(set(ops) | set(evidence["op"].dropna().astype(str) if len(evidence) else ()))
    rows = []
    for op in ops:
        row: dict = {"op": op}
        row.update(_cost_fields(op, costs, tuning_pass, captures, tuning, moe_summary, moe_runs))
        row.update(_failure_fields(op, failures))
        mine = evidence[(evidence["op"] == op).to_numpy(dtype=bool)] if len(evidence) else evidence
        serving = mine[(mine["kind"] == "serving").to_numpy(dtype=bool)] if len(mine) else mine
        steps = mine[(mine["kind"] == "step").to_numpy(dtype=bool)] if len(mine) else mine
        row.update(_evidence_fields("serving", serving))
        row.update(_evidence_fields("step", steps))
        row["step_points"] = len(steps)
        row["step_measurable"] = int((steps["verdict"] != "not_measurable").sum()) if len(steps) else 0
        row["step_models"] = ", ".join(sorted(set(steps["model"].dropna().astype(str)))) if len(steps) else ""
        if len(steps):
            measurable = steps[(steps["verdict"] != "not_measurable").to_numpy(dtype=bool)]
            row["step_change_min_pct"] = 100 * measurable["effect"].min() if len(measurable) else np.nan
            row["step_change_max_pct"] = 100 * measurable["effect"].max() if len(measurable) else np.nan
        row.update(_small_fields(serving, steps))
        s = speedups[(speedups["op"] == op).to_numpy(dtype=bool)] if len(speedups) else speedups
        row["tuner_speedup_median"] = s["speedup"].median() if len(s) else np.nan
        row["tuner_speedup_max"] = s["speedup"].max() if len(s) else np.nan
        row["break_even_steps"] = _break_even(op, break_even, captures, tuning)
        row.update(_plan_fields(op, plan))
        row.update(_decide(row))
        rows.append(row)
    return conform_columns(pd.DataFrame(rows), OP_VERDICT_COLUMNS) if rows else empty(OP_VERDICT_COLUMNS)


def _cost_fields(op, costs, tuning_pass, captures, tuning, moe_summary, moe_runs) -> dict:
    out = {}
    c = costs[(costs["op"] == op).to_numpy(dtype=bool)] if len(costs) else costs
    if len(c):
        r = c.iloc[0]
        out.update(calls=r["calls"], buckets=r["buckets"], call_s_min=r["wall_s_min"],
                   call_s_median=r["wall_s_median"], call_s_max=r["wall_s_max"])
    passes = []  # (model, seconds): the tuning passes of the step models whose capture tuned this op
    for model, dtype, run, seconds in (tuning_pass[["model", "dtype", "run_id", "tuning_s"]].itertuples(index=False)
                                       if len(tuning_pass) else []):
        ran = tuning[(tuning["run_id"] == run).fillna(False).to_numpy(dtype=bool)]["op"].dropna().astype(str)
        if op in set(ran):
            passes.append((f"{model} {dtype}", float(seconds)))
    if moe_summary is not None and len(moe_summary) and moe_runs is not None and len(moe_runs):
        ran = tuning[tuning["run_id"].isin(set(moe_runs["run_id"].dropna())).to_numpy(dtype=bool)]["op"]
        if op in set(ran.dropna().astype(str)) and not passes:
            passes = [(str(m), float(s)) for m, s in zip(moe_summary["model"], moe_summary["tuning_s"]) if pd.notna(s)]
    if passes:
        out.update(pass_models=", ".join(sorted({m for m, _ in passes})), pass_s_min=min(s for _, s in passes),
                   pass_s_max=max(s for _, s in passes))
    return out


def _failure_fields(op, failures) -> dict:
    f = failures[(failures["op"] == op).to_numpy(dtype=bool)] if len(failures) else failures
    if f.empty:
        return {"status": "unknown"}
    statuses = set(f["status"].astype(str))
    status = "not tuned" if statuses == {"not tuned"} else "partly tuned" if statuses - {"tuned"} else "tuned"
    bad = f[(f["status"] != "tuned").to_numpy(dtype=bool)]
    cause = bad["cause"].dropna()
    return {"status": status, "failed_runs": len(bad), "failure_cause": str(cause.iloc[0]) if len(cause) else None}


def _evidence_fields(kind: str, points: pd.DataFrame) -> dict:
    counts = points["verdict"].value_counts() if len(points) else pd.Series(dtype=int)
    out = {f"{kind}_faster": int(counts.get("faster", 0)), f"{kind}_slower": int(counts.get("slower", 0)),
           f"{kind}_within_noise": int(counts.get("within_noise", 0))}
    if kind == "serving":
        out.update(serving_points=len(points), serving_not_measurable=int(counts.get("not_measurable", 0)),
                   serving_speedup_min=points["speedup"].min() if len(points) else np.nan,
                   serving_speedup_median=points["speedup"].median() if len(points) else np.nan,
                   serving_speedup_max=points["speedup"].max() if len(points) else np.nan)
    measured = points[(points["verdict"] != "not_measurable").to_numpy(dtype=bool)] if len(points) else points
    detectable = measured["detectable"].dropna() if len(measured) else measured
    if len(detectable):  # the smallest change each measured comparison could have called (the rule's design)
        out.update({f"{kind}_detectable_min_pct": 100 * detectable.min(),
                    f"{kind}_detectable_max_pct": 100 * detectable.max()})
    for name, called_as, pick in (("best", "faster", "idxmin"), ("worst", "slower", "idxmax")):
        called = points[(points["verdict"] == called_as).to_numpy(dtype=bool)] if len(points) else points
        if len(called):
            r = called.loc[getattr(called["effect"], pick)()]
            at = " ".join(str(x) for x in (r["model"], r["label"]) if pd.notna(x) and str(x))
            out.update({f"{kind}_{name}": r["effect"], f"{kind}_{name}_lo": r["effect_lo"],
                        f"{kind}_{name}_hi": r["effect_hi"], f"{kind}_{name}_at": at})
    return out


def _small_fields(serving: pd.DataFrame, steps: pd.DataFrame) -> dict:
    out = {}
    for kind, points in (("serving", serving), ("step", steps)):
        small = points[((points["m"] <= SMALL_M) & (points.get("phase", pd.Series("decode", index=points.index))
                                                    .fillna("decode") == "decode")).fillna(False).to_numpy(dtype=bool)] \
            if len(points) else points
        measurable = small[(small["verdict"] != "not_measurable").to_numpy(dtype=bool)] if len(small) else small
        out.update({f"small_{kind}_points": len(measurable),
                    f"small_{kind}_faster": int((measurable["verdict"] == "faster").sum()) if len(measurable) else 0,
                    f"small_{kind}_slower": int((measurable["verdict"] == "slower").sum()) if len(measurable) else 0})
    return out


def _break_even(op, break_even, captures, tuning) -> float:
    """Fewest steps after which a tuning pass of a step model tuning ``op`` pays for itself (inf: never)."""
    if break_even is None or break_even.empty:
        return np.nan
    steps = []
    for (model, dtype), run in captures.items():
        ran = tuning[(tuning["run_id"] == run).fillna(False).to_numpy(dtype=bool)]["op"].dropna().astype(str)
        if op not in set(ran):
            continue
        mine = break_even[((break_even["model"] == model) & (break_even["dtype"] == dtype)).to_numpy(dtype=bool)]
        steps += list(mine["steps_to_break_even"].dropna())
    return float(min(steps)) if steps else np.nan


def _plan_fields(op, plan) -> dict:
    if plan is None or plan.ops.empty:
        return {}
    p = plan.ops[(plan.ops["op"] == op).to_numpy(dtype=bool)]
    if p.empty:
        return {}
    r = p.iloc[0]
    return {"plan_decision": r["decision"], "plan_full_s": r["full_s"], "plan_planned_s": r["planned_s"],
            "plan_buckets": r["n_buckets"], "plan_tuned_buckets": r["n_tuned_buckets"], "plan_cost_pct": r["cost_pct"]}


def _decide(row: dict) -> dict:
    """The recommendation, its basis and what input would answer more (see :func:`op_verdicts`)."""
    needs = []
    if not row.get("serving_points"):
        needs.append("a `profkit verify` table of a capture (the picks timed the way engines run them)")
    if not row.get("step_measurable"):
        needs.append("`profkit step` results with the states interleaved (e.g. `--states "
                     "untuned,cache,untuned,cache,untuned,cache`): one pass of each is not measurable")
    if pd.isna(row.get("tuner_speedup_median", np.nan)) and not row.get("serving_points"):
        needs.append("a capture with the default timed (`profkit capture`, or `profkit.capture()`)")
    out = {"needs": "; ".join(needs)}
    if row.get("status") == "not tuned":
        return {**out, "recommendation": "failed", "basis": "failures"}
    if row.get("step_measurable"):
        basis, n = "step", int(row["step_measurable"])
    elif row.get("serving_points") and row["serving_points"] > row.get("serving_not_measurable", 0):
        basis, n = "serving", int(row["serving_points"] - row.get("serving_not_measurable", 0))
    else:
        return {**out, "recommendation": "unknown", "basis": "none"}
    faster, slower = int(row[f"{basis}_faster"]), int(row[f"{basis}_slower"])
    chance = chance_count(n)
    out.update(basis=basis, chance_faster=chance)
    if slower > faster or faster < chance:
        return {**out, "recommendation": "skip"}
    if slower == 0 and 2 * faster >= n:
        return {**out, "recommendation": "keep"}
    decision = row.get("plan_decision")
    return {**out, "recommendation": "plan" if isinstance(decision, str) and decision != "full" else "keep"}


# -- where things ran -----------------------------------------------------------------------------
def serving_provenance(runs: pd.DataFrame, bench: pd.DataFrame, speedups: pd.DataFrame) -> dict:
    """Where the kernels and the serving pair come from: ``kernel_gpus``, ``kernel_ops``, ``serving_gpus``,
    ``serving_models``, ``serving_engines`` (sorted, comma-joined; "" when not recorded) and ``same_gpu``."""
    def joined(frame, column):
        if frame is None or column not in frame.columns:
            return ""
        return ", ".join(sorted({str(v) for v in frame[column].dropna() if str(v)}))

    serving = bench[bench["total_output_tokens"].notna().to_numpy(dtype=bool)] \
        if len(bench) and "total_output_tokens" in bench.columns else bench
    kernel_gpus, serving_gpus = joined(runs, "gpu"), joined(serving, "gpu")
    short = lambda s: {g.replace("NVIDIA ", "") for g in s.split(", ") if g}  # noqa: E731
    return {"kernel_gpus": kernel_gpus, "kernel_ops": joined(speedups, "op"), "serving_gpus": serving_gpus,
            "serving_models": joined(serving, "model"), "serving_engines": joined(serving, "engine"),
            "same_gpu": bool(kernel_gpus and serving_gpus and short(kernel_gpus) == short(serving_gpus))}


_ENV = ("gpu", "driver", "cuda", "torch", "flashinfer", "cudnn", "cublas", "cudnn_frontend", "python", "host")


def environment(runs: pd.DataFrame) -> pd.DataFrame:
    """(field, value) per environment column of the runs: every distinct value, comma-joined."""
    from profkit._versions import cudnn_version

    rows = []
    for col in (c for c in _ENV if c in runs.columns):
        values = sorted({cudnn_version(v) if col == "cudnn" else str(v) for v in runs[col].dropna()})
        rows.append({"field": "cuDNN" if col == "cudnn" else col, "value": ", ".join(values) if values else "?"})
    return pd.DataFrame(rows, columns=["field", "value"])


def kernels_beside_serving(speedups: pd.DataFrame, bench: pd.DataFrame, *, labels=None) -> pd.DataFrame:
    """Kernel speedups of the bench's model beside a serving pair (:func:`~profkit.analysis.kernel_vs_e2e`).

    The pair is autotune off/on where the bench says so, else the first two serving rows in
    file order (baseline first). Kernels are the captured shapes whose display label names the
    bench's model, else all of them.

    Returns:
        :func:`~profkit.analysis.kernel_vs_e2e` rows; empty when ``bench`` has no serving pair
        (with a warning naming why when rows were given).
    """
    if bench.empty or "total_output_tokens" not in bench:
        return pd.DataFrame()
    serving = bench[bench["total_output_tokens"].notna().to_numpy(dtype=bool)]
    if len(serving) < 2:
        return pd.DataFrame()
    flags = serving["autotune"].astype("boolean")
    known = not flags.isna().any() and flags.nunique() == 2
    pair = {} if known else {"baseline": str(serving["label"].iloc[0]), "treatment": str(serving["label"].iloc[1])}
    model = str(serving["model"].dropna().iloc[0]).rsplit("/", 1)[-1] if serving["model"].notna().any() else ""
    labels = labels or {}
    mine = speedups[speedups["shape"].map(lambda s: model in labels.get(s, "")).to_numpy(dtype=bool)] if model \
        else speedups
    try:
        return engine.kernel_vs_e2e(mine if len(mine) else speedups, serving, **pair)
    except ProfkitError as exc:
        warnings.warn(f"bench files given but no serving pair found: {exc}", stacklevel=2)
        return pd.DataFrame()
