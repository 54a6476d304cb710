"""The fused-MoE analyses of the MoE runs, per model, as the report and notebook 07 use them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analysis import cost
from profkit.analysis.moe import most_verified
from profkit.analysis._frames import conform_columns, empty

MOE_MODEL_COLUMNS = {"model": "string", "shape": "string", "run_id": "string", "runs": "string",
                     "step_source": "string", "tunings": "Int64", "step_sets": "Int64"}



def moe_frames(runs, verdicts: pd.DataFrame | None = None) -> dict:
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
    model_of = dict(zip(runs.runs["run_id"], runs.runs["model"]))
    verify = _sweeps(runs.verify, model_of)
    sensitivity = moe.routing_sensitivity(verify) if len(verify) else None
    out["summary"] = moe.model_summary(t.winners, t.candidates, verify, runs.step, runs.runs, sensitivity=sensitivity)
    if sensitivity is not None:
        out["sensitivity"] = with_intervals(sensitivity, verdicts)
    if len(out["sensitivity"]):
        out["sensitivity"] = out["sensitivity"].assign(model=out["sensitivity"]["run_id"].map(model_of))
    changes, predictions = [], []
    every = moe.step_changes(runs.step, by=["source"]) if len(runs.step) else None  # each set as if alone, at once
    for source, rows in (runs.step.groupby("source", sort=True) if len(runs.step) else []):
        model = str(rows["model"].dropna().iloc[0]) if rows["model"].notna().any() else ""
        changed = every[(every["source"] == source).to_numpy(dtype=bool)].drop(columns="source").reset_index(drop=True)
        changes.append(changed.assign(source=str(source), model=model))
        verified = verify[verify["run_id"].map(model_of) == model] if len(verify) else verify
        if len(verified):
            won = t.winners[t.winners["run_id"] == verified["run_id"].iloc[0]]
            predictions += [moe.step_predictions(rows, won, verified, state=s,
                                                 changes=changed).assign(source=str(source))
                            for s in ("cache", "repaired")]
    out["changes"] = pd.concat(changes, ignore_index=True) if changes else pd.DataFrame()
    out["predictions"] = pd.concat([p for p in predictions if len(p)], ignore_index=True) \
        if any(len(p) for p in predictions) else pd.DataFrame()
    out["parts"] = moe.tactic_parts(t.winners) if len(t.winners) else pd.DataFrame()
    across, tuning = [], []
    for model, mine in runs.runs.dropna(subset=["model"]).groupby("model", sort=True):
        ids = set(mine["run_id"].dropna())
        c = t.candidates[list(moe.ACROSS_RUNS_INPUTS)]  # the columns used: a filter takes every column
        w, c = t.winners[t.winners["run_id"].isin(ids)], c[c["run_id"].isin(ids).to_numpy(dtype=bool)]
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



def _sweeps(verify: pd.DataFrame, model_of: dict) -> pd.DataFrame:
    """Each model's verify rows of its sweep only (:func:`~profkit.analysis.moe.most_verified`): a rank's or a
    repeat's re-timing of another tuning is the ranks' evidence (:func:`profkit.analysis.ranks.served_agreement`)."""
    if verify.empty:
        return verify
    model = verify["run_id"].map(model_of)
    keep = {most_verified(g["run_id"]) for _, g in verify.groupby(model, sort=True)}
    return verify[verify["run_id"].astype(str).isin(keep).to_numpy(dtype=bool)]


def with_intervals(sensitivity: pd.DataFrame, verdicts: pd.DataFrame | None) -> pd.DataFrame:
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



def moe_models(runs: pd.DataFrame, sensitivity: pd.DataFrame, changes: pd.DataFrame) -> pd.DataFrame:
    """One row per MoE model, the one with the most evidence first (most tunings, then step sets, then name).

    Returns:
        :data:`MOE_MODEL_COLUMNS`: run_id (its run with the most verify rows, else its first run by folder), runs
        (every run id, comma-joined), step_source (the step set with an A/A series, else its first),
        tunings and step_sets.
    """
    if runs is None or runs.empty:
        return empty(MOE_MODEL_COLUMNS)
    rows = []
    for model, mine in runs.dropna(subset=["model"]).groupby("model", sort=True):
        ordered = mine.sort_values("folder")["run_id"].dropna().astype(str).tolist()
        mine_verified = sensitivity[sensitivity["run_id"].astype(str).isin(ordered).to_numpy(dtype=bool)] \
            if len(sensitivity) else sensitivity
        verified = [most_verified(mine_verified["run_id"])] if len(mine_verified) else []
        sets = changes[(changes["model"] == model).to_numpy(dtype=bool)] if len(changes) else changes
        sources = sorted(sets["source"].astype(str).unique()) if len(sets) else []
        aa = [src for src in sources if (sets[sets["source"] == src]["state"].astype(str).str.startswith("untuned-")).any()]
        rows.append({"model": model, "shape": str(mine["shape"].dropna().iloc[0]) if mine["shape"].notna().any() else "",
                     "run_id": (verified or ordered or [""])[0], "runs": ", ".join(ordered),
                     "step_source": (aa or sources or [""])[0], "tunings": len(ordered), "step_sets": len(sources)})
    out = pd.DataFrame(rows).sort_values(["tunings", "step_sets", "model"], ascending=[False, False, True],
                                         kind="stable")
    return conform_columns(out.reset_index(drop=True), MOE_MODEL_COLUMNS)
