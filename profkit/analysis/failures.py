"""Tunings that did nothing: buckets where every candidate but the default failed, or nothing won at all.

FlashInfer logs one INFO line per profile, "Skipped N unsupported tactic(s) for {op}", and keeps
the default (tactic -1) when nothing else ran: the op then looks tuned (it has a cache entry)
while it runs exactly what it ran untuned. :func:`tuning_failures` finds those buckets per op
from the candidates (each failed candidate's error is its named cause), or, where only a log's
INFO lines are known, from the skipped counts of the tuning table.
"""

from __future__ import annotations

import pandas as pd

from profkit.analysis._frames import conform_columns, empty, flashinfer_rows, require

FAILURE_COLUMNS = {
    "run_id": "string", "op": "string", "buckets": "Int64", "tuned": "Int64", "default_kept": "Int64",
    "no_winner": "Int64", "failed_candidates": "Int64", "cause": "string", "status": "string",
}


def tuning_failures(winners: pd.DataFrame, candidates: pd.DataFrame | None = None,
                    tuning: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (run_id, op): how many buckets tuning really changed, and why the others did not.

    A bucket is ``default_kept`` when its winner is tactic -1 and every other candidate FlashInfer
    tried there failed (or, without candidates, FlashInfer skipped some: ``n_skipped`` of the
    tuning table), ``no_winner`` when no candidate ran (the call returned the default, or an
    out-of-memory abort: winner source 'fallback'), else ``tuned``.

    Returns:
        :data:`FAILURE_COLUMNS`: cause is the error of the op's first failed candidate;
        status is ``not tuned`` when no bucket was tuned, ``partly tuned`` when some were not,
        else ``tuned``. Sorted by run_id, op.
    """
    require(winners, ("run_id", "op", "bucket", "tactic"), "winners")
    won = winners
    if "source" in won.columns:
        won = won[~won["source"].astype("string").isin(["cached", "cache_hit"]).fillna(False).to_numpy(dtype=bool)]
    if won.empty:
        return empty(FAILURE_COLUMNS)
    tried = _tried(candidates)
    skipped = _skipped(tuning)
    failures = _failures(candidates)
    rows = []
    for (run_id, op), g in won.groupby(["run_id", "op"], sort=True):
        kept = none = 0
        for w in g.itertuples(index=False):
            source = str(getattr(w, "source", "") or "")
            if source == "fallback" or pd.isna(w.tactic):
                none += 1
                continue
            if str(w.tactic) != "-1":
                continue
            ok_others, failed = tried.get((run_id, op, w.bucket), (None, 0))
            if (ok_others == 0 and failed) or (ok_others is None and skipped.get((run_id, op, w.bucket), 0) > 0):
                kept += 1
        failed, cause = failures.get((run_id, op), (0, None))
        tuned = len(g) - kept - none
        rows.append({"run_id": run_id, "op": op, "buckets": len(g), "tuned": tuned, "default_kept": kept,
                     "no_winner": none, "failed_candidates": failed,
                     "cause": None if cause is None else str(cause)[:300],
                     "status": "tuned" if tuned == len(g) else ("not tuned" if tuned == 0 else "partly tuned")})
    return conform_columns(pd.DataFrame(rows), FAILURE_COLUMNS)


def _tried(candidates: pd.DataFrame | None) -> dict:
    """{(run_id, op, bucket): (candidates other than -1 that ran ok, candidates that failed)}."""
    if candidates is None or candidates.empty:
        return {}
    c = flashinfer_rows(candidates)
    ok = (c["status"].astype("string") == "ok").fillna(False)
    other = (c["tactic"].astype("string") != "-1").fillna(True)
    frame = pd.DataFrame({"run_id": c["run_id"], "op": c["op"], "bucket": c["bucket"],
                          "ok_other": (ok & other).to_numpy(dtype=int), "failed": (~ok).to_numpy(dtype=int)})
    sums = frame.groupby(["run_id", "op", "bucket"], sort=False)[["ok_other", "failed"]].sum()
    return {key: (int(r.ok_other), int(r.failed)) for key, r in zip(sums.index, sums.itertuples(index=False))}


def _skipped(tuning: pd.DataFrame | None) -> dict:
    if tuning is None or tuning.empty or "n_skipped" not in tuning.columns:
        return {}
    t = tuning.dropna(subset=["n_skipped"])
    return {(r.run_id, r.op, r.bucket): int(r.n_skipped) for r in t.itertuples(index=False)}


def _failures(candidates: pd.DataFrame | None) -> dict:
    """{(run_id, op): (candidates that did not run ok, the first one's error)}, from one pass over the rows."""
    if candidates is None or candidates.empty:
        return {}
    c = flashinfer_rows(candidates)
    bad = c[(c["status"].astype("string") != "ok").fillna(False).to_numpy(dtype=bool)]
    counts = bad.groupby(["run_id", "op"], sort=False, observed=True).size()
    first = bad.drop_duplicates(["run_id", "op"])
    errors = dict(zip(zip(first["run_id"], first["op"]), first["error"]))
    return {key: (int(n), errors[key]) for key, n in counts.items()}
