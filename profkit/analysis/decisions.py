"""What FlashInfer chose per bucket, by how much, and against which noise: winners and speedups."""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analysis._frames import (DECISION, DEFAULT_NOISE_PCT, conform_columns, default_rows, empty,
                                      flashinfer_rows, group_ids, require, shapes_of)
from profkit.analysis.verdict import compare_values, within_noise

NOISE_COLUMNS = {"op": "string", "shape": "string", "profile": "string", "bucket": "Int64", "n_runs": "Int64",
                 "n_pairs": "Int64", "noise_pct": "float64", "noise_source": "string"}

WINNER_COLUMNS = {
    "run_id": "string", "rank": "Int64", "call": "Int64", "op": "string", "shape": "string", "profile": "string",
    "bucket": "Int64", "runner": "string", "tactic": "string", "time_ms": "float64", "status": "string",
    "runner_up_runner": "string", "runner_up_tactic": "string", "runner_up_ms": "float64", "gap_ms": "float64",
    "gap_pct": "float64", "n_candidates": "Int64", "n_failed": "Int64", "n_within_noise": "Int64",
    "noise_pct": "float64", "noise_source": "string", "default_runner": "string", "default_ms": "float64",
    "timing": "string",
}

SPEEDUP_COLUMNS = {
    "run_id": "string", "rank": "Int64", "op": "string", "shape": "string", "profile": "string", "bucket": "Int64",
    "runner": "string", "tactic": "string", "time_ms": "float64", "default_runner": "string",
    "default_ms": "float64", "speedup": "float64", "gain_pct": "float64", "saved_us": "float64",
    "noise_pct": "float64", "noise_source": "string", "slower_than_default": "boolean",
    "within_noise": "boolean", "timing": "string", "effect": "float64", "effect_lo": "float64",
    "effect_hi": "float64", "verdict": "string", "detectable": "float64",
}

_CANDIDATE_COLUMNS = ("run_id", "op", "profile", "bucket", "runner", "tactic", "time_ms")


def noise(candidates: pd.DataFrame, *, rel_threshold: float = DEFAULT_NOISE_PCT / 100) -> pd.DataFrame:
    """Estimate run-to-run noise per (op, profile) from repeated runs, else state a threshold.

    When two or more runs timed the same (op, profile, runner, tactic), each such candidate's
    relative standard deviation across runs is pooled (root mean square) over the profile's
    candidates, and the noise band is two pooled standard deviations. Profiles timed by one run
    get ``rel_threshold`` instead. Only FlashInfer's own candidates with a finite time count.

    Args:
        candidates: a candidates table (several runs stacked, e.g. ``profkit.concat``).
        rel_threshold: relative band used when no repeats exist (0.02 = 2%).

    Returns:
        One row per (op, profile), sorted by op, shape, bucket: ``op``, ``shape`` (problem shape,
        'N=.. K=..' for GEMMs), ``profile``, ``bucket``, ``n_runs`` (runs that timed it),
        ``n_pairs`` (candidates timed by at least two runs), ``noise_pct`` (band, percent of the
        time) and ``noise_source`` ("repeats" or "threshold").
    """
    require(candidates, _CANDIDATE_COLUMNS, "candidates")
    return _estimate_noise(candidates, rel_threshold)


