"""MoE tuning, end to end: do the tuner's picks hold under other routings, and what do they buy the model step?

Pure functions over the tables ``profkit.bench.moe_sweep`` and ``profkit step`` (MoE models)
write: a capture's ``winners``, an MoE ``verify`` table (every candidate timed per M under several
routings, column ``routing``; see :mod:`profkit.bench.routing`) and step rows (``series``, or
``label`` in a raw step.jsonl, names each timed series: ``untuned-2`` is a second, interleaved
series of the untuned state).

* :func:`routing_sensitivity`: per M and routing, the pick against the default and against the
  fastest candidate timed under that routing.
* :func:`step_changes`: each step series against untuned, per size (A/A pairs included).
* :func:`step_predictions`: the step change predicted from the capture (tuner times) and from
  verify (serving times under one routing), beside the measured one.
* :func:`picks_across_runs`: which buckets the repeated tunings of one model pick differently.
* :func:`tactic_parts`: each pick's tactic as its parts (row tile, each GEMM's tile, swizzle, cluster, raster).
"""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np
import pandas as pd

from profkit.analysis._frames import conform_columns, empty, moe_shape, require
from profkit.analysis.engine import assign_bucket
from profkit.analysis.step import MEASURED_COLUMNS, measured_step_change
from profkit.analysis.verify import VERDICT_INPUTS, bucket_verdicts, of_routing, repair_picks

SENSITIVITY_COLUMNS = {
    "run_id": "string", "shape": "string", "routing": "string", "m": "Int64", "bucket": "Int64",
    "imbalance": "float64", "pick_tactic": "string", "pick_ms": "float64", "default_ms": "float64",
    "serving_speedup": "float64", "verdict": "string", "best_tactic": "string", "best_ms": "float64",
    "regret": "float64", "pick_is_best": "boolean",
}
PREDICTION_COLUMNS = {
    "model": "string", "phase": "string", "tokens": "Int64", "bucket": "Int64", "state": "string",
    "layers": "Int64", "untuned_ms": "float64", "measured_delta_ms": "float64", "measured_delta_pct": "float64",
    "beyond_noise": "boolean", "predicted_capture_ms": "float64", "predicted_verify_ms": "float64",
    "verify_over_measured": "float64", "sign_agrees": "boolean",
}
# FlashInfer 0.7.2.post1 sm90_tuner.DEFAULT_SM90_MOE_TACTIC: what tactic -1 runs.
DEFAULT_TACTIC = [128, [[128, 64], 1], [[128, 64], [1, 1], False]]
PART_COLUMNS = {
    "run_id": "string", "bucket": "Int64", "tactic": "string", "default": "boolean", "tile": "Int64",
    "gemm1_tile": "string", "gemm1_swizzle": "Int64", "gemm2_tile": "string", "gemm2_cluster": "string",
    "gemm2_raster": "string",
}
# The candidates' columns :func:`picks_across_runs` reads.
ACROSS_RUNS_INPUTS = ("run_id", "bucket", "tactic", "time_ms")
ACROSS_RUNS_COLUMNS = {
    "shape": "string", "bucket": "Int64", "runs": "Int64", "distinct_picks": "Int64", "picks": "string",
    "spread_pct": "float64",
}


