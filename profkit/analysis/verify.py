"""Do the tuner's picks hold when the op runs the way engines run it? (the ``verify`` table)

``profkit verify`` re-times, per op, GEMM shape and M, the tuner's top-k candidates of M's bucket,
its winner and the default (runners[0], tactic -1) in a CUDA graph with rotating inputs: the
*serving* time, beside the tuner's own time of the same candidate. This module is the pure part:
which candidates to time (:func:`verify_plan`), and what the timings say (:func:`bucket_verdicts`,
:func:`op_summary`, :func:`policy_table`, :func:`repair_picks`, :func:`predict_step_from_verify`).

Noise: every verdict comes from the one rule of :mod:`profkit.analysis.verdict`
(docs/comparison_rule.md) with a verify *process* (one ``verify.parquet``, column ``source``) as
the unit: a candidate's 30 graph replays are one block of one process, so their p10-p90 band is
the spread inside a block, not between processes. In one process the pick against the default is
judged with the spread of that ratio between processes, calibrated on the shipped verify tables'
repeated kernels (``VERIFY_RATIO_SD``); with three or more processes timing both, with their own
spread. A comparison across processes (one run's pick against another run's) is not measurable
unless each run was verified in three or more processes (:func:`compare_runs`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analysis._frames import any_by, conform_columns, empty, flashinfer_rows, op_shape, require
from profkit.analysis.engine import assign_bucket
from profkit.analysis.decisions import tuner_ratio_sd
from profkit.analysis.verdict import MIN_UNITS, VERIFY_RATIO_SD, compare_samples, compare_two, compare_values
from profkit.errors import ProfkitError

PLAN_COLUMNS = {
    "run_id": "string", "op": "string", "shape": "string", "n": "Int64", "k": "Int64", "m": "Int64",
    "bucket": "Int64", "profile": "string", "runner": "string", "tactic": "string", "tuner_ms": "float64",
    "tuner_rank": "Int64", "winner": "boolean", "default": "boolean",
}
BUCKET_VERDICT_COLUMNS = {
    "run_id": "string", "op": "string", "shape": "string", "m": "Int64", "bucket": "Int64",
    "at_bucket": "boolean", "pick_runner": "string", "pick_tactic": "string", "pick_ms": "float64",
    "default_ms": "float64", "tuner_speedup": "float64", "serving_speedup": "float64",
    "serving_noise": "float64", "verdict": "string", "best_runner": "string", "best_tactic": "string",
    "best_ms": "float64", "regret": "float64", "rank_agreement": "float64", "cache_runs_pick": "boolean",
    "effect": "float64", "effect_lo": "float64", "effect_hi": "float64", "detectable": "float64", "n": "Int64",
    "n_baseline": "Int64", "design": "string", "tuner_verdict": "string",
}
OP_SUMMARY_COLUMNS = {
    "op": "string", "buckets": "Int64", "faster": "Int64", "slower": "Int64", "within_noise": "Int64",
    "not_measurable": "Int64", "median_tuner_speedup": "float64", "median_serving_speedup": "float64",
    "median_regret": "float64",
    "median_rank_agreement": "float64",
}
REPAIR_COLUMNS = {
    "run_id": "string", "op": "string", "shape": "string", "bucket": "Int64", "runner": "string",
    "tactic": "string", "file_key": "string", "serving_ms": "float64", "default_ms": "float64",
    "tuner_runner": "string", "tuner_tactic": "string", "reason": "string",
}
POLICY_COLUMNS = {
    "policy": "string", "op": "string", "shapes": "Int64", "buckets": "Int64", "slower": "Int64", "faster": "Int64",
    "within_noise": "Int64", "not_measurable": "Int64", "median_serving_speedup": "float64",
    "median_regret": "float64", "tuning_s": "float64",
}
STEP_COLUMNS = {
    "op": "string", "tokens": "Int64", "layers": "Int64", "state": "string",
    "predicted_delta_ms": "float64", "n_linears": "Int64", "n_missing": "Int64",
}


def verify_plan(candidates: pd.DataFrame, winners: pd.DataFrame, *, sizes, top_k: int = 5) -> pd.DataFrame:
    """Which candidates ``profkit verify`` times, at which M (GEMMs and fused MoE; n, k are NA for MoE).

    Args:
        candidates, winners: a capture's tables (profiled winners with ``default_time_ms``).
        sizes: the M values to time; each is timed with the candidates of the bucket FlashInfer's
            GEMMs round it up to (M above the largest tuned bucket is left out: untuned there).
        top_k: how many of the bucket's fastest candidates by the tuner's own time.

    Returns:
        One row per (run_id, op, shape, m, runner, tactic): the top-k candidates, the winner and
        the default (runners[0], tactic -1; ``tuner_ms`` is profkit's default timing), with
        ``tuner_rank`` (1 = the tuner's fastest; the default's rank among them when it was a
        candidate, else NA). Sorted by run_id, op, shape, m, tuner_rank.
    """
    require(candidates, ("run_id", "call", "op", "profile", "bucket", "runner", "tactic", "time_ms", "status"),
            "candidates")
    require(winners, ("run_id", "call", "op", "profile", "bucket", "runner", "tactic", "default_runner",
                      "default_time_ms"), "winners")
    won = winners[winners["source"].astype("string") == "profiled"] if "source" in winners else winners
    # A bucket profiled again by a later call (a runner keyed by M missed): its last winner is
    # what FlashInfer keeps in memory and writes to the cache file.
    won = won.sort_values("call", kind="stable").drop_duplicates(["run_id", "op", "profile"], keep="last")
    timed = flashinfer_rows(candidates)
    timed = timed[(timed["status"].astype("string") == "ok").fillna(False).to_numpy(bool) & timed["time_ms"].notna()]
    decision = ["run_id", "op", "profile", "call"]
    ranked = timed.sort_values(decision + ["time_ms"], kind="stable").drop_duplicates(decision + ["runner", "tactic"])
    ranked = ranked.assign(tuner_rank=ranked.groupby(decision).cumcount() + 1)
    rank_of = {key: (r, t) for key, r, t in zip(
        zip(ranked["run_id"], ranked["op"], ranked["profile"], ranked["call"], ranked["runner"], ranked["tactic"]),
        ranked["tuner_rank"], ranked["time_ms"])}
    rows = []
    for w in won.itertuples(index=False):
        shape = op_shape(w.profile)
        if shape is None:
            continue
        n, k = (int(part.split("=")[1]) for part in shape.split()) if shape.startswith("N=") else (None, None)
        bucket_rows = ranked[(ranked["run_id"] == w.run_id) & (ranked["op"] == w.op) & (ranked["profile"] == w.profile)
                             & (ranked["call"] == w.call)]
        chosen = {(r.runner, r.tactic): (r.time_ms, r.tuner_rank) for r in bucket_rows.head(top_k).itertuples()}
        key = (w.run_id, w.op, w.profile, w.call)
        chosen.setdefault((w.runner, w.tactic), rank_of.get(key + (w.runner, w.tactic), (pd.NA, w.time_ms))[::-1])
        default_rank = rank_of.get(key + (w.default_runner, "-1"), (pd.NA, None))[0]
        chosen[(w.default_runner, "-1")] = (w.default_time_ms, default_rank)
        for (runner, tactic), (tuner_ms, rank) in chosen.items():
            rows.append({"run_id": w.run_id, "op": w.op, "shape": shape, "n": n, "k": k, "bucket": int(w.bucket),
                         "profile": w.profile, "runner": runner, "tactic": tactic, "tuner_ms": tuner_ms,
                         "tuner_rank": rank, "winner": (runner, tactic) == (w.runner, w.tactic),
                         "default": (runner, tactic) == (w.default_runner, "-1")})
    if not rows:
        return empty(PLAN_COLUMNS)
    per_bucket = pd.DataFrame(rows)
    out = []
    for (run_id, op, shape), group in per_bucket.groupby(["run_id", "op", "shape"], sort=True):
        buckets = np.unique(group["bucket"].astype(int))
        wanted = np.asarray(sorted({int(m) for m in sizes if int(m) <= buckets.max()}), dtype=np.int64)
        for m, bucket in zip(wanted, assign_bucket(wanted, buckets)):
            out.append(group[group["bucket"] == bucket].assign(m=int(m)))
    plan = pd.concat(out) if out else per_bucket.iloc[:0].assign(m=pd.Series(dtype="Int64"))
    plan = plan.sort_values(["run_id", "op", "shape", "m", "tuner_rank"], na_position="last", kind="stable")
    return conform_columns(plan, PLAN_COLUMNS)


# The verify columns :func:`bucket_verdicts` reads (``source``, ``cache_choice`` and ``profile`` where present).
VERDICT_INPUTS = ("run_id", "op", "shape", "m", "bucket", "runner", "tactic", "tuner_ms", "winner", "default",
                  "serving_ms", "serving_p10_ms", "serving_p90_ms", "source", "cache_choice", "profile")


def bucket_verdicts(verify: pd.DataFrame, *, ratio_sd: float = VERIFY_RATIO_SD,
                    noise: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (run_id, op, shape, m): the tuner's pick against the default and the serving-best.

    Args:
        verify: the verify table (``profkit verify``; ``serving_ms`` with p10/p90 per candidate;
            ``source``, the file, names the process where several processes timed one run).
        ratio_sd: spread (sd of the log) of a pick/default ratio timed in one process; the
            default is calibrated on the shipped verify tables (docs/comparison_rule.md).
        noise: :func:`~profkit.analysis.decisions.noise` of the captures the picks came from, to
            judge the tuner's own pick-vs-default times (``tuner_verdict``); None: not measurable.

    Returns:
        One row per (run_id, op, shape, m) that has both a timed pick and a timed default:
        pick_ms and default_ms (serving times; geometric means over processes where several timed
        them), serving_speedup (default / pick), tuner_speedup (the same by the tuner's times),
        serving_noise (relative half-width of the wider p10-p90 band of the two: the spread inside
        one process), the rule's effect (pick / default - 1), effect_lo, effect_hi, detectable,
        n and n_baseline (processes), design and verdict (``faster`` / ``slower`` /
        ``within_noise`` / ``not_measurable``), the serving-best candidate and the pick's regret
        against it (pick / best - 1), rank_agreement (Spearman correlation of the tuner's and the
        serving order of the timed candidates; NaN under 3 candidates), and cache_runs_pick
        (whether FlashInfer's own lookup at this M ran the pick), and tuner_verdict: the rule on
        the tuner's own times of pick and default, with the spread its repeated runs measured
        (:func:`~profkit.analysis.decisions.tuner_ratio_sd`; not_measurable without repeats).
        Sorted by run_id, op, shape, m.
    """
    keys = ["run_id", "op", "shape", "m"]
    require(verify, (*keys, "bucket", "runner", "tactic", "tuner_ms", "winner", "default", "serving_ms",
                     "serving_p10_ms", "serving_p90_ms"), "verify")
    # The timed rows grouped (a stable sort: each group's rows keep their order), then worked as plain
    # arrays in slices of whole groups: no Python work per group (but the few timed in several
    # processes) and temporaries bounded by the slice, not the table (millions of rows).
    group = verify.groupby(keys, sort=False, observed=True, dropna=True).ngroup().to_numpy(dtype=float)
    timed = np.flatnonzero(verify["serving_ms"].notna().to_numpy(dtype=bool) & ~np.isnan(group))
    at = timed[np.argsort(group[timed], kind="stable")]
    del timed
    group = np.unique(group[at], return_inverse=True)[1]
    parts = [_slice_verdicts(verify.iloc[at[i:j]], group[i:j] - group[i], keys=keys, ratio_sd=ratio_sd)
             for i, j in _slices(group, _SLICE_ROWS)]
    del at, group
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if out.empty:
        return empty(BUCKET_VERDICT_COLUMNS)
    out["tuner_verdict"] = _tuner_verdicts(out, noise)
    # Sorted by the keys' text order before their text is made (a big table's: once, not twice).
    out = out.take(np.lexsort([out["m"].to_numpy(dtype=np.int64)] + [_codes(out[k]) for k in keys[2::-1]]))
    return conform_columns(out, BUCKET_VERDICT_COLUMNS)


# Rows of one slice of bucket_verdicts: its arrays take some tens of MB.
_SLICE_ROWS = 1 << 18


def _slices(group: np.ndarray, rows: int) -> list[tuple[int, int]]:
    """(start, end) of consecutive slices of about ``rows`` rows each, cut only where ``group`` (sorted) changes."""
    if not len(group):
        return []
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    cuts = starts[np.minimum(np.searchsorted(starts, np.arange(rows, len(group), rows)), len(starts) - 1)]
    edges = np.unique(np.r_[0, cuts, len(group)])
    return list(zip(edges[:-1].tolist(), edges[1:].tolist()))


def _slice_verdicts(rows: pd.DataFrame, g: np.ndarray, *, keys: list[str], ratio_sd: float | None) -> pd.DataFrame:
    """:func:`bucket_verdicts`' rows (without tuner_verdict) of timed ``rows`` grouped as ``g`` (0, 1, ..., sorted)."""
    n_groups = int(g[-1]) + 1
    column = lambda name: rows[name].to_numpy(dtype=float, na_value=np.nan)  # noqa: E731
    flag = lambda name: rows[name].fillna(False).to_numpy(dtype=bool)  # noqa: E731
    serving, p10, p90, tuner = (column(c) for c in ("serving_ms", "serving_p10_ms", "serving_p90_ms", "tuner_ms"))
    winner, default = flag("winner"), flag("default")
    pick, base = _first_by(winner, g, n_groups), _first_by(default, g, n_groups)
    valid = (pick >= 0) & (base >= 0)
    runner, tactic = _codes(rows["runner"]), _codes(rows["tactic"])
    same = valid[g] & (runner == runner[pick[g]]) & (tactic == tactic[pick[g]])
    source = _codes(rows["source"], missing="-") if "source" in rows.columns else np.zeros(len(rows), np.int64)
    cache = flag("cache_choice") if "cache_choice" in rows.columns else np.zeros(len(rows), dtype=bool)
    pick_units, base_units = _unit_medians(g, source, serving, same), _unit_medians(g, source, serving,
                                                                                   default & valid[g])
    rule = _rule(pick_units, base_units, valid, ratio_sd)
    groups = np.flatnonzero(valid)
    p, d = pick[groups], base[groups]
    best = np.lexsort((serving, g))[np.searchsorted(g, groups)]  # the group's first fastest row
    take = lambda name, at: rows[name].iloc[at].reset_index(drop=True)  # noqa: E731
    with np.errstate(divide="ignore", invalid="ignore"):
        bands = [(p90[i] - p10[i]) / (2 * serving[i]) for i in (p, d)]
        return pd.DataFrame({
            **{k: take(k, p) for k in keys}, "bucket": take("bucket", p),
            "at_bucket": (take("m", p) == take("bucket", p)).astype("boolean"),
            "pick_runner": take("runner", p), "pick_tactic": take("tactic", p),
            "pick_ms": rule["pick_ms"][groups], "default_ms": rule["default_ms"][groups],
            "tuner_speedup": tuner[d] / tuner[p],
            "serving_speedup": rule["default_ms"][groups] / rule["pick_ms"][groups],
            "serving_noise": np.where(bands[1] > bands[0], bands[1], bands[0]),  # as max(pick's, default's)
            "verdict": rule["verdict"][groups],
            "best_runner": take("runner", best), "best_tactic": take("tactic", best), "best_ms": serving[best],
            "regret": serving[p] / serving[best] - 1.0,
            "rank_agreement": _spearman_by(tuner, serving, g, n_groups)[groups],
            "cache_runs_pick": any_by(cache & winner, g, n_groups)[groups],
            **{k: rule[k][groups] for k in ("effect", "effect_lo", "effect_hi", "detectable", "n", "n_baseline",
                                             "design")},
            "profile": take("profile", p).astype("string") if "profile" in rows.columns else None,
            "pick_tuner_ms": tuner[p], "default_tuner_ms": tuner[d],
        })


def _tuner_verdicts(rows: pd.DataFrame, noise: pd.DataFrame | None) -> np.ndarray:
    """The rule on the tuner's pick vs default times, with the spread of the capture's repeats per (op, profile)."""
    band = rows[["op", "profile"]].astype("string")
    if noise is not None and len(noise):
        require(noise, ("op", "profile", "noise_pct", "noise_source"), "noise")
        keys = noise[["op", "profile", "noise_pct", "noise_source"]].astype({"op": "string", "profile": "string"})
        band = band.merge(keys.drop_duplicates(["op", "profile"]), on=["op", "profile"], how="left")
    rule = compare_values(rows["pick_tuner_ms"], rows["default_tuner_ms"], ratio_sd=tuner_ratio_sd(band))
    return rule["verdict"].to_numpy()


def _first_by(flags: np.ndarray, g: np.ndarray, n_groups: int) -> np.ndarray:
    """Position of each group's first flagged row (-1 where none has the flag)."""
    rows = np.flatnonzero(flags)
    groups, first = np.unique(g[rows], return_index=True)
    out = np.full(n_groups, -1, dtype=np.int64)
    out[groups] = rows[first]
    return out


def _codes(values: pd.Series, *, missing: str | None = None) -> np.ndarray:
    """Integer codes of ``values`` in the sorted order of their text; missing values coded as ``missing``, else -1."""
    values = values if isinstance(values.dtype, pd.CategoricalDtype) else values.astype("category")
    names = np.asarray(values.cat.categories.astype(str), dtype=object)
    if missing is not None:
        names = np.append(names, missing)
    rank = np.unique(names, return_inverse=True)[1]  # a category equal to ``missing`` shares its code
    codes = values.cat.codes.to_numpy()
    if missing is not None:
        return rank[np.where(codes < 0, len(names) - 1, codes)]
    return np.where(codes < 0, -1, rank[codes])


def _unit_medians(g: np.ndarray, source: np.ndarray, serving: np.ndarray,
                  rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group, process code, median serving ms) per process of each group's ``rows``, sorted by group and process."""
    at = np.flatnonzero(rows)
    at = at[np.lexsort((serving[at], source[at], g[at]))]
    gs, ss, v = g[at], source[at], serving[at]
    starts = np.flatnonzero(np.r_[True, (gs[1:] != gs[:-1]) | (ss[1:] != ss[:-1])])
    counts = np.diff(np.r_[starts, len(at)])
    lo, hi = starts + (counts - 1) // 2, starts + counts // 2
    return gs[starts], ss[starts], np.where(lo == hi, v[lo], (v[lo] + v[hi]) / 2)  # np.median's middle(s)


def _rule(pick: tuple, base: tuple, valid: np.ndarray, ratio_sd: float | None) -> dict[str, np.ndarray]:
    """The rule on each valid group's pick and default, processes as units; geometric means of their medians.

    One process per side (every row of a one-file table) is the calibrated one-unit design, for all
    such groups at once (:func:`compare_values`); groups timed in several processes go through
    :func:`compare_two`, paired where three or more processes timed both.
    """
    n_groups = len(valid)
    (pg, ps, pv), (bg, bs, bv) = pick, base
    n_pick, n_base = np.bincount(pg, minlength=n_groups), np.bincount(bg, minlength=n_groups)
    first_pick, first_base = np.searchsorted(pg, np.arange(n_groups)), np.searchsorted(bg, np.arange(n_groups))
    a, b = np.append(pv, np.nan)[first_pick], np.append(bv, np.nan)[first_base]  # each group's first unit
    nan = np.full(n_groups, np.nan)
    out = {"pick_ms": nan.copy(), "default_ms": nan.copy(), "effect": nan.copy(), "effect_lo": nan.copy(),
           "effect_hi": nan.copy(), "detectable": nan.copy(), "n": np.zeros(n_groups, dtype=np.int64),
           "n_baseline": np.zeros(n_groups, dtype=np.int64), "verdict": np.full(n_groups, None, dtype=object),
           "design": np.full(n_groups, None, dtype=object)}
    with np.errstate(invalid="ignore"):
        one = valid & (n_pick == 1) & (n_base == 1) & np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    one &= ratio_sd is not None and bool(np.isfinite(ratio_sd))
    fast = np.flatnonzero(one)
    decided = compare_values(a[fast], b[fast], ratio_sd=ratio_sd)
    for name in ("effect", "effect_lo", "effect_hi", "detectable", "verdict"):
        out[name][fast] = decided[name].to_numpy(dtype=object if name == "verdict" else float)
    out["pick_ms"][fast], out["default_ms"][fast] = np.exp(np.log(a[fast])), np.exp(np.log(b[fast]))
    out["n"][fast], out["n_baseline"][fast], out["design"][fast] = 1, 1, "calibrated"
    for k in np.flatnonzero(valid & ~one):
        i, j = slice(first_pick[k], first_pick[k] + n_pick[k]), slice(first_base[k], first_base[k] + n_base[k])
        pick_units, base_units = pv[i], bv[j]
        _, pi, bi = np.intersect1d(ps[i], bs[j], return_indices=True)
        paired = len(pi) >= MIN_UNITS
        c = compare_two(pick_units[pi] if paired else pick_units, base_units[bi] if paired else base_units,
                        paired=paired, ratio_sd=ratio_sd)
        out["pick_ms"][k] = float(np.exp(np.log(pick_units).mean()))
        out["default_ms"][k] = float(np.exp(np.log(base_units).mean()))
        for name in ("effect", "effect_lo", "effect_hi", "detectable", "verdict", "n", "n_baseline", "design"):
            out[name][k] = getattr(c, name)
    return out


def op_summary(verdicts: pd.DataFrame, *, at_bucket_only: bool = True) -> pd.DataFrame:
    """Per op: how often the tuner's pick is faster, slower, within noise of the default in serving, or not measurable.

    ``at_bucket_only`` counts each bucket once, at its own M (between-bucket M values run the
    same pick, or the default for runners keyed by M).
    """
    require(verdicts, ("op", "at_bucket", "verdict", "tuner_speedup", "serving_speedup", "regret",
                       "rank_agreement"), "verdicts")
    v = verdicts[verdicts["at_bucket"].fillna(False)] if at_bucket_only else verdicts
    rows = []
    for op, g in v.groupby("op", sort=True):
        counts = g["verdict"].value_counts()
        rows.append({"op": op, "buckets": len(g), "faster": int(counts.get("faster", 0)),
                     "slower": int(counts.get("slower", 0)), "within_noise": int(counts.get("within_noise", 0)),
                     "not_measurable": int(counts.get("not_measurable", 0)),
                     "median_tuner_speedup": g["tuner_speedup"].median(),
                     "median_serving_speedup": g["serving_speedup"].median(),
                     "median_regret": g["regret"].median(), "median_rank_agreement": g["rank_agreement"].median()})
    return conform_columns(pd.DataFrame(rows), OP_SUMMARY_COLUMNS) if rows else empty(OP_SUMMARY_COLUMNS)


def policy_table(verify: pd.DataFrame, tuning_s: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per measurement policy and op: how its picks fare in serving, and what its tuning cost.

    Args:
        verify: verify tables with a ``policy`` column (one policy per tuning method).
        tuning_s: optional rows of (policy, op, tuning_s): wall seconds of each tuning call; they
            are summed per policy and op.

    Returns:
        One row per (policy, op): shapes, buckets (each at its own M), slower / faster /
        within_noise / not_measurable (the pick against the default in serving, by
        :func:`bucket_verdicts`), median_serving_speedup,
        median_regret (against the serving-best of the timed candidates) and tuning_s.
    """
    require(verify, ("policy",), "verify")
    rows = []
    for policy, table in verify.groupby("policy", sort=True):
        summary = op_summary(bucket_verdicts(table))
        for row in summary.itertuples(index=False):
            spent = np.nan
            if tuning_s is not None and len(tuning_s):
                sel = tuning_s[(tuning_s["policy"] == policy) & (tuning_s["op"] == row.op)]
                spent = float(sel["tuning_s"].sum()) if len(sel) else np.nan
            rows.append({"policy": policy, "op": row.op, "shapes": table[table["op"] == row.op]["shape"].nunique(),
                         "buckets": row.buckets, "slower": row.slower, "faster": row.faster,
                         "within_noise": row.within_noise, "not_measurable": row.not_measurable,
                         "median_serving_speedup": row.median_serving_speedup,
                         "median_regret": row.median_regret, "tuning_s": spent})
    return conform_columns(pd.DataFrame(rows), POLICY_COLUMNS) if rows else empty(POLICY_COLUMNS)


RUN_COMPARISON_COLUMNS = {
    "op": "string", "shape": "string", "m": "Int64", "run_id": "string", "baseline": "string",
    "pick_runner": "string", "pick_tactic": "string", "pick_ms": "float64", "baseline_ms": "float64",
    "effect": "float64", "effect_lo": "float64", "effect_hi": "float64", "verdict": "string", "n": "Int64",
    "n_baseline": "Int64", "design": "string", "detectable": "float64", "note": "string",
}


def compare_runs(verify: pd.DataFrame, *, baseline: str, routing: str | None = None) -> pd.DataFrame:
    """Each run's pick against the ``baseline`` run's pick at the same (op, shape, m), in serving.

    The two picks were timed in different processes, so a process (``source``) is the unit: with
    one process per run the comparison is ``not_measurable``; verify each run in three or more
    processes to measure it. MoE rows are those of ``routing`` (:func:`of_routing`).

    Returns:
        One row per (op, shape, m, run_id != baseline) timed in both: pick_runner, pick_tactic,
        pick_ms and baseline_ms (geometric means over processes) and the rule's columns
        (effect = pick / baseline's pick - 1, effect_lo, effect_hi, verdict, n, n_baseline, design,
        detectable, note). Sorted by op, shape, m, run_id.
    """
    require(verify, ("run_id", "op", "shape", "m", "runner", "tactic", "winner", "serving_ms"), "verify")
    picks = of_routing(verify, routing)
    picks = picks[picks["winner"].fillna(False).to_numpy(dtype=bool) & picks["serving_ms"].notna().to_numpy(dtype=bool)]
    if not (picks["run_id"].astype("string") == baseline).fillna(False).any():
        raise ProfkitError(f"no verify picks of run {baseline!r}; runs: "
                           f"{', '.join(sorted(verify['run_id'].dropna().astype(str).unique()))}")
    picks = picks.assign(_unit=picks["source"].astype("string").fillna("-") if "source" in picks.columns else "-")
    out = compare_samples(picks, by=["op", "shape", "m"], label_col="run_id", baseline=baseline,
                          value_col="serving_ms", unit_col="_unit", paired=False)
    named = picks.drop_duplicates(["op", "shape", "m", "run_id"])[["op", "shape", "m", "run_id", "runner", "tactic"]]
    out = out.merge(named.rename(columns={"runner": "pick_runner", "tactic": "pick_tactic"}),
                    on=["op", "shape", "m", "run_id"], how="left")
    out = out.rename(columns={"value": "pick_ms", "baseline_value": "baseline_ms"})
    return conform_columns(out.sort_values(["op", "shape", "m", "run_id"], kind="stable"), RUN_COMPARISON_COLUMNS)


def repair_picks(verify: pd.DataFrame, *, routing: str | None = None) -> pd.DataFrame:
    """Per (run_id, op, shape, bucket): the serving-verified best, or the default where nothing beats it.

    Timed at the bucket's own M. A candidate replaces the default only when it is faster beyond
    noise (its p90 below the default's p10); among those, the fastest median wins, ties to the
    tuner's order. Each row carries FlashInfer's cache-file key of the chosen runner, recorded by
    verify at the bucket's M (``file_key``), which is what :func:`profkit.outputs.flashinfer_cache.cache_file`
    writes. MoE verify tables time each candidate under several routings: the picks follow
    ``routing`` (default: the tuner's own, ``"tuner"``); rows without a routing are GEMMs'.
    """
    require(verify, ("run_id", "op", "shape", "m", "bucket", "runner", "tactic", "winner", "default",
                     "serving_ms", "serving_p10_ms", "serving_p90_ms", "file_key"), "verify")
    verify = of_routing(verify, routing)
    at = verify[((verify["m"] == verify["bucket"]) & verify["serving_ms"].notna()).fillna(False).to_numpy(dtype=bool)]
    keys = ["run_id", "op", "shape", "bucket"]
    # Each bucket's rows worked as plain arrays (a Python loop over buckets cost a few ms each).
    group = at.groupby(keys, sort=True).ngroup().to_numpy()  # -1: a key is missing (left out, as groupby does)
    n_groups = int(group.max()) + 1 if len(group) else 0
    default = at["default"].fillna(False).to_numpy(dtype=bool)
    winner = at["winner"].fillna(False).to_numpy(dtype=bool)
    serving = at["serving_ms"].to_numpy(dtype=float)
    rank = at["tuner_rank"].astype("Float64").to_numpy(dtype=float, na_value=np.nan) if "tuner_rank" in at.columns \
        else np.full(len(at), np.nan)
    d = _first_by(default & (group >= 0), group, n_groups)  # each bucket's first default row
    has = np.flatnonzero(d >= 0)
    if not len(has):
        return empty(REPAIR_COLUMNS)
    d_p10 = np.append(at["serving_p10_ms"].to_numpy(dtype=float), np.nan)[d][np.maximum(group, 0)]
    with np.errstate(invalid="ignore"):
        beats = (group >= 0) & ~default & (at["serving_p90_ms"].to_numpy(dtype=float) < d_p10)
    # The fastest median among the candidates that beat the default, ties to the tuner's order (missing ranks last).
    order = np.lexsort((np.arange(len(at)), np.nan_to_num(rank, nan=np.inf), np.isnan(rank), serving, group))
    best = _first_by(beats[order], group[order], n_groups)
    best = np.where(best >= 0, order[np.maximum(best, 0)], -1)
    tuner = _first_by(winner & (group >= 0), group, n_groups)
    d, best, tuner = d[has], best[has], tuner[has]
    choice = np.where(best >= 0, best, d)
    take = lambda name, rows: at[name].iloc[rows].reset_index(drop=True)  # noqa: E731
    maybe = lambda name: take(name, np.maximum(tuner, 0)).astype(object).where(tuner >= 0, None)  # noqa: E731
    out = pd.DataFrame({**{k: take(k, d) for k in keys}, **{c: take(c, choice) for c in ("runner", "tactic", "file_key")},
                        "serving_ms": serving[choice], "default_ms": serving[d],
                        "tuner_runner": maybe("runner"), "tuner_tactic": maybe("tactic"),
                        "reason": np.where(best >= 0, "serving-best, faster than the default beyond noise",
                                           "nothing beats the default beyond noise")})
    return conform_columns(out, REPAIR_COLUMNS)


def of_routing(verify: pd.DataFrame, routing: str | None = None) -> pd.DataFrame:
    """The rows timed under ``routing`` (default ``"tuner"``), and every row that has no routing.

    Raises ProfkitError when MoE rows exist but none under ``routing``, naming the routings there are.
    """
    if "routing" not in verify.columns:
        return verify
    names = verify["routing"]
    names = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("string")  # a big table's: as read
    wanted = routing or "tuner"
    keep = (names == wanted).fillna(False) | names.isna()
    if names.notna().any() and not (names == wanted).fillna(False).any():
        raise ProfkitError(f"no verify rows under routing {wanted!r}; routings timed: "
                           f"{', '.join(sorted(names.dropna().unique()))}")
    return verify[keep.to_numpy(dtype=bool)]


def predict_step_from_verify(verify: pd.DataFrame, *, shapes, tokens, layers: int,
                             picks: pd.DataFrame | None = None) -> pd.DataFrame:
    """Predicted step-time change against untuned, from serving timings of the linears.

    Per linear and step size M, the tuned op runs what FlashInfer's own lookup chose at M in
    verify (``cache_choice``: the bucket's pick, or the default where the pick's key does not
    match M); ``picks`` (e.g. :func:`repair_picks`) predicts another cache instead: its runner
    and tactic at M's bucket, the default where the chosen key was recorded at another M.
    The change is that candidate's serving time minus the default's at M, summed over the
    linears and times ``layers``.

    Returns:
        One row per (op, tokens): state ('tuned' or 'repaired'), predicted_delta_ms (negative =
        faster), n_linears found, n_missing (linears without the timings needed: NaN result).
    """
    require(verify, ("op", "shape", "m", "runner", "tactic", "default", "serving_ms"), "verify")
    wanted = {f"N={n} K={k}" for n, k in shapes}
    used = [c for c in ("op", "shape", "m", "bucket", "runner", "tactic", "default", "cache_choice", "file_key",
                        "serving_ms") if c in verify.columns]  # the few columns used: a filter takes every column
    v = verify[used][(verify["shape"].isin(wanted) & verify["m"].isin(list(tokens))).to_numpy(dtype=bool)]
    # Each linear at each M (op, m, shape) worked as plain arrays: a Python loop of filters per linear cost ms each.
    group = v.groupby(["op", "m", "shape"], sort=True).ngroup().to_numpy()  # -1: a key is missing (left out)
    n_groups = int(group.max()) + 1 if len(group) else 0
    if not n_groups:
        return empty(STEP_COLUMNS)
    flag = lambda name: v[name].fillna(False).to_numpy(dtype=bool) & (group >= 0)  # noqa: E731
    default = _first_by(flag("default"), group, n_groups)
    if picks is not None:
        ran = _repaired_rows(v, group, n_groups, picks, default)
    else:
        ran = _first_by(flag("cache_choice"), group, n_groups) if "cache_choice" in v else np.full(n_groups, -1)
    serving = np.append(v["serving_ms"].to_numpy(dtype=float), np.nan)
    deltas = np.where((ran >= 0) & (default >= 0), serving[ran] - serving[default], np.nan)
    first = _first_by(group >= 0, group, n_groups)
    ops, ms = v["op"].to_numpy(dtype=object)[first], v["m"].to_numpy(dtype=object)[first]
    edges = np.flatnonzero(np.r_[True, (ops[1:] != ops[:-1]) | (ms[1:] != ms[:-1]), True])  # each (op, m)'s linears
    rows = []
    for i, j in zip(edges[:-1], edges[1:]):
        d = deltas[i:j]
        rows.append({"op": ops[i], "tokens": ms[i], "layers": layers, "state": "tuned" if picks is None else "repaired",
                     "predicted_delta_ms": float(np.sum(d)) * layers if not np.isnan(d).any() else np.nan,
                     "n_linears": len(d), "n_missing": int(np.isnan(d).sum())})
    return conform_columns(pd.DataFrame(rows), STEP_COLUMNS)


def verify_step_changes(verify: pd.DataFrame, step: pd.DataFrame, *, captures, linears) -> pd.DataFrame:
    """:func:`predict_step_from_verify` for every (model, dtype) whose tuning-pass capture was verified.

    Like :func:`profkit.analysis.step.predicted_step_changes` (same arguments, plus the verify
    table), with the serving timings in place of the tuner's; captures without verify rows are
    left out. Rows carry ``model`` and ``dtype``.
    """
    from profkit.analysis.step import per_step_capture

    def predict(run, **sizes):
        mine = verify[(verify["run_id"] == run).fillna(False).to_numpy(dtype=bool)]
        return predict_step_from_verify(mine, **sizes) if len(mine) else mine.iloc[:0]

    return per_step_capture(predict, step, captures=captures, linears=linears, columns=STEP_COLUMNS)


def _repaired_rows(v: pd.DataFrame, group: np.ndarray, n_groups: int, picks: pd.DataFrame,
                   default: np.ndarray) -> np.ndarray:
    """Per linear at an M: the row of what a repaired cache runs there: its pick at the bucket of the linear's first
    row, the default where it has none there or the pick's key was recorded at another M (-1: not timed)."""
    first = _first_by(group >= 0, group, n_groups)
    chosen = v.iloc[first][["op", "shape", "bucket"]].reset_index(drop=True).merge(
        picks.drop_duplicates(["op", "shape", "bucket"]), on=["op", "shape", "bucket"], how="left",
        suffixes=("", "_pick"), indicator=True)
    has_pick = (chosen["_merge"] == "both").to_numpy()
    equal = lambda mine, wanted: (mine.astype("string").array == wanted.astype("string").array).fillna(  # noqa: E731
        False).to_numpy(dtype=bool)
    at = np.maximum(group, 0)
    same = equal(v["runner"], chosen["runner"].iloc[at]) & equal(v["tactic"], chosen["tactic"].iloc[at])
    same = _first_by(same & (group >= 0), group, n_groups)
    ran = np.where(has_pick, same, default)
    if "file_key" in v.columns:  # the pick's key holds only at the M verify recorded it at
        moved = has_pick & (same >= 0) & ~equal(v["file_key"].iloc[np.maximum(same, 0)], chosen["file_key"])
        ran = np.where(moved, default, ran)
    return ran


def _spearman_by(a: np.ndarray, b: np.ndarray, g: np.ndarray, n_groups: int) -> np.ndarray:
    """Spearman's rank correlation per group (ties at their average rank); NaN under 3 pairs or a constant side."""
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b, g = a[keep], b[keep], g[keep]
    n = np.bincount(g, minlength=n_groups)
    sums = lambda x: np.bincount(g, weights=x, minlength=n_groups)  # noqa: E731
    # Ranks are half-integers and centred ranks multiples of 1/2: every sum here is exact, in any order.
    ra, rb = (r - (sums(r) / np.maximum(n, 1))[g] for r in (_average_ranks_by(a, g), _average_ranks_by(b, g)))
    scale = np.sqrt(sums(ra * ra) * sums(rb * rb))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((n >= 3) & (scale > 0), sums(ra * rb) / scale, np.nan)


def _average_ranks_by(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x`` inside each group, ties at the average of the ranks they span (as pandas' ``rank()``)."""
    order = np.lexsort((x, g))
    xs, gs = x[order], g[order]
    starts = np.flatnonzero(np.r_[True, (gs[1:] != gs[:-1]) | (xs[1:] != xs[:-1])])
    counts = np.diff(np.r_[starts, len(x)])
    before = starts - np.searchsorted(gs, gs[starts])  # rows of the group ranked below the tie
    ranks = np.empty(len(x))
    ranks[order] = np.repeat((2 * before + 1 + counts) / 2.0, counts)
    return ranks
