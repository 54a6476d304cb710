"""What tuning cost: where the seconds went, per op, bucket and runner, and what they bought."""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analysis._frames import conform_columns, empty, flashinfer_rows, require, shapes_of

BREAKDOWN_COLUMNS = {
    "run_id": "string", "rank": "Int64", "call": "Int64", "op": "string", "shape": "string", "profile": "string",
    "bucket": "Int64", "wall_s": "float64", "measure_s": "float64", "prep_s": "float64", "jit_s": "float64",
    "other_s": "float64", "default_s": "float64", "n_candidates": "Int64", "n_failed": "Int64",
    "status": "string",
}

RUNNER_COLUMNS = {
    "run_id": "string", "op": "string", "shape": "string", "bucket": "Int64", "runner": "string",
    "n_candidates": "Int64", "n_failed": "Int64", "measure_s": "float64", "jit_s": "float64",
    "mean_host_ms": "float64", "best_ms": "float64",
}

VALUE_COLUMNS = {
    "run_id": "string", "op": "string", "shape": "string", "bucket": "Int64", "tuning_s": "float64",
    "speedup": "float64", "saved_us": "float64", "cum_tuning_s": "float64", "cum_saved_us": "float64",
}

WORTH_COLUMNS = {
    "run_id": "string", "op": "string", "shape": "string", "n_buckets": "Int64", "tuning_s": "float64",
    "measure_s": "float64", "median_speedup": "float64", "max_speedup": "float64", "n_slower": "Int64",
    "saved_us_per_pass": "float64", "saved_pct_per_pass": "float64", "break_even_passes": "float64",
}

_TUNING_COLUMNS = ("run_id", "kind", "op", "wall_s", "measure_s", "jit_s", "prep_s")


def tuning_breakdown(tuning: pd.DataFrame, *, by: str = "bucket") -> pd.DataFrame:
    """Split tuning wall time into measuring, runner preparation, JIT and the rest.

    ``measure_s`` is the candidates' host time minus JIT inside them; ``prep_s`` the time before
    each runner's first candidate (``get_valid_tactics``: cuDNN plan builds); ``jit_s`` FlashInfer
    compiling modules; ``other_s = wall_s - measure_s - prep_s - jit_s`` (input synthesis,
    bookkeeping). ``default_s`` is profkit's own timing of the default, outside ``wall_s``.

    Args:
        tuning: a tuning table.
        by: "bucket" (one row per profiled bucket, kind=profile) or "call" (one row per tuning
            call: the whole ``choose_one``).

    Returns:
        Sorted by op, shape, bucket (or op, shape for calls), run_id: ``run_id``, ``rank``,
        ``call``, ``op``, ``shape``, ``profile``, ``bucket`` (NA for calls), ``wall_s``,
        ``measure_s``, ``prep_s``, ``jit_s``, ``other_s``, ``default_s`` (seconds),
        ``n_candidates``, ``n_failed``, ``status``. For calls, ``shape`` is the shape its
        buckets share.

    Raises:
        ProfkitError: for an unknown ``by``.
    """
    require(tuning, _TUNING_COLUMNS, "tuning")
    if by not in ("bucket", "call"):
        from profkit.errors import ProfkitError

        raise ProfkitError(f"by must be 'bucket' or 'call', got {by!r}")
    kind = "profile" if by == "bucket" else "call"
    rows = tuning[(tuning["kind"].astype("string") == kind).fillna(False).to_numpy(dtype=bool)].copy()
    if rows.empty:
        return empty(BREAKDOWN_COLUMNS)
    profiles = tuning[(tuning["kind"].astype("string") == "profile").fillna(False).to_numpy(dtype=bool)]
    if by == "bucket":
        rows["shape"] = shapes_of(rows).to_numpy()
    else:
        shape_of_call = (profiles.assign(shape=shapes_of(profiles).to_numpy())
                         .groupby(["run_id", "call"], dropna=False, observed=True)["shape"].first())
        keys = pd.MultiIndex.from_frame(rows[["run_id", "call"]])
        rows["shape"] = shape_of_call.reindex(keys).to_numpy()
        rows["bucket"] = pd.NA
    for col in ("wall_s", "measure_s", "prep_s", "jit_s", "default_s"):
        rows[col] = pd.to_numeric(rows[col], errors="coerce").astype(float).fillna(0.0) if col in rows else 0.0
    rows["other_s"] = (rows["wall_s"] - rows["measure_s"] - rows["prep_s"] - rows["jit_s"]).clip(lower=0.0)
    out = conform_columns(rows, BREAKDOWN_COLUMNS)
    keys = ["op", "shape", "bucket", "run_id", "rank", "call"]
    return out.sort_values(keys, kind="stable", na_position="last").reset_index(drop=True)


