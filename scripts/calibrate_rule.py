"""Print the comparison rule's calibration on the shipped A/A data (docs/comparison_rule.md).

    python scripts/calibrate_rule.py            # step A/A rates, detectable change per size, verify spread
    python scripts/calibrate_rule.py --csv DIR  # also write the tables as CSV

A/A: identical kernels. Step sets: a state given twice in one process (MoE ``untuned-2``, ``cache-2``), a state
whose recorded picks equal untuned's (the dense interleaved and bracketed sets), and any state's
pass against its own other pass (the one-pass-each design). Before: the old step rule (|median
difference| > the larger max - min of the two states' repetitions). After: analysis.verdict.
Verify: a candidate and its default timed in two processes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP_SETS = {
    "dense interleaved": "data/h200-verify/step-interleaved/*/*/step.jsonl",
    "MoE A/A": "data/h200-moe/*-step-aa/step.jsonl",
    "MoE repaired": "data/h200-moe/*-step-repaired/step.jsonl",
    "bracketed": "data/h200-verify/step-bracketed/*/step.jsonl",
}
KINDS = {"series": "state given twice (interleaved passes)", "same_kernels": "same picks as untuned",
         "single_pass": "one pass against another (one pass each)"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, help="also write aa_steps.csv, aa_rates.csv, detectable.csv here")
    args = parser.parse_args(argv)

    import pandas as pd

    import profkit
    from profkit.analysis import verdict
    from profkit.analysis.step import measured_step_change
    from profkit.sources.verify import read_verify

    frames = []
    for family, pattern in STEP_SETS.items():
        for path in sorted(ROOT.glob(pattern)):
            rows = profkit.read_bench(path, format="profkit-step")
            frames.append(rows.assign(source=str(path.parent.relative_to(ROOT)), family=family))
    steps = pd.concat(frames, ignore_index=True)
    points = pd.concat([verdict.aa_step_points(g).assign(family=family)
                        for family, g in steps.groupby("family", sort=False)], ignore_index=True)

    print(f"Comparison rule: t interval at {verdict.CONFIDENCE:.0%} on the log of pass medians, at least "
          f"{verdict.MIN_UNITS} passes per side, drift floor {verdict.DRIFT_FLOOR:.1%}.\n")
    print("1. Step A/A: identical kernels called faster or slower (false-positive rate), before -> after")
    for (family, kind), g in points.groupby(["family", "kind"], sort=False):
        r = verdict.aa_rates(g, by=["family"]).iloc[0]
        print(f"   {family:17s} {KINDS[kind]:44s} {r.points:4d} points: old rule {r.old_beyond_noise:6.1%} -> "
              f"this rule {r.calls} of {r.measurable} measurable")
    print("   per data set (old rule on single passes -> the rule on every A/A point of the set):")
    single = verdict.aa_rates(points[points["kind"] == "single_pass"], by=["source"]).set_index("source")
    for source, r in verdict.aa_rates(points, by=["source"]).set_index("source").iterrows():
        old, pairs = single.loc[source, "old_beyond_noise"], int(single.loc[source, "points"])
        print(f"     {source:52s} old {old:6.1%} of {pairs}"
              f" single-pass pairs -> this rule {r.calls} of {r.measurable} measurable ({r.points} points)")

    sensitivity = verdict.aa_sensitivity(steps)
    print(f"\n2. Sensitivity on the {sensitivity['measurable'].iloc[0]} measurable A/A points (share called):")
    for confidence, g in sensitivity.groupby("confidence", sort=False):
        print(f"   confidence {confidence:.0%}: " + ", ".join(f"floor {r.floor:.1%}: {r.called:5.1%}"
                                                          for r in g.itertuples()))

    measured = pd.concat([measured_step_change(g).assign(family=family)
                          for (family, _), g in steps.groupby(["family", "source"], sort=False)], ignore_index=True)
    table = verdict.detectable_by_size(measured, by="family")
    print("\n3. Detectable change per size (median over the set's comparisons, percent; one pass each: not measurable)")
    print("   " + table.to_string(index=False, float_format=lambda x: f"{x:.2f}").replace("\n", "\n   "))

    verify = read_verify(ROOT / "data" / "h200-verify", *sorted((ROOT / "data" / "h200-moe").glob("*/verify.parquet")))
    pairs = verdict.aa_verify_pairs(verify)
    diff = pairs["log_ratio_a"] - pairs["log_ratio_b"]
    sets = ["~".join(sorted(p)) for p in zip(_verify_set(pairs["source_a"]), _verify_set(pairs["source_b"]))]
    print(f"\n4. Verify: {len(pairs)} repeats of a candidate/default ratio in two processes; ratio_sd fitted on all "
          f"{verdict.ratio_sd_from_repeats(diff):.4f}, the largest over pairs of verify sets "
          f"{verdict.ratio_sd_from_repeats(diff, sets):.4f} (shipped VERIFY_RATIO_SD {verdict.VERIFY_RATIO_SD})")
    print("   processes that differ beyond the one-process band (the verify A/A rate), and verdicts that agree "
          "between the two processes:")
    by_set = pairs.assign(sets=sets)
    for name, part in [("all pairs", by_set), *sorted(by_set.groupby("sets"))]:
        a = verdict.aa_verify_agreement(part)
        print(f"   {name:22s} {a['pairs']:5d} pairs: beyond {a['beyond']:5.1%}; the same verdict in both: "
              f"old p10-p90 rule {a['old_agree']:5.1%}, this rule {a['new_agree']:5.1%}")

    if args.csv:
        args.csv.mkdir(parents=True, exist_ok=True)
        points.to_csv(args.csv / "aa_steps.csv", index=False)
        verdict.aa_rates(points, by=["family", "source", "kind"]).to_csv(args.csv / "aa_rates.csv", index=False)
        table.to_csv(args.csv / "detectable.csv", index=False)
        print(f"\nwrote {args.csv}/aa_steps.csv, aa_rates.csv, detectable.csv", file=sys.stderr)
    return 0


def _verify_set(sources):
    """The shipped verify set a file belongs to (policy, step, sweep, ...), from its path."""
    return sources.astype(str).str.extract(r"data/[^/]+/([^/]+)/")[0].fillna(sources.astype(str))


if __name__ == "__main__":
    raise SystemExit(main())
