"""Do the ranks agree, and what does their disagreement cost: the rank questions judged, frames in, frames out.

The inputs are the small frames :mod:`profkit.query.ranks` reduces a fleet to (or any frame of the same
columns): each distinct pick of a bucket with its paired log ratio against the bucket's best pick,
each rank's timings against the other ranks' median, each group of ranks with one signature.
:func:`repeated_tunings` computes the same frames in memory from one GPU's decisions and candidates (the
report's ranks and boots) and judges them. The words
are FlashInfer's accuracy harness's (RFC flashinfer#3920): *regret* (t(pick) / t(best) - 1), *top-1
agreement* (the share of tunings that picked the best pick) and the *winner-flip rate* (the share of
pairs of tunings whose picks differ). Every verdict is the one comparison rule's
(:func:`profkit.analysis.verdict.compare_ratio_stats`).
"""

from __future__ import annotations

import dataclasses

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


def pick_regrets(picks: pd.DataFrame, *, noise: pd.DataFrame | None = None,
                 ratio_sd: float | None = None) -> pd.DataFrame:
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
        ratio_sd: the calibrated sd of one run's log ratio, instead of ``noise`` (e.g. the verify timer's,
            :data:`profkit.analysis.verdict.VERIFY_RATIO_SD`).

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
    sd = np.full(len(p), np.nan if ratio_sd is None else float(ratio_sd))
    if ratio_sd is None and noise is not None and len(noise):
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