def runner_cost(candidates: pd.DataFrame) -> pd.DataFrame:
    """Measuring time per runner and bucket: which runner's tactics the tuning seconds went to.

    Args:
        candidates: a candidates table. profkit's default-timing rows are left out.

    Returns:
        One row per (run_id, op, shape, bucket, runner), sorted by op, shape, bucket, runner,
        run_id: ``n_candidates``, ``n_failed`` (no finite time), ``measure_s`` (sum of host
        seconds minus JIT), ``jit_s``, ``mean_host_ms`` (host milliseconds per candidate) and
        ``best_ms`` (the runner's fastest candidate).
    """
    require(candidates, ("run_id", "op", "profile", "bucket", "runner", "time_ms", "host_s"), "candidates")
    c = flashinfer_rows(candidates).copy()
    if c.empty:
        return empty(RUNNER_COLUMNS)
    c["shape"] = shapes_of(c).to_numpy()
    c["jit_s"] = pd.to_numeric(c["jit_s"], errors="coerce").fillna(0.0) if "jit_s" in c else 0.0
    c["host_s"] = pd.to_numeric(c["host_s"], errors="coerce").fillna(0.0)
    c["measure_s"] = c["host_s"] - c["jit_s"]
    c["failed"] = ~np.isfinite(c["time_ms"].to_numpy(dtype=float))
    keys = ["run_id", "op", "shape", "bucket", "runner"]
    g = c.groupby(keys, dropna=False, observed=True, sort=False)
    out = g.agg(n_candidates=("time_ms", "size"), n_failed=("failed", "sum"), measure_s=("measure_s", "sum"),
                jit_s=("jit_s", "sum"), mean_host_ms=("host_s", "mean"), best_ms=("time_ms", "min")).reset_index()
    out["mean_host_ms"] *= 1000.0
    out = conform_columns(out, RUNNER_COLUMNS)
    return out.sort_values(["op", "shape", "bucket", "runner", "run_id"], kind="stable").reset_index(drop=True)


def tuning_value(speedups: pd.DataFrame, tuning: pd.DataFrame) -> pd.DataFrame:
    """Cumulative tuning time against the time it saves, bucket by bucket in tuning order.

    Args:
        speedups: the output of :func:`profkit.analysis.speedup_vs_default`.
        tuning: a tuning table (its kind=profile rows give each bucket's wall time).

    Returns:
        One row per (run_id, op, shape, bucket), sorted by op, shape, run_id, bucket:
        ``tuning_s`` (the bucket's tuning wall seconds), ``speedup``, ``saved_us`` (per call at
        that bucket, may be negative), and running sums over the buckets of one (run, op, shape):
        ``cum_tuning_s`` and ``cum_saved_us`` (microseconds saved by one call at each bucket so far).
    """
    require(speedups, ("run_id", "op", "shape", "bucket", "speedup", "saved_us"), "speedups")
    breakdown = tuning_breakdown(tuning, by="bucket")
    if speedups.empty or breakdown.empty:
        return empty(VALUE_COLUMNS)
    cost = breakdown.groupby(["run_id", "op", "shape", "bucket"], dropna=False, observed=True)["wall_s"].sum()
    s = speedups.groupby(["run_id", "op", "shape", "bucket"], dropna=False, observed=True).agg(
        speedup=("speedup", "mean"), saved_us=("saved_us", "mean"))
    joined = s.join(cost.rename("tuning_s"), how="inner").reset_index()
    joined = joined.sort_values(["op", "shape", "run_id", "bucket"], kind="stable").reset_index(drop=True)
    g = joined.groupby(["run_id", "op", "shape"], dropna=False, observed=True, sort=False)
    joined["cum_tuning_s"] = g["tuning_s"].cumsum()
    joined["cum_saved_us"] = g["saved_us"].cumsum()
    return conform_columns(joined, VALUE_COLUMNS)


def worth_tuning(speedups: pd.DataFrame, tuning: pd.DataFrame) -> pd.DataFrame:
    """Answer "is this op worth tuning?": tuning seconds beside the speedup they bought.

    One "pass" calls the op once at every tuned bucket, so ``saved_us_per_pass`` adds up the
    per-call saving over the buckets and ``break_even_passes`` is how many such passes repay the
    tuning time. Real traffic hits some buckets far more than others: weight by engine batch
    sizes with :func:`profkit.analysis.weighted_speedup` for a serving estimate.

    Args:
        speedups: the output of :func:`profkit.analysis.speedup_vs_default`.
        tuning: a tuning table (kind=call rows give each call's wall time).

    Returns:
        One row per (run_id, op, shape), sorted by op, shape, run_id: ``n_buckets``,
        ``tuning_s`` and ``measure_s`` (wall and measuring seconds of the tuning calls),
        ``median_speedup``, ``max_speedup``, ``n_slower`` (buckets slower than the default),
        ``saved_us_per_pass``, ``saved_pct_per_pass`` (percent of the default's time per pass),
        ``break_even_passes`` (inf when nothing is saved).
    """
    require(speedups, ("run_id", "op", "shape", "speedup", "saved_us", "default_ms", "slower_than_default"),
            "speedups")
    calls = tuning_breakdown(tuning, by="call")
    if speedups.empty:
        return empty(WORTH_COLUMNS)
    s = speedups.assign(default_us=speedups["default_ms"] * 1000.0,
                        slower=speedups["slower_than_default"].fillna(False).astype(bool))
    g = s.groupby(["run_id", "op", "shape"], dropna=False, observed=True)
    out = g.agg(n_buckets=("speedup", "size"), median_speedup=("speedup", "median"),
                max_speedup=("speedup", "max"), n_slower=("slower", "sum"),
                saved_us_per_pass=("saved_us", "sum"), default_us=("default_us", "sum")).reset_index()
    keys = ["run_id", "op", "shape"]
    cost = calls.groupby(keys, dropna=False, observed=True)[["wall_s", "measure_s"]].sum()
    cost = cost.rename(columns={"wall_s": "tuning_s"}).reset_index()
    out = out.merge(cost.astype({k: "string" for k in keys}), on=keys, how="left")
    out["saved_pct_per_pass"] = 100.0 * out["saved_us_per_pass"] / out["default_us"]
    with np.errstate(divide="ignore", invalid="ignore"):
        passes = out["tuning_s"].to_numpy(dtype=float) * 1e6 / out["saved_us_per_pass"].to_numpy(dtype=float)
    out["break_even_passes"] = np.where(out["saved_us_per_pass"] > 0, passes, np.inf)
    out = conform_columns(out, WORTH_COLUMNS)
    return out.sort_values(["op", "shape", "run_id"], kind="stable").reset_index(drop=True)
