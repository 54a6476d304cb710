"""Print issue 36's targets (across GPUs) from the shipped data: ``python scripts/across_gpus_targets.py [data]``.

1. Shipped: each GPU's captures per op, and which GPU's captures were verified on which other GPU.
2. Porting costs at most a third of a full tuning on the target, both in fresh processes with their kernel
   compiles (:func:`profkit.analysis.portability.port_price`; also without compiles). A port without a
   ``price.json`` (``profkit port`` alone: a dense GEMM tuning) is priced by the catalogue against the same model
   and dtype's tuning pass on the target GPU in the step sets (:mod:`profkit.catalog.ports`).
3. The ported cache's model step is within noise of the target's own tuned cache or better at every size, and
   never slower than untuned beyond noise (:func:`profkit.analysis.step.compare_steps`, the one rule; the step
   set holding a ``ported`` state).
4. The portability table: per op and GPU pair, at how many (bucket, M) points the carried pick is slower beyond
   noise than the target's own pick, and by how much at worst (:func:`profkit.analysis.portability.portability`).
5. Not a target: how long a port's shortlist must be, from the two GPUs' own tunings
   (:func:`profkit.analysis.shortlist.shortlist_reach`: tuner timings, no extra GPU time).
"""

from __future__ import annotations

import sys
import warnings

import pandas as pd

from profkit import catalog
from profkit.analysis.portability import carried_picks, port_price, portability
from profkit.analysis.shortlist import shortlist_reach
from profkit.analysis.step import compare_steps
from profkit.catalog import partition
from profkit.printable import printable


def say(line: str) -> None:
    """One line of the printout; the names in it come from files, so controls and line breaks show as escapes."""
    print(printable(line))


def print_shipped(data) -> None:
    say("1. shipped: captures per GPU and op; verify rows per GPU a capture was tuned on -> timed on")
    runs = data.runs.assign(gpu=partition.run_gpus(data.runs).to_numpy())
    ops = data.tables.tuning[["run_id", "op"]].drop_duplicates("run_id").merge(runs[["run_id", "gpu"]], on="run_id")
    for (gpu, op), n in ops.groupby(["gpu", "op"]).size().items():
        say(f"   {gpu}: {op}: {n} captures")
    placed = partition.with_gpus(data.verify, data.runs)
    pairs = placed.groupby(["capture_gpu", "timed_gpu"]).size() if len(placed) else pd.Series(dtype=int)
    for (source, target), n in pairs.items():
        say(f"   verify: tuned on {source}, timed on {target}: {n} rows")
    gpus = partition.gpus(data)
    cross = {(s, t) for s, t in pairs.index if s != t}
    both = all((s, t) in cross for s in gpus for t in gpus if s != t)
    say(f"   cross-GPU verify both ways: {'MET' if both else 'MISSED'} "
          f"({', '.join(f'{s} -> {t}' for s, t in sorted(cross)) or 'none'})")


def print_price(prices: pd.DataFrame, gpus) -> None:
    say("2. port / full tuning on the target (target: at most 1/3 with compiles, fresh processes)")
    if prices.empty:
        say("   no port in this data")
    else:  # each GPU of the data is a target of issue 36's ports
        reached = set(prices["target_gpu"].dropna().astype(str))
        for gpu in [g for g in gpus if g not in reached]:
            say(f"   onto {gpu}: no port in this data  NOT MEASURED")
    for p in prices.itertuples(index=False):
        met = ("NOT MEASURED (no tuning on the target)" if pd.isna(p.port_over_fresh_tune) else
               "MET" if p.port_over_fresh_tune <= 1 / 3 else "MISSED")
        if pd.notna(p.dtype):  # profkit port alone: a dense tuning, against the target's tuning pass in its step set
            built = pd.notna(p.fresh_tune_jit_build_s) and p.fresh_tune_jit_build_s > 0
            say(f"   {p.model} {p.dtype}, {p.source_gpu} -> {p.target_gpu}, top-{p.top_k} ({p.folder}): "
                  f"{p.port_s:.1f} s / {p.fresh_tune_s:.1f} s "
                  + (f"(the target's tuning first in a fresh process, {p.fresh_tune_jit_build_s:.1f} s of JIT builds "
                     f"in it; {p.fresh_tune_from})" if built else "(the target's tuning pass in profkit step)")
                  + f" = {p.port_over_fresh_tune:.3f}  {met}"
                  + ("" if pd.isna(p.jit_builds) else f", FlashInfer's one-time JIT builds ({p.jit_builds}) inside "
                     "the port alone")
                  + ("" if pd.isna(p.jit_build_s) or not p.jit_build_s else
                     f"; without them {p.port_without_jit_s:.1f} s"
                     + (f" / {p.fresh_tune_without_jit_s:.1f} s" if built else "") + " = "
                     f"{p.port_over_fresh_tune_without_jit:.3f}"))
            continue
        say(f"   {p.model}, {p.source_gpu} -> {p.target_gpu}: with compiles {p.port_s:.1f} s / {p.fresh_tune_s:.1f} s "
              f"(fresh-process tuning) = {p.port_over_fresh_tune:.3f}  {met}")
        say(f"      without compiles {p.port_warm_s:.1f} s / {p.tune_warm_s:.1f} s = "
              f"{p.port_over_tune_without_compiles:.3f}; against the tuning right after the port in its process "
              f"{p.port_s:.1f} s / {p.tune_s:.1f} s = {p.port_over_tune:.3f}")