def moe_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of fused-MoE shapes (``shape`` or ``profile`` an MoE shape label)."""
    if frame.empty:
        return frame
    labels = frame["shape"] if "shape" in frame.columns else frame["profile"].map(moe_shape)
    return frame[labels.astype("string").str.startswith("E=").fillna(False).to_numpy(dtype=bool)]


def routing_sensitivity(verify: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, shape, routing, m): the tuner's pick against the default and against the routing's best.

    Args:
        verify: an MoE verify table (``routing`` and ``imbalance`` columns, see docs/schema.md).

    Returns:
        :data:`SENSITIVITY_COLUMNS`, from :func:`profkit.analysis.verify.bucket_verdicts` per
        routing: serving_speedup (default / pick), its verdict, the fastest timed candidate under
        this routing (best_tactic, best_ms), regret (pick / best - 1) and pick_is_best (the best
        is the pick itself). Sorted by run_id, shape, routing, m.
    """
    require(verify, ("routing", "imbalance", "m"), "verify")
    # The columns used: each filter of a wide frame takes every column.
    verify = verify[[c for c in (*VERDICT_INPUTS, "routing", "imbalance") if c in verify.columns]]
    parts = []
    for routing in sorted(verify["routing"].dropna().unique()):
        rows = of_routing(verify, routing)
        verdicts = bucket_verdicts(rows)
        if verdicts.empty:
            continue
        imbalance = rows.groupby(["run_id", "shape", "m"])["imbalance"].first().rename("imbalance").reset_index()
        parts.append(verdicts.assign(routing=routing).merge(imbalance, on=["run_id", "shape", "m"], how="left"))
    if not parts:
        return empty(SENSITIVITY_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    out["pick_is_best"] = (out["best_tactic"] == out["pick_tactic"]).fillna(False)
    out = out.sort_values(["run_id", "shape", "routing", "m"], kind="stable")
    return conform_columns(out, SENSITIVITY_COLUMNS)


def step_changes(step: pd.DataFrame, *, baseline: str = "untuned", by: Sequence[str] = ()) -> pd.DataFrame:
    """Each timed series of an MoE step (its ``label``) against ``baseline``, per size.

    :func:`profkit.analysis.step.measured_step_change` on the labels, so an A/A pair (``untuned-2``
    against ``untuned``, identical kernels) shows what the design calls noise; ``by`` (e.g. ``source``: each
    step set) measures each group as if alone, all at once.
    """
    require(step, ("state", "step_ms"), "step rows")
    return measured_step_change(_by_series(step), baseline=baseline, by=by)


def _by_series(step: pd.DataFrame) -> pd.DataFrame:
    """``step`` with ``state`` the timed series' name (``series``, or ``label`` in step.jsonl read raw)."""
    name = "series" if "series" in step.columns else "label"
    labels = step[name].astype("string") if name in step.columns else step["state"].astype("string")
    return step.assign(state=labels.fillna(step["state"].astype("string")))


def step_predictions(step: pd.DataFrame, winners: pd.DataFrame, verify: pd.DataFrame, *,
                     routing: str = "tuner", state: str = "tuned", changes: pd.DataFrame | None = None) -> pd.DataFrame:
    """The MoE step change of ``state`` against untuned: predicted from capture and from verify, and measured.

    Per step size (tokens = the MoE's M): the capture predicts ``layers x (pick - default)`` by the
    tuner's own times at M's bucket; verify predicts ``layers x (what the tuned op ran at M - the
    default at M)`` by serving times under ``routing`` (``cache_choice`` rows: FlashInfer's own
    lookup with the tuning's cache loaded; for ``repaired``, the bucket's :func:`repair_picks` pick
    under that routing). Only the MoE changes between states (the step's dense
    layers run torch), so the two predictions are of the same thing the step measures.

    Args:
        step: MoE step rows of one model (``profkit step``: label, layers, phase, tokens, step_ms).
        winners: the capture of the tuning whose cache ``state`` loaded (or ran).
        verify: the MoE verify table of that capture.
        routing: the verify routing whose timings predict.
        state: the step series predicted.
        changes: :func:`step_changes` of ``step`` when already computed (the same rows).

    Returns:
        :data:`PREDICTION_COLUMNS`, one row per (phase, tokens): verify_over_measured (predicted
        by verify / measured) and sign_agrees (same sign as the measured change).
    """
    require(step, ("model", "phase", "tokens", "layers", "step_ms"), "step rows")
    require(winners, ("bucket", "time_ms", "default_time_ms"), "winners")
    changes = step_changes(step) if changes is None else changes
    changes = changes[(changes["state"] == state).to_numpy(dtype=bool)]
    if changes.empty:
        return empty(PREDICTION_COLUMNS)
    layers = int(step["layers"].dropna().iloc[0])
    won = moe_rows(winners).dropna(subset=["bucket"])
    if "source" in won.columns:  # later layers' calls are cache hits of the same buckets
        won = won[(won["source"].astype("string") == "profiled").fillna(False).to_numpy(dtype=bool)]
    won = won.drop_duplicates("bucket", keep="last")
    buckets = np.sort(won["bucket"].astype(int).to_numpy())
    by_bucket = won.set_index(won["bucket"].astype(int))
    tokens = changes["tokens"].astype(int).to_numpy()
    bucket_of = assign_bucket(tokens, buckets) if len(buckets) else np.full(len(tokens), -1)
    served = _served_delta(verify, routing, repaired=state == "repaired")
    rows = []
    for change, m, bucket in zip(changes.itertuples(index=False), tokens, bucket_of):
        tuned = by_bucket.loc[bucket] if bucket in by_bucket.index else None
        capture = np.nan if tuned is None else layers * (float(tuned["time_ms"]) - float(tuned["default_time_ms"]))
        predicted = layers * served.get(int(m), np.nan)
        rows.append({"model": change.model, "phase": change.phase, "tokens": m,
                     "bucket": None if tuned is None else int(bucket), "state": state, "layers": layers,
                     "untuned_ms": change.baseline_ms, "measured_delta_ms": change.delta_ms,
                     "measured_delta_pct": change.delta_pct, "beyond_noise": change.beyond_noise,
                     "predicted_capture_ms": capture, "predicted_verify_ms": predicted,
                     "verify_over_measured": predicted / change.delta_ms if change.delta_ms else np.nan,
                     "sign_agrees": bool(np.sign(predicted) == np.sign(change.delta_ms)) if np.isfinite(predicted)
                     else None})
    return conform_columns(pd.DataFrame(rows), PREDICTION_COLUMNS)


def _served_delta(verify: pd.DataFrame, routing: str, *, repaired: bool) -> dict[int, float]:
    """{M: serving ms of what the tuned (or repaired) op runs at M minus the default's}, under ``routing``."""
    needed = [c for c in ("run_id", "op", "shape", "routing", "m", "bucket", "runner", "tactic", "winner", "default",
                          "cache_choice", "tuner_rank", "file_key", "serving_ms", "serving_p10_ms", "serving_p90_ms")
              if c in verify.columns]  # the few columns used: filtering a wide frame costs per column
    rows = moe_rows(of_routing(verify[needed], routing))
    rows = rows[rows["m"].notna().to_numpy(dtype=bool)]
    if repaired:  # each M runs its repaired pick at the bucket of its first row, the default where there is none
        picks = repair_picks(rows).drop_duplicates("bucket", keep="last").set_index("bucket")["tactic"]
        bucket = rows["m"].map(rows.drop_duplicates("m").set_index("m")["bucket"])
        runs = rows["tactic"] == bucket.map(picks).fillna("-1").astype(rows["tactic"].dtype)
    else:
        runs = rows["cache_choice"]
    ran = rows[runs.fillna(False).to_numpy(dtype=bool)].drop_duplicates("m").set_index("m")["serving_ms"]
    default = rows[rows["default"].fillna(False).to_numpy(dtype=bool)].drop_duplicates("m").set_index("m")["serving_ms"]
    return {int(m): float(ran[m] - default[m]) for m in sorted(set(ran.index) & set(default.index))}


def _aa_changes(rows: pd.DataFrame, *, by: Sequence[str] = ()) -> pd.DataFrame:
    """Each series given twice (``untuned-2``, ``cache-2``: identical kernels) against its first, per size; a pair
    within one ``by`` group (its series, its sizes) only."""
    by = list(by)
    labels = _by_series(rows)[[*by, "state"]].dropna(subset=["state"]).drop_duplicates()
    present = set(labels.itertuples(index=False, name=None))
    base_of = {key: key[-1].rsplit("-", 1)[0] for key in present if key[-1].rsplit("-", 1)[-1].isdigit()}
    base_of = {key: base for key, base in base_of.items() if (*key[:-1], base) in present}
    parts = []
    for base in sorted(set(base_of.values())):
        changes = step_changes(rows, baseline=base, by=by)
        parts.append(changes[[base_of.get(key) == base for key in changes[[*by, "state"]].itertuples(
            index=False, name=None)]])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["beyond_noise"])


