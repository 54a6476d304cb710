"""What tuning buys a model's step: predicted from a capture, measured by ``profkit step``.

Prediction: a decoder step calls each linear once per layer with M = the step's tokens.
FlashInfer rounds M up to the next tuned bucket and runs that bucket's winner; untuned it runs
runners[0] with tactic -1. So the predicted change per linear is the winner's time minus the
default's time at that bucket (both measured by FlashInfer's timer in the capture), summed over
linears and layers. Two cases run the default even when tuned, and predict no change: M above
the largest tuned bucket (FlashInfer's GEMMs map it to an untuned bucket), and cuBLASLt bf16
winners at an M other than the bucket's (their cache key holds M, gemm_base.py:2001).

Measured: every state is compared with its baseline by the one rule of
:mod:`profkit.analysis.verdict` (docs/comparison_rule.md), with a state's pass (consecutive
repetitions between other states' passes; the MoE step's ``pass``) as the unit of replication:
one pass of each state is not measurable; interleaved passes are paired.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from profkit.analysis._frames import conform_columns, gemm_shape, require
from profkit.analysis.engine import assign_bucket
from profkit.analysis.verdict import compare_samples

# Runners whose cache-key extras include M: a tuned config is found only at exactly the bucket.
EXACT_M_RUNNERS = ("CublasltBf16GemmRunner",)

LINEAR_COLUMNS = {
    "op": "string", "shape": "string", "tokens": "Int64", "bucket": "Int64", "applies": "boolean",
    "note": "string", "runner": "string", "tactic": "string", "time_ms": "float64",
    "default_ms": "float64", "delta_ms": "float64",
}
PREDICTED_COLUMNS = {"op": "string", "tokens": "Int64", "layers": "Int64", "predicted_delta_ms": "float64",
                     "n_linears": "Int64", "n_missing_default": "Int64"}
MEASURED_COLUMNS = {
    "model": "string", "dtype": "string", "phase": "string", "tokens": "Int64", "state": "string",
    "step_ms": "float64", "baseline_ms": "float64", "delta_ms": "float64", "delta_pct": "float64",
    "noise_ms": "float64", "beyond_noise": "boolean", "slower": "boolean", "effect": "float64",
    "effect_lo": "float64", "effect_hi": "float64", "verdict": "string", "n": "Int64", "n_baseline": "Int64",
    "design": "string", "detectable": "float64", "note": "string", "baseline": "string",
}
DRIFT_COLUMNS = {
    "model": "string", "dtype": "string", "source": "string", "phase": "string", "tokens": "Int64",
    "state": "string", "passes": "Int64", "step_ms": "float64", "drift_ms": "float64", "drift_pct": "float64",
    "within_ms": "float64",
}
BREAK_EVEN_COLUMNS = {
    "model": "string", "dtype": "string", "phase": "string", "tokens": "Int64", "state": "string",
    "saved_ms": "float64", "tuning_s": "float64", "steps_to_break_even": "float64",
    "serving_s_to_break_even": "float64",
}


def linear_deltas(winners: pd.DataFrame, *, shapes, tokens) -> pd.DataFrame:
    """Per linear and step size: the tuned winner vs the default at the bucket FlashInfer uses.

    Args:
        winners: winners of the tuning pass (profkit winners table, with default_time_ms).
        shapes: the step's linears as (n, k) pairs (e.g. from ``profkit.models.linear_layers``).
        tokens: step sizes (M) to predict for.

    Returns:
        One row per (op, shape, tokens): op, shape ('N=.. K=..'), tokens, bucket, applies (False
        when the default runs although tuned), note, runner, tactic, time_ms, default_ms and
        delta_ms (time_ms - default_ms; 0 when not applied; NaN when the default was not timed).
        Sorted by op, shape, tokens.
    """
    require(winners, ("op", "profile", "bucket", "runner", "tactic", "time_ms", "default_time_ms"), "winners")
    w = winners[winners["source"].astype("string") == "profiled"] if "source" in winners else winners
    w = w.assign(shape=w["profile"].map(gemm_shape))
    rows = []
    for (op, shape), group in w.groupby(["op", "shape"], sort=True):
        if shape not in {f"N={n} K={k}" for n, k in shapes}:
            continue
        by_bucket = group.drop_duplicates("bucket").set_index("bucket")
        top = int(by_bucket.index.max())
        for m, bucket in zip(tokens, assign_bucket(tokens, by_bucket.index)):
            win = by_bucket.loc[int(bucket)]
            note = ""
            if m > top:
                note = f"M above the largest tuned bucket {top}: untuned"
            elif win["runner"] in EXACT_M_RUNNERS and m != bucket:
                note = f"{win['runner']} winners are keyed by M; M={m} != bucket {bucket}: default runs"
            applies = not note
            delta = (win["time_ms"] - win["default_time_ms"]) if applies else 0.0
            rows.append({"op": op, "shape": shape, "tokens": m, "bucket": int(bucket) if m <= top else None,
                         "applies": applies, "note": note, "runner": win["runner"], "tactic": win["tactic"],
                         "time_ms": win["time_ms"], "default_ms": win["default_time_ms"], "delta_ms": delta})
    return conform_columns(pd.DataFrame(rows), LINEAR_COLUMNS)


def predict_step_change(winners: pd.DataFrame, *, shapes, tokens, layers: int) -> pd.DataFrame:
    """Predicted step-time change (ms) per step size: sum of :func:`linear_deltas` times layers.

    Returns:
        One row per (op, tokens): op, tokens, layers, predicted_delta_ms (negative = tuned is
        faster), n_linears found in the capture, n_missing_default (linears whose default was not
        timed: their delta is NaN and the prediction is NaN). Sorted by op, tokens.
    """
    per_linear = linear_deltas(winners, shapes=shapes, tokens=tokens)
    if per_linear.empty:
        return conform_columns(pd.DataFrame(), PREDICTED_COLUMNS)
    grouped = per_linear.groupby(["op", "tokens"], sort=True)
    out = grouped.agg(predicted_delta_ms=("delta_ms", lambda s: s.sum(min_count=len(s))),
                      n_linears=("shape", "size"), n_missing_default=("delta_ms", lambda s: int(s.isna().sum())))
    out = out.reset_index()
    out["predicted_delta_ms"] *= layers
    out["layers"] = layers
    return conform_columns(out, PREDICTED_COLUMNS)


def measured_step_change(bench: pd.DataFrame, *, baseline: str = "untuned", by: Sequence[str] = ()) -> pd.DataFrame:
    """Measured change of each state against ``baseline``, by the one comparison rule (docs/comparison_rule.md).

    Args:
        bench: ``profkit step`` rows (engine 'profkit-step': model, dtype, phase, tokens, state,
            step_ms, one row per repetition; ``series`` and ``pass`` where the reader gives them).
        baseline: the state (series) compared against.
        by: columns naming separate comparisons (e.g. ``source``): each is measured as if alone (its own
            passes, its own baseline), all at once.

    Returns:
        One row per (by..., model, dtype, phase, tokens, state != baseline), ``state`` being the timed
        series (``untuned-2`` for a state given twice: an A/A pair): step_ms and baseline_ms
        (geometric means of the pass medians), delta_ms, delta_pct (100 x effect), effect,
        effect_lo, effect_hi (relative, state / baseline - 1), verdict (faster, slower,
        within_noise or not_measurable: one pass of each state is not measurable), n and
        n_baseline (passes), design, detectable (the smallest relative change the point could
        have called), note (why a point is not measurable), baseline, noise_ms (detectable x
        baseline_ms; NaN when not measurable), beyond_noise
        (faster or slower) and slower; the ``by`` columns first. Sorted by by, model, dtype, phase, tokens, state.
    """
    by = list(by)
    require(bench, (*by, "model", "dtype", "phase", "tokens", "state", "step_ms"), "bench")
    keys = list(dict.fromkeys([*by, "model", "dtype", "phase", "tokens"]))
    used = [c for c in dict.fromkeys((*keys, "state", "step_ms", *UNIT_COLUMNS)) if c in bench.columns]
    # A few columns: each filter or sort takes every one.
    rows = step_units(bench[used].dropna(subset=["step_ms"]), by=by)
    out = compare_samples(rows, by=keys, label_col="series", baseline=baseline, value_col="step_ms", unit_col="unit")
    out = out.rename(columns={"series": "state", "value": "step_ms", "baseline_value": "baseline_ms"})
    out["delta_ms"] = out["step_ms"] - out["baseline_ms"]
    out["delta_pct"] = 100 * out["effect"]
    out["noise_ms"] = out["detectable"] * out["baseline_ms"]
    out["beyond_noise"] = out["verdict"].isin(["faster", "slower"])
    out["slower"] = out["verdict"] == "slower"
    columns = {**{c: str(bench[c].dtype) for c in by}, **MEASURED_COLUMNS}
    return conform_columns(out.sort_values(keys + ["state"], kind="stable"), columns)


# The columns :func:`step_units` reads besides ``state``, ``phase`` and ``tokens``.
UNIT_COLUMNS = ("series", "source", "line", "pass")


def step_units(bench: pd.DataFrame, *, by: Sequence[str] = ()) -> pd.DataFrame:
    """``bench`` with ``series`` (the timed series: its own name, else the state) and ``unit`` (its pass).

    A pass is the MoE step's ``pass`` where recorded, else the k-th run of consecutive rows of one
    series at one size in a ``source`` (file order, ``line`` where every row of the comparison has one):
    ``--states untuned,tuned,untuned,tuned`` gives each two passes. ``unit`` is ``<source>#<k>``, so passes
    of separate processes never pair. ``by`` names separate comparisons (:func:`measured_step_change`):
    passes are counted within each.
    """
    by = list(by)
    rows = bench.reset_index(drop=True)
    series = rows["series"].astype("string") if "series" in rows.columns else pd.Series(pd.NA, index=rows.index,
                                                                                        dtype="string")
    series = series.mask(series.fillna("") == "", rows["state"].astype("string"))
    source = rows["source"].astype("string").fillna("") if "source" in rows.columns else pd.Series(
        "", index=rows.index, dtype="string")
    order = np.arange(len(rows))
    if "line" in rows.columns:
        has = rows["line"].notna()
        complete = has.groupby([rows[c] for c in by], dropna=False).transform("all") if by else has.all()
        order = np.where(complete, rows["line"].to_numpy(dtype=float, na_value=np.nan), order)
    ordered = rows.assign(series=series, _source=source, _order=order).sort_values([*by, "_source", "_order"],
                                                                                   kind="stable")
    size = [*by, "_source", "phase", "tokens"]
    prev = ordered.groupby(size, dropna=False, sort=False)["series"].shift()
    starts = (ordered["series"] != prev).fillna(True).astype(int)
    run_no = starts.groupby([ordered[c] for c in size] + [ordered["series"]], dropna=False).cumsum() - 1
    if "pass" in ordered.columns:
        run_no = ordered["pass"].astype("Int64").fillna(run_no.astype("Int64"))
    unit = ordered["_source"].astype(str) + "#" + run_no.astype(str)
    return ordered.assign(unit=unit).drop(columns=["_source", "_order"]).sort_index()


def break_even(measured: pd.DataFrame, *, tuning_s: float) -> pd.DataFrame:
    """Steps (and seconds of serving at that size) before ``tuning_s`` of tuning pays for itself.

    Args:
        measured: output of :func:`measured_step_change`.
        tuning_s: wall seconds the tuning pass took (e.g. the capture's tuning call rows summed).

    Returns:
        One row per measured row: saved_ms (-delta_ms, only when beyond noise, else 0),
        tuning_s, steps_to_break_even (inf when nothing is saved) and serving_s_to_break_even
        (steps x the tuned step time). Same order as ``measured``.
    """
    require(measured, ("delta_ms", "beyond_noise", "step_ms"), "measured step change")
    saved = np.where(measured["beyond_noise"].fillna(False).to_numpy(bool), -measured["delta_ms"], 0.0)
    with np.errstate(divide="ignore"):
        steps = np.where(saved > 0, tuning_s * 1e3 / np.where(saved > 0, saved, 1.0), np.inf)
    out = measured.assign(saved_ms=saved, tuning_s=tuning_s, steps_to_break_even=steps,
                          serving_s_to_break_even=steps * measured["step_ms"] / 1e3)
    return conform_columns(out, BREAK_EVEN_COLUMNS)


TUNING_PASS_COLUMNS = {"model": "string", "dtype": "string", "run_id": "string", "tuning_s": "float64"}
BREAK_EVEN_TABLE_COLUMNS = {
    "model": "string", "dtype": "string", "phase": "string", "tokens": "Int64", "untuned_ms": "float64",
    "tuned_ms": "float64", "delta_ms": "float64", "delta_pct": "float64", "noise_ms": "float64",
    "tuning_s": "float64", "steps_to_break_even": "float64", "serving_s_to_break_even": "float64",
}


def tuning_pass_seconds(tuning: pd.DataFrame, *, captures) -> pd.DataFrame:
    """Wall seconds of each step run's tuning pass: its capture's top-level tuning calls summed.

    Args:
        tuning: a tuning table holding the tuning-pass captures.
        captures: run_id of the tuning-pass capture per (model, dtype).

    Returns:
        One row per (model, dtype) whose capture has tuning calls: model, dtype, run_id,
        tuning_s. Sorted by model, dtype.
    """
    require(tuning, ("run_id", "kind", "parent_call", "wall_s"), "tuning")
    rows = []
    for (model, dtype), run in sorted(captures.items()):
        calls = tuning[((tuning["run_id"] == run) & (tuning["kind"] == "call")
                        & tuning["parent_call"].isna()).fillna(False).to_numpy(dtype=bool)]
        if len(calls):
            rows.append({"model": model, "dtype": dtype, "run_id": run, "tuning_s": float(calls["wall_s"].sum())})
    return conform_columns(pd.DataFrame(rows), TUNING_PASS_COLUMNS)


def predicted_step_changes(winners: pd.DataFrame, step: pd.DataFrame, *, captures, linears) -> pd.DataFrame:
    """:func:`predict_step_change` for every (model, dtype) of ``step`` that has a tuning-pass capture.

    Args:
        winners: a winners table holding the tuning-pass captures.
        step: ``profkit step`` rows (model, dtype, tokens, layers).
        captures: run_id of the tuning-pass capture per (model, dtype).
        linears: (n, k) shapes of each model's linear layers, by model name.

    Returns:
        :func:`predict_step_change` rows with ``model`` and ``dtype``; sorted by model, dtype, op,
        tokens. Models without known linears are left out.
    """
    def predict(run, **sizes):
        return predict_step_change(winners[(winners["run_id"] == run).fillna(False).to_numpy(dtype=bool)], **sizes)

    return per_step_capture(predict, step, captures=captures, linears=linears, columns=PREDICTED_COLUMNS)


def per_step_capture(predict, step: pd.DataFrame, *, captures, linears, columns: dict) -> pd.DataFrame:
    """``predict(run_id, shapes=, tokens=, layers=)`` per (model, dtype) capture, with model and dtype.

    The step sizes and layer count come from that model and dtype's step rows; models without
    known linears, and captures ``predict`` has nothing for (an empty frame), are left out.
    """
    columns = {**columns, "model": "string", "dtype": "string"}
    out = []
    for (model, dtype), run in sorted(captures.items()):
        if model not in linears:
            continue
        rows = step[((step["model"] == model) & (step["dtype"] == dtype)).fillna(False).to_numpy(dtype=bool)]
        tokens = sorted(int(x) for x in rows["tokens"].dropna().unique())
        layers = int(rows["layers"].iloc[0]) if "layers" in rows and len(rows) else 1
        p = predict(run, shapes=linears[model], tokens=tokens, layers=layers)
        if len(p):
            out.append(p.assign(model=model, dtype=dtype))
    return conform_columns(pd.concat(out, ignore_index=True) if out else pd.DataFrame(), columns)


SIGN_AGREEMENT_COLUMNS = {"model": "string", "dtype": "string", "sizes": "Int64", "agree": "Int64",
                     "beyond_noise": "Int64", "agree_beyond_noise": "Int64"}


def sign_agreement(measured: pd.DataFrame, predicted: pd.DataFrame, *, state: str = "tuned") -> pd.DataFrame:
    """How often a prediction has the sign of the measured step change, per model and dtype.

    Args:
        measured: :func:`measured_step_change` rows (against untuned).
        predicted: rows of model, dtype, tokens, predicted_delta_ms (summed over ops per size);
            a size is predicted for both phases (the GEMMs' M is the step's tokens).
        state: the measured state the prediction is for.

    Returns:
        One row per (model, dtype): sizes measured and predicted, agree (same sign; a zero
        prediction agrees with nothing), beyond_noise (sizes whose measured change exceeds the
        noise) and agree_beyond_noise among them. Sorted by model, dtype.
    """
    require(measured, ("model", "dtype", "tokens", "state", "delta_ms", "beyond_noise"), "measured")
    require(predicted, ("model", "dtype", "tokens", "predicted_delta_ms"), "predicted")
    keys = ["model", "dtype", "tokens"]
    pred = predicted.groupby(keys, as_index=False)["predicted_delta_ms"].sum(min_count=1)
    both = measured[measured["state"] == state].merge(pred, on=keys).dropna(subset=["predicted_delta_ms", "delta_ms"])
    agree = (np.sign(both["predicted_delta_ms"]) == np.sign(both["delta_ms"])) & (both["predicted_delta_ms"] != 0)
    beyond = both["beyond_noise"].fillna(False).astype(bool)
    out = both.assign(agree=agree, beyond=beyond, agree_beyond=agree & beyond).groupby(["model", "dtype"], sort=True).agg(
        sizes=("agree", "size"), agree=("agree", "sum"), beyond_noise=("beyond", "sum"),
        agree_beyond_noise=("agree_beyond", "sum")).reset_index()
    return conform_columns(out, SIGN_AGREEMENT_COLUMNS)


def _recorded_picks(bench: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The first recorded ``picks`` (``name=Runner:tactic`` words) per ``keys``; unattributed or empty ones left out."""
    recorded = bench[bench["picks"].fillna("").astype(str).str.contains("=").to_numpy(dtype=bool)]
    return recorded.groupby(keys, as_index=False)["picks"].first()


def same_kernels(bench: pd.DataFrame, *, baseline: str = "untuned", by: Sequence[str] = ()) -> pd.DataFrame:
    """Where a state ran exactly the baseline's kernels (``profkit step``'s ``picks``), per size.

    A step change at such a size is between-pass drift, not a kernel choice.

    Args:
        bench: ``profkit step`` rows.
        baseline: the state compared against.
        by: columns naming separate comparisons (a state meets the baseline of its own only).

    Returns:
        One row per (by..., model, dtype, phase, tokens, state != baseline) where both states recorded
        picks: ``same`` (identical runner:tactic at every linear). Empty without a ``picks`` column.
    """
    keys = [*by, "model", "dtype", "phase", "tokens"]
    if "picks" not in bench.columns:
        return pd.DataFrame(columns=[*keys, "state", "same"])
    picks = _recorded_picks(bench, [*keys, "state"])
    base = picks[picks["state"] == baseline].drop(columns="state").rename(columns={"picks": "baseline_picks"})
    both = picks[picks["state"] != baseline].merge(base, on=keys)
    return both.assign(same=both["picks"] == both["baseline_picks"])[[*keys, "state", "same"]]


def fallback_sizes(bench: pd.DataFrame, *, by: Sequence[str] = ()) -> pd.DataFrame:
    """Per (by..., model, dtype, phase, tokens, state) with recorded picks: ``fallback``, True where every
    linear ran tactic -1 (FlashInfer's fallback: the untuned default when its runner is runners[0])."""
    keys = [*by, "model", "dtype", "phase", "tokens", "state"]
    if "picks" not in bench.columns:
        return pd.DataFrame(columns=[*keys, "fallback"])
    picks = _recorded_picks(bench, keys)
    words = picks["picks"].str.split()
    return picks.assign(fallback=[all(w.endswith(":-1") for w in ws) for ws in words])[[*keys, "fallback"]]


def pass_drift(bench: pd.DataFrame) -> pd.DataFrame:
    """How far a state's step time moves between its passes in one process (same kernels, same sizes).

    A pass is what :func:`step_units` calls one: a run of consecutive rows of one state at one size
    in a ``source`` (one ``profkit step`` file), or the MoE step's ``pass``: ``--states
    untuned,cache,untuned,cache`` gives each state two passes.

    Returns:
        One row per (model, dtype, source, phase, tokens, state) with two or more passes: passes,
        step_ms (median over all its repetitions), drift_ms (max - min of the pass medians), drift_pct
        (of step_ms), within_ms (the largest max - min inside one pass). Empty when no state repeats.
        ``state`` is the timed series (``untuned-2`` apart from ``untuned``).
    """
    require(bench, ("model", "dtype", "source", "phase", "tokens", "state", "step_ms"), "bench")
    rows = step_units(bench.dropna(subset=["step_ms"]))
    rows = rows.assign(state=rows["series"])
    keys = ["model", "dtype", "source", "phase", "tokens", "state"]
    per_pass = rows.groupby([*keys, "unit"])["step_ms"].agg(["median", "max", "min"])
    per_pass["spread"] = per_pass["max"] - per_pass["min"]
    out = per_pass.groupby(keys).agg(passes=("median", "size"), top=("median", "max"), bottom=("median", "min"),
                                     within_ms=("spread", "max")).reset_index()
    out["drift_ms"] = out["top"] - out["bottom"]
    out = out.merge(rows.groupby(keys)["step_ms"].median().reset_index(), on=keys)
    out = out[out["passes"] > 1]
    out = out.assign(drift_pct=100 * out["drift_ms"] / out["step_ms"])
    return conform_columns(out.sort_values(keys), DRIFT_COLUMNS)


def step_comparisons(rows: pd.DataFrame, *, baseline: str = "untuned") -> list[tuple[str, str, str, pd.DataFrame]]:
    """Which step rows to compare with each other: (where, model, dtype, rows) per comparison.

    A set is the folder holding step runs (``source`` is a run's folder). Each run is its own
    comparison where every run of its set and model holds ``baseline`` rows, so a state meets the
    baseline of its own process; else the set is pooled (states that ran in separate processes).
    """
    require(rows, ("source", "model", "dtype", "state"), "step rows")
    rows = rows.assign(step_set=rows["source"].astype(str).map(lambda source: source.rpartition("/")[0]))
    out = []
    for (where, model, dtype), group in rows.groupby(["step_set", "model", "dtype"], sort=True):
        runs = list(group.groupby("source", sort=True))
        if len(runs) > 1 and all((run["state"] == baseline).any() for _, run in runs):
            out += [(str(source), model, dtype, run) for source, run in runs]
        else:
            out.append((where, model, dtype, group))
    return out


def compare_steps(bench: pd.DataFrame, *, baseline: str = "untuned") -> pd.DataFrame:
    """:func:`measured_step_change` of every comparison :func:`step_comparisons` finds, with ``where``.

    Returns:
        ``where`` (the run's source, or the set when runs are pooled) and the :func:`measured_step_change`
        columns, one row per (where, model, dtype, phase, tokens, state != baseline). Sorted by where,
        model, dtype, phase, tokens, state. Empty when no comparison holds ``baseline``.
    """
    require(bench, ("model", "dtype", "phase", "tokens", "state", "step_ms"), "bench")
    rows = bench if "source" in bench.columns else bench.assign(source="")
    parts = [measured_step_change(group, baseline=baseline).assign(
        where=where if group["source"].nunique() > 1 else str(group["source"].iloc[0]))
        for where, _, _, group in step_comparisons(rows, baseline=baseline)]
    columns = {"where": "string", **MEASURED_COLUMNS}
    parts = [p for p in parts if len(p)]
    return conform_columns(pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(), columns)


def cache_change(rows: pd.DataFrame, *, cache: str) -> pd.DataFrame:
    """:func:`measured_step_change` of the ``cache`` state against untuned, where the cache state loaded the
    file ``cache`` names (its ``command`` says so); empty where it did not or a state is missing."""
    pair = rows[rows["state"].isin(["untuned", "cache"]).to_numpy(dtype=bool)]
    commands = pair.get("command", pd.Series(dtype=str)).astype(str)
    if set(pair["state"]) != {"untuned", "cache"} or not commands.str.contains(cache, regex=False).any():
        return conform_columns(pd.DataFrame(), MEASURED_COLUMNS)
    change = measured_step_change(pair)
    return change[(change["state"] == "cache").to_numpy(dtype=bool)].reset_index(drop=True)


def against_best(bench: pd.DataFrame, *, state: str = "repaired",
                 baselines: tuple[str, ...] = ("untuned", "cache")) -> pd.DataFrame:
    """Per size: ``state`` against the faster of ``baselines`` (lower step_ms), as :func:`measured_step_change`.

    Returns:
        One row per (model, dtype, phase, tokens) where ``state`` and every baseline have rows: best
        (that baseline), step_ms, best_ms, delta_pct, noise_ms, slower (the rule's verdict is
        slower), verdict, effect, effect_lo, effect_hi, detectable. Empty otherwise.
    """
    keys = ["model", "dtype", "phase", "tokens"]
    parts = [measured_step_change(bench[bench["state"].isin([b, state]).to_numpy(dtype=bool)], baseline=b).assign(best=b)
             for b in baselines]
    changes = pd.concat(parts, ignore_index=True)
    changes = changes[(changes["state"] == state).to_numpy(dtype=bool)]
    complete = changes.groupby(keys)["best"].transform("size") == len(baselines)
    best = changes[complete.to_numpy(dtype=bool)].sort_values("baseline_ms").groupby(keys).head(1)
    return best.rename(columns={"baseline_ms": "best_ms"}).sort_values(keys)[
        [*keys, "best", "step_ms", "best_ms", "delta_pct", "noise_ms", "slower", "verdict", "effect", "effect_lo",
         "effect_hi", "detectable"]].reset_index(drop=True)


def break_even_table(measured: pd.DataFrame, tuning_pass: pd.DataFrame) -> pd.DataFrame:
    """The tuned step sizes that save time beyond noise, with the steps that repay the tuning pass.

    Args:
        measured: output of :func:`measured_step_change`.
        tuning_pass: output of :func:`tuning_pass_seconds`.

    Returns:
        One row per (model, dtype, phase, tokens) where tuned is faster than untuned beyond
        noise: untuned_ms, tuned_ms, delta_ms, delta_pct, noise_ms, tuning_s,
        steps_to_break_even, serving_s_to_break_even (seconds of serving at that size). Sorted
        by model, dtype, phase, tokens.
    """
    rows = []
    for model, dtype, tuning_s in tuning_pass[["model", "dtype", "tuning_s"]].itertuples(index=False):
        m = measured[((measured["model"] == model) & (measured["dtype"] == dtype)
                      & (measured["state"] == "tuned")).fillna(False).to_numpy(dtype=bool)].reset_index(drop=True)
        if m.empty:
            continue
        be = break_even(m, tuning_s=float(tuning_s)).reset_index(drop=True)
        both = m.assign(**{c: be[c] for c in ("saved_ms", "tuning_s", "steps_to_break_even",
                                                "serving_s_to_break_even")})
        rows.append(both[both["saved_ms"] > 0])
    if not rows:
        return conform_columns(pd.DataFrame(), BREAK_EVEN_TABLE_COLUMNS)
    out = pd.concat(rows, ignore_index=True).rename(columns={"baseline_ms": "untuned_ms", "step_ms": "tuned_ms"})
    return conform_columns(out, BREAK_EVEN_TABLE_COLUMNS)
