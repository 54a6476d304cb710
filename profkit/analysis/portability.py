"""What a tuning carried to another GPU is worth there: the source GPU's picks timed on the target, against the
target's own picks and its default, in FlashInfer's accuracy-harness words (regret, top-1 agreement).

Pure: verify rows in (``capture_gpu``: where the capture was tuned; ``timed_gpu``: where the row was timed;
:func:`profkit.catalog.partition.verify_gpus` adds both), frames out.

Each pick is priced against the default timed in the same verify process, so the drift between the two
processes (the carried picks' and the target's own) cancels: regret is ``(carried / default) / (own / default')
- 1``, judged by the one rule with the calibrated spread of one process's log ratio on each side
(``VERIFY_RATIO_SD`` times sqrt 2). Where both GPUs picked the same (runner, tactic), the regret is zero by
construction and the verdict says ``same_pick``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from profkit.analysis._frames import conform_columns, empty
from profkit.analysis.verdict import VERIFY_RATIO_SD, compare_values

CARRIED_COLUMNS = {
    "op": "string", "shape": "string", "routing": "string", "m": "Int64", "bucket": "Int64", "source_gpu": "string",
    "target_gpu": "string", "carried_runner": "string", "carried_tactic": "string", "own_runner": "string",
    "own_tactic": "string", "top1_agrees": "boolean", "carried_ms": "float64", "own_ms": "float64",
    "default_ms": "float64", "regret": "float64", "regret_lo": "float64", "regret_hi": "float64",
    "regret_verdict": "string", "vs_default": "float64", "vs_default_verdict": "string",
}
PORTABILITY_COLUMNS = {
    "op": "string", "source_gpu": "string", "target_gpu": "string", "points": "Int64", "top1_agreement": "float64",
    "slower_than_own": "Int64", "faster_than_own": "Int64", "worst_regret": "float64", "worst_regret_at": "string",
    "slower_than_default": "Int64", "faster_than_default": "Int64",
}
PORT_PRICE_COLUMNS = {
    "model": "string", "dtype": "string", "source_gpu": "string", "target_gpu": "string", "top_k": "Int64",
    "port_s": "float64",
    "fresh_tune_s": "float64", "port_over_fresh_tune": "float64", "port_warm_s": "float64", "tune_warm_s": "float64",
    "port_over_tune_without_compiles": "float64", "tune_s": "float64", "port_over_tune": "float64",
    "fresh_tune_from": "string", "folder": "string", "jit_builds": "string", "jit_build_s": "float64",
    "fresh_tune_jit_build_s": "float64", "port_without_jit_s": "float64", "fresh_tune_without_jit_s": "float64",
    "port_over_fresh_tune_without_jit": "float64",
}
_KEY = ["op", "shape", "routing", "m"]


def carried_picks(verify: pd.DataFrame, *, ratio_sd: float = VERIFY_RATIO_SD) -> pd.DataFrame:
    """Per (op, shape, routing, M, source GPU, target GPU): the source's pick timed on the target against the
    target's own pick and default (:data:`CARRIED_COLUMNS`; ``regret`` and ``vs_default`` as relative changes:
    positive is slower). Empty without a capture timed on another GPU beside one tuned there."""
    needed = {"capture_gpu", "timed_gpu", "winner", "default", "serving_ms", *_KEY[:2], "m", "runner", "tactic"}
    if verify is None or not len(verify) or not needed <= set(verify.columns):
        return empty(CARRIED_COLUMNS)
    v = verify.assign(routing=verify["routing"].astype("string").fillna("") if "routing" in verify.columns else "",
                      process=_process(verify))
    v = v[v["serving_ms"].notna().to_numpy(dtype=bool)]
    cross = (v["capture_gpu"] != v["timed_gpu"]).fillna(False).to_numpy(dtype=bool)
    picked, default = v["winner"].fillna(False).to_numpy(dtype=bool), v["default"].fillna(False).to_numpy(dtype=bool)
    gpus = {"capture_gpu": "source_gpu", "timed_gpu": "target_gpu"}
    carried = _side(v[cross & picked], "carried").rename(columns=gpus)
    carried_default = _side(v[cross & default], "carried_default").rename(columns=gpus)
    own = _side(v[~cross & picked], "own").rename(columns={"timed_gpu": "target_gpu"}).drop(columns="capture_gpu")
    own_default = _side(v[~cross & default], "default").rename(columns={"timed_gpu": "target_gpu"}).drop(
        columns="capture_gpu")
    # A pick is priced against the default timed in its own process; a point timed by several processes
    # (a verify and a port, say) keeps the first.
    carried = carried.merge(carried_default[[*_KEY, "source_gpu", "target_gpu", "process", "carried_default_ms"]],
                            on=[*_KEY, "source_gpu", "target_gpu", "process"])
    own = own.merge(own_default[[*_KEY, "target_gpu", "process", "default_ms"]], on=[*_KEY, "target_gpu", "process"])
    out = (carried.drop_duplicates([*_KEY, "source_gpu", "target_gpu"]).drop(columns="process")
           .merge(own.drop_duplicates([*_KEY, "target_gpu"]).drop(columns="process"), on=[*_KEY, "target_gpu"]))
    if out.empty:
        return empty(CARRIED_COLUMNS)
    same = ((out["carried_runner"] == out["own_runner"]) & (out["carried_tactic"] == out["own_tactic"])).fillna(False)
    judged = compare_values(out["carried_ms"] / out["carried_default_ms"], out["own_ms"] / out["default_ms"],
                            ratio_sd=ratio_sd * math.sqrt(2))
    versus = compare_values(out["carried_ms"], out["carried_default_ms"], ratio_sd=ratio_sd)
    out = out.assign(top1_agrees=same.to_numpy(),
                     regret=np.where(same, 0.0, judged["effect"]), regret_lo=np.where(same, 0.0, judged["effect_lo"]),
                     regret_hi=np.where(same, 0.0, judged["effect_hi"]),
                     regret_verdict=np.where(same, "same_pick", judged["verdict"].astype(str)),
                     vs_default=versus["effect"].to_numpy(), vs_default_verdict=versus["verdict"].astype(str).to_numpy())
    out = out.sort_values([*_KEY, "source_gpu", "target_gpu"], kind="stable")
    return conform_columns(out[list(CARRIED_COLUMNS)].reset_index(drop=True), CARRIED_COLUMNS)


def portability(carried: pd.DataFrame) -> pd.DataFrame:
    """Per (op, source GPU, target GPU): how many points, top-1 agreement, at how many the carried pick is slower
    (faster) beyond noise than the target's own and than its default, and the worst regret with where."""
    if carried is None or carried.empty:
        return empty(PORTABILITY_COLUMNS)
    rows = []
    for (op, source, target), g in carried.groupby(["op", "source_gpu", "target_gpu"], sort=True):
        slower = g[(g["regret_verdict"] == "slower").to_numpy(dtype=bool)]
        worst = slower.loc[slower["regret"].idxmax()] if len(slower) else None
        rows.append({"op": op, "source_gpu": source, "target_gpu": target, "points": len(g),
                     "top1_agreement": float(g["top1_agrees"].astype(bool).mean()),
                     "slower_than_own": len(slower), "faster_than_own": int((g["regret_verdict"] == "faster").sum()),
                     "worst_regret": np.nan if worst is None else float(worst["regret"]),
                     "worst_regret_at": "" if worst is None else _where(worst),
                     "slower_than_default": int((g["vs_default_verdict"] == "slower").sum()),
                     "faster_than_default": int((g["vs_default_verdict"] == "faster").sum())})
    return conform_columns(pd.DataFrame(rows), PORTABILITY_COLUMNS)


