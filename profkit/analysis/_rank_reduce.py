"""The rank questions' small frames computed in memory from a catalogue's decisions and timings.

The pandas twins of :mod:`profkit.query.ranks` (which answers the same from parquet where it lies, for fleets
too large to hold): same columns, same rules, so :mod:`profkit.analysis.ranks` judges either. Inputs carry a
``gpu`` column; a run is a ``run_id`` (one process), a rank the ``rank`` column.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

_PICK_KEY = ["gpu", "op", "profile", "bucket", "runner", "tactic"]
_BUCKET = ["gpu", "op", "profile", "bucket"]


def timings(candidates: pd.DataFrame) -> pd.DataFrame:
    """Per (gpu, run_id, op, profile, runner, tactic): the run's rank (its largest) and its fastest finite time."""
    from profkit.analysis._frames import flashinfer_rows

    c = flashinfer_rows(candidates)
    c = c[np.isfinite(c["time_ms"].to_numpy(dtype=float))]
    keys = ["gpu", "run_id", "op", "profile", "runner", "tactic"]
    return (c.groupby(keys, dropna=False, sort=True, observed=True)
            .agg(rank=("rank", "max"), min_ms=("time_ms", "min")).reset_index())


def pick_stats(decisions: pd.DataFrame, times: pd.DataFrame) -> pd.DataFrame:
    """Each distinct pick of each bucket against the bucket's best pick (:func:`profkit.query.ranks.pick_stats`).

    Args:
        decisions: one row per tuning decision (:func:`profkit.analysis.winners`) with ``gpu``.
        times: :func:`timings` of the same runs.
    """
    d = decisions.assign(_r=decisions["rank"].astype("Int64"), _c=decisions["call"].astype("Int64"))
    d = d.sort_values(["run_id", "_r", "_c"], na_position="last", kind="stable")
    d["seen"] = d.groupby(_BUCKET, dropna=False, sort=False).cumcount() + 1
    buckets = d.groupby(_BUCKET, dropna=False).agg(bucket_tunings=("seen", "size"), bucket_ranks=("_r", "nunique"))
    picks = (d.groupby(_PICK_KEY, dropna=False).agg(tunings=("seen", "size"), ranks=("_r", "nunique"),
                                                   first_seen=("seen", "min")).reset_index()
             .merge(buckets.reset_index(), on=_BUCKET, how="left"))
    t = times[(times["min_ms"] > 0).to_numpy(dtype=bool)]
    pt = picks[_PICK_KEY].merge(t[["gpu", "op", "profile", "runner", "tactic", "run_id", "min_ms"]],
                                on=["gpu", "op", "profile", "runner", "tactic"])
    pt["lt"] = np.log(pt["min_ms"].to_numpy(dtype=float))
    geo = pt.groupby(_PICK_KEY, dropna=False).agg(timed_runs=("lt", "size"), mean_lt=("lt", "mean")).reset_index()
    best = geo.loc[geo.groupby(_BUCKET, dropna=False)["mean_lt"].idxmin(), _PICK_KEY].assign(best=True)
    bt = pt.merge(best[_PICK_KEY], on=_PICK_KEY)[[*_BUCKET, "run_id", "lt"]].rename(columns={"lt": "best_lt"})
    paired = pt.merge(bt, on=[*_BUCKET, "run_id"])
    paired["x"] = paired["lt"] - paired["best_lt"]
    ps = paired.groupby(_PICK_KEY, dropna=False).agg(n_paired=("x", "size"), mean_log_ratio=("x", "mean"),
                                                      sd_log_ratio=("x", "std")).reset_index()
    out = picks.merge(geo, on=_PICK_KEY, how="left").merge(best, on=_PICK_KEY, how="left").merge(
        ps, on=_PICK_KEY, how="left")
    out = out.assign(timed_runs=out["timed_runs"].fillna(0).astype("int64"), geo_ms=np.exp(out["mean_lt"]),
                     best=out["best"].fillna(False).astype(bool), n_paired=out["n_paired"].fillna(0).astype("int64"))
    out = out.sort_values(["gpu", "op", "profile", "bucket", "tunings", "first_seen"],
                          ascending=[True, True, True, True, False, True], kind="stable")
    return out.drop(columns="mean_lt").reset_index(drop=True)


