"""Do the ranks agree, and what does their disagreement cost: the rank questions judged, frames in, frames out.

The inputs are the small frames :mod:`profkit.query.ranks` reduces a fleet to (or any frame of the same
columns): each distinct pick of a bucket with its paired log ratio against the bucket's best pick,
each rank's timings against the other ranks' median, each group of ranks with one signature. The words
are FlashInfer's accuracy harness's (RFC flashinfer#3920): *regret* (t(pick) / t(best) - 1), *top-1
agreement* (the share of tunings that picked the best pick) and the *winner-flip rate* (the share of
pairs of tunings whose picks differ). Every verdict is the one comparison rule's
(:func:`profkit.analysis.verdict.compare_ratio_stats`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analysis._frames import DEFAULT_NOISE_PCT, conform_columns, empty, group_ids, require, shapes_of
from profkit.analysis.decisions import tuner_ratio_sd
from profkit.analysis.verdict import compare_ratio_stats

BAND_COLUMNS = {"gpu": "string", "op": "string", "profile": "string", "n_runs": "Int64", "n_pairs": "Int64",
                "noise_pct": "float64", "noise_source": "string"}

REGRET_COLUMNS = {
    "gpu": "string", "op": "string", "shape": "string", "profile": "string", "bucket": "Int64", "runner": "string",
    "tactic": "string", "tunings": "Int64", "ranks": "Int64", "share": "float64", "best": "boolean",
    "time_ms": "float64", "regret_pct": "float64", "regret_lo_pct": "float64", "regret_hi_pct": "float64",
    "verdict": "string", "design": "string", "n_units": "Int64", "detectable": "float64",
}

AGREEMENT_COLUMNS = {
    "gpu": "string", "op": "string", "shape": "string", "profile": "string", "bucket": "Int64", "ranks": "Int64",
    "tunings": "Int64", "distinct_picks": "Int64", "largest_runner": "string", "largest_tactic": "string",
    "largest_share": "float64", "best_runner": "string", "best_tactic": "string", "top1_agreement": "float64",
    "flip_rate": "float64", "worst_runner": "string", "worst_tactic": "string", "worst_regret_pct": "float64",
    "worst_regret_lo_pct": "float64", "worst_regret_hi_pct": "float64", "verdict": "string", "design": "string",
    "n_units": "Int64", "detectable": "float64", "expected_regret_pct": "float64",
}

SLOW_COLUMNS = {"gpu": "string", "rank": "Int64", "n_buckets": "Int64", "slower_pct": "float64",
                "slower_lo_pct": "float64", "slower_hi_pct": "float64", "verdict": "string", "ops": "Int64",
                "ops_slower": "string", "slow": "boolean"}

SIGNATURE_COLUMNS = {"gpu": "string", "signature": "string", "ranks": "object", "n_ranks": "Int64",
                     "share": "float64", "keys": "Int64", "largest": "boolean", "differs": "Int64",
                     "examples": "string"}

_BUCKET = ["gpu", "op", "profile", "bucket"]
_PICK = [*_BUCKET, "runner", "tactic"]


def noise_bands(spread: pd.DataFrame, *, rel_threshold: float = DEFAULT_NOISE_PCT / 100) -> pd.DataFrame:
    """Noise bands per (gpu, op, profile) from the run-to-run spread, as :func:`profkit.analysis.noise` states them.

    Args:
        spread: ``gpu``, ``op``, ``profile``, ``n_runs``, ``n_pairs``, ``rel_sd`` (root of the pooled relative
            variance of the candidates' times across runs; NaN without repeats), e.g. ``profkit.query.ranks.spread``.
        rel_threshold: relative band where no repeats exist (0.02 = 2%).

    Returns:
        ``gpu``, ``op``, ``profile``, ``n_runs``, ``n_pairs``, ``noise_pct`` (two relative standard deviations,
        percent) and ``noise_source`` ("repeats" or "threshold").
    """
    require(spread, ("gpu", "op", "profile", "n_runs", "n_pairs", "rel_sd"), "spread")
    repeats = (pd.to_numeric(spread["n_pairs"]).fillna(0) > 0).to_numpy(dtype=bool)
    rel_sd = spread["rel_sd"].to_numpy(dtype=float, na_value=np.nan)
    out = spread.assign(noise_pct=np.where(repeats, 200.0 * rel_sd, 100.0 * rel_threshold),
                        noise_source=np.where(repeats, "repeats", "threshold"))
    return conform_columns(out, BAND_COLUMNS)


def pick_regrets(picks: pd.DataFrame, *, noise: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each distinct pick of a bucket against the bucket's best pick: its regret and the rule's verdict on it.

    The regret is t(pick) / t(best) - 1, timed in the same runs (the geometric mean of the per-run ratios
    over the runs that timed both, whatever they picked). Three runs or more give the paired design;
    fewer, the calibrated spread of two tuner timings where repeats measured the bucket's noise (``noise``);
    else not measurable.

    Args:
        picks: one row per (gpu, op, profile, bucket, runner, tactic) with ``tunings``, ``ranks``,
            ``bucket_tunings``, ``best``, ``geo_ms``, ``n_paired``, ``mean_log_ratio``, ``sd_log_ratio``
            (``profkit.query.ranks.pick_stats``).
        noise: bands from :func:`noise_bands`; without them fewer than three runs are not measurable.

    Returns:
        One row per pick (:data:`REGRET_COLUMNS`): ``share`` of the bucket's tunings, ``time_ms`` (geometric
        mean), ``regret_pct`` with its interval, ``verdict`` (NA for the best pick itself), ``design``,
        ``n_units`` (runs), ``detectable``; sorted by gpu, op, shape, bucket, tunings (descending).
    """
    require(picks, (*_PICK, "tunings", "ranks", "bucket_tunings", "best", "geo_ms", "n_paired", "mean_log_ratio",
                    "sd_log_ratio"), "picks")
    if picks.empty:
        return empty(REGRET_COLUMNS)
    p = picks.reset_index(drop=True)
    best = p["best"].fillna(False).to_numpy(dtype=bool)
    sd = np.full(len(p), np.nan)
    if noise is not None and len(noise):
        require(noise, ("gpu", "op", "profile", "noise_pct", "noise_source"), "noise")
        bands = noise.drop_duplicates(["gpu", "op", "profile"]).set_index(["gpu", "op", "profile"])
        at = pd.MultiIndex.from_frame(p[["gpu", "op", "profile"]].astype("string"))
        sd = tuner_ratio_sd(bands.reindex(at).reset_index(drop=True))
    stats = p.assign(_i=np.arange(len(p)), n=np.where(best, 0, p["n_paired"].to_numpy(dtype=float, na_value=0)),
                     d=p["mean_log_ratio"], sd=p["sd_log_ratio"], ratio_sd=sd)
    rule = compare_ratio_stats(stats[["_i", "n", "d", "sd", "ratio_sd"]], by=["_i"]).set_index("_i").reindex(
        np.arange(len(p)))
    effect = rule["effect"].to_numpy(dtype=float)
    out = p.assign(
        shape=shapes_of(p).to_numpy(), share=p["tunings"].to_numpy(dtype=float) / p["bucket_tunings"].to_numpy(dtype=float),
        time_ms=p["geo_ms"], regret_pct=np.where(best, 0.0, 100.0 * effect),
        regret_lo_pct=100.0 * rule["effect_lo"].to_numpy(dtype=float),
        regret_hi_pct=100.0 * rule["effect_hi"].to_numpy(dtype=float),
        verdict=rule["verdict"].to_numpy(), design=rule["design"].to_numpy(),
        n_units=np.where(best, p["timed_runs"].to_numpy(dtype=float) if "timed_runs" in p else np.nan,
                         rule["n"].to_numpy(dtype=float)),
        detectable=rule["detectable"].to_numpy(dtype=float))
    out = conform_columns(out, REGRET_COLUMNS)
    return out.sort_values(["gpu", "op", "shape", "bucket", "tunings"], ascending=[True, True, True, True, False],
                           kind="stable").reset_index(drop=True)


def rank_agreement(picks: pd.DataFrame, *, noise: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per bucket: how many ranks, how many distinct picks, the largest group's share, and what the others cost.

    Args:
        picks: as :func:`pick_regrets` takes them, with ``first_seen`` (the order of a pick's first tuning:
            the largest group on a tie is the first seen) and ``bucket_ranks``.
        noise: bands from :func:`noise_bands` (for buckets timed by fewer than three runs).

    Returns:
        One row per (gpu, op, profile, bucket) (:data:`AGREEMENT_COLUMNS`), sorted by gpu, op, shape, bucket:
        ``ranks`` (distinct ranks), ``tunings`` (decisions: a rank may have tuned the bucket more than
        once), ``distinct_picks``, the largest group's pick and ``largest_share`` of the tunings, the best
        pick and ``top1_agreement`` (the share of tunings that picked it), ``flip_rate`` (the share of pairs
        of tunings with different picks; NaN for one tuning), the worst pick with its regret, interval,
        ``verdict`` (slower: it costs beyond noise; within_noise; not_measurable; NA when all tunings
        agree), ``design``, ``n_units`` and ``detectable``, and ``expected_regret_pct`` (the tunings'
        mean regret: what the lottery costs a rank on average).
    """
    require(picks, ("first_seen", "bucket_ranks"), "picks")
    regrets = pick_regrets(picks, noise=noise)
    if regrets.empty:
        return empty(AGREEMENT_COLUMNS)
    at = pd.MultiIndex.from_frame(regrets[_PICK].astype({"bucket": "Int64"}))
    extra = picks.astype({"bucket": "Int64"}).set_index(_PICK)[["first_seen", "bucket_ranks"]].reindex(at)
    g = group_ids(regrets, _BUCKET)
    n_groups = int(g.max()) + 1
    tunings = regrets["tunings"].to_numpy(dtype=float)
    regret = regrets["regret_pct"].to_numpy(dtype=float, na_value=np.nan)
    best = regrets["best"].fillna(False).to_numpy(dtype=bool)
    n = np.bincount(g, weights=tunings, minlength=n_groups)
    largest = _first_by(g, (extra["first_seen"].to_numpy(dtype=float), -tunings))
    best_row = np.full(n_groups, -1)
    best_row[g[best]] = np.flatnonzero(best)
    # The worst pick: the largest priced regret among the others (an unpriced one when none is priced).
    worst = _first_by(g, (np.where(np.isfinite(regret), -regret, np.inf), best))
    has_worst = ~best[worst]
    has_best = best_row >= 0
    unpriced = np.bincount(g, weights=~np.isfinite(regret), minlength=n_groups) > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        out = regrets[["gpu", "op", "shape", "profile", "bucket"]].take(largest).reset_index(drop=True).assign(
            ranks=extra["bucket_ranks"].to_numpy()[largest], tunings=n.astype(int),
            distinct_picks=np.bincount(g, minlength=n_groups),
            largest_runner=regrets["runner"].to_numpy()[largest], largest_tactic=regrets["tactic"].to_numpy()[largest],
            largest_share=tunings[largest] / n,
            best_runner=np.where(has_best, regrets["runner"].to_numpy()[best_row], None),
            best_tactic=np.where(has_best, regrets["tactic"].to_numpy()[best_row], None),
            top1_agreement=np.where(has_best, tunings[best_row] / n, np.nan),
            flip_rate=np.where(n >= 2, 1.0 - np.bincount(g, weights=tunings * (tunings - 1), minlength=n_groups)
                               / (n * (n - 1)), np.nan),
            expected_regret_pct=np.where(unpriced, np.nan,
                                         np.bincount(g, weights=np.nan_to_num(tunings * regret), minlength=n_groups) / n),
            worst_regret_pct=np.where(has_worst, regret[worst], 0.0))
        for column, source in (("worst_runner", "runner"), ("worst_tactic", "tactic"), ("verdict", "verdict"),
                               ("design", "design"), ("worst_regret_lo_pct", "regret_lo_pct"),
                               ("worst_regret_hi_pct", "regret_hi_pct"), ("n_units", "n_units"),
                               ("detectable", "detectable")):
            out[column] = regrets[source].take(worst).where(has_worst).to_numpy()
    out = conform_columns(out, AGREEMENT_COLUMNS)
    return out.sort_values(["gpu", "op", "shape", "bucket", "profile"], kind="stable").reset_index(drop=True)


def _first_by(g: np.ndarray, keys: tuple) -> np.ndarray:
    """Per group id (ascending), the row that sorts first by ``keys`` (the last key sorts first, as np.lexsort)."""
    order = np.lexsort((*keys, g))
    return order[np.r_[True, g[order][1:] != g[order][:-1]]]


def slow_ranks(speed: pd.DataFrame) -> pd.DataFrame:
    """Ranks slower than the others across ops: a GPU problem, not a tactic problem.

    Each bucket a rank timed is one unit: the mean over its candidates of log(the rank's time / the
    ranks' median time of the candidate). Per rank the rule judges the mean over its buckets (paired:
    units are buckets). A rank is ``slow`` when it is slower beyond noise across all its buckets and in
    at least half of the ops it timed, so one op's odd tactic does not make a GPU slow.

    Args:
        speed: ``gpu``, ``rank``, ``op`` (NA: every op), ``n_buckets``, ``mean_log_ratio``, ``sd_log_ratio``
            (``profkit.query.ranks.rank_speed``).

    Returns:
        One row per (gpu, rank) (:data:`SLOW_COLUMNS`): ``slower_pct`` (positive: slower than the median
        rank) with its interval, ``verdict``, ``ops`` timed, ``ops_slower`` (the ops judged slower, joined by
        ", "), ``slow``; sorted by gpu, slower_pct (descending), rank.
    """
    require(speed, ("gpu", "rank", "op", "n_buckets", "mean_log_ratio", "sd_log_ratio"), "speed")
    if speed.empty:
        return empty(SLOW_COLUMNS)
    s = speed.assign(op=speed["op"].astype("string").fillna(""), n=speed["n_buckets"], d=speed["mean_log_ratio"],
                     sd=speed["sd_log_ratio"], ratio_sd=np.nan)
    rule = compare_ratio_stats(s[["gpu", "rank", "op", "n", "d", "sd", "ratio_sd"]], by=["gpu", "rank", "op"])
    overall = rule[rule["op"] == ""].set_index(["gpu", "rank"])
    per_op = rule[rule["op"] != ""]
    slower_ops = per_op[per_op["verdict"] == "slower"].groupby(["gpu", "rank"])["op"].agg(", ".join)
    n_ops = per_op.groupby(["gpu", "rank"])["op"].size()
    n_buckets = s[s["op"] == ""].set_index(["gpu", "rank"])["n_buckets"]
    out = overall.assign(n_buckets=n_buckets.reindex(overall.index),
                         ops=n_ops.reindex(overall.index).fillna(0).astype(int),
                         ops_slower=slower_ops.reindex(overall.index).fillna("")).reset_index()
    n_slower = np.array([len(x.split(", ")) if x else 0 for x in out["ops_slower"]])
    out = out.assign(slower_pct=100.0 * out["effect"], slower_lo_pct=100.0 * out["effect_lo"],
                     slower_hi_pct=100.0 * out["effect_hi"],
                     slow=(out["verdict"] == "slower").to_numpy(dtype=bool) & (2 * n_slower >= np.maximum(out["ops"], 1)))
    out = conform_columns(out, SLOW_COLUMNS)
    return out.sort_values(["gpu", "slower_pct", "rank"], ascending=[True, False, True], kind="stable").reset_index(drop=True)


def signature_groups(signatures: pd.DataFrame) -> pd.DataFrame:
    """Ranks grouped by identical picks, the largest group first and the odd ones out after it (tlparse's view).

    Args:
        signatures: one row per (gpu, signature): ``ranks`` (a list), ``n_ranks``, ``keys``, ``largest``,
            ``differs``, ``examples`` (``profkit.query.ranks.signatures``).

    Returns:
        The same rows with ``share`` (of the GPU's ranks) and ``signature`` as text (:data:`SIGNATURE_COLUMNS`),
        sorted by gpu, largest first, n_ranks (descending), first rank.
    """
    require(signatures, ("gpu", "signature", "ranks", "n_ranks", "keys", "largest", "differs", "examples"), "signatures")
    if signatures.empty:
        return empty(SIGNATURE_COLUMNS)
    total = signatures.groupby("gpu")["n_ranks"].transform("sum")
    first = [min(r) if len(r) else np.nan for r in signatures["ranks"]]
    out = signatures.assign(share=signatures["n_ranks"] / total, signature=signatures["signature"].map(
        lambda s: f"{int(s):016x}"), _first=first)
    out = out.sort_values(["gpu", "largest", "n_ranks", "_first"], ascending=[True, False, False, True], kind="stable")
    return conform_columns(out.drop(columns="_first"), SIGNATURE_COLUMNS).reset_index(drop=True)