def rank_agreement(picks: pd.DataFrame, *, noise: pd.DataFrame | None = None,
                   ratio_sd: float | None = None) -> pd.DataFrame:
    """Per bucket: how many ranks, how many distinct picks, the largest group's share, and what the others cost.

    Args:
        picks: as :func:`pick_regrets` takes them, with ``first_seen`` (the order of a pick's first tuning:
            the largest group on a tie is the first seen) and ``bucket_ranks``.
        noise: bands from :func:`noise_bands` (for buckets timed by fewer than three runs).
        ratio_sd: a calibrated sd of one run's log ratio instead of ``noise`` (:func:`pick_regrets`).

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
    regrets = pick_regrets(picks, noise=noise, ratio_sd=ratio_sd)
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


def served_agreement(verify: pd.DataFrame) -> pd.DataFrame:
    """What the ranks' disagreement costs in serving: :func:`rank_agreement` of the picks re-timed by ``profkit verify``.

    Each verify table of one rank's capture (``profkit verify RANKS_FOLDER``) re-times that rank's pick beside
    its tuner's top candidates at each bucket's M, in CUDA graphs; a table is one run of the rule. A bucket's
    picks are the tables' ``winner`` rows; each pick is priced against the bucket's best pick in the tables
    that timed both (other ranks' picks are timed where they are in a table's shortlist), with the verify
    timer's calibrated spread (:data:`~profkit.analysis.verdict.VERIFY_RATIO_SD`) for fewer than three tables.

    Returns:
        :data:`AGREEMENT_COLUMNS` per (gpu, op, profile, bucket): ``gpu`` is the GPU the tables were timed on,
        ``ranks`` and ``tunings`` the tables, ``n_units`` the tables that timed the worst pick and the best.
    """
    from profkit.analysis.verdict import VERIFY_RATIO_SD

    return rank_agreement(served_pick_stats(verify), ratio_sd=VERIFY_RATIO_SD)


def served_pick_stats(verify: pd.DataFrame) -> pd.DataFrame:
    """The picks of ranks' verify tables in :func:`pick_regrets`' columns (a table is a run and a rank; its serving
    median the time), by :func:`profkit.analysis._rank_reduce.pick_stats`.

    Rows at each bucket's own M, timed ok, under the tuner's routing where a routing is named; ``gpu`` is
    ``verify_gpu``; a table's pick is its ``winner`` row.
    """
    from profkit.analysis import _rank_reduce

    require(verify, ("run_id", "op", "profile", "bucket", "m", "runner", "tactic", "winner", "serving_ms", "status"),
            "verify")
    v = verify[(verify["m"] == verify["bucket"]).fillna(False).to_numpy(dtype=bool)
               & (verify["status"].astype("string") == "ok").fillna(False).to_numpy(dtype=bool)
               & (pd.to_numeric(verify["serving_ms"], errors="coerce") > 0).fillna(False).to_numpy(dtype=bool)]
    if "routing" in v.columns:
        routing = v["routing"].astype("string")
        v = v[(routing.isna() | (routing == "tuner")).to_numpy(dtype=bool)]
    gpu = v["verify_gpu"].astype("string").fillna("unknown GPU") if "verify_gpu" in v else "unknown GPU"
    table = v["run_id"].astype(str) + "|" + (v["verify_run_id"].astype(str) if "verify_run_id" in v else "")
    v = v.assign(gpu=gpu, run_id=table, tactic=v["tactic"].astype(str), bucket=v["bucket"].astype("Int64"),
                 min_ms=pd.to_numeric(v["serving_ms"]).astype(float))
    v = v.assign(rank=v["run_id"].map({t: i for i, t in enumerate(sorted(v["run_id"].unique()))}).astype("Int64"))
    picks = v[v["winner"].fillna(False).to_numpy(dtype=bool)].drop_duplicates([*_BUCKET, "run_id"]).assign(call=1)
    times = v.groupby(["gpu", "run_id", "op", "profile", "runner", "tactic"], sort=True).agg(
        rank=("rank", "max"), min_ms=("min_ms", "min")).reset_index()
    return _rank_reduce.pick_stats(picks, times)


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


def signature_groups(signatures: pd.DataFrame, *, by: tuple = ("gpu",)) -> pd.DataFrame:
    """Ranks grouped by identical picks, the largest group first and the odd ones out after it (tlparse's view).

    Args:
        signatures: one row per (gpu, signature): ``ranks`` (a list), ``n_ranks``, ``keys``, ``largest``,
            ``differs``, ``examples`` (``profkit.query.ranks.signatures``).
        by: the scope the groups were formed in (``("gpu", "op", "shape")``: per shape, as
            :func:`repeated_tunings` forms them).

    Returns:
        The same rows with ``share`` (of the scope's ranks) and ``signature`` as text (the ``by`` columns, then
        :data:`SIGNATURE_COLUMNS`), sorted by scope, largest first, n_ranks (descending), first rank.
    """
    by = list(by)
    columns = {**{c: "string" for c in by}, **SIGNATURE_COLUMNS}
    require(signatures, (*by, "signature", "ranks", "n_ranks", "keys", "largest", "differs", "examples"), "signatures")
    if signatures.empty:
        return empty(columns)
    total = signatures.groupby(by, dropna=False)["n_ranks"].transform("sum")
    first = [min(r) if len(r) else np.nan for r in signatures["ranks"]]
    out = signatures.assign(share=signatures["n_ranks"] / total, signature=signatures["signature"].map(
        lambda s: f"{int(s):016x}"), _first=first)
    out = out.sort_values([*by, "largest", "n_ranks", "_first"], ascending=[True] * len(by) + [False, False, True],
                          kind="stable")
    return conform_columns(out.drop(columns="_first"), columns).reset_index(drop=True)


TUNER_COLUMNS = {"gpu": "string", "tuner": "Int64", "run_id": "string", "rank": "Int64", "label": "string",
                 "path": "string", "peers": "Int64"}

TUNING_COLUMNS = {"gpu": "string", "op": "string", "shape": "string", "profile": "string", "bucket": "Int64",
                  "tuner": "Int64", "label": "string", "call": "Int64", "runner": "string", "tactic": "string", "best": "boolean",
                  "largest": "boolean", "regret_pct": "float64", "verdict": "string"}

SHAPE_COLUMNS = {
    "gpu": "string", "op": "string", "shape": "string", "ranks": "Int64", "buckets": "Int64", "disagree": "Int64",
    "top1_agreement": "float64", "flip_rate": "float64", "slower": "Int64", "within_noise": "Int64",
    "not_measurable": "Int64", "worst_bucket": "Int64", "worst_regret_pct": "float64", "worst_regret_lo_pct": "float64",
    "worst_regret_hi_pct": "float64", "worst_verdict": "string", "expected_regret_pct": "float64", "groups": "Int64",
    "largest_group": "Int64",
}

_SCOPE = ("gpu", "op", "shape")


@dataclasses.dataclass(frozen=True, eq=False)
class RankAnswers:
    """Do repeated tunings of one shape on one GPU agree, and what does their disagreement cost.

    A *tuner* is one rank of one run (a process): the ranks of a job, or the boots of a tuning repeated in
    fresh processes. Every frame's ``rank`` and ``ranks`` count tuners.

    Attributes:
        tuners: one row per tuner (:data:`TUNER_COLUMNS`): its number, ``run_id``, ``rank``, ``label`` (its folder's
            name where known, else its run_id), ``path`` and ``peers`` (the most other tuners of one shape it tuned:
            with one peer, a slow tuner's partner is as much faster).
        shapes: :func:`shape_agreement`, one row per (gpu, op, shape).
        agreement: :func:`rank_agreement`, one row per (gpu, op, profile, bucket).
        picks: :func:`pick_regrets`, one row per distinct pick of a bucket.
        tunings: one row per tuning decision (:data:`TUNING_COLUMNS`): its tuner, pick, whether that is the best
            pick and the largest group's, and the pick's regret and verdict.
        groups: :func:`signature_groups` per (gpu, op, shape): tuners grouped by identical picks over the shape's buckets.
        slow: :func:`slow_ranks` of the tuners.
    """

    tuners: pd.DataFrame
    shapes: pd.DataFrame
    agreement: pd.DataFrame
    picks: pd.DataFrame
    tunings: pd.DataFrame
    groups: pd.DataFrame
    slow: pd.DataFrame


def repeated_tunings(decisions: pd.DataFrame, candidates: pd.DataFrame | None = None, *, gpu: str,
                     noise: pd.DataFrame | None = None, runs: pd.DataFrame | None = None,
                     timings: pd.DataFrame | None = None) -> RankAnswers:
    """The rank questions over every (op, shape) that two runs or more tuned on one GPU, in memory.

    The same answers ``profkit ranks`` gives from parquet (:mod:`profkit.query.ranks`), with each run's rank
    (a process) as its own tuner, so fresh-process tunings (boots) are compared as ranks are.

    Args:
        decisions: one GPU's :func:`profkit.analysis.winners`.
        candidates: that GPU's candidates (the runs the decisions came from).
        gpu: the GPU's name (the ``gpu`` column of every frame).
        noise: :func:`profkit.analysis.noise` of the candidates (default: estimated from them; required with
            ``timings``).
        runs: the runs table (``run_id``, ``path``): a tuner is labelled by its folder.
        timings: instead of ``candidates``, each run's fastest time per candidate (``run_id``, ``rank``, ``op``,
            ``profile``, ``runner``, ``tactic``, ``min_ms``): a catalogue's reductions
            (:attr:`profkit.catalog.Catalog.reductions`), for more runs than fit in memory as candidates.

    Returns:
        A :class:`RankAnswers`; empty frames where no (op, shape) was tuned by two runs.
    """
    from profkit.analysis import _rank_reduce as reduce
    from profkit.analysis.decisions import noise as estimate_noise

    require(decisions, ("run_id", "rank", "call", "op", "shape", "profile", "bucket", "runner", "tactic"), "decisions")
    n_runs = decisions.groupby(["op", "shape"], dropna=False)["run_id"].transform("nunique")
    d = decisions[(n_runs >= 2).to_numpy(dtype=bool)].assign(gpu=gpu)
    if d.empty:
        return RankAnswers(*(empty(c) for c in (TUNER_COLUMNS, SHAPE_COLUMNS, AGREEMENT_COLUMNS, REGRET_COLUMNS,
                                                TUNING_COLUMNS,
                                                {c: "string" for c in _SCOPE} | SIGNATURE_COLUMNS, SLOW_COLUMNS)))
    tuners = _tuners(d, runs)
    d = _as_tuner(d, tuners)
    kept = d[["run_id", "op", "profile"]].drop_duplicates()
    if timings is None:
        c = _as_tuner(candidates.merge(kept, on=["run_id", "op", "profile"]).assign(gpu=gpu), tuners)
        times = reduce.timings(c)
        bands = (noise if noise is not None else estimate_noise(c)).assign(gpu=gpu)
    else:
        times = _as_tuner(reduce.matching(timings, kept).assign(gpu=gpu), tuners)
        bands = noise.assign(gpu=gpu)
    stats = reduce.pick_stats(d, times)
    agreement = rank_agreement(stats, noise=bands)
    picks = pick_regrets(stats, noise=bands)
    groups = signature_groups(reduce.signatures(d, by=_SCOPE), by=_SCOPE)
    return RankAnswers(tuners=tuners, shapes=shape_agreement(agreement, groups), agreement=agreement, picks=picks,
                       tunings=_tunings(d, picks, agreement, tuners), groups=groups,
                       slow=slow_ranks(reduce.rank_speed(times)))


def shape_agreement(agreement: pd.DataFrame, groups: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per op and shape: how many of its buckets the ranks disagree on, and the costliest disagreement.

    Args:
        agreement: :func:`rank_agreement` rows.
        groups: :func:`signature_groups` formed per (gpu, op, shape) (optional).

    Returns:
        One row per (gpu, op, shape) (:data:`SHAPE_COLUMNS`), sorted by gpu, op, shape: ``ranks`` (the most of any
        bucket), ``buckets``, ``disagree`` (buckets with more than one pick), the buckets' mean ``top1_agreement``
        and ``flip_rate``, how many buckets' worst pick is ``slower``, ``within_noise`` or ``not_measurable``, the
        worst priced regret with its bucket, interval and verdict, the buckets' mean ``expected_regret_pct``, and
        the signature ``groups`` with the ranks in the ``largest_group``.
    """
    require(agreement, ("gpu", "op", "shape", "bucket", "ranks", "distinct_picks", "top1_agreement", "flip_rate",
                        "worst_regret_pct", "verdict", "expected_regret_pct"), "agreement")
    if agreement.empty:
        return empty(SHAPE_COLUMNS)
    verdict = agreement["verdict"].astype("string")
    a = agreement.assign(_v=verdict, _w=pd.to_numeric(agreement["worst_regret_pct"]).where(agreement["distinct_picks"] > 1),
                         disagree=(agreement["distinct_picks"] > 1).astype(int),
                         **{v: (verdict == v).fillna(False).astype(int) for v in ("slower", "within_noise", "not_measurable")})
    keys = ["gpu", "op", "shape"]
    out = a.groupby(keys, sort=True, dropna=False).agg(
        ranks=("ranks", "max"), buckets=("bucket", "size"), top1_agreement=("top1_agreement", "mean"),
        flip_rate=("flip_rate", "mean"), expected_regret_pct=("expected_regret_pct", "mean"), disagree=("disagree", "sum"),
        slower=("slower", "sum"), within_noise=("within_noise", "sum"), not_measurable=("not_measurable", "sum"))
    worst = a.dropna(subset=["_w"]).sort_values("_w", ascending=False, kind="stable").drop_duplicates(keys)
    worst = worst.set_index(keys)[["bucket", "worst_regret_pct", "worst_regret_lo_pct", "worst_regret_hi_pct", "_v"]]
    out = out.join(worst.rename(columns={"bucket": "worst_bucket", "_v": "worst_verdict"}))
    if groups is not None and len(groups):
        per = groups.groupby(keys, dropna=False).agg(groups=("n_ranks", "size"), largest_group=("n_ranks", "max"))
        out = out.join(per)
    return conform_columns(out.reset_index(), SHAPE_COLUMNS)


def _tuners(d: pd.DataFrame, runs: pd.DataFrame | None) -> pd.DataFrame:
    """One row per (run_id, rank), numbered in folder (else run_id), rank order, labelled by its folder."""
    t = d[["gpu", "run_id", "rank"]].drop_duplicates().astype({"rank": "Int64", "run_id": "string"})
    paths = ({} if runs is None or "path" not in runs else
             runs.assign(run_id=runs["run_id"].astype("string")).drop_duplicates("run_id").set_index("run_id")["path"])
    t["path"] = t["run_id"].map(paths).astype("string")
    t = t.assign(_at=t["path"].fillna(t["run_id"])).sort_values(["_at", "rank"], na_position="first", kind="stable")
    t = t.drop(columns="_at").reset_index(drop=True)
    path = t["path"]
    name = [_folder_name(p, r) for p, r in zip(path, t["run_id"])]
    twice = pd.Series(name).duplicated(keep=False).to_numpy()  # two folders of one name: with their parents'
    name = [_folder_name(p, r, depth=2) if two else n for n, p, r, two in zip(name, path, t["run_id"], twice)]
    label = [n if pd.isna(r) or f"rank{int(r)}" in n else f"{n} rank {int(r)}" for n, r in zip(name, t["rank"])]
    shapes = d.assign(run_id=d["run_id"].astype("string"), rank=d["rank"].astype("Int64"))[
        ["op", "shape", "run_id", "rank"]].drop_duplicates()
    shapes["n"] = shapes.groupby(["op", "shape"], dropna=False)["run_id"].transform("size")
    peers = shapes.groupby(["run_id", "rank"], dropna=False)["n"].max() - 1
    at = pd.MultiIndex.from_frame(t[["run_id", "rank"]])
    out = t.assign(tuner=np.arange(len(t)), label=label, peers=peers.reindex(at).to_numpy())
    return conform_columns(out, TUNER_COLUMNS)


def _folder_name(path, run_id, *, depth: int = 1) -> str:
    """The folder a run was read from, by its last ``depth`` names that are not 'capture' (its run_id where unknown)."""
    if pd.isna(path):
        return str(run_id)
    parts = [p for p in str(path).replace("\\", "/").split("/") if p and p != "capture"]
    return "/".join(parts[-depth:]) if parts else str(run_id)


def _as_tuner(frame: pd.DataFrame, tuners: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its ``rank`` replaced by its (run_id, rank)'s tuner number."""
    key = tuners.assign(_k=tuners["rank"].fillna(-1).astype("int64"))[["run_id", "_k", "tuner"]]
    out = frame.assign(_k=frame["rank"].astype("Int64").fillna(-1).astype("int64"), run_id=frame["run_id"].astype("string"))
    out = out.merge(key.astype({"run_id": "string"}), on=["run_id", "_k"], how="left")
    return out.drop(columns=["_k", "rank"]).rename(columns={"tuner": "rank"})


def _tunings(d: pd.DataFrame, picks: pd.DataFrame, agreement: pd.DataFrame, tuners: pd.DataFrame) -> pd.DataFrame:
    keys = ["gpu", "op", "profile", "bucket", "runner", "tactic"]
    priced = picks[[*keys, "best", "regret_pct", "verdict"]].astype({"bucket": "Int64"})
    largest = agreement[["gpu", "op", "profile", "bucket", "largest_runner", "largest_tactic"]].rename(
        columns={"largest_runner": "runner", "largest_tactic": "tactic"}).assign(largest=True).astype({"bucket": "Int64"})
    out = (d.astype({"bucket": "Int64", "runner": "string", "tactic": "string"}).rename(columns={"rank": "tuner"})
           .merge(priced, on=keys, how="left").merge(largest, on=keys, how="left"))
    out["label"] = out["tuner"].map(tuners.set_index("tuner")["label"])
    out["largest"] = out["largest"].fillna(False)
    out = conform_columns(out, TUNING_COLUMNS)
    return out.sort_values(["gpu", "op", "shape", "bucket", "tuner", "call"], kind="stable").reset_index(drop=True)