def print_step(steps: pd.DataFrame, gpus) -> None:
    say("3. the ported cache's step: against the target's own cache, and against untuned (the one rule)")
    ported = (steps["state"] == "ported").to_numpy(dtype=bool)
    sets = steps.loc[ported, "source"].unique()
    if not len(sets):
        say("   no step set with a ported state in this data")
    elif "gpu" in steps.columns:  # each GPU of the data is a target of issue 36's step proof
        stepped = set(steps.loc[ported, "gpu"].dropna().astype(str))
        for gpu in [g for g in gpus if g not in stepped]:
            say(f"   on {gpu}: no step set with a ported state in this data  NOT MEASURED")
    tally = {"A/A": [0, 0], "ported": [0, 0]}  # [flagged, measured sizes]: the rule on identical kernels, and ported
    for source in sets:
        rows = steps[(steps["source"] == source).to_numpy(dtype=bool)]
        loaded = (rows.groupby("state")["loaded_cache"].first().fillna("").astype(str) if "loaded_cache" in rows.columns
                  else pd.Series(dtype=str))
        for baseline, target in (("cache", "within noise of the own cache or faster"),
                                 ("untuned", "never slower than untuned")):
            if not (rows["state"] == baseline).any():
                say(f"   {source}: no {baseline} state in this set")
                continue
            c = compare_steps(rows, baseline=baseline)
            say(f"   {source}, against {baseline} ({target}):")
            for state, g in c.groupby("state", sort=True):
                counts = g["verdict"].value_counts()
                slower = g[(g["verdict"] == "slower").to_numpy(dtype=bool)]
                at = ", ".join(f"{r.phase} {r.tokens} {100 * r.effect:+.1f}% [{100 * r.effect_lo:+.1f}%, "
                               f"{100 * r.effect_hi:+.1f}%]" for r in slower.itertuples(index=False))
                measured = counts.get("not_measurable", 0) == 0
                kind = state.rsplit("-", 1)[0] if state.rsplit("-", 1)[-1].isdigit() else state  # ported-2: ported
                verdict = ("  MET" if slower.empty and measured else "  MISSED" if not slower.empty
                           else "  NOT MEASURED (one pass per state)") if kind == "ported" else ""
                named = kind != "untuned"  # where the carried states and the A/A pairs lose (untuned: everywhere)
                same_file = kind != baseline and loaded.get(kind, "") == loaded.get(baseline) != ""
                if baseline == "cache" and (kind in ("ported", baseline) or same_file) and state != baseline:
                    which, flags = (("ported", ("slower",)) if kind == "ported"
                                    else ("A/A", ("slower", "faster")))  # A/A: either way is noise
                    tally[which][0] += int(g["verdict"].isin(flags).sum())
                    tally[which][1] += int((g["verdict"] != "not_measurable").sum())
                say(f"      {state:<10} {len(g)} sizes: faster {counts.get('faster', 0)}, slower {len(slower)}, "
                      f"within noise {counts.get('within_noise', 0)}, not measurable "
                      f"{counts.get('not_measurable', 0)}{verdict}" + (f"; slower at {at}" if at and named else ""))
    _print_tally(tally)


def _print_tally(tally: dict) -> None:
    """The step target in context: how often the rule flags identical kernels, and the ported files."""
    (aa, aa_n), (ported, ported_n) = tally["A/A"], tally["ported"]
    say(f"   in all: the own cache against itself (A/A pairs: the same file twice) beyond noise at {aa} of {aa_n} sizes "
          f"(either way); the ported files slower than the own cache at {ported} of {ported_n}")


def print_portability(table: pd.DataFrame) -> None:
    say("4. portability: the carried pick against the target's own pick and default, per op and GPU pair")
    if table.empty:
        say("   no capture verified on another GPU in this data")
    for r in table.itertuples(index=False):
        worst = f", worst {100 * r.worst_regret:+.1f}% at {r.worst_regret_at}" if r.slower_than_own else ""
        say(f"   {r.op}, {r.source_gpu} -> {r.target_gpu}: {r.points} points, top-1 agreement "
              f"{r.top1_agreement:.1%}; slower than own beyond noise at {r.slower_than_own}{worst}; faster than "
              f"own at {r.faster_than_own}; against the target's default: faster at {r.faster_than_default}, "
              f"slower at {r.slower_than_default}")


def print_shortlist(data) -> None:
    say("5. a port's shortlist: the source tuner's top-k re-timed on the target, priced by the target tuner's timings")
    table = shortlist_reach(partition.candidates_with_gpus(data))
    if table.empty:
        say("   no (op, profile) tuned on two GPUs in this data")
    for r in table.itertuples(index=False):
        regret = (f"; regret median {100 * r.median_regret:.1f}%, worst {100 * r.worst_regret:.1f}% at {r.worst_at}"
                  if pd.notna(r.worst_regret) else "")
        say(f"   {r.op}, {r.source_gpu} -> {r.target_gpu}, top-{r.top_k}: the own pick in the shortlist at "
              f"{r.own_in_shortlist} of {r.points} points, none timed at {r.none_timed}{regret}")


def main(root: str = "data") -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        data = catalog.open(root)
    print_shipped(data)
    steps = pd.concat([data.step, data.step_other], ignore_index=True)
    print_price(port_price(data.port_prices), partition.gpus(data))
    print_step(steps, partition.gpus(data))
    print_portability(portability(carried_picks(partition.with_gpus(data.verify, data.runs))))
    print_shortlist(data)


if __name__ == "__main__":
    main(*sys.argv[1:])