def port_price(prices: pd.DataFrame) -> pd.DataFrame:
    """What carrying a tuning to a GPU cost against tuning there, per port (:data:`PORT_PRICE_COLUMNS`).

    ``port_over_fresh_tune``: the port with its kernel compiles (its first run in the process) over the same
    model's tuning in a fresh process on that GPU (``fresh_tune_s``: an MoE's tuning call, a dense model's tuning
    pass in its step set; NaN when the catalogue holds none); a dense port (``dtype`` set) has no warm pair;
    ``port_over_tune_without_compiles``: both again in the same process, every kernel compiled;
    ``port_over_tune``: the port over the tuning that followed it in its process (some kernels compiled by the
    port already); ``jit_builds``, ``jit_build_s``: the JIT modules FlashInfer compiled inside the port and their
    seconds where known (a fresh machine's one-time cost, part of ``port_s``); ``port_without_jit_s``: the port less
    those seconds (NaN where they are not known); ``fresh_tune_without_jit_s``: the tuning less its own
    (``fresh_tune_jit_build_s``: a dense tuning pass first in a fresh process builds them; one after its step set's
    untuned pass does not, and counts none where not recorded); ``port_over_fresh_tune_without_jit``: the one over the
    other. ``prices``: the catalogue's ``port_prices``. Sorted by model, source and target GPU.
    """
    if prices is None or prices.empty:
        return empty(PORT_PRICE_COLUMNS)
    p = prices.rename(columns={"port_cold_s": "port_s"})
    p = p.assign(port_over_fresh_tune=p["port_s"] / p["fresh_tune_s"],
                 port_over_tune_without_compiles=p["port_warm_s"] / p["tune_warm_s"],
                 port_over_tune=p["port_s"] / p["tune_s"],
                 port_without_jit_s=p["port_s"] - p["jit_build_s"],
                 fresh_tune_without_jit_s=p["fresh_tune_s"] - p["fresh_tune_jit_build_s"].fillna(0))
    p = p.assign(port_over_fresh_tune_without_jit=p["port_without_jit_s"] / p["fresh_tune_without_jit_s"])
    p = p.sort_values([c for c in ("model", "dtype", "source_gpu", "target_gpu") if c in p.columns], kind="stable")
    return conform_columns(p, PORT_PRICE_COLUMNS)


def _side(rows: pd.DataFrame, name: str) -> pd.DataFrame:
    """One row per (key, GPUs): that side's runner, tactic and serving time (the first where a key repeats)."""
    keep = [*_KEY, "bucket", "capture_gpu", "timed_gpu", "process", "runner", "tactic", "serving_ms"]
    side = rows[[c for c in keep if c in rows.columns]].drop_duplicates([*_KEY, "capture_gpu", "timed_gpu", "process"])
    side = side.astype({"tactic": "string", "runner": "string"})
    side = side.rename(columns={"runner": f"{name}_runner", "tactic": f"{name}_tactic", "serving_ms": f"{name}_ms"})
    return side.drop(columns=[c for c in ("bucket",) if name != "carried" and c in side.columns])


def _process(verify: pd.DataFrame) -> pd.Series:
    """The verify process each row was timed in: its ``verify_run_id``, else its file, else one for all."""
    for column in ("verify_run_id", "source"):
        if column in verify.columns:
            return verify[column].astype("string").fillna("")
    return pd.Series("", index=verify.index, dtype="string")


def _where(row) -> str:
    routing = f" ({row['routing']} routing)" if row["routing"] else ""
    return f"{row['shape']} M={int(row['m'])}{routing}"
