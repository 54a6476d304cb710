"""The rank questions' small frames computed in memory from a catalogue's decisions and timings.

The pandas twins of :mod:`profkit.query.ranks` (which answers the same from parquet where it lies, for fleets
too large to hold): same columns, same rules, so :mod:`profkit.analysis.ranks` judges either. Inputs carry a
``gpu`` column; a run is a ``run_id`` (one process), a rank the ``rank`` column. Timings may hold their names
as categoricals (a catalogue's reductions: millions of rows); what is joined to them is first cut to the rows
it can match (:func:`matching`).
"""

from __future__ import annotations

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


def spread(timings: pd.DataFrame) -> pd.DataFrame:
    """Run-to-run spread per (gpu, op, profile) from each run's mean time per candidate
    (:func:`profkit.query.ranks.spread`; ``timings``: ``gpu``, ``run_id``, ``op``, ``profile``, ``runner``,
    ``tactic``, ``mean_ms``, FlashInfer's own finite times only)."""
    keys = ["gpu", "op", "profile"]
    cand = timings.groupby([*keys, "runner", "tactic"], sort=False)["mean_ms"].agg(["size", "mean", "var"])
    cand = cand[(cand["size"] >= 2).to_numpy(dtype=bool)]
    cv2 = (cand["var"] / cand["mean"] ** 2).groupby(level=keys, sort=False).agg(["size", "mean"])
    out = timings.groupby(keys, sort=True)["run_id"].nunique().rename("n_runs").to_frame().join(cv2)
    out = out.reset_index().assign(n_pairs=out["size"].fillna(0).astype("int64").to_numpy(),
                                   rel_sd=np.sqrt(out["mean"].to_numpy(dtype=float)))
    out = out[["gpu", "op", "profile", "n_runs", "n_pairs", "rel_sd"]]
    return out.astype({"gpu": "string", "op": "string", "profile": "string"})


