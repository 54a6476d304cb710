"""Print the `profkit advise` proof from a shipped proof folder (no GPU): the issue's targets, measured.

    .venv/bin/python scripts/advise_proof.py [data/h200-advise/llama3-8b-fp8]

Reads PROOF/full, PROOF/planned and PROOF/compare (``scripts/device/advise_step.sh``, see its run.txt)
and the plan beside them (PLAN/blocklist.json, the switches in PLAN/plan.md). Prints:
1. tuning wall time of the full and the planned pass (``tuning_s`` of their step rows) and the ratio
   (target >= 5x);
2. the advised step against the tuned (``cache``) and untuned steps per size, with the repetitions'
   noise (target: advised within noise of tuned at every size);
3. what the planned run's capture holds that the plan should have left out (``plan_violations``;
   target: nothing), and the same check on the full run as a control.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import re
import sys
import tarfile
import tempfile
import warnings
from pathlib import Path

import pandas as pd

import profkit
from profkit.analysis.advise import advise, plan_violations
from profkit.analysis.step import measured_step_change


def shipped_plan(plan_dir: Path, capture: Path):
    """The plan as shipped: advise's Plan from the capture, with the switches of PLAN_DIR's files.

    The switches come from blocklist.json and plan.md's "Switches" lines (``- `skip_ops`: ...``,
    ``- `tuning_buckets`: ...``, as ``profkit advise`` writes them).
    """
    blocklist = json.loads((plan_dir / "blocklist.json").read_text())["invalid_tactics"]
    switches = dict(re.findall(r"^- `(skip_ops|tuning_buckets)`: (.*)$", (plan_dir / "plan.md").read_text(), re.M))
    skip = switches.get("skip_ops", "none")
    buckets = switches.get("tuning_buckets", "FlashInfer default")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        plan = advise(profkit.load(capture))
    return dataclasses.replace(
        plan, blocklist=blocklist,
        tuning_buckets=None if buckets == "FlashInfer default" else tuple(ast.literal_eval(buckets)),
        skip_ops=() if skip == "none" else tuple(op.strip() for op in skip.split(",")))


def step_rows(folder: Path) -> pd.DataFrame:
    return profkit.read_bench(folder / "step.jsonl", format="profkit-step")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", nargs="?", default="data/h200-advise/llama3-8b-fp8",
                   help="holds plan/ and proof/ (default: %(default)s)")
    args = p.parse_args(argv)
    root = Path(args.folder)
    proof = root / "proof"
    pd.set_option("display.width", 200)

    full_s = step_rows(proof / "full")["tuning_s"].dropna().iloc[0]
    planned_s = step_rows(proof / "planned")["tuning_s"].dropna().iloc[0]
    print(f"tuning wall time: full {full_s:.1f} s, planned {planned_s:.1f} s, ratio {full_s / planned_s:.1f}x "
          "(target >= 5x; the full pass includes the gemm JIT build, see run.txt)")

    compare = step_rows(proof / "compare")
    advised = "advised"
    if advised not in set(compare["state"]):
        # A plan that skips every op tunes nothing, so FlashInfer writes no cache: its step is the untuned one.
        advised = "untuned"
        print("\nthe plan tunes nothing (planned pass wrote no cache.json): the advised step is the untuned step")
    against = {}
    for baseline in ("cache", "untuned"):
        if baseline == advised:
            continue
        rows = compare[compare["state"].isin([advised, baseline])]
        m = measured_step_change(rows, baseline=baseline)
        against[baseline] = m.set_index(["phase", "tokens"])
    columns = {"advised_ms": against["cache"]["step_ms"], "tuned_ms": against["cache"]["baseline_ms"],
               "vs_tuned_pct": against["cache"]["delta_pct"].round(2),
               "vs_tuned": against["cache"].apply(_verdict, axis=1)}
    if "untuned" in against:
        columns.update({"untuned_ms": against["untuned"]["baseline_ms"],
                        "vs_untuned_pct": against["untuned"]["delta_pct"].round(2),
                        "vs_untuned": against["untuned"].apply(_verdict, axis=1)})
    table = pd.DataFrame(columns)
    print("\nadvised step against tuned (state cache: the full pass's cache.json) and untuned, same process:")
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    slower = int((table["vs_tuned"] == "slower").sum())
    print(f"advised slower than tuned beyond noise at {slower} of {len(table)} sizes (target 0)")

    with tempfile.TemporaryDirectory() as tmp, tarfile.open(proof / "captures.tar.gz") as tar:
        tar.extractall(tmp, filter="data")
        plan = shipped_plan(root / "plan", Path(tmp) / "full" / "capture")
        for name in ("planned", "full"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                found = plan_violations(plan, profkit.load(Path(tmp) / name / "capture"))
            counts = found.groupby("what")["n"].sum().to_dict() if len(found) else {}
            print(f"{name} run against the plan: {int(found['n'].sum()) if len(found) else 0} candidate timings "
                  f"outside it {counts}")
    return 0


def _verdict(row) -> str:
    return "slower" if row["slower"] else "faster" if row["beyond_noise"] else "within noise"


if __name__ == "__main__":
    sys.exit(main())