def picks_across_runs(winners: pd.DataFrame, candidates: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (shape, bucket): how many runs tuned it, how many distinct picks they made, and their spread.

    Args:
        winners: the winners of repeated tunings of one model (distinct ``run_id``).
        candidates: their candidates; with them, spread_pct is how much slower the slowest run's
            pick is than the fastest run's pick, both by the first run's own tuner times.

    Returns:
        :data:`ACROSS_RUNS_COLUMNS`, picks as ``run_id=tactic`` words. Sorted by shape, bucket.
    """
    require(winners, ("run_id", "profile", "bucket", "tactic"), "winners")
    # The few columns used: each filter of a wide frame takes every column.
    winners = winners[[c for c in ("run_id", "profile", "bucket", "tactic", "source", "shape") if c in winners.columns]]
    if candidates is not None and not candidates.empty:
        candidates = candidates[list(ACROSS_RUNS_INPUTS)]
    won = moe_rows(winners).assign(shape=lambda w: w["profile"].map(moe_shape))
    if "source" in won.columns:
        won = won[(won["source"].astype("string") == "profiled").fillna(False).to_numpy(dtype=bool)]
    groups = won.groupby(["shape", "bucket"], sort=True)
    runs, distinct, at = groups["run_id"].nunique(), groups["tactic"].nunique(), groups.indices
    spread = _pick_spread(won, groups, candidates) if candidates is not None and not candidates.empty else {}
    run_ids, tactics = won["run_id"].to_numpy(dtype=object), won["tactic"].to_numpy(dtype=object)
    rows = [{"shape": key[0], "bucket": int(key[1]), "runs": runs[key], "distinct_picks": distinct[key],
             "picks": " ".join(f"{r}={t}" for r, t in zip(run_ids[at[key]], tactics[at[key]])),
             "spread_pct": spread.get(key, np.nan)} for key in runs.index]
    return conform_columns(pd.DataFrame(rows), ACROSS_RUNS_COLUMNS) if rows else empty(ACROSS_RUNS_COLUMNS)


def _pick_spread(won: pd.DataFrame, groups, candidates: pd.DataFrame) -> dict:
    """{(shape, bucket) tuned by several runs: how much slower the slowest pick is than the fastest, in percent, both by
    the first run's (by name) own first time of each tactic; 0 with one such time}."""
    first = groups["run_id"].min()[groups["run_id"].nunique() > 1].rename("first_run")
    picked = won.dropna(subset=["tactic"]).drop_duplicates(["shape", "bucket", "tactic"]).join(
        first, on=["shape", "bucket"], how="inner")
    times = candidates.drop_duplicates(["run_id", "bucket", "tactic"]).rename(columns={"run_id": "first_run"})
    timed = picked[["shape", "bucket", "tactic", "first_run"]].merge(times, on=["first_run", "bucket", "tactic"])
    timed = timed.dropna(subset=["time_ms"]).groupby(["shape", "bucket"])["time_ms"].agg(["size", "max", "min"])
    return {key: 100.0 * (top / bottom - 1.0) if n > 1 else 0.0
            for key, n, top, bottom in zip(timed.index, timed["size"], timed["max"], timed["min"])}


def tactic_parts(winners: pd.DataFrame) -> pd.DataFrame:
    """Each fused-MoE winner's tactic as its parts; tactic -1 as the default it runs (``default`` True).

    Returns:
        :data:`PART_COLUMNS`, one row per profiled winner (tiles as 'MxN', cluster 'MxN', raster
        'M' or 'N'); winners whose tactic is not an SM90 fused-MoE tuple are left out. Sorted by
        run_id, bucket.
    """
    require(winners, ("run_id", "bucket", "tactic"), "winners")
    won = moe_rows(winners)
    if "source" in won.columns:
        won = won[(won["source"].astype("string") == "profiled").fillna(False).to_numpy(dtype=bool)]
    rows = []
    for w in won.itertuples(index=False):
        try:
            value = json.loads(str(w.tactic))
            value = DEFAULT_TACTIC if value == -1 else value
            tile, (g1, swizzle), (g2, cluster, raster_m) = value
            rows.append({"run_id": w.run_id, "bucket": w.bucket, "tactic": w.tactic, "default": str(w.tactic) == "-1",
                         "tile": int(tile), "gemm1_tile": "x".join(map(str, g1)), "gemm1_swizzle": int(swizzle),
                         "gemm2_tile": "x".join(map(str, g2)), "gemm2_cluster": "x".join(map(str, cluster)),
                         "gemm2_raster": "M" if raster_m else "N"})
        except (TypeError, ValueError):
            continue
    if not rows:
        return empty(PART_COLUMNS)
    return conform_columns(pd.DataFrame(rows).sort_values(["run_id", "bucket"], kind="stable"), PART_COLUMNS)


MODEL_SUMMARY_COLUMNS = {
    "model": "string", "shape": "string", "tunings": "Int64", "buckets": "Int64", "tuning_s": "float64",
    "verify_over_tuning": "float64", "routings": "Int64", "op_speedup_min": "float64", "op_speedup_max": "float64",
    "pick_slower": "Int64", "max_regret_pct": "float64", "flip_buckets": "Int64", "max_flip_spread_pct": "float64",
    "step_sizes": "Int64", "step_faster": "Int64", "step_slower": "Int64", "step_change_min_pct": "float64",
    "step_change_max_pct": "float64", "aa_points": "Int64", "aa_beyond_noise": "Int64",
    "predicted_beyond_noise": "Int64", "sign_agrees_beyond_noise": "Int64", "within_1_5x": "Int64",
    "repaired_points": "Int64", "repaired_slower": "Int64", "repaired_vs_cache_points": "Int64",
    "repaired_vs_cache_slower": "Int64",
}


def most_verified(run_ids: pd.Series) -> str:
    """The run with the most verify rows (the sweep's, every routing and M, over a repeat or a rank's bucket-only
    table), the first by name on a tie."""
    counts = run_ids.astype(str).value_counts()
    return str(sorted(counts.index[counts == counts.max()])[0])


def model_summary(winners: pd.DataFrame, candidates: pd.DataFrame, verify: pd.DataFrame, step: pd.DataFrame,
                  runs: pd.DataFrame, *, routing: str = "tuner", sensitivity: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per MoE model: what tuning cost, what it bought per op and at the step, and how well it was predicted.

    Args:
        winners, candidates: every capture of the models (repeated tunings included).
        verify: the MoE verify tables; per model those of its run with the most verify rows (:func:`most_verified`).
        step: MoE step rows (``series``); their ``cache`` and ``repaired`` series loaded the verified
            capture's files.
        runs: one row per run folder with run_id, model, tune_call_s (:class:`profkit.sources.moe_runs.MoeRuns`).
        routing: the verify routing the op speedup, the ratio and the predictions use.
        sensitivity: :func:`routing_sensitivity` of ``verify`` when already computed.

    Returns:
        :data:`MODEL_SUMMARY_COLUMNS`: tuning_s is the first tuning's wall seconds, verify_over_tuning that
        routing's verify seconds over it (same process); op speedups and pick_slower (pick slower than
        the default beyond noise) at every verified M under every routing; flips over the repeated
        tunings; step counts are sizes of the cache series against untuned; aa_* every series given twice
        (``untuned-2``, ``cache-2``: identical kernels) against its first; the prediction columns compare verify's prediction with
        the measured cache and repaired changes; repaired_points and repaired_vs_cache_points count the
        repaired series' sizes timed against untuned and against the cache series, repaired_slower and
        repaired_vs_cache_slower those where it is slower beyond noise. Counts add up over step sets: a
        size timed in two sets counts twice.
    """
    if sensitivity is None and len(verify):
        sensitivity = routing_sensitivity(verify)
    rows = []
    # Every step set measured at once per baseline: one call per set cost tens of ms of fixed pandas work.
    sets = ["model", "source"]
    measured = [_per_set(frame, sets) for frame in (step_changes(step, by=sets),
                                                  step_changes(step, baseline="cache", by=sets),
                                                  _aa_changes(step, by=sets))] if len(step) else []
    for model, mine in runs.dropna(subset=["model"]).groupby("model", sort=True):
        run_ids = set(mine["run_id"].dropna())
        w = winners[winners["run_id"].isin(run_ids)]
        c = candidates[candidates["run_id"].isin(run_ids)] if candidates.empty else \
            candidates[list(ACROSS_RUNS_INPUTS)][candidates["run_id"].isin(run_ids).to_numpy(dtype=bool)]
        v = verify[verify["run_id"].isin(run_ids)] if len(verify) else verify
        if len(v):  # the sweep's own table: a rank's or a repeat's re-timing is not the model's verify
            v = v[(v["run_id"].astype(str) == most_verified(v["run_id"])).to_numpy(dtype=bool)]
        s = step[step["model"] == model] if len(step) else step
        first = mine.sort_values("folder").iloc[0]
        row = {"model": model, "tunings": len(run_ids), "tuning_s": first["tune_call_s"]}
        across = picks_across_runs(w, c)
        if len(across):
            row.update(shape=across["shape"].iloc[0], buckets=across["bucket"].nunique(),
                       flip_buckets=int((across["distinct_picks"] > 1).sum()),
                       max_flip_spread_pct=across["spread_pct"].max())
        if len(v):  # its run's rows under the routings it timed: routing_sensitivity(v)
            mine_sens = (sensitivity["run_id"] == v["run_id"].iloc[0]) & sensitivity["routing"].isin(
                set(v["routing"].dropna().astype(str)))
            sens = sensitivity[mine_sens.fillna(False).to_numpy(dtype=bool)]
            seconds = mine.get(f"verify_{routing}_s")
            row.update(routings=sens["routing"].nunique(), op_speedup_min=sens["serving_speedup"].min(),
                       op_speedup_max=sens["serving_speedup"].max(),
                       pick_slower=int((sens["verdict"] == "slower").sum()),
                       max_regret_pct=100 * sens["regret"].max(),
                       verify_over_tuning=(seconds.dropna().iloc[0] / first["tune_call_s"]
                                           if seconds is not None and seconds.notna().any() else np.nan))
        if len(s):
            row.update(_step_summary(s, measured, w, v, routing))
        rows.append(row)
    return conform_columns(pd.DataFrame(rows), MODEL_SUMMARY_COLUMNS) if rows else empty(MODEL_SUMMARY_COLUMNS)


def _step_summary(step: pd.DataFrame, measured: list, winners: pd.DataFrame, verify: pd.DataFrame,
                  routing: str) -> dict:
    """The step columns of :func:`model_summary`, over every step set (file) of one model: counts add up.
    ``measured``: :func:`_per_set` of the sets' changes against untuned, repaired against the cache, the A/A pairs."""
    parts = [_one_step_set(rows, *(of.get(key, empty) for of, empty in measured), winners, verify, routing)
             for key, rows in step.groupby(["model", "source"], sort=True)]
    out: dict = {}
    for part in parts:
        for key, value in part.items():
            if key not in out:
                out[key] = value
            elif key.endswith("_min_pct"):
                out[key] = min(out[key], value)
            elif key.endswith("_max_pct"):
                out[key] = max(out[key], value)
            else:
                out[key] += value
    return out


def _per_set(changes: pd.DataFrame, sets: list[str]) -> tuple[dict, pd.DataFrame]:
    """({set: its rows of ``changes``, as measured alone}, an empty such frame)."""
    columns = [c for c in changes.columns if c not in sets or c in MEASURED_COLUMNS]
    if not len(changes):
        return {}, changes[columns].reset_index(drop=True)
    return ({key: g[columns].reset_index(drop=True) for key, g in changes.groupby(sets, sort=False)},
            changes[columns].iloc[:0].reset_index(drop=True))


def _one_step_set(rows: pd.DataFrame, changes: pd.DataFrame, versus: pd.DataFrame, aa: pd.DataFrame,
                  winners: pd.DataFrame, verify: pd.DataFrame, routing: str) -> dict:
    """The step columns of one step set: cache and repaired against untuned (``changes``), the A/A pairs (``aa``),
    repaired against the cache (``versus``), the predictions."""
    out: dict = {}
    cache = changes[changes["state"] == "cache"]
    if len(cache):
        out.update(step_sizes=len(cache), step_faster=int((cache["beyond_noise"] & ~cache["slower"]).sum()),
                   step_slower=int(cache["slower"].sum()), step_change_min_pct=cache["delta_pct"].min(),
                   step_change_max_pct=cache["delta_pct"].max())
    if len(aa):
        out.update(aa_points=len(aa), aa_beyond_noise=int(aa["beyond_noise"].sum()))
    repaired = changes[changes["state"] == "repaired"]
    if len(repaired):
        out.update(repaired_points=len(repaired), repaired_slower=int(repaired["slower"].sum()))
    versus = versus[versus["state"] == "repaired"]
    if len(versus):  # also in a set with no untuned (cache,repaired,cache)
        out.update(repaired_vs_cache_points=len(versus), repaired_vs_cache_slower=int(versus["slower"].sum()))
    if len(verify) and len(cache):
        verified_run = verify["run_id"].iloc[0]
        won = winners[winners["run_id"] == verified_run]
        pred = pd.concat([step_predictions(rows, won, verify, routing=routing, state=state, changes=changes)
                          for state in ("cache", "repaired")], ignore_index=True)
        beyond = pred[pred["beyond_noise"].fillna(False).to_numpy(dtype=bool)]
        ratio = beyond["verify_over_measured"]
        out.update(predicted_beyond_noise=len(beyond),
                   sign_agrees_beyond_noise=int(beyond["sign_agrees"].fillna(False).sum()),
                   within_1_5x=int(((ratio >= 1 / 1.5) & (ratio <= 1.5)).sum()))
    return out
