"""One row per op (tuning calls' cost, the tuner's speedups, timings between buckets) and the runs' environment."""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analysis._frames import conform_columns, empty

CALL_COST_COLUMNS = {
    "op": "string", "buckets": "Int64", "calls": "Int64", "wall_s_min": "float64", "wall_s_median": "float64",
    "wall_s_max": "float64", "measure_share": "float64", "prep_share": "float64", "split_known": "boolean",
    "later_calls": "Int64", "later_s_min": "float64", "later_s_max": "float64",
}

SPEEDUP_SUMMARY_COLUMNS = {
    "op": "string", "shapes": "Int64", "buckets": "Int64", "buckets_per_shape": "Int64", "median_speedup": "float64",
    "max_speedup": "float64", "slower": "Int64", "slower_beyond_noise": "Int64",
}



def call_costs(breakdown: pd.DataFrame, calls: pd.DataFrame, tuning: pd.DataFrame, first_runs) -> pd.DataFrame:
    """Per op: the wall time of a tuning call that profiled every bucket of its shape.

    Returns:
        :data:`CALL_COST_COLUMNS`: the first runs' full calls (min, median, max seconds), the
        shares of measuring and runner preparation in them (NaN when the tuning rows carry no
        phase times: ``split_known``), and the later runs' full calls of the same ops (repeats,
        other ranks). Sorted by op.
    """
    if breakdown.empty or calls.empty:
        return empty(CALL_COST_COLUMNS)
    per_call = breakdown.groupby(["run_id", "call"], observed=True).size().rename("n_buckets").reset_index()
    every = calls.merge(per_call, on=["run_id", "call"], how="inner")
    timed = tuning[tuning["kind"].eq("profile").fillna(False).to_numpy(dtype=bool)].groupby(["run_id", "call"])
    known = timed["measure_s"].apply(lambda s: bool(s.notna().any())).rename("split_known").reset_index()
    every = every.merge(known, on=["run_id", "call"], how="left")
    every["first_run"] = every["run_id"].isin(first_runs).to_numpy(dtype=bool)
    top = every.groupby("op")["n_buckets"].transform("max")
    full = every[(every["n_buckets"] == top).to_numpy(dtype=bool)]
    rows = []
    for op, g in full.groupby("op", sort=True):
        first = g[g["first_run"].to_numpy(dtype=bool)]
        later = g[~g["first_run"].to_numpy(dtype=bool)]
        shown = first if len(first) else g
        split = bool(shown["split_known"].fillna(False).all())
        wall = float(shown["wall_s"].sum())
        rows.append({"op": op, "buckets": int(shown["n_buckets"].max()), "calls": len(shown),
                     "wall_s_min": shown["wall_s"].min(), "wall_s_median": shown["wall_s"].median(),
                     "wall_s_max": shown["wall_s"].max(),
                     "measure_share": shown["measure_s"].sum() / wall if split and wall else np.nan,
                     "prep_share": shown["prep_s"].sum() / wall if split and wall else np.nan, "split_known": split,
                     "later_calls": len(later) if len(first) else 0,
                     "later_s_min": later["wall_s"].min() if len(first) and len(later) else np.nan,
                     "later_s_max": later["wall_s"].max() if len(first) and len(later) else np.nan})
    return conform_columns(pd.DataFrame(rows), CALL_COST_COLUMNS) if rows else empty(CALL_COST_COLUMNS)



def speedup_summary(speedups: pd.DataFrame) -> pd.DataFrame:
    """Per op: the winner against FlashInfer's default by the tuner's own timer (first run each)."""
    rows = []
    for op, g in (speedups.groupby("op", sort=True) if len(speedups) else []):
        slow = g["slower_than_default"].fillna(False).to_numpy(dtype=bool)
        per = g.groupby("shape")["bucket"].nunique()
        rows.append({"op": op, "shapes": g["shape"].nunique(), "buckets": len(g),
                     "buckets_per_shape": int(per.iloc[0]) if per.nunique() == 1 and len(per) else pd.NA,
                     "median_speedup": g["speedup"].median(), "max_speedup": g["speedup"].max(),
                     "slower": int(slow.sum()),
                     "slower_beyond_noise": int((slow & ~g["within_noise"].fillna(False).to_numpy(dtype=bool)).sum())})
    return conform_columns(pd.DataFrame(rows), SPEEDUP_SUMMARY_COLUMNS) if rows else empty(SPEEDUP_SUMMARY_COLUMNS)



def between_summary(between: pd.DataFrame) -> pd.DataFrame:
    """Per (op, at_bucket): median, min and max of tuned-vs-untuned op timings, and how many (shape, M)."""
    if between.empty:
        return pd.DataFrame(columns=["op", "at_bucket", "median_speedup", "min_speedup", "max_speedup", "n"])
    g = between.groupby(["op", "at_bucket"])["speedup"].agg(["median", "min", "max", "count"]).reset_index()
    return g.rename(columns={"median": "median_speedup", "min": "min_speedup", "max": "max_speedup", "count": "n"})



_ENV = ("gpu", "driver", "cuda", "torch", "flashinfer", "cudnn", "cublas", "cudnn_frontend", "python", "host")



def environment(runs: pd.DataFrame) -> pd.DataFrame:
    """(field, value) per environment column of the runs: every distinct value, comma-joined."""
    from profkit._versions import cudnn_version

    rows = []
    for col in (c for c in _ENV if c in runs.columns):
        values = sorted({cudnn_version(v) if col == "cudnn" else str(v) for v in runs[col].dropna()})
        rows.append({"field": "cuDNN" if col == "cudnn" else col, "value": ", ".join(values) if values else "?"})
    return pd.DataFrame(rows, columns=["field", "value"])
