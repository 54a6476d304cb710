"""Print the MoE issue's targets from the shipped H200 MoE runs (default data/h200-moe).

    .venv/bin/python scripts/moe_targets.py [DATA]

The numbers come from profkit.analysis.moe.model_summary; the all-candidates-failed target runs a
toy SM90-shaped MoE through FlashInfer's real AutoTuner on this CPU (profkit.testing.moe).
"""

from __future__ import annotations

import sys

import pandas as pd

from profkit.analysis import moe
from profkit.analysis.failures import tuning_failures
from profkit.sources.moe_runs import read_moe_runs


def main(argv: list[str]) -> int:
    runs = read_moe_runs(argv[0] if argv else "data/h200-moe")
    t = runs.tables
    summary = moe.model_summary(t.winners, t.candidates, runs.verify, runs.step, runs.runs)
    with pd.option_context("display.width", 200, "display.max_columns", 40):
        print(summary.set_index("model").T.to_string(float_format=lambda v: f"{v:.3g}"))
    print()
    data_ok = (summary["buckets"] >= 20) & (summary["routings"] >= 4) & (summary["step_sizes"] > 0)
    tunings = ", ".join(f"{m} {n}" for m, n in zip(summary["model"], summary["tunings"]))
    print(f"shipped data: {int(data_ok.sum())} of 3 MoE models tuned over 20 buckets, verified under >= 4 routings "
          f"and stepped; tunings per model: {tunings}")
    beyond, agree = int(summary["predicted_beyond_noise"].sum()), int(summary["sign_agrees_beyond_noise"].sum())
    print(f"step prediction from verify: sign agrees at {agree} of {beyond} sizes measured beyond noise; "
          f"within 1.5x at {int(summary['within_1_5x'].sum())} of {beyond}")
    print("verify of one op, one routing, over its buckets / tuning it (one process): "
          + ", ".join(f"{m} {r:.2f}" for m, r in zip(summary["model"], summary["verify_over_tuning"])))
    total = {k: int(summary[k].sum()) for k in ("repaired_slower", "repaired_points", "repaired_vs_cache_slower",
                                                 "repaired_vs_cache_points", "aa_beyond_noise", "aa_points")}
    print(f"repaired step slower beyond noise than untuned: {total['repaired_slower']} of {total['repaired_points']} "
          f"sizes; than the cache (tuned): {total['repaired_vs_cache_slower']} of {total['repaired_vs_cache_points']} "
          "(a size timed in two step sets counts twice)")
    print(f"A/A (a series timed twice, interleaved: untuned-2, cache-2): {total['aa_beyond_noise']} of "
          f"{total['aa_points']} sizes beyond noise")
    print(f"all candidates failing (toy, real AutoTuner): reported as {_all_failed_status()!r}")
    return 0


def _all_failed_status() -> str:
    import profkit
    from profkit.testing import moe as M
    from profkit.testing import cpu_autotuner

    with cpu_autotuner():
        with profkit.capture(tune=True) as cap:
            M.sm90_moe(8, M.ToySm90MoERunner(failing_from=0))
    return str(tuning_failures(cap.winners, cap.candidates, cap.tuning)["status"].iloc[0])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
