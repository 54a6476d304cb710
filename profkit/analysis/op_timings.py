"""Is the bucket-level gain realised at sizes never profiled? Tuned vs untuned op timings.

The ``op_timings`` table holds the real op timed outside tuning at chosen M (on and between
bucket values), without tuned configs and with them. Two FlashInfer 0.7.2 design choices show
up between buckets: cuBLASLt bf16 cache-key extras include M (GB:2001), so a tuned cuBLASLt
config is found only at exactly the bucket's M and other M fall back to another runner; and a
cuBLAS fp8 tactic is an index into a per-shape heuristic list (GB:230-295), so the same index at
M=3000 can be another algorithm than at M=3072. The op timings also use their own method
(CUDA graph over rotating inputs, median) rather than the tuner's.

Tuned against untuned at one M is one timing each in one process, judged by the one comparison
rule (docs/comparison_rule.md) with the spread ``profkit verify`` measured for the same timing
method between processes (``VERIFY_RATIO_SD``): the replays' p10-p90 band is the spread inside
one block, not between blocks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analysis._frames import conform_columns, empty, require
from profkit.analysis.verdict import VERIFY_RATIO_SD, compare_values, within_noise

BETWEEN_COLUMNS = {
    "run_id": "string", "op": "string", "shape": "string", "n": "Int64", "k": "Int64", "m": "Int64",
    "bucket": "Int64", "at_bucket": "boolean", "untuned_runner": "string", "untuned_tactic": "string",
    "untuned_ms": "float64", "tuned_runner": "string", "tuned_tactic": "string", "tuned_ms": "float64",
    "speedup": "float64", "within_noise": "boolean", "bucket_speedup": "float64",
    "bucket_runner": "string", "bucket_tactic": "string", "config_applied": "boolean", "timing": "string",
    "effect": "float64", "effect_lo": "float64", "effect_hi": "float64", "verdict": "string",
    "detectable": "float64",
}


def between_buckets(op_timings: pd.DataFrame, *, speedups: pd.DataFrame | None = None,
                    ratio_sd: float = VERIFY_RATIO_SD) -> pd.DataFrame:
    """Compare tuned with untuned op timings at each M, beside the tuner's own bucket speedup.

    Args:
        op_timings: an op_timings table (``state`` "untuned" and "tuned" rows per M).
        speedups: output of :func:`profkit.analysis.speedup_vs_default` for the same shapes, to
            add what tuning promised at the bucket (``bucket_speedup``) and which winner it
            stored (``bucket_runner``, ``bucket_tactic``).
        ratio_sd: spread (sd of the log) of a tuned/untuned ratio timed in one process.

    Returns:
        One row per (run_id, op, n, k, m), sorted by op, shape, m: ``shape`` ('N=.. K=..'),
        ``bucket`` (FlashInfer's bucket for M), ``at_bucket`` (M equals the bucket),
        ``untuned_runner/_tactic/_ms`` and ``tuned_runner/_tactic/_ms`` (what ``choose_one``
        returned and its median time per call), ``speedup`` (untuned_ms / tuned_ms), the rule's
        ``effect`` (tuned_ms / untuned_ms - 1), ``effect_lo``, ``effect_hi``, ``verdict`` and
        ``detectable``, ``within_noise`` (the verdict is neither faster nor slower), ``bucket_speedup``,
        ``bucket_runner``, ``bucket_tactic``, ``config_applied`` (the tuned call ran the bucket's
        winner, runner and tactic: False where the lookup missed, as cuBLASLt does between
        buckets; NA without ``speedups``) and
        ``timing``.
    """
    require(op_timings, ("op", "n", "k", "m", "bucket", "state", "runner", "tactic", "time_ms"), "op_timings")
    if op_timings.empty:
        return empty(BETWEEN_COLUMNS)
    t = op_timings.copy()
    for col in ("run_id", "timing"):
        if col not in t.columns:
            t[col] = pd.NA
    for col in ("time_ms_p10", "time_ms_p90"):
        if col not in t.columns:
            t[col] = t["time_ms"]
    keys = ["op", "n", "k", "m"]
    state = t["state"].astype("string")
    untuned = t[(state == "untuned").fillna(False).to_numpy(dtype=bool)]
    tuned = t[(state == "tuned").fillna(False).to_numpy(dtype=bool)]
    cols = ["runner", "tactic", "time_ms", "time_ms_p10", "time_ms_p90"]
    u = untuned[keys + ["bucket", "run_id", "timing"] + cols].rename(columns={c: f"u_{c}" for c in cols})
    v = tuned[keys + ["run_id"] + cols].rename(columns={c: f"t_{c}" for c in cols})
    joined = u.drop_duplicates(keys).merge(v.drop_duplicates(keys), on=keys, how="inner", suffixes=("", "_t"))
    if joined.empty:
        return empty(BETWEEN_COLUMNS)
    joined["run_id"] = joined["run_id_t"].fillna(joined["run_id"])
    joined["shape"] = [f"N={int(n)} K={int(k)}" for n, k in zip(joined["n"], joined["k"])]
    joined["at_bucket"] = joined["m"].astype("Int64") == joined["bucket"].astype("Int64")
    joined["untuned_runner"], joined["untuned_tactic"] = joined["u_runner"], joined["u_tactic"]
    joined["tuned_runner"], joined["tuned_tactic"] = joined["t_runner"], joined["t_tactic"]
    joined["untuned_ms"], joined["tuned_ms"] = joined["u_time_ms"], joined["t_time_ms"]
    joined["speedup"] = joined["untuned_ms"] / joined["tuned_ms"]
    rule = compare_values(joined["tuned_ms"], joined["untuned_ms"], ratio_sd=ratio_sd)
    for col in ("effect", "effect_lo", "effect_hi", "verdict", "detectable"):
        joined[col] = rule[col].to_numpy()
    joined["within_noise"] = within_noise(joined["verdict"])
    joined["bucket_speedup"] = np.nan
    joined["bucket_runner"] = pd.NA
    joined["bucket_tactic"] = pd.NA
    if speedups is not None and not speedups.empty:
        require(speedups, ("op", "shape", "bucket", "speedup", "runner", "tactic"), "speedups")
        s = speedups.groupby(["op", "shape", "bucket"], observed=True).agg(
            bucket_speedup=("speedup", "mean"), bucket_runner=("runner", "first"),
            bucket_tactic=("tactic", "first")).reset_index()
        s = s.astype({"op": "string", "shape": "string", "bucket": "Int64"})
        joined = joined.drop(columns=["bucket_speedup", "bucket_runner", "bucket_tactic"])
        joined = joined.astype({"op": "string", "shape": "string", "bucket": "Int64"}).merge(
            s, on=["op", "shape", "bucket"], how="left")
    applied = ((joined["tuned_runner"].astype("string") == joined["bucket_runner"].astype("string"))
               & (joined["tuned_tactic"].astype("string") == joined["bucket_tactic"].astype("string")))
    joined["config_applied"] = applied.where(joined["bucket_runner"].notna(), pd.NA)
    out = conform_columns(joined, BETWEEN_COLUMNS)
    return out.sort_values(["op", "shape", "m", "run_id"], kind="stable").reset_index(drop=True)