def _estimate_noise(candidates: pd.DataFrame, rel_threshold: float) -> pd.DataFrame:
    """Body of :func:`noise` (kept apart because ``winners`` has an argument named noise)."""
    c = flashinfer_rows(candidates)
    c = c[np.isfinite(c["time_ms"].to_numpy(dtype=float))]
    if c.empty:
        return empty(NOISE_COLUMNS)
    times = c["time_ms"].to_numpy(dtype=float)
    # Integer codes instead of string group keys: this runs on millions of rows.
    prof = group_ids(c, ["op", "profile"])
    cand = group_ids(c, ["op", "profile", "runner", "tactic"])
    run = pd.factorize(c["run_id"], use_na_sentinel=False)[0].astype(np.int64)
    # One value per run and candidate (a run may have tuned the same profile twice).
    pair, pair_first = np.unique(cand * (int(run.max()) + 1) + run, return_inverse=False, return_index=True)
    pair_of_row = np.searchsorted(pair, cand * (int(run.max()) + 1) + run)
    pair_mean = np.bincount(pair_of_row, weights=times) / np.bincount(pair_of_row)
    pair_cand = cand[pair_first]
    n_cand = int(cand.max()) + 1
    count = np.bincount(pair_cand, minlength=n_cand)
    mean = np.bincount(pair_cand, weights=pair_mean, minlength=n_cand) / np.maximum(count, 1)
    sq = np.bincount(pair_cand, weights=(pair_mean - mean[pair_cand]) ** 2, minlength=n_cand)
    with np.errstate(divide="ignore", invalid="ignore"):
        cv2 = np.where(count >= 2, sq / np.maximum(count - 1, 1) / mean ** 2, np.nan)
    cand_first = np.unique(cand, return_index=True)[1]
    cand_prof = prof[cand_first]
    n_prof = int(prof.max()) + 1
    has = np.isfinite(cv2)
    n_pairs = np.bincount(cand_prof[has], minlength=n_prof)
    cv2_mean = np.bincount(cand_prof[has], weights=cv2[has], minlength=n_prof) / np.maximum(n_pairs, 1)
    prof_run = np.unique(prof * (int(run.max()) + 1) + run)
    n_runs = np.bincount(prof_run // (int(run.max()) + 1), minlength=n_prof)
    prof_first = np.unique(prof, return_index=True)[1]
    out = c.iloc[prof_first][["op", "profile", "bucket"]].reset_index(drop=True)
    out["n_runs"] = n_runs
    out["n_pairs"] = n_pairs
    repeats = n_pairs > 0
    out["noise_pct"] = np.where(repeats, 200.0 * np.sqrt(cv2_mean), 100.0 * rel_threshold)
    out["noise_source"] = np.where(repeats, "repeats", "threshold")
    out["shape"] = shapes_of(out).to_numpy()
    out = conform_columns(out, NOISE_COLUMNS)
    return _sort(out, ["op", "shape", "bucket", "profile"])


def winners(candidates: pd.DataFrame, *, noise: pd.DataFrame | None = None,
            rel_threshold: float = DEFAULT_NOISE_PCT / 100) -> pd.DataFrame:
    """Find the winner of every tuning decision, its runner-up, the gap and the near-ties.

    A decision is one (run_id, rank, call, op, profile). The winner is FlashInfer's rule: the
    smallest finite ``time_ms`` among its own candidates, the first measured (``seq``) on ties
    (AT:2531). profkit's default-timing rows (``source == "default"``) never compete; they fill
    ``default_ms``.

    Args:
        candidates: a candidates table, one or several runs.
        noise: a frame from :func:`noise` to use instead of estimating it from ``candidates``
            (e.g. estimated over repeats, applied to one run).
        rel_threshold: relative band for profiles without repeats (0.02 = 2%).

    Returns:
        One row per decision, sorted by op, shape, bucket, run_id, rank, call: ``run_id``,
        ``rank``, ``call``, ``op``, ``shape``, ``profile``, ``bucket``, ``runner``, ``tactic``,
        ``time_ms`` and ``status`` of the winner; ``runner_up_runner``, ``runner_up_tactic``,
        ``runner_up_ms``; ``gap_ms`` and ``gap_pct`` (runner-up minus winner, in ms and percent
        of the winner); ``n_candidates`` (finite FlashInfer candidates), ``n_failed`` (no finite
        time); ``n_within_noise`` (other candidates within ``noise_pct`` of the winner);
        ``noise_pct`` and ``noise_source``; ``default_runner`` and ``default_ms`` (runners[0],
        tactic -1, timed by profkit with FlashInfer's timer; NA when not timed); ``timing``.
    """
    require(candidates, _CANDIDATE_COLUMNS, "candidates")
    if noise is None:
        noise_frame = _estimate_noise(candidates, rel_threshold)
    else:
        require(noise, ("op", "profile", "noise_pct", "noise_source"), "noise")
        noise_frame = noise
    frame = candidates.copy()
    for key in DECISION:
        if key not in frame.columns:
            frame[key] = pd.NA
    if "seq" not in frame.columns:
        frame["seq"] = np.arange(len(frame))
    if "status" not in frame.columns:
        frame["status"] = "ok"
    if "timing" not in frame.columns:
        frame["timing"] = pd.NA
    fi = flashinfer_rows(frame)
    if fi.empty:
        return empty(WINNER_COLUMNS)
    gid = group_ids(fi, DECISION)
    times = fi["time_ms"].to_numpy(dtype=float)
    finite = np.isfinite(times)
    n_groups = int(gid.max()) + 1
    n_failed = np.bincount(gid[~finite], minlength=n_groups)
    n_cand = np.bincount(gid[finite], minlength=n_groups)

    ok = fi[finite]
    ok_gid = gid[finite]
    ok_times = times[finite]
    seq = pd.to_numeric(ok["seq"], errors="coerce").fillna(np.inf).to_numpy(dtype=float)
    order = np.lexsort((seq, ok_times, ok_gid))
    sorted_gid = ok_gid[order]
    first = np.r_[True, sorted_gid[1:] != sorted_gid[:-1]] if len(sorted_gid) else np.zeros(0, bool)
    start = np.flatnonzero(first)
    win_rows = order[start]
    has_second = np.r_[start[1:], len(order)] - start >= 2
    second_rows = np.where(has_second, order[np.minimum(start + 1, len(order) - 1)], -1)
    groups = sorted_gid[start]

    win = ok.iloc[win_rows]
    # Keep the nullable dtypes: Int64.to_numpy() turns <NA> ranks into floats.
    out = win[DECISION + ["bucket", "runner", "tactic", "status", "timing"]].reset_index(drop=True)
    out["time_ms"] = ok_times[win_rows]
    second = ok.iloc[np.where(has_second, second_rows, 0)]
    out["runner_up_runner"] = np.where(has_second, second["runner"].astype(object).to_numpy(), None)
    out["runner_up_tactic"] = np.where(has_second, second["tactic"].astype(object).to_numpy(), None)
    out["runner_up_ms"] = np.where(has_second, ok_times[np.maximum(second_rows, 0)], np.nan)
    out["gap_ms"] = out["runner_up_ms"] - out["time_ms"]
    out["gap_pct"] = 100.0 * out["gap_ms"] / out["time_ms"]
    out["n_candidates"] = n_cand[groups]
    out["n_failed"] = n_failed[groups]

    # Noise band per (op, profile), then the count of other candidates inside it.
    band = noise_frame[["op", "profile", "noise_pct", "noise_source"]].drop_duplicates(["op", "profile"])
    out = out.merge(band, on=["op", "profile"], how="left")
    out["noise_pct"] = out["noise_pct"].fillna(100.0 * rel_threshold)
    out["noise_source"] = out["noise_source"].fillna("threshold")
    band_by_group = np.full(n_groups, np.nan)
    band_by_group[groups] = out["noise_pct"].to_numpy(dtype=float)
    best_by_group = np.full(n_groups, np.nan)
    best_by_group[groups] = out["time_ms"].to_numpy(dtype=float)
    inside = ok_times <= best_by_group[ok_gid] * (1.0 + band_by_group[ok_gid] / 100.0)
    out["n_within_noise"] = np.bincount(ok_gid[inside], minlength=n_groups)[groups] - 1

    out = _attach_default(out, default_rows(frame))
    out["shape"] = shapes_of(out).to_numpy()
    out = conform_columns(out, WINNER_COLUMNS)
    return _sort(out, ["op", "shape", "bucket", "run_id", "rank", "call"])


def _attach_default(out: pd.DataFrame, defaults: pd.DataFrame) -> pd.DataFrame:
    if defaults.empty:
        out["default_runner"] = pd.NA
        out["default_ms"] = np.nan
        return out
    d = defaults[DECISION + ["runner", "time_ms"]].rename(columns={"runner": "default_runner",
                                                                   "time_ms": "default_ms"})
    d = d.drop_duplicates(DECISION, keep="first")
    keyed = out.reset_index(drop=True)
    left = keyed[DECISION].astype("string").fillna("<NA>")
    right = d[DECISION].astype("string").fillna("<NA>")
    right = right.assign(default_runner=d["default_runner"].to_numpy(), default_ms=d["default_ms"].to_numpy())
    joined = left.merge(right, on=DECISION, how="left")
    keyed["default_runner"] = joined["default_runner"].to_numpy()
    keyed["default_ms"] = joined["default_ms"].to_numpy(dtype=float)
    return keyed


def speedup_vs_default(frame: pd.DataFrame, *, noise: pd.DataFrame | None = None,
                       rel_threshold: float = DEFAULT_NOISE_PCT / 100) -> pd.DataFrame:
    """Compare each bucket's winner with what runs untuned (runners[0], tactic -1).

    ``speedup = default_ms / time_ms`` (bigger is better). A bucket is ``slower_than_default``
    when the tuned choice measured slower than the default (the failure of flashinfer#3537).
    ``verdict`` is the one comparison rule's (docs/comparison_rule.md): the winner and the default
    are one timing each of one tuning run, judged with the run-to-run spread of :func:`noise` where
    repeated runs measured it (``noise_source == "repeats"``); with a threshold instead, the
    design cannot tell a change from run-to-run drift: ``not_measurable``. ``within_noise`` is
    True unless the verdict is faster or slower, so a "slower" bucket within noise is a tie, not
    a regression.

    Args:
        frame: a candidates table (with profkit's ``source == "default"`` rows), the output of
            :func:`winners`, or a winners table (``time_ms`` and ``default_time_ms``).
        noise: noise estimate from :func:`noise`, used when ``frame`` is a candidates table or
            a winners table.
        rel_threshold: relative band where no repeats exist (0.02 = 2%).

    Returns:
        One row per decision with a timed default, sorted by op, shape, bucket, run_id:
        ``run_id``, ``rank``, ``op``, ``shape``, ``profile``, ``bucket``, ``runner``, ``tactic``,
        ``time_ms`` (winner), ``default_runner``, ``default_ms``, ``speedup`` (x),
        ``gain_pct`` ((speedup - 1) x 100), ``saved_us`` (default minus winner, microseconds per
        call), ``noise_pct``, ``noise_source``, ``slower_than_default``, ``within_noise``,
        ``timing``, and the rule's ``effect`` (time_ms / default_ms - 1), ``effect_lo``,
        ``effect_hi``, ``verdict`` and ``detectable``. Rows whose default was not timed are left out.
    """
    if not isinstance(frame, pd.DataFrame):
        require(frame, (), "candidates")
    if "default_ms" in frame.columns:
        w = frame.copy()
    elif "default_time_ms" in frame.columns:
        require(frame, ("op", "profile", "bucket", "runner", "tactic", "time_ms"), "winners")
        w = frame.rename(columns={"default_time_ms": "default_ms"}).copy()
        if noise is not None:
            require(noise, ("op", "profile", "noise_pct", "noise_source"), "noise")
            w = w.drop(columns=[c for c in ("noise_pct", "noise_source") if c in w.columns]).merge(
                noise[["op", "profile", "noise_pct", "noise_source"]].drop_duplicates(["op", "profile"]),
                on=["op", "profile"], how="left")
        if "noise_pct" not in w.columns:
            w["noise_pct"] = np.nan
            w["noise_source"] = pd.NA
        w["noise_pct"] = w["noise_pct"].fillna(100.0 * rel_threshold)
        w["noise_source"] = w["noise_source"].astype("string").fillna("threshold")
        if "shape" not in w.columns:
            w["shape"] = shapes_of(w).to_numpy()
    else:
        w = winners(frame, noise=noise, rel_threshold=rel_threshold)
    if w.empty:
        return empty(SPEEDUP_COLUMNS)
    time = w["time_ms"].to_numpy(dtype=float)
    default = pd.to_numeric(w["default_ms"], errors="coerce").to_numpy(dtype=float)
    keep = np.isfinite(time) & np.isfinite(default) & (time > 0)
    w = w[keep].copy()
    time, default = time[keep], default[keep]
    w["default_ms"] = default
    w["speedup"] = default / time
    w["gain_pct"] = 100.0 * (w["speedup"] - 1.0)
    w["saved_us"] = 1000.0 * (default - time)
    w["slower_than_default"] = time > default
    rule = compare_values(time, default, ratio_sd=tuner_ratio_sd(w))
    for col in ("effect", "effect_lo", "effect_hi", "verdict", "detectable"):
        w[col] = rule[col].to_numpy()
    w["within_noise"] = within_noise(w["verdict"])
    out = conform_columns(w, SPEEDUP_COLUMNS)
    return _sort(out, ["op", "shape", "bucket", "run_id", "rank"])


def tuner_ratio_sd(frame: pd.DataFrame) -> np.ndarray:
    """Spread (sd of the log) of a ratio of two tuner timings of one run, per row: NaN without repeats.

    ``noise_pct`` from repeats is two relative standard deviations of one timing across runs, so
    the log ratio of two independent timings has sd sqrt(2) x noise_pct / 200. A threshold band
    (``noise_source`` "threshold" or missing) is no measurement of the spread.
    """
    band = pd.to_numeric(frame.get("noise_pct", pd.Series(np.nan, index=frame.index)), errors="coerce")
    source = frame.get("noise_source", pd.Series(pd.NA, index=frame.index, dtype="string")).astype("string")
    repeats = (source == "repeats").fillna(False).to_numpy(dtype=bool)
    return np.where(repeats, np.sqrt(2.0) * band.to_numpy(dtype=float) / 200.0, np.nan)


def _sort(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    keys = [k for k in keys if k in frame.columns]
    return frame.sort_values(keys, kind="stable", na_position="last").reset_index(drop=True)
