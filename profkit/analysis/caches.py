"""Did a cache file do anything? FlashInfer's own word (it ignored a file made in another environment) and the
step's (a state that loaded a file ran only default tactics).

Pure: the catalogue's ``cache_events`` (from the debug logs) and step rows in, one row per cache that did
nothing out.
"""

from __future__ import annotations

import pandas as pd

from profkit.analysis._frames import conform_columns, empty

IDLE_CACHE_COLUMNS = {"cache": "string", "why": "string", "detail": "string", "where": "string", "times": "Int64"}


def idle_caches(cache_events: pd.DataFrame, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Cache files that did nothing, one row per (cache, why).

    ``why`` is ``ignored`` (FlashInfer logged that the file was created in a different environment and ignored
    it; ``detail`` names the mismatched fields, e.g. ``gpu: saved=NVIDIA H100 80GB HBM3 vs current=NVIDIA H200``),
    ``ignored by profkit verify`` / ``ignored by profkit port`` (the same, in a process that re-timed the other
    GPU's picks: on purpose; the events' ``during``) or ``defaults only`` (a step state that loaded the file ran
    the default tactic, -1, in every layer at every size; ``detail`` names the state). ``where`` is the first log
    or step folder that shows it, ``times`` how often it was seen.
    """
    rows = []
    if cache_events is not None and len(cache_events):
        ignored = cache_events[(cache_events["kind"] == "cache_env_mismatch").fillna(False).to_numpy(dtype=bool)]
        during = ignored["during"] if "during" in ignored.columns else pd.Series(pd.NA, index=ignored.index)
        why = ("ignored by " + during.astype("string")).fillna("ignored")
        for (path, detail, reason), g in ignored.assign(why=why).groupby(["path", "detail", "why"], dropna=False,
                                                                        sort=True):
            rows.append({"cache": path, "why": reason, "detail": detail, "where": str(g["file"].iloc[0]),
                         "times": len(g)})
    if steps is not None and len(steps) and {"loaded_cache", "picks", "state"} <= set(steps.columns):
        loaded = steps[(steps["loaded_cache"].fillna("") != "").to_numpy(dtype=bool) & steps["picks"].notna().to_numpy()]
        for (cache, state), g in loaded.groupby(["loaded_cache", "state"], sort=True):
            tactics = [pick.rpartition(":")[2] for picks in g["picks"].astype(str) for pick in picks.split()]
            if tactics and all(t == "-1" for t in tactics):
                rows.append({"cache": cache, "why": "defaults only", "detail": str(state),
                             "where": str(g["source"].iloc[0]) if "source" in g else "", "times": len(g)})
    return conform_columns(pd.DataFrame(rows), IDLE_CACHE_COLUMNS) if rows else empty(IDLE_CACHE_COLUMNS)
