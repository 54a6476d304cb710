"""The model step across step comparisons: every state against untuned and the tuned cache, per comparison and set.

Frames in, frames out (:mod:`profkit.analysis.step` holds the per-comparison arithmetic and the rule).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analysis import step
from profkit.analysis._frames import conform_columns, empty

# The step and serving states compared with untuned, in order of preference: the cache file a
# deployment loads, else the same process right after tuning.
TUNED_STATES = ("cache", "tuned")

NEW_STATES = ("repaired", "advised", "planned", "ported", "blind", "v2-graph", "v2-eager")

STEP_SET_COLUMNS = {
    "where": "string", "model": "string", "dtype": "string", "state": "string", "baseline": "string",
    "sizes": "Int64", "faster": "Int64", "slower": "Int64", "within_noise": "Int64", "not_measurable": "Int64",
    "same_kernels": "Int64", "fallback": "Int64",
}

BREAK_EVEN_SUMMARY_COLUMNS = {
    "model": "string", "dtype": "string", "sizes": "Int64", "saving_sizes": "Int64", "slower": "Int64",
    "tuning_s": "float64", "steps_min": "float64", "steps_max": "float64", "serving_s_min": "float64",
    "serving_s_max": "float64",
}

PREDICTION_AGREEMENT_COLUMNS = {
    "model": "string", "dtype": "string", "against": "string", "where": "string", "sizes": "Int64",
    "agree": "Int64", "beyond_noise": "Int64", "agree_beyond_noise": "Int64",
}



def all_step_rows(data) -> pd.DataFrame:
    frames = [f for f in (data.step, data.step_other) if len(f) and {"state", "source"} <= set(f.columns)]
    if not frames:
        return pd.DataFrame()
    rows = pd.concat(frames, ignore_index=True)
    if "step_set" not in rows.columns:  # frames built by hand: the set is the folder holding the run
        rows = rows.assign(step_set=rows["source"].astype(str).str.rpartition("/")[0])
    return rows



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
    # Every comparison measured at once per baseline (one call per comparison cost tens of ms of fixed pandas work),
    # on the few columns used (each filter of the step rows takes every column).
    used = [c for c in ("model", "dtype", "phase", "tokens", "state", "step_ms", *step.UNIT_COLUMNS, "loaded_cache")
            if c in rows.columns]
    comparisons = step.step_comparisons(rows[used])
    tagged = pd.concat([g.assign(_comparison=i) for i, (*_, g) in enumerate(comparisons)], ignore_index=True)
    states = tagged.drop_duplicates(["_comparison", "state"])
    present = set(zip(states["_comparison"], states["state"].astype(str)))
    loaded = {}
    if "loaded_cache" in tagged.columns:  # the file each state loaded (one per state in a comparison)
        files = tagged[(tagged["loaded_cache"].fillna("").astype(str) != "").to_numpy(dtype=bool)].drop_duplicates(
            ["_comparison", "state"])
        loaded = dict(zip(zip(files["_comparison"], files["state"].astype(str)), files["loaded_cache"].astype(str)))
    baselines = []
    for i in range(len(comparisons)):
        tuned = next((s for s in TUNED_STATES if (i, s) in present), None)
        baselines += [(i, b) for b in ("untuned", tuned) if b is not None and (i, b) in present]
    parts = []
    for baseline in dict.fromkeys(b for _, b in baselines):
        mine = [i for i, b in baselines if b == baseline]
        m = step.measured_step_change(tagged[tagged["_comparison"].isin(mine).to_numpy(dtype=bool)],
                                      baseline=baseline, by=["_comparison"])
        if baseline != "untuned":
            m = m[m["state"].isin(NEW_STATES).to_numpy(dtype=bool)]
        parts.append(m.assign(_order=[baselines.index((i, baseline)) for i in m["_comparison"]]))
    out = pd.concat(parts, ignore_index=True).sort_values("_order", kind="stable") if parts else pd.DataFrame()
    if out.empty:
        return pd.DataFrame()
    ids = out["_comparison"].to_numpy()
    return out.drop(columns=["_comparison", "_order"]).reset_index(drop=True).assign(
        where=[comparisons[i][0] for i in ids], baseline=[baselines[int(k)][1] for k in out["_order"]],
        loaded_cache=[loaded.get((i, str(x)), "") for i, x in zip(ids, out["state"])])


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
    size = ["model", "dtype", "phase", "tokens", "state"]
    used = [c for c in ("source", *size, "picks") if c in rows.columns]
    comparisons = step.step_comparisons(rows[used])  # a few columns: each comparison's rows are taken from them all
    of = {(where, model, dtype): i for i, (where, model, dtype, _) in enumerate(comparisons)}
    tagged = pd.concat([g.assign(_comparison=i) for i, (*_, g) in enumerate(comparisons)], ignore_index=True)
    # Per (comparison, state): sizes with recorded picks, those that ran untuned's kernels, those that fell back.
    same = step.same_kernels(tagged, by=["_comparison"]).groupby(["_comparison", "state"])["same"].agg(["size", "sum"])
    fallback = step.fallback_sizes(tagged, by=["_comparison"]).groupby(["_comparison", "state"])["fallback"].agg(
        ["size", "sum"])
    keys = ["where", "model", "dtype", "state", "baseline"]
    groups = changes.groupby(keys, sort=True)["verdict"]
    counts = groups.value_counts().unstack(fill_value=0)
    out = []
    for key, sizes in groups.size().items():
        where, model, dtype, state, baseline = key
        at = (of.get((where, model, dtype), -1), state)
        count = lambda verdict: int(counts.at[key, verdict]) if verdict in counts.columns else 0  # noqa: E731
        out.append({"where": where, "model": model, "dtype": dtype, "state": state, "baseline": baseline,
                    "sizes": sizes, "faster": count("faster"), "slower": count("slower"),
                    "within_noise": count("within_noise"), "not_measurable": count("not_measurable"),
                    "same_kernels": int(same.at[at, "sum"]) if at in same.index else pd.NA,
                    "fallback": int(fallback.at[at, "sum"]) if at in fallback.index else pd.NA})
    return conform_columns(pd.DataFrame(out), STEP_SET_COLUMNS) if out else empty(STEP_SET_COLUMNS)



def step_drift(rows: pd.DataFrame) -> pd.DataFrame:
    if rows.empty:
        return pd.DataFrame()
    used = [c for c in ("model", "dtype", "phase", "tokens", "state", "step_ms", *step.UNIT_COLUMNS) if c in rows.columns]
    parts = [g for *_, g in step.step_comparisons(rows[used])]  # a few columns: each part is taken from them all
    return step.pass_drift(pd.concat(parts, ignore_index=True)) if parts else pd.DataFrame()



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
