"""The recommendation per op, decided here and nowhere else: the evidence it rests on, and the rule that decides.

:func:`op_verdicts` gives one row per op with what tuning cost, what it bought beyond noise in serving and
at the model step (effects and intervals from the one comparison rule, :mod:`profkit.analysis.verdict`), and
the recommendation (``keep``, ``skip``, ``plan``, ``failed`` or ``unknown``).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from profkit.analysis._frames import conform_columns, empty
from profkit.analysis.step_sets import TUNED_STATES
from profkit.errors import ProfkitError

RECOMMENDATIONS = ("keep", "skip", "plan", "failed", "unknown")

# The rule calls identical kernels "faster" at no more than half its two-sided A/A rate
# (docs/comparison_rule.md: <= 5% of A/A points beyond noise, either way).
CHANCE_FASTER = 0.025

# A count of "faster" points is a gain only when identical kernels would reach it less often than this.
CHANCE_LEVEL = 0.05

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



def plan_of(tables, verdicts: pd.DataFrame):
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
