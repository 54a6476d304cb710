"""Print the verify issue's targets from the shipped data (``python scripts/verify_targets.py [data]``).

1. The repaired step is never slower than untuned beyond noise, and within noise of the per-size best of
   untuned and the tuned cache (every step comparison that holds a repaired state).
2. The step change predicted from verify has the measured sign at >= 13 of 16 sizes per model and dtype.
3. Verifying a shape costs at most half of tuning it (the policy study's own ratios, one process each).
"""

import sys
import warnings

import pandas as pd

from profkit.analysis import step, verify
from profkit.analysis.overview import overview
from profkit.sources.datadir import read_datadir


def _sizes(frame: pd.DataFrame) -> str:
    return ", ".join(f"{r.phase} {r.tokens} ({r.delta_pct:+.1f}%)" for r in frame.itertuples()) or "none"


def repaired_targets(rows: pd.DataFrame) -> None:
    print("1. repaired step: sizes slower than untuned / than the best of untuned and cache, beyond noise")
    for where, model, dtype, group in step.step_comparisons(rows):
        if not (group["state"] == "repaired").any():
            continue
        change = step.measured_step_change(group)
        slower = change[(change["state"] == "repaired") & change["slower"]]
        sizes = int(group.groupby(["phase", "tokens"]).ngroups)
        line = f"   {model} {dtype} ({where}): vs untuned {len(slower)} of {sizes} [{_sizes(slower)}]"
        if (group["state"] == "cache").any():
            best = step.against_best(group)
            lost = best[best["slower"]]
            line += f"; vs best {len(lost)} of {len(best)} [{_sizes(lost)}]"
        print(line + ("  MET" if slower.empty else "  MISSED"))


def sign_targets(data, results, rows: pd.DataFrame) -> None:
    print("2. sign of the step change predicted from verify, measured tuned (or cache) vs untuned")
    predicted = verify.verify_step_changes(data.verify, results.step_rows, captures=data.step_captures,
                                           linears=data.linears)
    against = [("shipped tuned step", results.step_measured, "tuned")]
    for where, model, dtype, group in step.step_comparisons(rows):
        measured = step.cache_change(group, cache=f"h200/step/{model}-{dtype}/cache.json")  # the verified pass's cache
        if len(measured):
            against.append((where, measured, "cache"))
    for where, measured, state in against:
        for a in step.sign_agreement(measured, predicted, state=state).itertuples():
            verdict = "MET" if a.agree >= 13 else "MISSED"
            print(f"   {a.model} {a.dtype} vs {where}: {a.agree} of {a.sizes} "
                  f"({a.agree_beyond_noise} of {a.beyond_noise} beyond noise)  {verdict}")


def cost_targets(data) -> None:
    print("3. verify seconds / tuning seconds of the same shape in one process (the policy study)")
    runs = []
    for p in data.provenance.values():
        seen = set()
        for run in p.get("runs") or []:
            if isinstance(run, dict) and {"verify_s", "tune_call_s", "n", "k"} <= set(run):
                # The shape's first tuning in a process pays its cuDNN plan builds, as a user's tuning pass does.
                runs.append({**run, "tuning": "later" if (run["n"], run["k"]) in seen else "first"})
                seen.add((run["n"], run["k"]))
    if not runs:
        print("   no policy study in this data")
        return
    ratios = pd.DataFrame(runs).assign(ratio=lambda f: f["verify_s"] / f["tune_call_s"])
    for (tuning, policy), g in ratios.groupby(["tuning", "policy"]):
        print(f"   {tuning} tuning of the shape, {policy}: {len(g)} shapes, ratio {g['ratio'].min():.2f}-"
              f"{g['ratio'].max():.2f} (median {g['ratio'].median():.2f}); at most 0.5 in "
              f"{int((g['ratio'] <= 0.5).sum())} of {len(g)}")


def main(root: str = "data") -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        data = read_datadir(root)
        results = overview(data)
    rows = pd.concat([data.step, data.step_other], ignore_index=True)
    repaired_targets(rows)
    sign_targets(data, results, rows)
    cost_targets(data)


if __name__ == "__main__":
    main(*sys.argv[1:])
