"""Print the `profkit advise` proof from a shipped proof folder (no GPU): the issue's targets, measured.

    .venv/bin/python scripts/advise_proof.py [data/h200-advise/llama3-8b-fp8]

Reads PROOF/full, PROOF/planned and PROOF/compare (``scripts/device/advise_step.sh``, see its run.txt)
and the plan beside them (PLAN/plan.json, or for the shipped folders written before it PLAN/plan.md's
switches and PLAN/blocklist.json: :func:`profkit.sources.plan.read_plan`). Prints:
1. tuning wall time of the full and the planned pass (``tuning_s`` of their step rows) and the ratio
   (target >= 5x);
2. the advised step against the tuned (``cache``) and untuned steps per size, with the repetitions'
   noise (target: advised within noise of tuned at every size);
3. what the planned run's capture holds that the plan should have left out (``plan_violations``;
   target: nothing), and the same check on the full run as a control.

The numbers are computed by :mod:`profkit.analysis.targets`; this script reads the folder and prints them.
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
import warnings
from pathlib import Path

import pandas as pd

import profkit
from profkit.analysis import targets
from profkit.analysis.advise import plan_violations
from profkit.sources.plan import read_plan


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

    t = targets.advise_tuning(step_rows(proof / "full"), step_rows(proof / "planned")).iloc[0]
    print(f"tuning wall time: full {t.full_tuning_s:.1f} s, planned {t.planned_tuning_s:.1f} s, ratio {t.ratio:.1f}x "
          "(target >= 5x; the full pass includes the gemm JIT build, see run.txt)")

    compare = step_rows(proof / "compare")
    if targets.advised_state(compare) == "untuned":
        print("\nthe plan tunes nothing (planned pass wrote no cache.json): the advised step is the untuned step")
    table = targets.advised_step(compare).set_index(["phase", "tokens"]).dropna(axis=1, how="all")
    print("\nadvised step against tuned (state cache: the full pass's cache.json) and untuned, same process:")
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    slower = int((table["vs_tuned"] == "slower").sum())
    print(f"advised slower than tuned beyond noise at {slower} of {len(table)} sizes (target 0)")

    plan = targets.written_plan(read_plan(root / "plan"))
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(proof / "captures.tar.gz") as tar:
        tar.extractall(tmp, filter="data")
        for name in ("planned", "full"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                found = plan_violations(plan, profkit.load(Path(tmp) / name / "capture"))
            counts = found.groupby("what")["n"].sum().to_dict() if len(found) else {}
            print(f"{name} run against the plan: {int(found['n'].sum()) if len(found) else 0} candidate timings "
                  f"outside it {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