def matching(frame: pd.DataFrame, keys: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` whose values in ``keys``' columns are one of ``keys``' rows (NA matches NA), in order.

    Categorical columns (a catalogue's timings: millions of rows) are matched by their codes, never as text.
    """
    on = list(keys.columns)
    mine, wanted = [], []
    for c in on:
        if isinstance(frame[c].dtype, pd.CategoricalDtype):
            categories = frame[c].cat.categories
            mine.append(frame[c].cat.codes.to_numpy().astype(np.int64))
            codes = pd.Categorical(keys[c].astype(object), categories=categories).codes.astype(np.int64)
            wanted.append(np.where((codes < 0) & keys[c].notna().to_numpy(dtype=bool), -2, codes))  # not among them
        else:
            codes = pd.factorize(pd.concat([frame[c], keys[c]], ignore_index=True).astype(object))[0]
            mine.append(codes[:len(frame)])
            wanted.append(codes[len(frame):])
    hit = pd.MultiIndex.from_arrays(wanted).get_indexer(pd.MultiIndex.from_arrays(mine)) >= 0 if len(keys) \
        else np.zeros(len(frame), dtype=bool)
    return frame[hit]


def as_text(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``frame`` with its categorical ``columns`` as text (to be joined to text)."""
    cats = [c for c in columns if isinstance(frame[c].dtype, pd.CategoricalDtype)]
    return frame.assign(**{c: frame[c].astype(object).astype("string") for c in cats}) if cats else frame


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
    on = ["gpu", "op", "profile", "runner", "tactic"]
    t = as_text(matching(times[(times["min_ms"] > 0).to_numpy(dtype=bool)], picks[on].drop_duplicates()), on)
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

    A rank's signature is the set of its (op, profile, picks) as one hash; each group is compared with its
    scope's largest group (most ranks; the lowest rank on ties) through one rank of each. Returns the ``by``
    columns and ``signature``, ``ranks``, ``n_ranks``, ``keys``, ``largest``, ``differs``, ``examples``
    ("op bucket"; the bucket alone where ``by`` holds the op).
    """
    by = list(by)
    columns = [*by, "signature", "ranks", "n_ranks", "keys", "largest", "differs", "examples"]
    d = decisions[decisions["rank"].notna().to_numpy(dtype=bool)]
    if d.empty:
        return pd.DataFrame(columns=columns)
    d = d.assign(rank=d["rank"].astype("int64"), key=_hashes(d["op"], d["profile"]),
                 pick=_hashes(d["runner"], d["tactic"]))
    scope = [*by, "rank"]
    kp = d.drop_duplicates([*scope, "key", "pick"]).sort_values([*scope, "key"], kind="stable")
    # A rank's picks at a key: the xor of its distinct picks' hashes (a set hash); its signature: of its keys'.
    named = {"bucket": ("bucket", "min")} | ({} if "op" in by else {"op": ("op", "first")})
    rk = kp.groupby([*scope, "key"], dropna=False, sort=False).agg(**named)
    rk["picks"] = _xor_by(kp["pick"].to_numpy(), [*scope, "key"], kp)
    rk = rk.reset_index()
    rk["entry"] = _hashes(rk["key"], rk["picks"])
    sig = rk.groupby(scope, dropna=False, sort=False).agg(keys=("key", "size")).reset_index()
    sig["signature"] = _xor_by(rk["entry"].to_numpy(), scope, rk)
    groups = (sig.sort_values("rank", kind="stable").groupby([*by, "signature"], dropna=False, sort=False)
              .agg(ranks=("rank", list), n_ranks=("rank", "size"), rep=("rank", "min"), keys=("keys", "first"))
              .reset_index())
    lead = groups.sort_values([*by, "n_ranks", "rep"], ascending=[True] * len(by) + [False, True], kind="stable")
    lead = lead.drop_duplicates(by)[[*by, "rep", "keys"]].rename(columns={"rep": "lrep", "keys": "lkeys"})
    groups = groups.merge(lead, on=by, how="left")
    mine = groups[[*by, "signature", "rep"]].merge(rk.rename(columns={"rank": "rep"}), on=[*by, "rep"])
    theirs = lead[[*by, "lrep"]].merge(rk.rename(columns={"rank": "lrep"}), on=[*by, "lrep"])[[*by, "key", "picks"]]
    both = mine.merge(theirs, on=[*by, "key"], suffixes=("", "_l")).sort_values(["op", "bucket"], kind="stable")
    changed = both[(both["picks"] != both["picks_l"]).to_numpy(dtype=bool)]
    named = changed["bucket"].map(_int) if "op" in by else changed["op"].astype(str) + " " + changed["bucket"].map(_int)
    at = [*by, "signature"]
    changed_at = changed.assign(_n=named).groupby(at, dropna=False)["_n"]
    cmp = pd.concat([both.groupby(at, dropna=False).size().rename("common"), changed_at.size().rename("changed"),
                     changed_at.agg(lambda x: "; ".join(x[:examples])).rename("examples")], axis=1)
    out = groups.merge(cmp.reset_index(), on=at, how="left")
    common, n_changed = out["common"].fillna(0).astype(int), out["changed"].fillna(0).astype(int)
    out = out.assign(largest=out["rep"] == out["lrep"], differs=out["keys"] + out["lkeys"] - 2 * common + n_changed,
                     examples=[e if isinstance(e, str) else "" for e in out["examples"]])
    return out.sort_values([*by, "n_ranks", "rep"], ascending=[True] * len(by) + [False, True],
                           kind="stable")[columns].reset_index(drop=True)


def _hashes(a: pd.Series, b: pd.Series) -> np.ndarray:
    """One 64-bit hash per row of the pair (a, b)."""
    return pd.util.hash_pandas_object(pd.DataFrame({"a": a.to_numpy(), "b": b.to_numpy()}), index=False).to_numpy()


def _xor_by(values: np.ndarray, keys: list[str], frame: pd.DataFrame) -> np.ndarray:
    """The xor of ``values`` per run of equal ``keys`` in ``frame`` (sorted by them), one per run in order."""
    codes = pd.MultiIndex.from_frame(frame[keys]).factorize()[0] if len(keys) > 1 else pd.factorize(frame[keys[0]])[0]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    return np.bitwise_xor.reduceat(values.astype(np.uint64), starts)


def _int(value) -> str:
    return "?" if pd.isna(value) else str(int(value))
