"""Every analysis the report shows over one catalogue's frames, computed once, eagerly, in one place.

:func:`analyse` takes what :func:`profkit.catalog.open` returns (or one GPU's part of it,
:mod:`profkit.catalog.partition`) and returns :class:`Results`: frozen frames, each the output of one
public analysis function, so a notebook can call the same function on its own frames. The report's
sections only format these fields; the recommendation is :func:`profkit.analysis.recommend.op_verdicts`'s.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from profkit.analysis import _rank_reduce, compare, cost, decisions, op_timings, step, verdict
from profkit.analysis._frames import DEFAULT_NOISE_PCT, conform_columns, shapes_of
from profkit.analysis.caches import idle_caches
from profkit.analysis.failures import tuning_failures
from profkit.analysis.moe_models import moe_frames, moe_models
from profkit.analysis.ranks import noise_bands
from profkit.analysis.recommend import op_verdicts, plan_of, verdict_evidence
from profkit.analysis.serving import kernels_beside_serving, serving_provenance, serving_verdicts
from profkit.analysis.step_sets import (all_step_rows, break_even_summary, comparison_changes, drift_summary,
                                        prediction_agreement, step_drift, step_set_changes)
from profkit.analysis.summaries import between_summary, call_costs, environment, speedup_summary
from profkit.analysis.verify import op_summary

# The groups of analyses :func:`analyse` reports to ``progress``, in order.
STEPS = ("decisions", "repeats", "steps", "serving", "MoE", "verdicts")


@dataclasses.dataclass(frozen=True, eq=False)
class Results:
    """The analysis frames of one catalogue (or one GPU's part of it); empty frames where an input is absent.

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
        between_summary: :func:`~profkit.analysis.summaries.between_summary` of ``between``.
        failures: :func:`~profkit.analysis.failures.tuning_failures` of every run.
        call_costs: :func:`~profkit.analysis.summaries.call_costs` (one row per op).
        speedup_summary: :func:`~profkit.analysis.summaries.speedup_summary` (one row per op).
        environment: :func:`~profkit.analysis.summaries.environment` of the runs.
        step_rows: the ``profkit step`` rows of the tuning-pass step sets.
        step_measured: :func:`~profkit.analysis.step.measured_step_change` of those rows.
        step_predicted: :func:`~profkit.analysis.step.predicted_step_changes`.
        step_tuning: :func:`~profkit.analysis.step.tuning_pass_seconds`.
        step_break_even: :func:`~profkit.analysis.step.break_even_table`.
        step_comparisons: :func:`~profkit.analysis.step.step_comparisons` of every step row: (where, model, dtype, rows).
        step_changes: :func:`~profkit.analysis.step_sets.comparison_changes`: every step comparison's states against
            untuned and the tuned cache.
        step_sets: :func:`~profkit.analysis.step_sets.step_set_changes` (one row per step run or set, state, baseline).
        drift: :func:`~profkit.analysis.step.pass_drift` of the step sets that repeat a state.
        drift_summary: :func:`~profkit.analysis.step_sets.drift_summary` of ``drift`` (per phase).
        break_even_summary: :func:`~profkit.analysis.step_sets.break_even_summary` (per model and dtype).
        predictions: :func:`~profkit.analysis.step_sets.prediction_agreement`.
        e2e, e2e_problem: :func:`~profkit.analysis.serving.kernels_beside_serving`: the rows, and why there are none
            where serving rows were given ("" otherwise).
        serving_where: :func:`~profkit.analysis.serving.serving_provenance` (empty without ``e2e``).
        verdicts: the shipped tunings' serving verdicts (:func:`~profkit.analysis.serving.serving_verdicts`).
        policies: :func:`~profkit.analysis.verify.policy_table` of the policy study.
        verify_summary: :func:`~profkit.analysis.verify.op_summary` of ``verdicts``.
        moe_summary, moe_sensitivity, moe_changes, moe_predictions, moe_parts, moe_across, moe_tuning, moe_ops,
            moe_runs: :func:`~profkit.analysis.moe_models.moe_frames` of the MoE runs.
        moe_models: :func:`~profkit.analysis.moe_models.moe_models`: one row per MoE model, most evidence first.
        idle_caches: :func:`~profkit.analysis.caches.idle_caches` of the logs' cache events and the step rows.
        aa: the rule on identical kernels in the step rows (:func:`~profkit.analysis.verdict.aa_rates` per kind);
            empty without such pairs.
        plan: :func:`~profkit.analysis.advise.advise` of the captures (serving gains where verified);
            None when it cannot plan (``plan_error`` says why).
        frontier: :func:`~profkit.analysis.advise.budget_frontier` of ``plan``.
        evidence: :func:`~profkit.analysis.recommend.verdict_evidence`: every comparison behind the verdicts.
        op_verdicts: :func:`~profkit.analysis.recommend.op_verdicts`: one row per op, the recommendation first.
    """

    noise: pd.DataFrame
    winners: pd.DataFrame
    first_runs: list
    speedups: pd.DataFrame
    breakdown: pd.DataFrame
    first_breakdown: pd.DataFrame
    calls: pd.DataFrame
    value: pd.DataFrame
    worth: pd.DataFrame
    stability: pd.DataFrame
    ranks: pd.DataFrame
    diff: pd.DataFrame
    cache_diff: pd.DataFrame
    between: pd.DataFrame
    between_summary: pd.DataFrame
    failures: pd.DataFrame
    call_costs: pd.DataFrame
    speedup_summary: pd.DataFrame
    environment: pd.DataFrame
    step_rows: pd.DataFrame
    step_measured: pd.DataFrame
    step_predicted: pd.DataFrame
    step_tuning: pd.DataFrame
    step_break_even: pd.DataFrame
    step_comparisons: list
    step_changes: pd.DataFrame
    step_sets: pd.DataFrame
    drift: pd.DataFrame
    drift_summary: pd.DataFrame
    break_even_summary: pd.DataFrame
    predictions: pd.DataFrame
    e2e: pd.DataFrame
    e2e_problem: str
    serving_where: dict
    verdicts: pd.DataFrame
    policies: pd.DataFrame
    verify_summary: pd.DataFrame
    moe_summary: pd.DataFrame
    moe_sensitivity: pd.DataFrame
    moe_changes: pd.DataFrame
    moe_predictions: pd.DataFrame
    moe_parts: pd.DataFrame
    moe_across: pd.DataFrame
    moe_tuning: pd.DataFrame
    moe_ops: list
    moe_runs: pd.DataFrame
    moe_models: pd.DataFrame
    idle_caches: pd.DataFrame
    aa: pd.DataFrame
    plan: object
    plan_error: str
    frontier: pd.DataFrame
    evidence: pd.DataFrame
    op_verdicts: pd.DataFrame


def analyse(data, *, progress=None) -> Results:
    """Every analysis the report shows over ``data``'s frames (pure; nothing is read), each computed once.

    Where the catalogue read many runs as reductions (``data.reductions``: :class:`profkit.catalog.Reductions`),
    the noise, winners, flips and rank divergence count every run from them (:func:`reduced_noise`,
    :func:`reduced_winners`); what needs candidates (speedups, figures, the plan, the first-run diff's prices)
    counts the runs read whole, which hold every first run.

    Args:
        data: a :class:`profkit.catalog.Catalog` (or any object with its attributes).
        progress: called with the name of each group of analyses as it starts (e.g. to advance a progress bar).

    Returns:
        :class:`Results`.
    """
    say = progress or (lambda name: None)
    t = data.tables
    reduced = getattr(data, "reductions", None)
    say("decisions")
    if reduced is None:
        noise = decisions.noise(t.candidates)
        winners = decisions.winners(t.candidates, noise=noise)
    else:
        noise = reduced_noise(reduced.timings, reduced.decisions)
        winners = reduced_winners(decisions.winners(t.candidates, noise=noise), reduced, noise=noise)
    first = compare.first_runs(winners, t.runs)
    is_first = winners["run_id"].isin(first).to_numpy(dtype=bool)
    # One decision per bucket for the headline figures: the first call of the first run.
    speedups = decisions.speedup_vs_default(
        winners[is_first].sort_values("call", kind="stable").drop_duplicates(["run_id", "op", "profile"]))
    first_tuning = t.tuning[t.tuning["run_id"].isin(first).to_numpy(dtype=bool)]
    breakdown = cost.tuning_breakdown(t.tuning)
    calls = cost.tuning_breakdown(t.tuning, by="call")
    timings = data.op_timings
    between = op_timings.between_buckets(timings, speedups=speedups) if len(timings) else pd.DataFrame()
    failures = tuning_failures(t.winners, t.candidates, t.tuning) if len(t.winners) else pd.DataFrame()

    say("repeats")
    if reduced is None:
        stability = compare.winner_stability(winners, candidates=t.candidates)
        ranks = compare.rank_divergence(t.candidates, noise=noise)
    else:
        stability = compare.winner_stability(winners, timings=reduced.timings)
        ranks = compare.rank_divergence(decisions=winners, timings=reduced.timings)
    diff = compare.repeat_diff(winners, first=first, candidates=t.candidates)
    cache_diff = compare.cache_agreement(winners, data.cache_winners)

    say("steps")
    rows = data.step
    step_rows = rows if len(rows) and {"state", "step_ms", "tokens"} <= set(rows.columns) else pd.DataFrame()
    measured = step.measured_step_change(step_rows) if len(step_rows) else pd.DataFrame()
    predicted = step.predicted_step_changes(t.winners, step_rows, captures=data.step_captures, linears=data.linears) \
        if len(step_rows) else pd.DataFrame()
    step_tuning = step.tuning_pass_seconds(t.tuning, captures=data.step_captures)
    break_even = step.break_even_table(measured, step_tuning) if len(measured) else pd.DataFrame()
    all_steps = all_step_rows(data)
    changes = comparison_changes(all_steps)
    drift = step_drift(all_steps)
    aa_points = verdict.aa_step_points(all_steps, kinds=("series", "same_kernels")) if len(all_steps) \
        else pd.DataFrame()

    say("serving")
    verdicts, policies = serving_verdicts(getattr(data, "verify", pd.DataFrame()),
                                          getattr(data, "policy_tuning", None), noise=noise)
    e2e, e2e_problem = kernels_beside_serving(speedups, data.bench, labels=data.labels)

    say("MoE")
    moe = moe_frames(getattr(data, "moe", None), verdicts)

    say("verdicts")
    plan, plan_error, frontier = plan_of(t, verdicts)
    evidence = verdict_evidence(verdicts, changes, moe["sensitivity"], moe["changes"], captures=data.step_captures,
                                winners=t.winners, moe_ops=moe["ops"])
    costs = call_costs(breakdown, calls, t.tuning, first)
    ops = sorted(set(t.winners["op"].dropna().astype(str)) | set(moe["ops"]))
    return Results(
        noise=noise, winners=winners, first_runs=first, speedups=speedups, breakdown=breakdown,
        first_breakdown=breakdown[breakdown["run_id"].isin(first).to_numpy(dtype=bool)] if len(breakdown) else breakdown,
        calls=calls, value=cost.tuning_value(speedups, first_tuning), worth=cost.worth_tuning(speedups, first_tuning),
        stability=stability, ranks=ranks, diff=diff, cache_diff=cache_diff, between=between,
        between_summary=between_summary(between), failures=failures, call_costs=costs,
        speedup_summary=speedup_summary(speedups), environment=environment(t.runs), step_rows=step_rows,
        step_measured=measured, step_predicted=predicted, step_tuning=step_tuning, step_break_even=break_even,
        step_comparisons=step.step_comparisons(all_steps) if len(all_steps) else [], step_changes=changes,
        step_sets=step_set_changes(all_steps, changes=changes), drift=drift, drift_summary=drift_summary(drift),
        break_even_summary=break_even_summary(measured, break_even, step_tuning),
        predictions=prediction_agreement(data.verify, measured, predicted, changes, step_rows=step_rows,
                                         captures=data.step_captures, caches=getattr(data, "step_caches", {}),
                                         linears=data.linears),
        e2e=e2e, e2e_problem=e2e_problem, serving_where=serving_provenance(t.runs, data.bench, speedups) if len(e2e) else {},
        verdicts=verdicts, policies=policies, verify_summary=op_summary(verdicts) if len(verdicts) else pd.DataFrame(),
        moe_summary=moe["summary"], moe_sensitivity=moe["sensitivity"], moe_changes=moe["changes"],
        moe_predictions=moe["predictions"], moe_parts=moe["parts"], moe_across=moe["across"],
        moe_tuning=moe["tuning"], moe_ops=moe["ops"], moe_runs=moe["runs"],
        moe_models=moe_models(moe["runs"], moe["sensitivity"], moe["changes"]),
        idle_caches=idle_caches(getattr(data, "cache_events", None), all_steps),
        aa=verdict.aa_rates(aa_points, by=["kind"]) if len(aa_points) else pd.DataFrame(),
        plan=plan, plan_error=plan_error, frontier=frontier, evidence=evidence,
        op_verdicts=op_verdicts(evidence, costs, tuning_pass=step_tuning, captures=data.step_captures,
                                tuning=t.tuning, speedups=speedups, failures=failures, plan=plan,
                                break_even=break_even, moe_summary=moe["summary"], moe_runs=moe["runs"], ops=ops))


def reduced_noise(timings: pd.DataFrame, decided: pd.DataFrame) -> pd.DataFrame:
    """:func:`profkit.analysis.noise` from each run's mean time per candidate instead of the candidates.

    Args:
        timings: ``run_id``, ``op``, ``profile``, ``runner``, ``tactic``, ``mean_ms`` (FlashInfer's own finite
            times; a catalogue's reductions).
        decided: decisions of the same runs (``op``, ``profile``, ``bucket``): each profile's bucket.

    Returns:
        :data:`profkit.analysis.decisions.NOISE_COLUMNS`, sorted as :func:`~profkit.analysis.noise` sorts them.
    """
    bands = noise_bands(_rank_reduce.spread(timings.assign(gpu="")))
    buckets = decided.drop_duplicates(["op", "profile"])[["op", "profile", "bucket"]].astype(
        {"op": "string", "profile": "string"})
    out = bands.drop(columns="gpu").merge(buckets, on=["op", "profile"], how="left")
    out = out.assign(shape=shapes_of(out).to_numpy())
    out = conform_columns(out, decisions.NOISE_COLUMNS)
    out = out.sort_values(["op", "shape", "bucket", "profile"], kind="stable", na_position="last")
    return out.reset_index(drop=True)


def reduced_winners(winners: pd.DataFrame, reduced, *, noise: pd.DataFrame,
                    rel_threshold: float = DEFAULT_NOISE_PCT / 100) -> pd.DataFrame:
    """``winners`` of the runs read whole, with the decisions of the runs read only as reductions.

    A reduced run's decision carries its winner, time and default (``reduced.decisions``) and the noise band of
    its (op, profile); what only candidates tell (runner-up, gap, failed and near-tied candidates, status) is NA.

    Args:
        winners: :func:`profkit.analysis.winners` of the runs read whole.
        reduced: a catalogue's reductions (``decisions`` of every run, ``detailed``: the run ids read whole).
        noise: the noise bands of every run (:func:`reduced_noise`).
        rel_threshold: relative band for profiles without repeats (0.02 = 2%).

    Returns:
        :data:`profkit.analysis.decisions.WINNER_COLUMNS`, sorted as :func:`~profkit.analysis.winners` sorts them.
    """
    d = reduced.decisions
    d = d[~d["run_id"].isin(set(reduced.detailed)).to_numpy(dtype=bool)]
    band = noise[["op", "profile", "noise_pct", "noise_source"]].drop_duplicates(["op", "profile"])
    d = d.merge(band, on=["op", "profile"], how="left")
    d = d.assign(noise_pct=d["noise_pct"].fillna(100.0 * rel_threshold),
                 noise_source=d["noise_source"].fillna("threshold"), shape=shapes_of(d).to_numpy())
    out = pd.concat([winners, conform_columns(d, decisions.WINNER_COLUMNS)], ignore_index=True)
    out = conform_columns(out, decisions.WINNER_COLUMNS)
    return out.sort_values(["op", "shape", "bucket", "run_id", "rank", "call"], kind="stable",
                           na_position="last").reset_index(drop=True)
