"""Compare decisions: winner flips across repeated runs, diffs of two captures or caches, ranks."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from profkit.analysis import _rank_reduce
from profkit.analysis._frames import (DEFAULT_NOISE_PCT, any_by, conform_columns, empty, flashinfer_rows,
                                      group_ids, join_by, max_by, require, shapes_of)
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


def _price_table(candidates: pd.DataFrame | None, *, timings: pd.DataFrame | None = None,
                 picks: pd.DataFrame | None = None) -> pd.Series | None:
    """Fastest finite time per (run_id, op, profile, runner, tactic) among FlashInfer candidates; from ``timings``
    (each run's ``min_ms`` per candidate) instead where given, only for the (op, profile, runner, tactic) of
    ``picks``."""
    keys = ["run_id", "op", "profile", "runner", "tactic"]
    if timings is not None:
        require(timings, (*keys, "min_ms"), "timings")
        picked = _rank_reduce.as_text(_rank_reduce.matching(timings, picks[keys[1:]].drop_duplicates()), keys)
        return picked.groupby(keys, observed=True)["min_ms"].min()
    if candidates is None:
        return None
    require(candidates, ("run_id", "op", "profile", "runner", "tactic", "time_ms"), "candidates")
    c = flashinfer_rows(candidates)
    c = c[np.isfinite(c["time_ms"].to_numpy(dtype=float))]
    return c.groupby(keys, observed=True)["time_ms"].min()


def _regret(w: pd.DataFrame, gid: np.ndarray, n_groups: int,
            prices: pd.Series | None) -> tuple[np.ndarray, np.ndarray]:
    """Worst loss (percent, us) per group of running another row's winner in a row's own run; NaN if unpriced.

    Every row of a group is priced with every distinct (runner, tactic) of its group, on its own
    (run_id, op, profile); the worst finite loss counts, 0 when none is worse or the group has one row.
    """
    if prices is None:
        return np.full(n_groups, np.nan), np.full(n_groups, np.nan)
    worst_pct, worst_us = np.zeros(n_groups), np.zeros(n_groups)
    rows = np.flatnonzero(np.bincount(gid, minlength=n_groups)[gid] >= 2)
    if not len(rows) or prices.empty:
        return worst_pct, worst_us
    pick = group_ids(w.iloc[rows], ["runner", "tactic"])
    # One row per (group, distinct pick), crossed with the group's rows.
    picks = pd.DataFrame({"g": gid[rows], "p": pick, "at": rows}).drop_duplicates(["g", "p"])
    cross = pd.DataFrame({"g": gid[rows], "row": rows}).merge(picks[["g", "at"]], on="g", sort=False)
    row, at, g = (cross[c].to_numpy() for c in ("row", "at", "g"))
    asked = pd.MultiIndex.from_arrays([w["run_id"].take(row), w["op"].take(row), w["profile"].take(row),
                                       w["runner"].take(at), w["tactic"].take(at)])
    found = prices.index.get_indexer(asked)
    t = np.where(found >= 0, prices.to_numpy(dtype=float)[np.maximum(found, 0)], np.nan)
    best = w["time_ms"].to_numpy(dtype=float, na_value=np.nan)[row]
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(t) & np.isfinite(best) & (best > 0)
    np.maximum.at(worst_pct, g[ok], 100.0 * (t[ok] / best[ok] - 1.0))
    np.maximum.at(worst_us, g[ok], 1000.0 * (t[ok] - best[ok]))
    return worst_pct, worst_us


def _flip_verdict(regret_pct: np.ndarray, w: pd.DataFrame, gid: np.ndarray,
                  n_groups: int) -> tuple[pd.arrays.StringArray, np.ndarray]:
    """The rule's verdict on each group's worst regret, with the widest repeats-measured spread of its tunings.

    The regret compares two timings of one run (another run's winner against the run's own), so
    its spread is that of a ratio of two tuner timings (:func:`profkit.analysis.decisions.tuner_ratio_sd`).
    """
    sd = tuner_ratio_sd(w)
    spread = np.where(any_by(np.isfinite(sd), gid, n_groups), max_by(sd, gid, n_groups), np.nan)
    verdict = pd.array([pd.NA] * n_groups, dtype="string")
    detectable = np.full(n_groups, np.nan)
    ok = np.isfinite(regret_pct)
    if ok.any():
        rule = compare_values(1.0 + regret_pct[ok] / 100.0, np.ones(int(ok.sum())), ratio_sd=spread[ok])
        verdict[ok] = rule["verdict"].to_numpy()
        detectable[ok] = rule["detectable"].to_numpy(dtype=float)
    return verdict, detectable


def _within_noise(verdict: pd.arrays.StringArray) -> pd.arrays.BooleanArray:
    """Not slower; NA where there is no verdict."""
    return pd.array(verdict != "slower", dtype="boolean")


def winner_stability(winners: pd.DataFrame, *, candidates: pd.DataFrame | None = None,
                     timings: pd.DataFrame | None = None) -> pd.DataFrame:
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
        timings: instead of ``candidates``, each run's fastest time per candidate (``run_id``, ``op``,
            ``profile``, ``runner``, ``tactic``, ``min_ms``): a catalogue's reductions
            (:attr:`profkit.catalog.Catalog.reductions`), for more runs than fit in memory as candidates.

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
    prices = _price_table(candidates, timings=timings, picks=w)
    w = w.sort_values(["run_id"], kind="stable").reset_index(drop=True)
    gid = group_ids(w, _KEY)
    n_groups = int(gid.max()) + 1
    n = np.bincount(gid, minlength=n_groups)
    # Winners are counted as their text, as the winners column shows them; rows are in run order.
    runner, tactic = w["runner"].astype(str), w["tactic"].astype(str)
    label = group_ids(pd.DataFrame({"runner": runner, "tactic": tactic}), ["runner", "tactic"])
    pair = group_ids(pd.DataFrame({"g": gid, "label": label}), ["g", "label"])
    pair_first = np.unique(pair, return_index=True)[1]
    pair_count = np.bincount(pair)
    pair_gid = gid[pair_first]
    # Each group's distinct winners, most frequent first, ties in order of first appearance.
    ranked = np.lexsort((pair_first, -pair_count, pair_gid))
    modal = ranked[np.r_[True, pair_gid[ranked][1:] != pair_gid[ranked][:-1]]]
    texts = [f"{r}:{t} x{c}" for r, t, c in zip(runner.take(pair_first[ranked]), tactic.take(pair_first[ranked]),
                                                 pair_count[ranked])]
    agree_pairs = np.bincount(pair_gid, weights=pair_count * (pair_count - 1), minlength=n_groups)
    times = w["time_ms"].to_numpy(dtype=float, na_value=np.nan)
    finite = np.isfinite(times)
    n_finite = np.bincount(gid[finite], minlength=n_groups)
    top = max_by(np.where(finite, times, np.nan), gid, n_groups)
    bottom = -max_by(np.where(finite, -times, np.nan), gid, n_groups)
    regret_pct, regret_us = _regret(w, gid, n_groups, prices)
    band = w["noise_pct"].to_numpy(dtype=float, na_value=np.nan)
    noise_pct = np.where(any_by(np.isfinite(band), gid, n_groups), max_by(band, gid, n_groups), DEFAULT_NOISE_PCT)
    verdict, detectable = _flip_verdict(regret_pct, w, gid, n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = w[_KEY].take(np.unique(gid, return_index=True)[1]).reset_index(drop=True).assign(
            n_tunings=n, n_distinct=np.bincount(pair_gid, minlength=n_groups),
            modal_runner=runner.take(pair_first[modal]).to_numpy(),
            modal_tactic=tactic.take(pair_first[modal]).to_numpy(),
            modal_share=pair_count[modal] / n,
            flip_rate=np.where(n >= 2, 1.0 - agree_pairs / (n * (n - 1)), np.nan),
            winners=join_by(texts, pair_gid[ranked], n_groups, "; "),
            spread_pct=np.where(n_finite >= 2, 100.0 * (top / bottom - 1.0), np.nan),
            regret_pct=regret_pct, regret_us=regret_us, noise_pct=noise_pct, within_noise=_within_noise(verdict),
            verdict=verdict, detectable=detectable)
    out = conform_columns(out, STABILITY_COLUMNS)
    return out.sort_values(["op", "shape", "bucket", "profile"], kind="stable").reset_index(drop=True)


def diff_winners(a: pd.DataFrame, b: pd.DataFrame, *, candidates: pd.DataFrame | None = None,
                 by: Sequence[str] = ()) -> pd.DataFrame:
    """Diff two sets of decisions (captures, cache files, two GPUs or versions) bucket by bucket.

    Args:
        a: the reference decisions: output of :func:`profkit.analysis.winners`, a winners table,
            or ``profkit.read_cache(...).winners``; one row per (op, profile).
        b: the decisions to compare with ``a``, same forms.
        candidates: candidates to price both choices on the same measurements (e.g. ``a``'s
            capture). Without them the cost uses each side's own ``time_ms``, measured in
            different runs, and is NaN where a side has no times (cache files).
        by: columns of both sides naming separate diffs (e.g. a capture and its cache file), each diffed as if alone
            (with the same ``candidates``), all at once.

    Returns:
        One row per (by..., op, profile) present in either side, the ``by`` columns first, sorted by by, op, shape,
        bucket:
        ``runner_a``, ``tactic_a``, ``runner_b``, ``tactic_b``, ``change`` ("same", "tactic" (same
        runner), "runner", "only_a", "only_b"), ``changed``, ``time_a_ms``, ``time_b_ms``,
        ``cost_us`` and ``cost_pct`` (b's choice minus a's, microseconds and percent of a's:
        positive means b's choice is slower) and ``priced_on`` ("candidates", "own runs" or
        empty).

    Raises:
        ProfkitError: when a side holds several decisions for one (op, profile), e.g. several
            runs stacked: filter by ``run_id`` first.
    """
    by = list(by)
    sides = []
    for name, frame in (("a", a), ("b", b)):
        w = _as_winners(frame, "winners")
        require(w, by, "winners")
        dup = w.duplicated([*by, "op", "profile"], keep=False)
        if dup.any():
            first = w[dup].iloc[0]
            runs = w.loc[dup, "run_id"].astype("string").dropna().unique()
            raise ProfkitError(
                f"{name} holds {int(dup.sum())} decisions for {int(w[dup].groupby(['op', 'profile']).ngroups)} "
                f"(op, profile) keys, e.g. {first['op']} {first['profile']}"
                + (f" from runs {', '.join(runs[:3])}" if len(runs) else "")
                + "; pass one run (filter by run_id) per side")
        sides.append(w[[*by, "op", "shape", "profile", "bucket", "runner", "tactic", "time_ms", "run_id"]])
    joined = sides[0].merge(sides[1], on=[*by, "op", "profile"], how="outer", suffixes=("_a", "_b"), indicator=True)
    columns = {**{c: str(sides[0][c].dtype) for c in by}, **DIFF_COLUMNS}
    if joined.empty:
        return empty(columns)
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
        mean = per_pick.to_numpy(dtype=float)
        ta, tb = (np.where(found >= 0, mean[np.maximum(found, 0)], np.nan) for found in (
            per_pick.index.get_indexer(pd.MultiIndex.from_arrays(
                [joined["op"], joined["profile"], joined[f"runner_{side}"], joined[f"tactic_{side}"]]))
            for side in ("a", "b")))
        hit = both.to_numpy() & np.isfinite(ta) & np.isfinite(tb)
        cost_a[hit], cost_b[hit], priced[hit] = ta[hit], tb[hit], "candidates"
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
    out = conform_columns(joined, columns)
    return out.sort_values([*by, "op", "shape", "bucket", "profile"], kind="stable").reset_index(drop=True)


def rank_divergence(candidates: pd.DataFrame | None = None, *, noise: pd.DataFrame | None = None,
                    rel_threshold: float = DEFAULT_NOISE_PCT / 100, decisions: pd.DataFrame | None = None,
                    timings: pd.DataFrame | None = None) -> pd.DataFrame:
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
        decisions, timings: instead of ``candidates``, the ranks' decisions (:func:`profkit.analysis.winners`
            rows, their ``noise_pct`` set) and each run's fastest time per candidate (``run_id``, ``op``,
            ``profile``, ``runner``, ``tactic``, ``min_ms``): a catalogue's reductions
            (:attr:`profkit.catalog.Catalog.reductions`), for more runs than fit in memory as candidates.

    Returns:
        One row per (op, shape, profile, bucket) timed by two or more ranks, sorted by op,
        shape, bucket: ``ranks`` ("0,1,2"), ``n_ranks``, ``n_distinct`` (distinct winners),
        ``agree``, ``winners`` ("rank: runner:tactic" joined by " | "), ``regret_pct``,
        ``regret_us``, ``noise_pct``, ``within_noise``, ``verdict``, ``detectable``. Empty when fewer
        than two ranks appear.
    """
    if decisions is None:
        require(candidates, ("run_id", "rank", "op", "profile", "runner", "tactic", "time_ms"), "candidates")
        ranked = candidates[candidates["rank"].notna().to_numpy(dtype=bool)]
        if ranked.empty or ranked["rank"].nunique() < 2:
            return empty(RANK_COLUMNS)
        w = _winners(ranked, noise=noise, rel_threshold=rel_threshold)
    else:
        require(decisions, ("run_id", "rank", "op", "profile", "runner", "tactic", "time_ms", "noise_pct"), "decisions")
        w = decisions
    w = w[w["rank"].notna().to_numpy(dtype=bool)]
    if w.empty or w["rank"].nunique() < 2:
        return empty(RANK_COLUMNS)
    prices = _price_table(ranked) if decisions is None else _price_table(None, timings=timings, picks=w)
    gid = group_ids(w, _KEY)
    w = w.assign(_g=gid).sort_values(["_g", "rank", "run_id"], kind="stable").reset_index(drop=True)
    gid = w.pop("_g").to_numpy()
    n_groups = int(gid.max()) + 1
    rank = w["rank"].to_numpy(dtype=np.int64)
    # Distinct ranks per group, ascending (rows are sorted by rank within a group).
    new_rank = np.r_[True, (gid[1:] != gid[:-1]) | (rank[1:] != rank[:-1])]
    n_ranks = np.bincount(gid[new_rank], minlength=n_groups)
    ranks = join_by([str(r) for r in rank[new_rank]], gid[new_rank], n_groups, ",")
    label = group_ids(pd.DataFrame({"r": w["runner"].astype(str), "t": w["tactic"].astype(str)}), ["r", "t"])
    pair = group_ids(pd.DataFrame({"g": gid, "label": label}), ["g", "label"])
    n_distinct = np.bincount(gid[np.unique(pair, return_index=True)[1]], minlength=n_groups)
    texts = [f"{int(r)}: {ru}:{t}" for r, ru, t in zip(w["rank"], w["runner"], w["tactic"])]
    regret_pct, regret_us = _regret(w, gid, n_groups, prices)
    verdict, detectable = _flip_verdict(regret_pct, w, gid, n_groups)
    out = w[_KEY].take(np.unique(gid, return_index=True)[1]).reset_index(drop=True).assign(
        ranks=ranks, n_ranks=n_ranks, n_distinct=n_distinct, agree=n_distinct == 1,
        winners=join_by(texts, gid, n_groups, " | "), regret_pct=regret_pct, regret_us=regret_us,
        noise_pct=max_by(w["noise_pct"].to_numpy(dtype=float, na_value=np.nan), gid, n_groups),
        within_noise=_within_noise(verdict), verdict=verdict, detectable=detectable)
    out = out[n_ranks >= 2]
    if out.empty:
        return empty(RANK_COLUMNS)
    out = conform_columns(out, RANK_COLUMNS)
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
            each file was written in (``profkit.catalog``).

    Returns:
        :func:`diff_winners` rows (b = the cache file) plus ``run_id``, for every (op, profile)
        the capture decided; they should all be "same". Empty when no cache sits beside a capture.
    """
    columns = {**DIFF_COLUMNS, "run_id": "string"}
    if cache_winners.empty or "capture_run_id" not in cache_winners:
        return empty(columns)
    # Every capture against its cache files at once (one diff per capture cost tens of ms of fixed pandas work).
    runs = cache_winners["capture_run_id"]
    mine = winners[winners["run_id"].isin(set(runs.dropna())).fillna(False).to_numpy(dtype=bool)]
    if "call" in mine:
        mine = mine.sort_values("call", kind="stable")
    mine = mine.drop_duplicates(["run_id", "op", "profile"]).assign(_capture=lambda f: f["run_id"])
    decided = mine[["run_id", "profile"]].drop_duplicates().rename(columns={"run_id": "capture_run_id"})
    cached = cache_winners.merge(decided.assign(_decided=True), on=["capture_run_id", "profile"], how="left")
    cached = cached[cached["_decided"].notna().to_numpy(dtype=bool)].drop_duplicates(["capture_run_id", "op", "profile"])
    cached = cached.drop(columns=["_decided"]).rename(columns={"capture_run_id": "_capture"})
    both = set(mine["_capture"]) & set(cached["_capture"])  # captures with decisions and a cache file's
    if not both:
        return empty(columns)
    diff = diff_winners(mine[mine["_capture"].isin(both).to_numpy(dtype=bool)],
                        cached[cached["_capture"].isin(both).to_numpy(dtype=bool)], by=["_capture"])
    return conform_columns(diff.rename(columns={"_capture": "run_id"}), columns)
