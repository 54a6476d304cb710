"""Time profkit.analysis on 1e6 synthetic candidate rows (target: winners + speedups < 2 s).

    .venv/bin/python benchmarks/bench_analysis.py [--rows 1000000]

The synthetic capture looks like a large real one: 8 runs (repeats, so noise comes from
repeats), 25 GEMM shapes of one op, 20 buckets each, 250 tactics per bucket over two runners,
plus profkit's default row per decision. Prints one line per analysis step.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from profkit import analysis, schema


def synthetic_candidates(rows: int, *, runs: int = 8, shapes: int = 25, buckets: int = 20,
                         seed: int = 0) -> pd.DataFrame:
    """A candidates frame of about ``rows`` rows (schema dtypes), deterministic for ``seed``."""
    rng = np.random.default_rng(seed)
    tactics = max(2, rows // (runs * shapes * buckets))
    bucket_values = np.array([2 ** i for i in range(buckets)], dtype=np.int64)
    r, s, b, t = np.meshgrid(np.arange(runs), np.arange(shapes), np.arange(buckets), np.arange(tactics), indexing="ij")
    r, s, b, t = r.ravel(), s.ravel(), b.ravel(), t.ravel()
    n_values = 1024 + 512 * np.arange(shapes)
    m = bucket_values[b]
    profiles = np.array([f"(({2 ** i}, 4096), (4096, {n}), (0,), (0,), (-1, {n}), (41943040,))"
                         for n in n_values for i in range(buckets)], dtype=object)
    base = (1.0 + 0.01 * t + rng.random(tactics)[t]) * (0.01 + m / 4096 * 0.2)
    time_ms = base * (1.0 + 0.005 * rng.standard_normal(len(t)))
    runner = np.where(t % 2 == 0, "CublasltBf16GemmRunner", "CudnnBf16GemmRunner")
    frame = pd.DataFrame({
        "run_id": pd.Series(np.array([f"run-{i}" for i in range(runs)], dtype=object)[r], dtype="string"),
        "rank": pd.array(r % 4, dtype="Int64"), "call": pd.array(s + 1, dtype="Int64"),
        "thread": pd.array(np.ones(len(t), dtype=np.int64), dtype="Int64"),
        "seq": pd.array(np.arange(len(t)), dtype="Int64"), "api": "choose_one", "op": "bf16_gemm",
        "profile": pd.Series(profiles[s * buckets + b], dtype="string"), "bucket": pd.array(m, dtype="Int64"),
        "bucket_key": pd.NA, "shapes": pd.NA, "runner": pd.Series(runner, dtype="string"),
        "tactic": pd.Series(t.astype(str), dtype="string"), "time_ms": time_ms, "status": "ok", "error": "",
        "host_s": 0.002, "jit_s": 0.0, "timing": "cuda_graph, cold L2, median of 10", "source": "flashinfer",
    })
    first = frame[frame["tactic"] == "0"]
    default = first.assign(tactic="-1", source="default", time_ms=first["time_ms"] * 1.02,
                           runner="CublasltBf16GemmRunner")
    return schema.conform(pd.concat([frame, default], ignore_index=True), "candidates")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    candidates = synthetic_candidates(args.rows)
    print(f"synthetic candidates   {len(candidates):>9,} rows  {time.perf_counter() - started:6.2f} s (setup)")
    steps = {}

    def step(name, fn):
        t0 = time.perf_counter()
        result = fn()
        steps[name] = time.perf_counter() - t0
        print(f"{name:<22} {len(result):>9,} rows  {steps[name]:6.2f} s")
        return result

    noise = step("noise", lambda: analysis.noise(candidates))
    won = step("winners", lambda: analysis.winners(candidates, noise=noise))
    step("speedup_vs_default", lambda: analysis.speedup_vs_default(won))
    step("winner_stability", lambda: analysis.winner_stability(won))
    step("runner_cost", lambda: analysis.runner_cost(candidates))
    step("decode_tactics", lambda: analysis.decode_tactics(candidates))
    core = steps["noise"] + steps["winners"] + steps["speedup_vs_default"]
    print(f"{'noise+winners+speedup':<22} {'':>9}       {core:6.2f} s  (target < 2 s)")
    print(f"{'winners (own noise)':<22}", end=" ")
    t0 = time.perf_counter()
    analysis.winners(candidates)
    print(f"{'':>9}       {time.perf_counter() - t0:6.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
