"""Join kernel decisions to engine end-to-end results: which buckets a serving run hits, and how much.

The join is an estimate and says so: a decode step calls each linear layer once with M = the
number of running requests (about the benchmark's concurrency); a prefill step with M = the
prompt tokens batched together (batch x input length, capped by the engine's chunked-prefill
size). FlashInfer maps M to a bucket; the GEMM ops of 0.7.2 round up to the next bucket (M=333
ran the 512 bucket in the H200 op timings); beyond the largest tuned bucket the default runs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analysis._frames import conform_columns, empty, require
from profkit.errors import ProfkitError

BATCH_COLUMNS = {
    "label": "string", "engine": "string", "model": "string", "autotune": "boolean", "phase": "string",
    "m": "Int64", "tokens": "Int64", "calls": "float64",
}

WEIGHTED_COLUMNS = {
    "label": "string", "op": "string", "shape": "string", "phase": "string", "m": "Int64", "bucket": "Int64",
    "clamped": "boolean", "calls": "float64", "default_ms": "float64", "time_ms": "float64",
    "speedup": "float64", "weight": "float64", "saved_ms": "float64",
}

DELTA_COLUMNS = {
    "kind": "string", "metric": "string", "unit": "string", "higher_is_better": "boolean",
    "baseline": "float64", "treatment": "float64", "change_pct": "float64", "improvement_pct": "float64",
    "note": "string",
}

# (column, unit, higher is better), in the order reports list them.
E2E_METRICS = (
    ("output_tok_s", "tok/s", True), ("total_tok_s", "tok/s", True), ("request_throughput", "req/s", True),
    ("mean_ttft_ms", "ms", False), ("median_ttft_ms", "ms", False), ("p99_ttft_ms", "ms", False),
    ("mean_tpot_ms", "ms", False), ("mean_itl_ms", "ms", False), ("median_itl_ms", "ms", False),
    ("p95_itl_ms", "ms", False), ("p99_itl_ms", "ms", False), ("mean_e2e_ms", "ms", False),
    ("duration_s", "s", False),
)


def assign_bucket(m, buckets, *, round_up: bool = True) -> np.ndarray:
    """Map token counts ``m`` to tuned buckets the way FlashInfer looks them up.

    Args:
        m: token counts (scalar or array).
        buckets: the tuned bucket values (any order).
        round_up: ceil to the smallest bucket >= m (the GEMM ops of FlashInfer 0.7.2, and
            ``autotune(round_up=True)``); False floors to the largest bucket <= m (FlashInfer's
            generic default). Values beyond either end clamp to the end bucket.

    Returns:
        An int64 array of buckets, one per value of ``m``.
    """
    edges = np.unique(np.asarray(list(buckets), dtype=np.int64))
    if edges.size == 0:
        raise ProfkitError("no buckets to map to: the speedups frame has no rows for this op and shape")
    values = np.atleast_1d(np.asarray(m, dtype=np.int64))
    if round_up:
        idx = np.searchsorted(edges, values, side="left")
    else:
        idx = np.searchsorted(edges, values, side="right") - 1
    return edges[np.clip(idx, 0, edges.size - 1)]


def engine_batches(bench: pd.DataFrame, *, prefill_chunk: int | None = None) -> pd.DataFrame:
    """Estimate the GEMM M of each serving run's decode and prefill steps, and how often each runs.

    Args:
        bench: a bench frame (``profkit.read_bench``); rows without token counts (lm-eval) are
            skipped.
        prefill_chunk: the engine's chunked-prefill size in tokens (SGLang
            ``--chunked-prefill-size``, vLLM ``max_num_batched_tokens``); prefill M is capped
            by it. None leaves prefill M uncapped (it then clamps to the largest bucket).

    Returns:
        Two rows per serving run (phase "decode" then "prefill"), in bench order: ``label``,
        ``engine``, ``model``, ``autotune``, ``phase``, ``m`` (tokens per op call: decode =
        ``max_concurrency``, else the completed requests; prefill = batch x mean input length),
        ``tokens`` (the phase's tokens over the run) and ``calls`` (op calls per layer over the
        run = tokens / m).
    """
    require(bench, ("label", "max_concurrency", "successful_requests", "total_input_tokens",
                    "total_output_tokens"), "bench")
    rows = []
    for _, r in bench.iterrows():
        inputs, outputs, done = r["total_input_tokens"], r["total_output_tokens"], r["successful_requests"]
        if pd.isna(outputs) or pd.isna(done) or int(done) <= 0:
            continue
        batch = r["max_concurrency"]
        batch = int(batch) if not pd.isna(batch) else int(done)
        base = {"label": r.get("label"), "engine": r.get("engine"), "model": r.get("model"),
                "autotune": r.get("autotune")}
        rows.append({**base, "phase": "decode", "m": batch, "tokens": int(outputs), "calls": int(outputs) / batch})
        if not pd.isna(inputs) and int(inputs) > 0:
            prefill = max(1, int(round(batch * int(inputs) / int(done))))
            if prefill_chunk is not None:
                prefill = min(prefill, int(prefill_chunk))
            rows.append({**base, "phase": "prefill", "m": prefill, "tokens": int(inputs),
                         "calls": int(inputs) / prefill})
    if not rows:
        return empty(BATCH_COLUMNS)
    return conform_columns(pd.DataFrame(rows), BATCH_COLUMNS)


def weighted_speedup(speedups: pd.DataFrame, batches: pd.DataFrame, *, round_up: bool = True) -> pd.DataFrame:
    """Weight per-bucket kernel speedups by the buckets a serving run hits.

    Each phase's weight is the default kernel time it spends: ``calls x default_ms x m / bucket``
    (the bucket's time scaled to the real M, which matters when M is beyond the largest bucket).
    Beyond the largest tuned bucket FlashInfer's GEMMs map M to a bucket that was never tuned and
    run the default, so such a phase counts with speedup 1 (``clamped``).
    A "total" row per (label, op, shape) combines the phases:
    ``sum(weight) / sum(weight / speedup)``.

    Args:
        speedups: output of :func:`profkit.analysis.speedup_vs_default` (one run per op and
            shape; repeats are averaged per bucket).
        batches: output of :func:`engine_batches`.
        round_up: bucket mapping, see :func:`assign_bucket`.

    Returns:
        Sorted by label, op, shape, then phase (decode, prefill, total): ``label``, ``op``,
        ``shape``, ``phase``, ``m``, ``bucket``, ``clamped`` (M beyond the largest bucket),
        ``calls``, ``default_ms`` and ``time_ms`` (per call at the bucket), ``speedup``,
        ``weight`` (default milliseconds spent in the phase per layer) and ``saved_ms`` (kernel
        milliseconds saved per layer over the run).
    """
    require(speedups, ("op", "shape", "bucket", "default_ms", "time_ms"), "speedups")
    require(batches, ("label", "phase", "m", "calls"), "batches")
    if speedups.empty or batches.empty:
        return empty(WEIGHTED_COLUMNS)
    per_bucket = speedups.groupby(["op", "shape", "bucket"], observed=True)[["default_ms", "time_ms"]].mean()
    rows = []
    for (op, shape), table in per_bucket.groupby(level=["op", "shape"], observed=True):
        table = table.droplevel(["op", "shape"])
        edges = table.index.to_numpy(dtype=np.int64)
        for label, phases in batches.groupby("label", dropna=False, sort=False):
            parts = []
            for _, p in phases.iterrows():
                m = int(p["m"])
                bucket = int(assign_bucket(m, edges, round_up=round_up)[0])
                clamped = m > edges.max()
                d = table.loc[bucket, "default_ms"]
                t = d if clamped else table.loc[bucket, "time_ms"]  # untuned beyond the tuned range
                scale = m / bucket
                weight = float(p["calls"]) * d * scale
                parts.append({"label": label, "op": op, "shape": shape, "phase": p["phase"], "m": m,
                              "bucket": bucket, "clamped": clamped, "calls": float(p["calls"]),
                              "default_ms": d, "time_ms": t, "speedup": d / t, "weight": weight,
                              "saved_ms": float(p["calls"]) * scale * (d - t)})
            if parts:
                total_w = sum(x["weight"] for x in parts)
                tuned_w = sum(x["weight"] / x["speedup"] for x in parts)
                rows.extend(parts)
                rows.append({"label": label, "op": op, "shape": shape, "phase": "total", "m": pd.NA,
                             "bucket": pd.NA, "clamped": any(x["clamped"] for x in parts),
                             "calls": sum(x["calls"] for x in parts), "default_ms": np.nan, "time_ms": np.nan,
                             "speedup": total_w / tuned_w if tuned_w > 0 else np.nan, "weight": total_w,
                             "saved_ms": sum(x["saved_ms"] for x in parts)})
    if not rows:
        return empty(WEIGHTED_COLUMNS)
    out = conform_columns(pd.DataFrame(rows), WEIGHTED_COLUMNS)
    order = out["phase"].map({"decode": 0, "prefill": 1, "total": 2}).fillna(3)
    return (out.assign(_o=order.to_numpy()).sort_values(["label", "op", "shape", "_o"], kind="stable")
            .drop(columns="_o").reset_index(drop=True))


def _pick(bench: pd.DataFrame, label, autotune: bool, role: str) -> pd.Series:
    serving = bench[bench["total_output_tokens"].notna().to_numpy(dtype=bool)] if "total_output_tokens" in bench else bench
    if label is not None:
        rows = serving[(serving["label"].astype("string") == label).fillna(False).to_numpy(dtype=bool)]
        what = f"label {label!r}"
    elif "autotune" in serving.columns:
        rows = serving[(serving["autotune"].astype("boolean") == autotune).fillna(False).to_numpy(dtype=bool)]
        what = f"autotune={autotune}"
    else:
        rows = serving.iloc[:0]
        what = "an autotune column"
    if len(rows) != 1:
        labels = ", ".join(sorted({str(x) for x in serving.get("label", pd.Series(dtype=str)).dropna()})) or "none"
        raise ProfkitError(f"{role}: expected one serving row with {what}, found {len(rows)} "
                           f"(labels: {labels}); pass {role}=<label>")
    return rows.iloc[0]


def e2e_delta(bench: pd.DataFrame, *, baseline: str | None = None, treatment: str | None = None) -> pd.DataFrame:
    """Compare two serving runs metric by metric (autotune off vs on, main vs PR).

    Args:
        bench: a bench frame holding both runs.
        baseline: label of the reference run; default the row with ``autotune == False``.
        treatment: label of the run to compare; default the row with ``autotune == True``.

    Returns:
        One row per metric both runs report, in the order of ``E2E_METRICS``: ``kind`` ("e2e"),
        ``metric`` (bench column), ``unit``, ``higher_is_better``, ``baseline``, ``treatment``,
        ``change_pct`` (treatment / baseline - 1, percent) and ``improvement_pct`` (bigger is
        better: the change for throughputs, baseline / treatment - 1 for latencies), ``note``.

    Raises:
        ProfkitError: when a run cannot be picked unambiguously.
    """
    require(bench, ("label",), "bench")
    base = _pick(bench, baseline, False, "baseline")
    treat = _pick(bench, treatment, True, "treatment")
    rows = []
    for metric, unit, higher in E2E_METRICS:
        if metric not in bench.columns:
            continue
        b, t = base[metric], treat[metric]
        if pd.isna(b) or pd.isna(t) or float(b) == 0 or float(t) == 0:
            continue
        b, t = float(b), float(t)
        change = 100.0 * (t / b - 1.0)
        rows.append({"kind": "e2e", "metric": metric, "unit": unit, "higher_is_better": higher, "baseline": b,
                     "treatment": t, "change_pct": change,
                     "improvement_pct": change if higher else 100.0 * (b / t - 1.0),
                     "note": f"{base.get('label')} -> {treat.get('label')}"})
    return conform_columns(pd.DataFrame(rows), DELTA_COLUMNS) if rows else empty(DELTA_COLUMNS)


def kernel_vs_e2e(speedups: pd.DataFrame, bench: pd.DataFrame, *, baseline: str | None = None,
                  treatment: str | None = None, prefill_chunk: int | None = None,
                  round_up: bool = True) -> pd.DataFrame:
    """Put weighted kernel speedups beside the end-to-end deltas of a serving pair.

    The kernel rows weight each op's per-bucket speedup by the treatment run's decode and
    prefill M (:func:`weighted_speedup`); the e2e rows are :func:`e2e_delta`. Both express
    ``improvement_pct`` as bigger-is-better percent. When the kernels were captured on another
    GPU or model than the serving pair, the numbers sit side by side, not in a causal chain;
    ``note`` carries the bucket mapping so the reader can judge.

    Args:
        speedups: output of :func:`profkit.analysis.speedup_vs_default`.
        bench: a bench frame with the two serving runs.
        baseline: label of the reference run (default: ``autotune == False``).
        treatment: label of the tuned run (default: ``autotune == True``).
        prefill_chunk: chunked-prefill cap in tokens, see :func:`engine_batches`.
        round_up: bucket mapping, see :func:`assign_bucket`.

    Returns:
        Kernel rows first (one per op and shape, sorted by op, shape; ``kind`` "kernel",
        ``metric`` "<op> <shape>", ``unit`` "ms/layer", ``baseline`` / ``treatment`` = weighted
        default / tuned kernel milliseconds per layer over the run), then the e2e rows; columns
        ``kind``, ``metric``, ``unit``, ``higher_is_better``, ``baseline``, ``treatment``,
        ``change_pct``, ``improvement_pct``, ``note``.
    """
    deltas = e2e_delta(bench, baseline=baseline, treatment=treatment)
    treat = _pick(bench, treatment, True, "treatment")
    batches = engine_batches(pd.DataFrame([treat]), prefill_chunk=prefill_chunk)
    weighted = weighted_speedup(speedups, batches, round_up=round_up)
    rows = []
    for (op, shape), g in weighted.groupby(["op", "shape"], sort=True, observed=True):
        total = g[g["phase"] == "total"].iloc[0]
        phases = g[g["phase"] != "total"]
        note = "; ".join(f"{p.phase} M={p.m} -> bucket {p.bucket}{' (clamped)' if p.clamped else ''} "
                         f"x{p.speedup:.3f}" for p in phases.itertuples())
        base_ms, tuned_ms = total["weight"], total["weight"] / total["speedup"]
        rows.append({"kind": "kernel", "metric": f"{op} {shape}", "unit": "ms/layer", "higher_is_better": False,
                     "baseline": base_ms, "treatment": tuned_ms, "change_pct": 100.0 * (tuned_ms / base_ms - 1.0),
                     "improvement_pct": 100.0 * (total["speedup"] - 1.0), "note": note})
    kernel = conform_columns(pd.DataFrame(rows), DELTA_COLUMNS) if rows else empty(DELTA_COLUMNS)
    return pd.concat([kernel, deltas], ignore_index=True) if len(kernel) and len(deltas) else (
        kernel if len(kernel) else deltas)
