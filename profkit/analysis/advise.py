"""A tuning plan: which ops, buckets and tactics FlashInfer's autotuner can leave out, and at what price.

The plan is written in FlashInfer's own switches (flashinfer-python 0.7.2.post1):

- ``autotune(True, skip_ops=...)``: ``choose_one`` returns ``(runners[0], -1)`` for the op before
  anything is profiled (autotuner.py:2205), so a skipped op saves its whole tuning time and runs
  the default at every size.
- ``autotune(True, tuning_buckets=...)``: one tuple for every op in the context; it replaces
  both the generated buckets and the mapping, but only inside the context (autotuner.py:2089-2141).
  At serving time the op's own mapping applies again (GEMMs: round up to the next hybrid bucket,
  ``map_to_hybrid_bucket_uncapped``), so a size whose own bucket was not tuned is a cache miss and
  runs the default. A dropped bucket therefore costs exactly its tuned gain over the default.
- ``FLASHINFER_TACTICS_BLOCKLIST``: ``TacticsBlocklist.filter`` runs after the runner's
  ``get_valid_tactics`` (autotuner.py:2414-2417), so a blocked tactic saves its measuring time only;
  cuDNN runners build all their plans inside ``get_valid_tactics``, and that preparation
  (``prep_s``) is paid even when every tactic of the runner is blocked.

Gains are the tuner's own timings (pick against the default, beyond the noise band), or serving
timings from a verify verdict frame when one is given. Costs are the capture's tuning table.
Everything is per "pass": one call of every captured shape at every bucket, or, with a batch-size
mix, one call of every shape at the mix's sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd

from profkit.analysis._frames import conform, flashinfer_rows, require, shapes_of
from profkit.analysis.cost import tuning_breakdown
from profkit.analysis.decisions import noise as estimate_noise
from profkit.analysis.decisions import speedup_vs_default
from profkit.analysis.engine import assign_bucket
from profkit.errors import ProfkitError

BUCKET_COLUMNS = {
    "op": "string", "shape": "string", "bucket": "Int64", "n_runs": "Int64", "tuning_s": "float64",
    "measure_s": "float64", "prep_s": "float64", "jit_s": "float64", "blocked_s": "float64",
    "default_ms": "float64", "tuned_ms": "float64", "gain_ms": "float64", "noise_pct": "float64",
    "gain_source": "string", "beyond_noise": "boolean", "weight": "float64", "value_ms": "float64",
    "tuned": "boolean",
}
TACTIC_COLUMNS = {
    "op": "string", "runner": "string", "tactic": "string", "n_timed": "Int64", "n_failed": "Int64",
    "n_within_noise": "Int64", "n_won": "Int64", "measure_s": "float64", "blocked": "boolean",
    "reason": "string",
}
OP_COLUMNS = {
    "op": "string", "n_shapes": "Int64", "n_buckets": "Int64", "n_tuned_buckets": "Int64",
    "full_s": "float64", "planned_s": "float64", "saved_s": "float64", "ratio": "float64", "jit_s": "float64",
    "prep_kept_s": "float64", "pass_ms": "float64", "cost_ms": "float64", "cost_pct": "float64",
    "decision": "string", "verdict": "string",
}
# FlashInfer's _collect_metadata keys (autotuner.py:306-362) and the runs-table columns holding them.
METADATA_FROM_RUNS = {
    "flashinfer_version": ("flashinfer",), "cuda_version": ("cuda",), "cublas_version": ("cublas",),
    "cudnn_version": ("cudnn",), "cudnn_frontend_version": ("cudnn_frontend",),
    "cutlass_dsl_version": ("cutlass_dsl",), "gpu": ("flashinfer_metadata_gpu", "gpu"),
}


@dataclass(frozen=True)
class Plan:
    """What to tune, what it costs and what it risks.

    Attributes:
        ops: one row per op (OP_COLUMNS): full and planned tuning seconds, their ratio, the
            expected step cost of the plan (``cost_ms`` per pass, ``cost_pct`` of the fully
            tuned pass) and the decision: ``skip``, ``some buckets``, ``block only`` or ``full``.
        buckets: one row per (op, shape, bucket) (BUCKET_COLUMNS) with its cost, gain and
            whether the plan tunes it.
        tactics: one row per (op, runner, tactic) (TACTIC_COLUMNS): blocked or not, and why.
        skip_ops: ops for ``autotune(skip_ops=...)``.
        tuning_buckets: buckets for ``autotune(tuning_buckets=...)``; None keeps FlashInfer's own.
        blocklist: ``{"op::RunnerClass": [tactic, ...]}`` in the blocklist file's format.
        metadata: the capture's environment in FlashInfer's ``_metadata`` keys.
        budget: the constraint the plan was chosen under, as text.
        gain_source: "serving" (verify frame) or "tuner" (the tuner's own timings).
        notes: plain statements the writers print (what a switch cannot save, unpriced buckets).
    """

    ops: pd.DataFrame
    buckets: pd.DataFrame
    tactics: pd.DataFrame
    skip_ops: tuple[str, ...]
    tuning_buckets: tuple[int, ...] | None
    blocklist: dict[str, list]
    metadata: dict
    budget: str
    gain_source: str
    notes: tuple[str, ...] = field(default=())

    @property
    def tuned_ops(self) -> tuple[str, ...]:
        """Ops the plan still tunes."""
        return tuple(op for op in self.ops["op"] if op not in self.skip_ops)

    @property
    def full_s(self) -> float:
        return float(self.ops["full_s"].sum())

    @property
    def planned_s(self) -> float:
        return float(self.ops["planned_s"].sum())

    @property
    def cost_pct(self) -> float:
        total = float(self.ops["pass_ms"].sum())
        return 100.0 * float(self.ops["cost_ms"].sum()) / total if total > 0 else 0.0

    def __repr__(self) -> str:
        ratio = self.full_s / self.planned_s if self.planned_s > 0 else float("inf")
        return (f"Plan({len(self.ops)} op(s): tuning {self.full_s:.1f} s -> {self.planned_s:.1f} s "
                f"({ratio:.1f}x less), expected cost {self.cost_pct:+.2f}% per pass; {self.budget})")


def advise(tables, *, verify: pd.DataFrame | None = None, budget_s: float | None = None,
           max_slowdown_pct: float | None = None, mix: Mapping[int, float] | None = None,
           metadata: Mapping[str, str] | None = None, rel_threshold: float = 0.02) -> Plan:
    """Choose a tuning plan from captures (one or several runs or ranks) and optional serving verdicts.

    Without a budget the plan drops only what buys nothing beyond noise (expected cost <= 0).
    ``max_slowdown_pct`` then drops more, cheapest risk per saved second first, while the
    expected cost stays within that percent of the fully tuned pass; ``budget_s`` drops more until
    the planned tuning time fits, whatever it costs.

    Args:
        tables: a ``profkit.Tables`` (candidates, tuning and runs tables of the captures).
        verify: per-bucket serving verdicts (``profkit.analysis.verify.bucket_verdicts``): op,
            shape (or n and k), bucket, serving_speedup (pick over default), serving_noise
            (relative half-width of the noise band); optional default_ms (serving) and at_bucket.
        budget_s: at most this many seconds of tuning.
        max_slowdown_pct: at most this many percent slower (per pass) than full tuning.
        mix: batch-size mix {M: weight}; each M counts at FlashInfer's bucket for it (round up),
            M beyond the largest tuned bucket runs the default either way. None: every bucket once.
        metadata: the capture's FlashInfer ``_metadata`` (e.g. from its cache.json); None builds it
            from the runs table (unknown fields become "*", which FlashInfer's blocklist loader accepts).
        rel_threshold: noise band for profiles without repeats (0.02 = 2%).

    Raises:
        ProfkitError: both budgets given, a negative budget, or no tuned bucket to plan from.
    """
    if budget_s is not None and max_slowdown_pct is not None:
        raise ProfkitError("give either budget_s or max_slowdown_pct, not both")
    if (budget_s is not None and budget_s < 0) or (max_slowdown_pct is not None and max_slowdown_pct < 0):
        raise ProfkitError("budgets must not be negative")
    candidates, tuning = tables.candidates, tables.tuning
    require(candidates, ("run_id", "op", "profile", "bucket", "runner", "tactic", "time_ms", "host_s"), "candidates")
    require(tuning, ("run_id", "kind", "op", "wall_s", "measure_s", "jit_s", "prep_s"), "tuning")
    tactics = tactic_verdicts(candidates, rel_threshold=rel_threshold)
    blocked = tactics[tactics["blocked"].fillna(False).to_numpy(dtype=bool)]
    buckets = bucket_costs(candidates, tuning, blocked)
    if buckets.empty:
        raise ProfkitError("no tuned bucket in the captures: nothing to plan")
    buckets = _attach_gains(buckets, candidates, verify, rel_threshold)
    buckets = _attach_weights(buckets, mix)
    overhead = _call_overhead(tuning)
    selection = _select(buckets, overhead, budget_s, max_slowdown_pct)
    buckets = buckets.assign(tuned=[(op not in selection.skip and b in selection.buckets)
                                    for op, b in zip(buckets["op"], buckets["bucket"])])
    all_buckets = set(int(b) for b in buckets["bucket"])
    every_op_skipped = selection.skip >= set(buckets["op"])
    tuning_buckets = (None if selection.buckets >= all_buckets or every_op_skipped
                      else tuple(sorted(selection.buckets)))
    ops = _op_table(buckets, overhead, selection, gain_source=_source(verify))
    budget = (f"at most {budget_s:g} s of tuning" if budget_s is not None else
              f"at most {max_slowdown_pct:g}% slower than full tuning" if max_slowdown_pct is not None else
              "no step cost beyond noise")
    return Plan(ops=ops, buckets=conform(buckets, BUCKET_COLUMNS), tactics=tactics,
                skip_ops=tuple(sorted(selection.skip)), tuning_buckets=tuning_buckets,
                blocklist=_blocklist(blocked, selection.skip), budget=budget, gain_source=_source(verify),
                metadata=dict(metadata) if metadata else metadata_from_runs(tables.runs),
                notes=_notes(ops, buckets, blocked, selection))


FRONTIER_COLUMNS = {
    "max_slowdown_pct": "float64", "full_s": "float64", "planned_s": "float64", "ratio": "float64",
    "cost_pct": "float64", "skip_ops": "string", "tuning_buckets": "string", "n_blocked": "Int64",
}


def budget_frontier(tables, *, slowdowns=(0.0, 0.5, 1.0, 2.0, 5.0), **kwargs) -> pd.DataFrame:
    """What each "at most Y% slower" budget buys: one row per budget (FRONTIER_COLUMNS).

    ``kwargs`` go to :func:`advise` (verify, mix, metadata, rel_threshold).
    """
    rows = []
    for pct in slowdowns:
        p = advise(tables, max_slowdown_pct=pct, **kwargs)
        rows.append({"max_slowdown_pct": pct, "full_s": p.full_s, "planned_s": p.planned_s,
                     "ratio": p.full_s / p.planned_s if p.planned_s > 0 else np.inf, "cost_pct": p.cost_pct,
                     "skip_ops": ",".join(p.skip_ops),
                     "tuning_buckets": "default" if p.tuning_buckets is None else ",".join(map(str, p.tuning_buckets)),
                     "n_blocked": sum(len(v) for v in p.blocklist.values())})
    return conform(pd.DataFrame(rows), FRONTIER_COLUMNS)


def tactic_verdicts(candidates: pd.DataFrame, *, rel_threshold: float = 0.02) -> pd.DataFrame:
    """Per (op, runner, tactic): was it ever within noise of its decision's winner? Block it if not.

    A decision is one (run_id, rank, call, op, profile). A candidate is within noise when its time
    is at most the decision's best time times (1 + noise_pct / 100) (``noise``: repeats, else
    ``rel_threshold``). Failed, fallen-back and out-of-memory candidates have no time and are never
    within noise; they name the reason. The default (tactic -1) is never blocked.

    Returns:
        TACTIC_COLUMNS, sorted by op, runner, tactic; ``measure_s`` is the tactic's measuring seconds
        per pass (host time minus JIT, summed over shapes and buckets, mean over runs).
    """
    c = flashinfer_rows(candidates).copy()
    if c.empty:
        return conform(pd.DataFrame(), TACTIC_COLUMNS)
    band = estimate_noise(candidates, rel_threshold=rel_threshold)[["op", "profile", "noise_pct"]]
    c = c.merge(band.drop_duplicates(["op", "profile"]), on=["op", "profile"], how="left")
    c["noise_pct"] = c["noise_pct"].fillna(100.0 * rel_threshold)
    decision = [k for k in ("run_id", "rank", "call", "op", "profile") if k in c.columns]
    keyed = c[decision].astype("string").fillna("<NA>")
    time = pd.to_numeric(c["time_ms"], errors="coerce").to_numpy(dtype=float)
    best = pd.Series(np.where(np.isfinite(time), time, np.inf)).groupby(
        [keyed[k].to_numpy() for k in decision]).transform("min").to_numpy()
    c["within"] = np.isfinite(time) & (time <= best * (1.0 + c["noise_pct"].to_numpy(dtype=float) / 100.0))
    c["won"] = np.isfinite(time) & (time == best)
    c["failed"] = ~np.isfinite(time)
    status = c["status"].astype("string").fillna("ok") if "status" in c else pd.Series("ok", index=c.index)
    c["status_"] = np.where(c["failed"], status.replace({"ok": "failed"}), status)
    jit = pd.to_numeric(c["jit_s"], errors="coerce").fillna(0.0) if "jit_s" in c else 0.0
    c["measure_s"] = pd.to_numeric(c["host_s"], errors="coerce").fillna(0.0) - jit
    c["shape"] = shapes_of(c).to_numpy()
    n_runs = c.groupby(["op", "shape"], observed=True, dropna=False)["run_id"].transform("nunique").clip(lower=1)
    c["measure_s"] = c["measure_s"] / n_runs  # per pass: runs of one shape are repeats or ranks
    g = c.groupby(["op", "runner", "tactic"], observed=True, sort=True, dropna=False)
    out = g.agg(n_timed=("time_ms", "size"), n_failed=("failed", "sum"), n_within_noise=("within", "sum"),
                n_won=("won", "sum"), measure_s=("measure_s", "sum"),
                statuses=("status_", lambda s: sorted(set(s) - {"ok"}))).reset_index()
    out["blocked"] = (out["n_within_noise"] == 0) & (out["tactic"].astype("string") != "-1")
    out["reason"] = [_reason(b, s) for b, s in zip(out["blocked"], out["statuses"])]
    return conform(out, TACTIC_COLUMNS)


def _reason(blocked: bool, statuses: list) -> str:
    if not blocked:
        return "within noise of the winner at least once"
    words = {"failed": "failed", "fallback": "fell back to tactic -1", "oom": "ran out of memory"}
    named = [words.get(s, s) for s in statuses]
    return ("; ".join(named) + "; never within noise of the winner") if named else "never within noise of the winner"


def bucket_costs(candidates: pd.DataFrame, tuning: pd.DataFrame, blocked: pd.DataFrame) -> pd.DataFrame:
    """Tuning seconds per (op, shape, bucket), mean over the runs that tuned it.

    ``blocked_s`` is the measuring time of the ``blocked`` tactics' candidates in that bucket:
    what the blocklist saves there (their preparation stays, see the module docstring).
    """
    per_run = tuning_breakdown(tuning, by="bucket")
    per_run = per_run[per_run["status"].astype("string").fillna("ok") == "ok"]
    if per_run.empty:
        return conform(pd.DataFrame(), BUCKET_COLUMNS)
    keys = ["op", "shape", "bucket"]
    g = per_run.groupby(keys, observed=True, sort=True)
    out = g.agg(n_runs=("run_id", "nunique"), tuning_s=("wall_s", "sum"), measure_s=("measure_s", "sum"),
                prep_s=("prep_s", "sum"), jit_s=("jit_s", "sum")).reset_index()
    for col in ("tuning_s", "measure_s", "prep_s", "jit_s"):
        out[col] = out[col] / out["n_runs"]
    out["blocked_s"] = _blocked_seconds(candidates, blocked, out)
    return out


def _blocked_seconds(candidates: pd.DataFrame, blocked: pd.DataFrame, buckets: pd.DataFrame) -> np.ndarray:
    c = flashinfer_rows(candidates)
    if c.empty or blocked.empty:
        return np.zeros(len(buckets))
    c = c.assign(shape=shapes_of(c).to_numpy())
    hit = c.merge(blocked[["op", "runner", "tactic"]], on=["op", "runner", "tactic"], how="inner")
    jit = pd.to_numeric(hit["jit_s"], errors="coerce").fillna(0.0) if "jit_s" in hit else 0.0
    hit = hit.assign(measure_s=pd.to_numeric(hit["host_s"], errors="coerce").fillna(0.0) - jit)
    per_run = hit.groupby(["op", "shape", "bucket"], observed=True)["measure_s"].sum()
    joined = buckets.set_index(["op", "shape", "bucket"]).join(per_run.rename("s"), how="left")
    return (joined["s"].fillna(0.0) / joined["n_runs"]).to_numpy(dtype=float)


def _call_overhead(tuning: pd.DataFrame) -> dict[str, float]:
    """Per op: tuning-call seconds outside its profiled buckets (final lookup, bookkeeping), per pass."""
    calls = tuning_breakdown(tuning, by="call")
    profiles = tuning_breakdown(tuning, by="bucket")
    if calls.empty:
        return {}
    inside = profiles.groupby(["run_id", "call"], observed=True)["wall_s"].sum()
    calls = calls.set_index(["run_id", "call"]).join(inside.rename("inside"), how="left").reset_index()
    calls["rest"] = (calls["wall_s"] - calls["inside"].fillna(0.0)).clip(lower=0.0)
    per_shape = calls.groupby(["op", "shape", "run_id"], observed=True, dropna=False)["rest"].sum()
    per_shape = per_shape.groupby(level=["op", "shape"], observed=True, dropna=False).mean()
    return {str(op): float(v) for op, v in per_shape.groupby(level="op", observed=True).sum().items()}


def _source(verify) -> str:
    return "serving" if verify is not None and len(verify) else "tuner"


def _attach_gains(buckets: pd.DataFrame, candidates: pd.DataFrame, verify, rel_threshold: float) -> pd.DataFrame:
    """Per bucket: default and tuned times, the gain, its noise band and whether it is beyond it."""
    band = estimate_noise(candidates, rel_threshold=rel_threshold)
    s = speedup_vs_default(candidates, noise=band, rel_threshold=rel_threshold)
    keys = ["op", "shape", "bucket"]
    tuner = s.groupby(keys, observed=True).agg(default_ms=("default_ms", "mean"), tuned_ms=("time_ms", "mean"),
                                                noise_pct=("noise_pct", "mean")).reset_index()
    out = buckets.merge(tuner, on=keys, how="left")
    out["gain_source"] = "tuner"
    if verify is not None and len(verify):
        out = _serving_gains(out, verify)
    out["gain_ms"] = out["default_ms"] - out["tuned_ms"]
    with np.errstate(invalid="ignore", divide="ignore"):
        gap_pct = 100.0 * out["gain_ms"] / out["tuned_ms"]
    out["beyond_noise"] = (gap_pct.abs() > out["noise_pct"]).fillna(False)
    return out


def _serving_gains(out: pd.DataFrame, verify: pd.DataFrame) -> pd.DataFrame:
    require(verify, ("op", "bucket", "serving_speedup", "serving_noise"), "verify verdicts")
    v = verify.copy()
    if "shape" not in v.columns:
        require(v, ("n", "k"), "verify verdicts")
        v["shape"] = [f"N={int(n)} K={int(k)}" for n, k in zip(v["n"], v["k"])]
    if "at_bucket" in v.columns:
        v = v[v["at_bucket"].fillna(False).to_numpy(dtype=bool)]
    agg = {"serving_speedup": ("serving_speedup", "mean"), "serving_noise": ("serving_noise", "mean")}
    if "default_ms" in v.columns:
        agg["serving_default_ms"] = ("default_ms", "mean")
    v = v.groupby(["op", "shape", "bucket"], observed=True).agg(**agg).reset_index()
    v["bucket"] = v["bucket"].astype("Int64")
    out = out.merge(v, on=["op", "shape", "bucket"], how="left")
    has = out["serving_speedup"].notna()
    default = out["serving_default_ms"] if "serving_default_ms" in out else out["default_ms"]
    default = default.fillna(out["default_ms"])
    out.loc[has, "default_ms"] = default[has]
    out.loc[has, "tuned_ms"] = default[has] / out.loc[has, "serving_speedup"]
    out.loc[has, "noise_pct"] = 100.0 * out.loc[has, "serving_noise"]
    out.loc[has, "gain_source"] = "serving"
    return out.drop(columns=[c for c in ("serving_speedup", "serving_noise", "serving_default_ms") if c in out])


def _attach_weights(buckets: pd.DataFrame, mix) -> pd.DataFrame:
    """How often a pass calls each bucket, and the step time it risks if left untuned (value_ms)."""
    out = buckets.copy()
    if mix is None:
        out["weight"] = 1.0
    else:
        sizes = {int(m): float(w) for m, w in dict(mix).items()}
        total = sum(w for w in sizes.values() if w > 0)
        if not sizes or total <= 0 or any(m <= 0 for m in sizes):
            raise ProfkitError("the batch-size mix needs positive sizes and a positive total weight")
        out["weight"] = 0.0
        for (op, shape), rows in out.groupby(["op", "shape"], observed=True, sort=False):
            edges = rows["bucket"].to_numpy(dtype=np.int64)
            for m, w in sizes.items():
                if m > edges.max():
                    continue  # beyond the tuned range the default runs, tuned or not
                b = int(assign_bucket(m, edges, round_up=True)[0])
                out.loc[rows.index[edges == b], "weight"] += w / total
    gain = out["gain_ms"].where(out["beyond_noise"], 0.0).fillna(0.0)
    out["value_ms"] = out["weight"] * gain
    return out


@dataclass
class _Selection:
    buckets: set
    skip: set


def _planned_s(buckets: pd.DataFrame, overhead: dict, sel: _Selection) -> dict[str, float]:
    out = {}
    for op, rows in buckets.groupby("op", observed=True, sort=False):
        if op in sel.skip:
            out[op] = 0.0
            continue
        kept = rows["bucket"].isin(sel.buckets).to_numpy()
        if not kept.any():
            out[op] = 0.0
            continue
        per_bucket = rows["tuning_s"] - rows["jit_s"] - rows["blocked_s"]
        out[op] = float(per_bucket[kept].sum() + rows["jit_s"].sum() + overhead.get(op, 0.0))
    return out


def _cost_ms(buckets: pd.DataFrame, sel: _Selection) -> float:
    dropped = buckets["op"].isin(sel.skip) | ~buckets["bucket"].isin(sel.buckets)
    return float(buckets.loc[dropped.to_numpy(dtype=bool), "value_ms"].sum())


def _select(buckets: pd.DataFrame, overhead: dict, budget_s, max_slowdown_pct) -> _Selection:
    """Greedy: drop the bucket (for every op) or skip the op with the least risk per saved second."""
    sel = _Selection(buckets=set(int(b) for b in buckets["bucket"]), skip=set())
    pass_ms = float((buckets["weight"] * buckets["tuned_ms"].fillna(0.0)).sum())
    allowed = (max_slowdown_pct or 0.0) / 100.0 * pass_ms

    def moves():
        for b in sorted(sel.buckets) if len(sel.buckets) > 1 else ():  # the last one goes by skipping ops
            yield _Selection(sel.buckets - {b}, set(sel.skip))
        for op in sorted(set(buckets["op"]) - sel.skip):
            yield _Selection(set(sel.buckets), sel.skip | {op})

    def best_move(limit):
        now_s, now_cost = sum(_planned_s(buckets, overhead, sel).values()), _cost_ms(buckets, sel)
        best, best_key = None, None
        for m in moves():
            saved = now_s - sum(_planned_s(buckets, overhead, m).values())
            extra = _cost_ms(buckets, m) - now_cost
            if saved <= 1e-12 or (limit is not None and _cost_ms(buckets, m) > limit + 1e-12):
                continue
            key = (extra / saved, -saved)
            if best_key is None or key < best_key:
                best, best_key = m, key
        return best

    while (m := best_move(allowed)) is not None:
        sel = m
    if budget_s is not None:
        while sum(_planned_s(buckets, overhead, sel).values()) > budget_s + 1e-9:
            m = best_move(None)
            if m is None:
                break
            sel = m
    return sel


def _op_table(buckets: pd.DataFrame, overhead: dict, sel: _Selection, *, gain_source: str) -> pd.DataFrame:
    planned = _planned_s(buckets, overhead, sel)
    rows = []
    for op, r in buckets.groupby("op", observed=True, sort=True):
        full = float(r["tuning_s"].sum() + overhead.get(op, 0.0))
        tuned = r["tuned"].to_numpy(dtype=bool)
        pass_ms = float((r["weight"] * r["tuned_ms"].fillna(0.0)).sum())
        cost = float(r.loc[~tuned, "value_ms"].sum())
        gained = float(r["value_ms"].sum())
        decision = ("skip" if op in sel.skip else "some buckets" if not tuned.all()
                    else "block only" if (r["blocked_s"] > 0).any() else "full")
        rows.append({
            "op": op, "n_shapes": r["shape"].nunique(), "n_buckets": r["bucket"].nunique(),
            "n_tuned_buckets": r.loc[tuned, "bucket"].nunique(), "full_s": full, "planned_s": planned[op],
            "saved_s": full - planned[op], "ratio": full / planned[op] if planned[op] > 0 else np.inf,
            "jit_s": float(r["jit_s"].sum()),
            "prep_kept_s": float(r.loc[tuned, "prep_s"].sum()),
            "pass_ms": pass_ms, "cost_ms": cost, "cost_pct": 100.0 * cost / pass_ms if pass_ms > 0 else 0.0,
            "decision": decision, "verdict": _verdict(op, decision, full, gained, pass_ms, gain_source),
        })
    return conform(pd.DataFrame(rows), OP_COLUMNS)


def _verdict(op: str, decision: str, full_s: float, gained_ms: float, pass_ms: float, source: str) -> str:
    pct = 100.0 * gained_ms / pass_ms if pass_ms > 0 else 0.0
    bought = (f"full tuning ({full_s:.1f} s) buys {1000 * gained_ms:.1f} us per pass ({pct:+.2f}%) beyond noise, "
              f"by {source} timings")
    if decision == "skip" and gained_ms <= 0:
        return f"do not tune {op} on this GPU: {bought}"
    if decision == "skip":
        return f"{op} left untuned to fit the budget: {bought}"
    return f"{op}: {bought}"


def _blocklist(blocked: pd.DataFrame, skip: set) -> dict[str, list]:
    import json

    out: dict[str, list] = {}
    for (op, runner), rows in blocked.groupby(["op", "runner"], observed=True, sort=True):
        if op in skip:
            continue
        out[f"{op}::{runner}"] = [json.loads(t) for t in rows["tactic"]]
    return out


def _notes(ops: pd.DataFrame, buckets: pd.DataFrame, blocked: pd.DataFrame, sel: _Selection) -> tuple[str, ...]:
    notes = []
    for row in ops.itertuples(index=False):
        if row.decision != "skip" and row.prep_kept_s > 0 and not blocked.empty:
            notes.append(f"{row.op}: blocked tactics still cost their runner's preparation "
                         f"(get_valid_tactics, cuDNN plan builds): {row.prep_kept_s:.1f} s of prep_s stays in the "
                         "tuned buckets; only choosing the backend at the call site avoids it.")
    missing = buckets["default_ms"].isna()
    if missing.any():
        notes.append(f"{int(missing.sum())} bucket(s) have no timed default: their gain counts as 0.")
    return tuple(notes)


def metadata_from_runs(runs: pd.DataFrame) -> dict:
    """FlashInfer's ``_metadata`` keys for the capture's environment; "*" where the runs table does not say.

    All runs must agree on each known field; a blocklist for a mixed set would match none of them.

    Raises:
        ProfkitError: when the runs disagree on a field.
    """
    out = {}
    for key, columns in METADATA_FROM_RUNS.items():
        values = set()
        for col in columns:
            if col in runs.columns:
                values = {str(v) for v in runs[col].dropna() if str(v) not in ("", "None", "unknown")}
                if values:
                    break
        if len(values) > 1:
            raise ProfkitError(f"the captures ran in different environments ({key}: {', '.join(sorted(values))}): "
                               "advise each environment on its own")
        out[key] = values.pop() if values else "*"
    return out


def autotune_arguments(plan: Plan, blocklist_path: str | None = None) -> tuple[dict, dict]:
    """``flashinfer.autotune`` keyword arguments and the environment for a tuning run with ``plan``.

    Returns:
        ``(kwargs, env)``: ``kwargs`` for ``flashinfer.autotune(True, **kwargs)`` (``skip_ops`` when
        the plan skips ops, ``tuning_buckets`` when it drops buckets); ``env`` is
        ``{"FLASHINFER_TACTICS_BLOCKLIST": blocklist_path}`` when the plan blocks tactics and a path
        is given. FlashInfer reads that variable when it creates its AutoTuner (autotuner.py:1576),
        so set it before the process first uses FlashInfer's tuner.
    """
    kwargs: dict = {}
    if plan.skip_ops:
        kwargs["skip_ops"] = set(plan.skip_ops)
    if plan.tuning_buckets is not None:
        kwargs["tuning_buckets"] = tuple(plan.tuning_buckets)
    env = {"FLASHINFER_TACTICS_BLOCKLIST": str(blocklist_path)} if plan.blocklist and blocklist_path else {}
    return kwargs, env


VIOLATION_COLUMNS = {"op": "string", "shape": "string", "bucket": "Int64", "runner": "string", "tactic": "string",
                     "what": "string", "n": "Int64"}


def plan_violations(plan: Plan, tables) -> pd.DataFrame:
    """What a tuning run captured that ``plan`` should have left out; empty when FlashInfer followed it.

    Checks FlashInfer's own candidates: a blocked tactic timed ("blocked tactic timed"), a skipped
    op profiled ("skipped op profiled"), a bucket outside ``tuning_buckets`` profiled ("bucket not
    planned"). One row per (op, shape, bucket, runner, tactic, what) with the count.
    """
    import json

    c = flashinfer_rows(tables.candidates)
    if c.empty:
        return conform(pd.DataFrame(), VIOLATION_COLUMNS)
    c = c.assign(shape=shapes_of(c).to_numpy())
    blocked = {(key.split("::", 1)[0], key.split("::", 1)[1], json.dumps(t, separators=(", ", ": ")))
               for key, ts in plan.blocklist.items() for t in ts}
    what = pd.Series(pd.NA, index=c.index, dtype="string")
    triples = list(zip(c["op"], c["runner"], c["tactic"].astype("string")))
    what[[t in blocked for t in triples]] = "blocked tactic timed"
    if plan.tuning_buckets is not None:
        outside = ~c["bucket"].isin(plan.tuning_buckets) & ~c["op"].isin(plan.skip_ops)
        what[outside.to_numpy(dtype=bool)] = "bucket not planned"
    what[c["op"].isin(plan.skip_ops).to_numpy(dtype=bool)] = "skipped op profiled"
    bad = c.assign(what=what)[what.notna().to_numpy(dtype=bool)]
    out = bad.groupby(["op", "shape", "bucket", "runner", "tactic", "what"], observed=True).size()
    return conform(out.rename("n").reset_index(), VIOLATION_COLUMNS)
