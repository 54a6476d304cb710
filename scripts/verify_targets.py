"""Print the verify issue's targets from the shipped data (``python scripts/verify_targets.py [data]``).

1. The repaired step is never slower than untuned beyond noise, and within noise of the per-size best of
   untuned and the tuned cache (every step comparison that holds a repaired state).
2. The step change predicted from verify has the measured sign at >= 13 of 16 sizes per model and dtype.
3. Verifying a shape costs at most half of tuning it (the policy study's own ratios, one process each).

The targets are computed by :mod:`profkit.analysis.targets`; this script reads the data and prints them.
"""

import sys
import warnings

import pandas as pd

from profkit.analysis import targets, verify
from profkit import catalog
from profkit.report import build_model


def print_repaired(table: pd.DataFrame) -> None:
    print("1. repaired step: sizes slower than untuned / than the best of untuned and cache, beyond noise")
    for r in table.itertuples():
        line = f"   {r.model} {r.dtype} ({r.where}): vs untuned {r.slower} of {r.sizes} [{r.slower_at or 'none'}]"
        if not pd.isna(r.best_sizes):
            line += f"; vs best {r.slower_than_best} of {r.best_sizes} [{r.slower_than_best_at or 'none'}]"
        print(line + ("  MET" if r.met else "  MISSED"))


def print_sign(table: pd.DataFrame) -> None:
    print("2. sign of the step change predicted from verify, measured tuned (or cache) vs untuned")
    for a in table.itertuples():
        print(f"   {a.model} {a.dtype} vs {a.against}: {a.agree} of {a.sizes} "
              f"({a.agree_beyond_noise} of {a.beyond_noise} beyond noise)  {'MET' if a.met else 'MISSED'}")


def print_cost(table: pd.DataFrame) -> None:
    print("3. verify seconds / tuning seconds of the same shape in one process (the policy study)")
    if table.empty:
        print("   no policy study in this data")
    for c in table.itertuples():
        print(f"   {c.tuning} tuning of the shape, {c.policy}: {c.shapes} shapes, ratio {c.ratio_min:.2f}-"
              f"{c.ratio_max:.2f} (median {c.ratio_median:.2f}); at most 0.5 in {c.at_most_half} of {c.shapes}")


def main(root: str = "data") -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model = build_model(catalog.open(root))  # the GPU with the most runs: the H200's data
        data, results = model.data, model.results
    rows = pd.concat([data.step, data.step_other], ignore_index=True)
    print_repaired(targets.repaired_targets(rows))
    predicted = verify.verify_step_changes(data.verify, results.step_rows, captures=data.step_captures,
                                           linears=data.linears)
    print_sign(targets.sign_targets(rows, predicted, shipped=results.step_measured))
    print_cost(targets.cost_targets(data.provenance))


if __name__ == "__main__":
    main(*sys.argv[1:])
