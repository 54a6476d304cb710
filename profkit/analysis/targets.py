"""The issues' targets, measured on shipped data: one table per target, one row per comparison.

``scripts/verify_targets.py`` and ``scripts/advise_proof.py`` print these tables; everything they
decide is here, so the tests call the same functions.

verify and repair (issue "verify"):

- :func:`repaired_targets`: the repaired step is never slower than untuned beyond noise, and within
  noise of the per-size best of untuned and the tuned cache.
- :func:`sign_targets`: the step change predicted from verify has the measured sign at
  >= :data:`SIGN_TARGET` of 16 sizes per model and dtype.
- :func:`cost_targets`: verifying a shape costs at most half of tuning it (the policy study's ratios).

advise (the ``profkit advise`` proof):

- :func:`advise_tuning`: tuning wall time of the full and the planned pass, and their ratio (target >= 5x).
- :func:`advised_state` and :func:`advised_step`: the advised step against the tuned (``cache``) and
  untuned steps per size (target: within noise of tuned at every size).
- :func:`written_plan`: the plan ``profkit advise`` wrote, as the :class:`~profkit.analysis.advise.Plan`
  that :func:`~profkit.analysis.advise.plan_violations` checks a capture against.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from profkit.analysis import step
from profkit.analysis._frames import conform_columns, empty
from profkit.analysis.advise import BUCKET_COLUMNS, OP_COLUMNS, PLAN_TACTIC_COLUMNS, Plan
from profkit.schema import PlanFile

SIGN_TARGET = 13  # sizes of 16 whose measured step change has the predicted sign
COST_TARGET = 0.5  # verify seconds per tuning second of the same shape

REPAIRED_COLUMNS = {
    "where": "string", "model": "string", "dtype": "string", "sizes": "Int64", "slower": "Int64",
    "slower_at": "string", "best_sizes": "Int64", "slower_than_best": "Int64", "slower_than_best_at": "string",
    "met": "boolean",
}
SIGN_COLUMNS = {
    "against": "string", "model": "string", "dtype": "string", "sizes": "Int64", "agree": "Int64",
    "beyond_noise": "Int64", "agree_beyond_noise": "Int64", "met": "boolean",
}
COST_COLUMNS = {
    "tuning": "string", "policy": "string", "shapes": "Int64", "ratio_min": "float64", "ratio_max": "float64",
    "ratio_median": "float64", "at_most_half": "Int64",
}
ADVISE_TUNING_COLUMNS = {"full_tuning_s": "float64", "planned_tuning_s": "float64", "ratio": "float64"}


def repaired_targets(rows: pd.DataFrame) -> pd.DataFrame:
    """Per step comparison holding a repaired state: sizes where repaired is slower beyond noise.

    Args:
        rows: step rows of every set (``Catalog.step`` and ``step_other`` stacked).

    Returns:
        One row per comparison of :func:`profkit.analysis.step.step_comparisons` that holds a
        ``repaired`` state (REPAIRED_COLUMNS): ``where``, ``model``, ``dtype``; ``sizes`` (phase,
        tokens) measured; ``slower`` sizes where repaired is slower than untuned beyond noise and
        ``slower_at`` them as text (``"decode 24 (+4.9%), ..."``, empty when none); where the
        comparison also holds a ``cache`` state, ``best_sizes``, ``slower_than_best`` and
        ``slower_than_best_at`` against the faster of untuned and cache per size (else NA);
        ``met``: repaired slower than untuned nowhere. In the comparisons' order.
    """
    out = []
    for where, model, dtype, group in _comparisons(rows):
        if not (group["state"] == "repaired").any():
            continue
        change = step.measured_step_change(group)
        slower = change[(change["state"] == "repaired") & change["slower"]]
        row = {"where": where, "model": model, "dtype": dtype, "sizes": int(group.groupby(["phase", "tokens"]).ngroups),
               "slower": len(slower), "slower_at": _sizes(slower), "met": slower.empty}
        if (group["state"] == "cache").any():
            best = step.against_best(group)
            lost = best[best["slower"]]
            row.update(best_sizes=len(best), slower_than_best=len(lost), slower_than_best_at=_sizes(lost))
        out.append(row)
    return conform_columns(pd.DataFrame(out), REPAIRED_COLUMNS) if out else empty(REPAIRED_COLUMNS)


def _comparisons(rows: pd.DataFrame) -> list[tuple[str, str, str, pd.DataFrame]]:
    """:func:`profkit.analysis.step.step_comparisons`, none for no rows (it cannot split an empty ``source``)."""
    return step.step_comparisons(rows) if len(rows) else []


def _sizes(frame: pd.DataFrame) -> str:
    return ", ".join(f"{r.phase} {r.tokens} ({r.delta_pct:+.1f}%)" for r in frame.itertuples())


def sign_targets(rows: pd.DataFrame, predicted: pd.DataFrame, *, shipped: pd.DataFrame) -> pd.DataFrame:
    """How often the step change predicted from verify has the measured sign, per measurement and model.

    Args:
        rows: step rows of every set (as :func:`repaired_targets`); each comparison whose ``cache``
            state loaded the verified pass's cache (``h200/step/<model>-<dtype>/cache.json``) is
            measured cache against untuned.
        predicted: :func:`profkit.analysis.verify.verify_step_changes` rows.
        shipped: the shipped tuned step's change against untuned (``Results.step_measured``),
            measured tuned against untuned.

    Returns:
        One row per (against, model, dtype) (SIGN_COLUMNS): ``against`` is ``"shipped tuned step"``
        or the comparison's ``where``; the :func:`profkit.analysis.step.sign_agreement` counts;
        ``met``: ``agree >= SIGN_TARGET``. The shipped tuned step first, then the comparisons in order.
    """
    against = [("shipped tuned step", shipped, "tuned")]
    for where, model, dtype, group in _comparisons(rows):
        measured = step.cache_change(group, cache=f"h200/step/{model}-{dtype}/cache.json")  # the verified pass's cache
        if len(measured):
            against.append((where, measured, "cache"))
    parts = [step.sign_agreement(measured, predicted, state=state).assign(against=where)
             for where, measured, state in against]
    out = pd.concat(parts, ignore_index=True)
    return conform_columns(out.assign(met=out["agree"] >= SIGN_TARGET), SIGN_COLUMNS)


def cost_targets(provenance: Mapping[str, Mapping]) -> pd.DataFrame:
    """Verify seconds per tuning second of the same shape in one process (the policy study), per policy.

    Args:
        provenance: ``Catalog.provenance``; each file's ``runs`` entries holding ``verify_s``,
            ``tune_call_s``, ``n`` and ``k`` are the study's shapes, in the order they ran.

    Returns:
        One row per (tuning, policy) (COST_COLUMNS), sorted by them: ``tuning`` is ``first`` for a
        shape's first tuning in its process (it pays the cuDNN plan builds, as a user's tuning pass
        does) and ``later`` after; ``shapes``, the ratio's min, max and median, and ``at_most_half``
        (shapes with ratio <= COST_TARGET). Empty when the data holds no policy study.
    """
    runs = []
    for p in provenance.values():
        seen = set()
        for run in p.get("runs") or []:
            if isinstance(run, dict) and {"verify_s", "tune_call_s", "n", "k"} <= set(run):
                runs.append({**run, "tuning": "later" if (run["n"], run["k"]) in seen else "first"})
                seen.add((run["n"], run["k"]))
    if not runs:
        return empty(COST_COLUMNS)
    ratios = pd.DataFrame(runs).assign(ratio=lambda f: f["verify_s"] / f["tune_call_s"],
                                       half=lambda f: f["ratio"] <= COST_TARGET)
    out = ratios.groupby(["tuning", "policy"], sort=True).agg(
        shapes=("ratio", "size"), ratio_min=("ratio", "min"), ratio_max=("ratio", "max"),
        ratio_median=("ratio", "median"), at_most_half=("half", "sum")).reset_index()
    return conform_columns(out, COST_COLUMNS)


def advise_tuning(full: pd.DataFrame, planned: pd.DataFrame) -> pd.DataFrame:
    """Tuning wall time of the full and the planned pass (``tuning_s`` of their step rows) and the ratio.

    Returns:
        One row (ADVISE_TUNING_COLUMNS): ``full_tuning_s``, ``planned_tuning_s`` (each the first
        ``tuning_s`` recorded in the pass's step rows) and ``ratio`` = full / planned.
    """
    full_s = float(full["tuning_s"].dropna().iloc[0])
    planned_s = float(planned["tuning_s"].dropna().iloc[0])
    return conform_columns(pd.DataFrame([{"full_tuning_s": full_s, "planned_tuning_s": planned_s,
                                  "ratio": full_s / planned_s}]), ADVISE_TUNING_COLUMNS)


def advised_state(compare: pd.DataFrame) -> str:
    """The state of the compare process that ran the plan's cache: ``advised``, else ``untuned``.

    A plan that skips every op tunes nothing, so FlashInfer writes no cache: its step is the untuned one.
    """
    return "advised" if "advised" in set(compare["state"]) else "untuned"


def advised_step(compare: pd.DataFrame) -> pd.DataFrame:
    """The advised step against the tuned (``cache``) and untuned steps of the same process, per size.

    Returns:
        One row per (phase, tokens): ``advised_ms``, ``tuned_ms``, ``vs_tuned_pct`` (rounded to
        0.01), ``vs_tuned`` (``slower``, ``faster`` or ``within noise``, by the comparison rule),
        and ``untuned_ms``, ``vs_untuned_pct``, ``vs_untuned`` the same against untuned (NA when
        the advised state is the untuned one: :func:`advised_state`).
    """
    advised = advised_state(compare)
    against = {}
    for baseline in ("cache", "untuned"):
        if baseline == advised:
            continue
        rows = compare[compare["state"].isin([advised, baseline])]
        against[baseline] = step.measured_step_change(rows, baseline=baseline).set_index(["phase", "tokens"])
    columns = {"advised_ms": against["cache"]["step_ms"], "tuned_ms": against["cache"]["baseline_ms"],
               "vs_tuned_pct": against["cache"]["delta_pct"].round(2),
               "vs_tuned": against["cache"].apply(_verdict, axis=1)}
    if "untuned" in against:
        columns.update({"untuned_ms": against["untuned"]["baseline_ms"],
                        "vs_untuned_pct": against["untuned"]["delta_pct"].round(2),
                        "vs_untuned": against["untuned"].apply(_verdict, axis=1)})
    table = pd.DataFrame(columns)
    for name in ("untuned_ms", "vs_untuned_pct", "vs_untuned"):
        if name not in table:
            table[name] = pd.NA
    return table.reset_index()


def _verdict(row) -> str:
    return "slower" if row["slower"] else "faster" if row["beyond_noise"] else "within noise"


def written_plan(written: PlanFile) -> Plan:
    """The plan ``profkit advise`` wrote (:func:`profkit.sources.plan.read_plan`) as a :class:`Plan`.

    Its switches (``skip_ops``, ``tuning_buckets``, ``blocklist``) and per-op numbers are the
    written ones; ``buckets`` and ``tactics`` are empty (the files hold no per-bucket costs), so
    the Plan serves :func:`~profkit.analysis.advise.plan_violations` and
    :func:`~profkit.analysis.advise.autotune_arguments`, not :func:`~profkit.analysis.advise.budget_frontier`.
    """
    ops = pd.DataFrame([{**{name: getattr(o, name) for name in OP_COLUMNS if hasattr(o, name)},
                         "n_tuned_buckets": len(o.tuned_buckets), "saved_s": o.full_s - o.planned_s,
                         "ratio": o.full_s / o.planned_s if o.planned_s > 0 else float("inf")}
                        for o in written.ops])
    return Plan(ops=conform_columns(ops, OP_COLUMNS) if len(ops) else empty(OP_COLUMNS), buckets=empty(BUCKET_COLUMNS),
                tactics=empty(PLAN_TACTIC_COLUMNS), skip_ops=tuple(written.skip_ops),
                tuning_buckets=None if written.tuning_buckets is None else tuple(written.tuning_buckets),
                blocklist={key: list(tactics) for key, tactics in written.blocklist.items()},
                metadata=dict(written.metadata), budget=written.budget, gain_source=written.gain_source,
                notes=tuple(written.notes))
