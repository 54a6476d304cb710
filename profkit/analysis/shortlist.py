"""How long a port's shortlist must be: had ``profkit port`` re-timed the source GPU tuner's top-k of a profile on
the target, how far would the best of them be from the target's own pick?

Pure: candidate rows of two or more GPUs' tunings in (``gpu`` beside FlashInfer's columns), one row per (op, GPU
pair, k) out. Both sides are the tuners' own timings, with no extra GPU time: each (GPU, op, profile, runner,
tactic) is its median over that GPU's runs; the target's own pick is its fastest. ``regret`` is the best
shortlisted candidate's target time over the own pick's, less 1. These are single tuner timings, not judged by the
comparison rule: the table says where a short list cannot hold the own pick, not that a port loses there (the step
proof says that).
"""

from __future__ import annotations

import pandas as pd

from profkit.analysis._frames import conform_columns, empty

SHORTLIST_COLUMNS = {
    "op": "string", "source_gpu": "string", "target_gpu": "string", "top_k": "Int64", "points": "Int64",
    "own_in_shortlist": "Int64", "none_timed": "Int64", "median_regret": "float64", "worst_regret": "float64", "worst_at": "string",
}
TOP_KS = (1, 3, 5, 10)
_PROFILE = ["op", "profile"]


def shortlist_reach(candidates: pd.DataFrame, top_ks=TOP_KS) -> pd.DataFrame:
    """Per op, ordered GPU pair and k in ``top_ks``: the (op, profile) points both GPUs tuned, at how many the
    target's own pick is among the source's k fastest, at how many none of those k was timed on the target (no
    regret there), and the median and worst regret of the best of them timed on the target (``worst_at``: that
    point's bucket)."""
    timed = _medians(candidates)
    if timed.empty:
        return empty(SHORTLIST_COLUMNS)
    timed["rank"] = timed.groupby(["gpu", *_PROFILE], sort=False)["time_ms"].rank(method="first")
    pairs = timed.merge(timed, on=[*_PROFILE, "runner", "tactic"], suffixes=("_src", "_tgt"))
    pairs = pairs[(pairs["gpu_src"] != pairs["gpu_tgt"]).to_numpy()]
    pairs["own"] = pairs["rank_tgt"] == 1
    own = timed[timed["rank"] == 1][["gpu", *_PROFILE, "time_ms"]].rename(
        columns={"gpu": "gpu_tgt", "time_ms": "own_ms"})
    point = ["gpu_src", "gpu_tgt", *_PROFILE]
    points = pairs.groupby(["op", "gpu_src", "gpu_tgt"], sort=True)["profile"].nunique()
    rows = []
    for k in top_ks:
        short = pairs[(pairs["rank_src"] <= k).to_numpy()]
        best = short.groupby(point, sort=False).agg(best_ms=("time_ms_tgt", "min"), bucket=("bucket_tgt", "first"),
                                                     own_in=("own", "any"))
        best = best.reset_index().merge(own, on=["gpu_tgt", *_PROFILE])
        best["regret"] = best["best_ms"] / best["own_ms"] - 1
        groups = dict(iter(best.groupby(["op", "gpu_src", "gpu_tgt"], sort=False)))
        for (op, src, tgt), n in points.items():
            g = groups.get((op, src, tgt), best.iloc[:0])
            worst = g.loc[g["regret"].idxmax()] if len(g) else None
            rows.append({"op": op, "source_gpu": src, "target_gpu": tgt, "top_k": k, "points": int(n),
                         "own_in_shortlist": int(g["own_in"].sum()), "none_timed": int(n) - len(g),
                         "median_regret": float(g["regret"].median()) if len(g) else None,
                         "worst_regret": float(worst["regret"]) if worst is not None else None,
                         "worst_at": f"bucket {worst['bucket']}" if worst is not None else None})
    if not rows:
        return empty(SHORTLIST_COLUMNS)
    table = pd.DataFrame(rows).sort_values(["op", "source_gpu", "target_gpu", "top_k"], ignore_index=True)
    return conform_columns(table, SHORTLIST_COLUMNS)


def _medians(candidates: pd.DataFrame) -> pd.DataFrame:
    """Each (GPU, op, profile, runner, tactic)'s median time over its GPU's ok candidate rows."""
    need = {"gpu", *_PROFILE, "runner", "tactic", "time_ms", "status", "bucket"}
    if candidates is None or candidates.empty or not need <= set(candidates.columns):
        return pd.DataFrame()
    ok = candidates[(candidates["status"] == "ok").fillna(False).to_numpy(dtype=bool)
                    & candidates["time_ms"].notna().to_numpy() & candidates["gpu"].notna().to_numpy()]
    ok = ok[["gpu", *_PROFILE, "runner", "tactic", "time_ms", "bucket"]].astype(
        {"gpu": str, "op": str, "profile": str, "runner": str, "tactic": str, "time_ms": float})
    return ok.groupby(["gpu", *_PROFILE, "runner", "tactic"], sort=False, as_index=False).agg(
        time_ms=("time_ms", "median"), bucket=("bucket", "first"))