def rank_speed(times: pd.DataFrame) -> pd.DataFrame:
    """Each rank's timings against the ranks' median, per op and across ops (:func:`profkit.query.ranks.rank_speed`)."""
    t = times[(times["rank"].notna() & (times["min_ms"] > 0)).to_numpy(dtype=bool)]
    cand = ["gpu", "op", "profile", "runner", "tactic"]
    med = t.groupby(cand, dropna=False).agg(m=("min_ms", "median"), lo=("rank", "min"), hi=("rank", "max"))
    med = med[(med["lo"] < med["hi"]).to_numpy(dtype=bool)].reset_index()
    per = t.merge(med[[*cand, "m"]], on=cand)
    per["x"] = np.log(per["min_ms"].to_numpy(dtype=float) / per["m"].to_numpy(dtype=float))
    per = per.groupby(["gpu", "rank", "op", "profile"], dropna=False)["x"].mean().reset_index()
    by_op = per.groupby(["gpu", "rank", "op"], dropna=False)["x"].agg(["size", "mean", "std"]).reset_index()
    overall = per.groupby(["gpu", "rank"], dropna=False)["x"].agg(["size", "mean", "std"]).reset_index().assign(op=pd.NA)
    out = pd.concat([overall, by_op], ignore_index=True).rename(
        columns={"size": "n_buckets", "mean": "mean_log_ratio", "std": "sd_log_ratio"})
    out["op"] = out["op"].astype("string")
    return out.sort_values(["gpu", "rank", "op"], na_position="first", kind="stable").reset_index(drop=True)


def signatures(decisions: pd.DataFrame, *, by: tuple = ("gpu",), examples: int = 3) -> pd.DataFrame:
    """Ranks grouped by identical picks within each ``by`` scope (:func:`profkit.query.ranks.signatures`).

    A rank's signature is the set of its (op, profile, picks); each group is compared with its scope's largest
    group (most ranks; the lowest rank on ties) through one rank of each. Returns the ``by`` columns and
    ``signature``, ``ranks``, ``n_ranks``, ``keys``, ``largest``, ``differs``, ``examples`` ("op bucket"; the
    bucket alone where ``by`` holds the op).
    """
    by = list(by)
    d = decisions[decisions["rank"].notna().to_numpy(dtype=bool)]
    d = d.assign(rank=d["rank"].astype("int64"), pick=list(zip(d["runner"].astype(str), d["tactic"].astype(str))))
    keys = [*by, "rank", *(k for k in ("op", "profile") if k not in by)]
    rk = (d.groupby(keys, dropna=False)
          .agg(picks=("pick", lambda s: tuple(sorted(set(s)))), bucket=("bucket", "min")).reset_index())
    rows = []
    for scope, of_scope in rk.groupby(by, dropna=False, sort=True):
        per_rank = {r: g.set_index(["op", "profile"]) for r, g in of_scope.groupby("rank", sort=True)}
        sig = {r: _hash(sorted(zip(g.index, g["picks"]))) for r, g in per_rank.items()}
        groups: dict[int, list[int]] = {}
        for r, s in sig.items():
            groups.setdefault(s, []).append(r)
        lrep = min(groups.values(), key=lambda ranks: (-len(ranks), ranks[0]))[0]
        theirs = per_rank[lrep]
        for s, ranks in groups.items():
            mine = per_rank[ranks[0]]
            common = mine.join(theirs[["picks"]].rename(columns={"picks": "picks_l"}), how="inner")
            changed = common[[a != b for a, b in zip(common["picks"], common["picks_l"])]]
            changed = changed.reset_index().sort_values(["op", "bucket"], kind="stable")
            rows.append({**dict(zip(by, scope if isinstance(scope, tuple) else (scope,))), "signature": s,
                         "ranks": ranks, "n_ranks": len(ranks), "keys": len(mine), "largest": ranks[0] == lrep,
                         "differs": len(mine) + len(theirs) - 2 * len(common) + len(changed),
                         "examples": "; ".join(_int(b) if "op" in by else f"{op} {_int(b)}" for op, b in
                                               zip(changed["op"][:examples], changed["bucket"][:examples]))})
    columns = [*by, "signature", "ranks", "n_ranks", "keys", "largest", "differs", "examples"]
    return pd.DataFrame(rows, columns=columns)


def _hash(items) -> int:
    return int.from_bytes(hashlib.blake2b(repr(items).encode(), digest_size=8).digest(), "little")


def _int(value) -> str:
    return "?" if pd.isna(value) else str(int(value))
