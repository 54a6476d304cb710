"""Compare decisions: winner flips across repeated runs, diffs of two captures or caches, ranks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analysis._frames import DEFAULT_NOISE_PCT, conform_columns, empty, flashinfer_rows, require, shapes_of
from profkit.analysis.decisions import tuner_ratio_sd
from profkit.analysis.decisions import winners as _winners
from profkit.analysis.verdict import compare_values
from profkit.errors import ProfkitError

STABILITY_COLUMNS = {
    "op": "string", "shape": "string", "profile": "string", "bucket": "Int64", "n_tunings": "Int64",
    "n_distinct": "Int64", "modal_runner": "string", "modal_tactic": "string", "modal_share": "float64",
    "flip_rate": "float64", "winners": "string", "spread_pct": "float64", "regret_pct": "float64",
    "regret_us": "float64", "noise_pct": "float64", "within_noise": "boolean", "verdict": "string",
    "detectable": "float64",
}

DIFF_COLUMNS = {
    "op": "string", "shape": "string", "profile": "string", "bucket": "Int64", "runner_a": "string",
    "tactic_a": "string", "runner_b": "string", "tactic_b": "string", "change": "string", "changed": "boolean",
    "time_a_ms": "float64", "time_b_ms": "float64", "cost_us": "float64", "cost_pct": "float64",
    "priced_on": "string",
}

RANK_COLUMNS = {
    "op": "string", "shape": "string", "profile": "string", "bucket": "Int64", "ranks": "string",
    "n_ranks": "Int64", "n_distinct": "Int64", "agree": "boolean", "winners": "string",
    "regret_pct": "float64", "regret_us": "float64", "noise_pct": "float64", "within_noise": "boolean",
    "verdict": "string", "detectable": "float64",
}

_KEY = ["op", "shape", "profile", "bucket"]


def _as_winners(frame: pd.DataFrame, table: str) -> pd.DataFrame:
    require(frame, ("op", "profile", "runner", "tactic"), table)
    w = frame.copy()
    if "shape" not in w.columns:
        w["shape"] = shapes_of(w).to_numpy()
    for col, value in (("bucket", pd.NA), ("time_ms", np.nan), ("run_id", pd.NA), ("noise_pct", np.nan)):
        if col not in w.columns:
            w[col] = value
    w["bucket"] = w["bucket"].astype("Int64")
    return w


def _price_table(candidates: pd.DataFrame | None) -> pd.Series | None:
    """Fastest finite time per (run_id, op, profile, runner, tactic) among FlashInfer candidates."""
    if candidates is None:
        return None
    require(candidates, ("run_id", "op", "profile", "runner", "tactic", "time_ms"), "candidates")
    c = flashinfer_rows(candidates)
    c = c[np.isfinite(c["time_ms"].to_numpy(dtype=float))]
    keys = ["run_id", "op", "profile", "runner", "tactic"]
    return c.groupby(keys, observed=True)["time_ms"].min()


def _regret(rows: pd.DataFrame, prices: pd.Series | None) -> tuple[float, float]:
    """Worst loss (percent, us) of running another row's winner in a row's own run; NaN if unpriced."""
    if prices is None or len(rows) < 2:
        return (np.nan, np.nan) if prices is None else (0.0, 0.0)
    picks = rows[["runner", "tactic"]].drop_duplicates().itertuples(index=False)
    picks = list(picks)
    worst_pct, worst_us = 0.0, 0.0
    for row in rows.itertuples(index=False):
        best = row.time_ms
        for runner, tactic in picks:
            t = prices.get((row.run_id, row.op, row.profile, runner, tactic), np.nan)
            if np.isfinite(t) and np.isfinite(best) and best > 0:
                worst_pct = max(worst_pct, 100.0 * (t / best - 1.0))
                worst_us = max(worst_us, 1000.0 * (t - best))
    return worst_pct, worst_us


def _flip_verdict(regret_pct: float, tunings: pd.DataFrame):
    """The rule's verdict on a flip's worst regret, with the widest repeats-measured spread of its tunings.

    The regret compares two timings of one run (another run's winner against the run's own), so
    its spread is that of a ratio of two tuner timings (:func:`profkit.analysis.decisions.tuner_ratio_sd`).
    """
    if not np.isfinite(regret_pct):
        return pd.NA, np.nan
    sd = tuner_ratio_sd(tunings)
    spread = float(np.nanmax(sd)) if np.isfinite(sd).any() else np.nan
    rule = compare_values([1.0 + regret_pct / 100.0], [1.0], ratio_sd=spread).iloc[0]
    return str(rule["verdict"]), float(rule["detectable"])


def winner_stability(winners: pd.DataFrame, *, candidates: pd.DataFrame | None = None) -> pd.DataFrame:
    """Measure how often the winner of a bucket changes across repeated tunings.

    A tuning is one decision: a run, or a later call of the same run that profiled the bucket
    again (FlashInfer re-profiles when its cache lookup misses, e.g. cuBLASLt keys holding M).
    ``flip_rate`` is the share of run pairs whose winners differ (0 = every run chose the same
    (runner, tactic); 1 = all differ). With ``candidates``, ``regret_pct`` prices the flip: the
    worst slowdown of running another run's winner instead of a run's own, measured within that
    run, and ``verdict`` judges it by the one comparison rule (docs/comparison_rule.md): ``slower``
    when the flip costs beyond the run-to-run spread that repeats measured (:func:`profkit.analysis.noise`),
    ``within_noise`` when not, ``not_measurable`` without repeats; ``within_noise`` is True unless it is slower.

    Args:
        winners: decisions of several runs: the output of :func:`profkit.analysis.winners` or a
            winners table (e.g. ``profkit.concat`` of repeated captures).
        candidates: the runs' candidates, to price flips; without them ``regret_*`` is NaN.

    Returns:
        One row per (op, shape, profile, bucket), sorted by op, shape, bucket: ``n_tunings``,
        ``n_distinct`` (distinct winners), ``modal_runner`` and ``modal_tactic`` (most frequent
        winner; the first in run order on ties), ``modal_share``, ``flip_rate``, ``winners``
        ("runner:tactic xN; ..." by count), ``spread_pct`` (winner times' max / min - 1, percent),
        ``regret_pct``, ``regret_us``, ``noise_pct`` (widest band of the tunings),
        ``within_noise``, ``verdict`` and ``detectable`` (relative); NA without candidates.
    """
    w = _as_winners(winners, "winners")
    if w.empty:
        return empty(STABILITY_COLUMNS)
    prices = _price_table(candidates)
    w = w.sort_values(["run_id"], kind="stable")
    rows = []
    for key, group in w.groupby(_KEY, dropna=False, observed=True, sort=False):
        labels = list(zip(group["runner"].astype(str), group["tactic"].astype(str)))
        counts: dict = {}
        for label in labels:
            counts[label] = counts.get(label, 0) + 1
        modal = max(counts, key=lambda k: (counts[k], -labels.index(k)))
        n = len(labels)
        agree_pairs = sum(c * (c - 1) for c in counts.values())
        times = group["time_ms"].to_numpy(dtype=float)
        finite = times[np.isfinite(times)]
        regret_pct, regret_us = _regret(group, prices)
        band = group["noise_pct"].to_numpy(dtype=float)
        noise_pct = float(np.nanmax(band)) if np.isfinite(band).any() else DEFAULT_NOISE_PCT
        verdict, detectable = _flip_verdict(regret_pct, group)
        rows.append({
            **dict(zip(_KEY, key)), "n_tunings": n, "n_distinct": len(counts), "modal_runner": modal[0],
            "modal_tactic": modal[1], "modal_share": counts[modal] / n,
            "flip_rate": 1.0 - agree_pairs / (n * (n - 1)) if n >= 2 else np.nan,
            "winners": "; ".join(f"{r}:{t} x{c}" for (r, t), c in sorted(counts.items(), key=lambda kv: -kv[1])),
            "spread_pct": 100.0 * (finite.max() / finite.min() - 1.0) if len(finite) >= 2 else np.nan,
            "regret_pct": regret_pct, "regret_us": regret_us, "noise_pct": noise_pct,
            "within_noise": verdict != "slower" if verdict is not pd.NA else pd.NA, "verdict": verdict,
            "detectable": detectable,
        })
    out = conform_columns(pd.DataFrame(rows), STABILITY_COLUMNS)
    return out.sort_values(["op", "shape", "bucket", "profile"], kind="stable").reset_index(drop=True)


def diff_winners(a: pd.DataFrame, b: pd.DataFrame, *, candidates: pd.DataFrame | None = None) -> pd.DataFrame:
    """Diff two sets of decisions (captures, cache files, two GPUs or versions) bucket by bucket.

    Args:
        a: the reference decisions: output of :func:`profkit.analysis.winners`, a winners table,
            or ``profkit.read_cache(...).winners``; one row per (op, profile).
        b: the decisions to compare with ``a``, same forms.
        candidates: candidates to price both choices on the same measurements (e.g. ``a``'s
            capture). Without them the cost uses each side's own ``time_ms``, measured in
            different runs, and is NaN where a side has no times (cache files).

    Returns:
        One row per (op, profile) present in either side, sorted by op, shape, bucket:
        ``runner_a``, ``tactic_a``, ``runner_b``, ``tactic_b``, ``change`` ("same", "tactic" (same
        runner), "runner", "only_a", "only_b"), ``changed``, ``time_a_ms``, ``time_b_ms``,
        ``cost_us`` and ``cost_pct`` (b's choice minus a's, microseconds and percent of a's:
        positive means b's choice is slower) and ``priced_on`` ("candidates", "own runs" or
        empty).

    Raises:
        ProfkitError: when a side holds several decisions for one (op, profile), e.g. several
            runs stacked: filter by ``run_id`` first.
    """
    sides = []
    for name, frame in (("a", a), ("b", b)):
        w = _as_winners(frame, "winners")
        dup = w.duplicated(["op", "profile"], keep=False)
        if dup.any():
            first = w[dup].iloc[0]
            runs = w.loc[dup, "run_id"].astype("string").dropna().unique()
            raise ProfkitError(
                f"{name} holds {int(dup.sum())} decisions for {int(w[dup].groupby(['op', 'profile']).ngroups)} "
                f"(op, profile) keys, e.g. {first['op']} {first['profile']}"
                + (f" from runs {', '.join(runs[:3])}" if len(runs) else "")
                + "; pass one run (filter by run_id) per side")
        sides.append(w[["op", "shape", "profile", "bucket", "runner", "tactic", "time_ms", "run_id"]])
    joined = sides[0].merge(sides[1], on=["op", "profile"], how="outer", suffixes=("_a", "_b"), indicator=True)
    if joined.empty:
        return empty(DIFF_COLUMNS)
    joined["shape"] = joined["shape_a"].fillna(joined["shape_b"])
    joined["bucket"] = joined["bucket_a"].fillna(joined["bucket_b"])
    both = joined["_merge"] == "both"
    same_runner = (joined["runner_a"] == joined["runner_b"]).fillna(False).astype(bool)
    same_tactic = (joined["tactic_a"] == joined["tactic_b"]).fillna(False).astype(bool)
    joined["change"] = np.select(
        [joined["_merge"] == "left_only", joined["_merge"] == "right_only", same_runner & same_tactic, same_runner],
        ["only_a", "only_b", "same", "tactic"], default="runner")
    joined["changed"] = joined["change"] != "same"
    prices = _price_table(candidates)
    cost_a = np.full(len(joined), np.nan)
    cost_b = np.full(len(joined), np.nan)
    priced = np.full(len(joined), "", dtype=object)
    if prices is not None:
        per_pick = prices.groupby(level=["op", "profile", "runner", "tactic"]).mean()
        for i, row in enumerate(joined.itertuples(index=False)):
            if not both.iloc[i]:
                continue
            ta = per_pick.get((row.op, row.profile, row.runner_a, row.tactic_a), np.nan)
            tb = per_pick.get((row.op, row.profile, row.runner_b, row.tactic_b), np.nan)
            if np.isfinite(ta) and np.isfinite(tb):
                cost_a[i], cost_b[i], priced[i] = ta, tb, "candidates"
    own_a = joined["time_ms_a"].to_numpy(dtype=float)
    own_b = joined["time_ms_b"].to_numpy(dtype=float)
    use_own = (priced == "") & both.to_numpy() & np.isfinite(own_a) & np.isfinite(own_b)
    cost_a = np.where(use_own, own_a, cost_a)
    cost_b = np.where(use_own, own_b, cost_b)
    priced = np.where(use_own, "own runs", priced)
    joined["time_a_ms"] = own_a
    joined["time_b_ms"] = own_b
    joined["cost_us"] = 1000.0 * (cost_b - cost_a)
    with np.errstate(divide="ignore", invalid="ignore"):
        joined["cost_pct"] = 100.0 * (cost_b / cost_a - 1.0)
    joined["priced_on"] = priced
    out = conform_columns(joined, DIFF_COLUMNS)
    return out.sort_values(["op", "shape", "bucket", "profile"], kind="stable").reset_index(drop=True)


def rank_divergence(candidates: pd.DataFrame, *, noise: pd.DataFrame | None = None,
                    rel_threshold: float = DEFAULT_NOISE_PCT / 100) -> pd.DataFrame:
    """Find buckets where tensor-parallel ranks chose different winners, and price the difference.

    Each rank's winner is computed from its own candidates (independent per-rank tuning; with
    ``set_autotune_process_group`` every rank records the cross-rank mean and cannot diverge).
    ``regret_pct`` is the worst slowdown, on some rank, of running another rank's winner instead
    of its own, measured on that rank; ``verdict`` judges it as :func:`winner_stability` does
    (``within_noise``: not slower).

    Args:
        candidates: candidates of several ranks (the ``rank`` column set); rows without a rank
            are ignored.
        noise: noise estimate from :func:`profkit.analysis.noise`; estimated from
            ``candidates`` (ranks count as repeats) when omitted.
        rel_threshold: relative band where no repeats exist (0.02 = 2%).

    Returns:
        One row per (op, shape, profile, bucket) timed by two or more ranks, sorted by op,
        shape, bucket: ``ranks`` ("0,1,2"), ``n_ranks``, ``n_distinct`` (distinct winners),
        ``agree``, ``winners`` ("rank: runner:tactic" joined by " | "), ``regret_pct``,
        ``regret_us``, ``noise_pct``, ``within_noise``, ``verdict``, ``detectable``. Empty when fewer
        than two ranks appear.
    """
    require(candidates, ("run_id", "rank", "op", "profile", "runner", "tactic", "time_ms"), "candidates")
    ranked = candidates[candidates["rank"].notna().to_numpy(dtype=bool)]
    if ranked.empty or ranked["rank"].nunique() < 2:
        return empty(RANK_COLUMNS)
    w = _winners(ranked, noise=noise, rel_threshold=rel_threshold)
    prices = _price_table(ranked)
    rows = []
    for key, group in w.groupby(_KEY, dropna=False, observed=True, sort=False):
        ranks = sorted(int(r) for r in group["rank"].dropna().unique())
        if len(ranks) < 2:
            continue
        group = group.sort_values(["rank", "run_id"], kind="stable")
        picks = {(r, t) for r, t in zip(group["runner"].astype(str), group["tactic"].astype(str))}
        regret_pct, regret_us = _regret(group, prices)
        noise_pct = float(group["noise_pct"].max())
        verdict, detectable = _flip_verdict(regret_pct, group)
        rows.append({
            **dict(zip(_KEY, key)), "ranks": ",".join(map(str, ranks)), "n_ranks": len(ranks),
            "n_distinct": len(picks), "agree": len(picks) == 1,
            "winners": " | ".join(f"{int(r)}: {ru}:{t}" for r, ru, t in
                                  zip(group["rank"], group["runner"], group["tactic"])),
            "regret_pct": regret_pct, "regret_us": regret_us, "noise_pct": noise_pct,
            "within_noise": verdict != "slower" if verdict is not pd.NA else pd.NA, "verdict": verdict,
            "detectable": detectable,
        })
    if not rows:
        return empty(RANK_COLUMNS)
    out = conform_columns(pd.DataFrame(rows), RANK_COLUMNS)
    return out.sort_values(["op", "shape", "bucket", "profile"], kind="stable").reset_index(drop=True)


RUN_WINNER_COLUMNS = {
    "op": "string", "shape": "string", "profile": "string", "bucket": "Int64", "run_id": "string",
    "baseline_run": "string", "runner": "string", "tactic": "string", "time_ms": "float64",
    "baseline_runner": "string", "baseline_tactic": "string", "baseline_ms": "float64", "noise_pct": "float64",
    "effect": "float64", "effect_lo": "float64", "effect_hi": "float64", "verdict": "string",
    "detectable": "float64",
}


def compare_run_winners(candidates: pd.DataFrame, *, baseline: str) -> pd.DataFrame:
    """Each run's winner time against the ``baseline`` run's winner time, bucket by bucket.

    The two times come from different runs (one timing each), so the one comparison rule
    (docs/comparison_rule.md) judges them with the run-to-run spread :func:`profkit.analysis.noise`
    measured where repeated runs timed the profile; without repeats the point is ``not_measurable``.

    Args:
        candidates: candidates of several runs (``profkit.concat`` of captures).
        baseline: the run_id every other run is compared with.

    Returns:
        One row per (op, profile, run_id != baseline) both runs decided: the two winners and
        times, noise_pct, and the rule's effect (time_ms / baseline_ms - 1), effect_lo,
        effect_hi, verdict and detectable. Sorted by op, shape, bucket, run_id.

    Raises:
        ProfkitError: when no candidates of ``baseline`` exist, naming the runs there are.
    """
    require(candidates, ("run_id", "op", "profile", "runner", "tactic", "time_ms"), "candidates")
    runs = sorted(candidates["run_id"].dropna().astype(str).unique())
    if baseline not in runs:
        raise ProfkitError(f"no candidates of run {baseline!r}; runs: {', '.join(runs)}; pass one as the baseline")
    w = _winners(candidates)
    w = w.sort_values("call", kind="stable").drop_duplicates(["run_id", "op", "profile"]) if "call" in w else w
    base = w[(w["run_id"] == baseline).fillna(False).to_numpy(dtype=bool)]
    other = w[(w["run_id"] != baseline).fillna(False).to_numpy(dtype=bool)]
    cols = ["op", "profile", "runner", "tactic", "time_ms", "noise_pct", "noise_source"]
    joined = other.merge(base[cols].rename(columns={c: f"baseline_{c}" for c in cols[2:]}), on=["op", "profile"])
    if joined.empty:
        return empty(RUN_WINNER_COLUMNS)
    as_baseline = {"noise_pct": "_p", "noise_source": "_s", "baseline_noise_pct": "noise_pct",
                   "baseline_noise_source": "noise_source"}
    spread = np.fmax(tuner_ratio_sd(joined), tuner_ratio_sd(joined.rename(columns=as_baseline)))
    rule = compare_values(joined["time_ms"], joined["baseline_time_ms"], ratio_sd=spread)
    out = joined.assign(baseline_run=baseline, baseline_ms=joined["baseline_time_ms"],
                        **{c: rule[c].to_numpy() for c in ("effect", "effect_lo", "effect_hi", "verdict",
                                                           "detectable")})
    out = conform_columns(out, RUN_WINNER_COLUMNS)
    return out.sort_values(["op", "shape", "bucket", "run_id"], kind="stable").reset_index(drop=True)


def first_runs(winners: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """The earliest run of each (op, shape), by ``runs.started_at`` then run_id, sorted.

    The report's headline figures show one decision per bucket: the first run's. Later runs of
    the same shapes (repeats, other ranks) go to :func:`repeat_diff` and :func:`winner_stability`.
    """
    require(winners, ("op", "shape", "run_id"), "winners")
    started = dict(zip(runs["run_id"], runs["started_at"].astype("string").fillna(""))) if len(runs) else {}
    order = winners[["op", "shape", "run_id"]].drop_duplicates().assign(
        _t=lambda f: f["run_id"].map(started).fillna(""))
    first = order.sort_values(["_t", "run_id"], kind="stable").drop_duplicates(["op", "shape"])
    return sorted(first["run_id"].dropna().astype(str).unique())


def repeat_diff(winners: pd.DataFrame, *, first: list[str], candidates: pd.DataFrame) -> pd.DataFrame:
    """Diff the first run of each shape against the next run of the same shapes (a repeat).

    Args:
        winners: output of :func:`profkit.analysis.winners` over several runs.
        first: the first runs (:func:`first_runs`).
        candidates: the candidates; both choices are priced on the first runs' measurements.

    Returns:
        :func:`diff_winners` rows plus ``run_a`` and ``run_b`` (the two runs of each row); empty
        when no shape was tuned twice.
    """
    is_first = winners["run_id"].isin(first).to_numpy(dtype=bool)
    others = winners[~is_first]
    if others.empty:
        return empty({**DIFF_COLUMNS, "run_a": "string", "run_b": "string"})
    second = others.sort_values("run_id").drop_duplicates(["op", "profile"])
    keys = second.set_index(["op", "profile"]).index
    a = winners[is_first]
    a = a[a.set_index(["op", "profile"]).index.isin(keys)]
    a = a.sort_values("call", kind="stable").drop_duplicates(["op", "profile"]) if "call" in a else a
    priced_on = candidates[candidates["run_id"].isin(first).to_numpy(dtype=bool)]
    diff = diff_winners(a, second, candidates=priced_on)
    run_of = lambda side: side.set_index(["op", "profile"])["run_id"].astype("string")  # noqa: E731
    index = pd.MultiIndex.from_frame(diff[["op", "profile"]])
    return diff.assign(run_a=run_of(a).reindex(index).to_numpy(), run_b=run_of(second).reindex(index).to_numpy())


def cache_agreement(winners: pd.DataFrame, cache_winners: pd.DataFrame) -> pd.DataFrame:
    """Diff each capture's winners against the cache file FlashInfer wrote in the same capture.

    Args:
        winners: output of :func:`profkit.analysis.winners` (with ``run_id`` and ``call``).
        cache_winners: winners read from cache files, with ``capture_run_id`` naming the capture
            each file was written in (``profkit.sources.datadir``).

    Returns:
        :func:`diff_winners` rows (b = the cache file) plus ``run_id``, for every (op, profile)
        the capture decided; they should all be "same". Empty when no cache sits beside a capture.
    """
    columns = {**DIFF_COLUMNS, "run_id": "string"}
    if cache_winners.empty or "capture_run_id" not in cache_winners:
        return empty(columns)
    rows = []
    for run, cached in cache_winners.groupby("capture_run_id", sort=True):
        mine = winners[(winners["run_id"] == run).fillna(False).to_numpy(dtype=bool)]
        if "call" in mine:
            mine = mine.sort_values("call", kind="stable")
        mine = mine.drop_duplicates(["op", "profile"])
        cached = cached[cached["profile"].isin(mine["profile"]).to_numpy(dtype=bool)].drop_duplicates(["op", "profile"])
        if len(mine) and len(cached):
            rows.append(diff_winners(mine, cached.drop(columns="capture_run_id")).assign(run_id=run))
    return conform_columns(pd.concat(rows, ignore_index=True), columns) if rows else empty(columns)
