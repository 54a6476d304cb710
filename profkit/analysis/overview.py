"""Every analysis the report shows, run once over a data directory's frames.

:func:`overview` takes what :func:`profkit.sources.datadir.read_datadir` returns (any object with
its attributes: frames and plain mappings, no files) and returns an :class:`Overview` of frames.
Each field is the output of one public analysis function, so a notebook can call the same
function on its own frames.
"""

from __future__ import annotations

import dataclasses
import warnings

import pandas as pd

from profkit.analysis import compare, cost, decisions, engine, op_timings, step
from profkit.errors import ProfkitError


@dataclasses.dataclass(frozen=True, eq=False)
class Overview:
    """The analysis frames of one data directory (each empty when its input is absent).

    Attributes:
        noise: :func:`~profkit.analysis.noise` of all candidates.
        winners: :func:`~profkit.analysis.winners` of all candidates.
        first_runs: the earliest run of each (op, shape) (:func:`~profkit.analysis.first_runs`).
        speedups: :func:`~profkit.analysis.speedup_vs_default` of the first runs' first calls.
        breakdown: :func:`~profkit.analysis.tuning_breakdown` per bucket, all runs.
        calls: :func:`~profkit.analysis.tuning_breakdown` per call, all runs.
        value: :func:`~profkit.analysis.tuning_value` of the first runs.
        worth: :func:`~profkit.analysis.worth_tuning` of the first runs.
        stability: :func:`~profkit.analysis.winner_stability` across runs and calls.
        ranks: :func:`~profkit.analysis.rank_divergence`.
        diff: :func:`~profkit.analysis.repeat_diff` (first run vs the next run of its shapes).
        cache_diff: :func:`~profkit.analysis.cache_agreement`.
        between: :func:`~profkit.analysis.between_buckets` of the op timings.
        step_rows: the ``profkit step`` rows the step analyses use.
        step_measured: :func:`~profkit.analysis.step.measured_step_change`.
        step_predicted: :func:`~profkit.analysis.step.predicted_step_changes`.
        step_tuning: :func:`~profkit.analysis.step.tuning_pass_seconds`.
        step_break_even: :func:`~profkit.analysis.step.break_even_table`.
        e2e: :func:`kernels_beside_serving`.
    """

    noise: pd.DataFrame
    winners: pd.DataFrame
    first_runs: list
    speedups: pd.DataFrame
    breakdown: pd.DataFrame
    calls: pd.DataFrame
    value: pd.DataFrame
    worth: pd.DataFrame
    stability: pd.DataFrame
    ranks: pd.DataFrame
    diff: pd.DataFrame
    cache_diff: pd.DataFrame
    between: pd.DataFrame
    step_rows: pd.DataFrame
    step_measured: pd.DataFrame
    step_predicted: pd.DataFrame
    step_tuning: pd.DataFrame
    step_break_even: pd.DataFrame
    e2e: pd.DataFrame


def overview(data) -> Overview:
    """Run every analysis the report needs over ``data``'s frames (pure; nothing is read).

    Args:
        data: a :class:`profkit.sources.datadir.DataDir` (or any object with its attributes).

    Returns:
        An :class:`Overview`.
    """
    t = data.tables
    noise = decisions.noise(t.candidates)
    won = decisions.winners(t.candidates, noise=noise)
    first = compare.first_runs(won, t.runs)
    # One decision per bucket for the headline figures: the first call of the first run.
    prim = won[won["run_id"].isin(first).to_numpy(dtype=bool)].sort_values("call", kind="stable")
    speedups = decisions.speedup_vs_default(prim.drop_duplicates(["run_id", "op", "profile"]))
    first_tuning = t.tuning[t.tuning["run_id"].isin(first).to_numpy(dtype=bool)]
    step_rows = data.step
    has_step = len(step_rows) and {"state", "step_ms", "tokens"} <= set(step_rows.columns)
    measured = step.measured_step_change(step_rows) if has_step else pd.DataFrame()
    tuning_pass = step.tuning_pass_seconds(t.tuning, captures=data.step_captures)
    return Overview(
        noise=noise, winners=won, first_runs=first, speedups=speedups,
        breakdown=cost.tuning_breakdown(t.tuning), calls=cost.tuning_breakdown(t.tuning, by="call"),
        value=cost.tuning_value(speedups, first_tuning), worth=cost.worth_tuning(speedups, first_tuning),
        stability=compare.winner_stability(won, candidates=t.candidates),
        ranks=compare.rank_divergence(t.candidates, noise=noise),
        diff=compare.repeat_diff(won, first=first, candidates=t.candidates),
        cache_diff=compare.cache_agreement(won, data.cache_winners),
        between=op_timings.between_buckets(data.op_timings, speedups=speedups) if len(data.op_timings)
        else pd.DataFrame(),
        step_rows=step_rows if has_step else pd.DataFrame(), step_measured=measured,
        step_predicted=step.predicted_step_changes(t.winners, step_rows, captures=data.step_captures,
                                                   linears=data.linears) if has_step else pd.DataFrame(),
        step_tuning=tuning_pass,
        step_break_even=step.break_even_table(measured, tuning_pass) if has_step else pd.DataFrame(),
        e2e=kernels_beside_serving(speedups, data.bench, labels=data.labels))


def kernels_beside_serving(speedups: pd.DataFrame, bench: pd.DataFrame, *, labels=None) -> pd.DataFrame:
    """Kernel speedups of the bench's model beside a serving pair (:func:`~profkit.analysis.kernel_vs_e2e`).

    The pair is autotune off/on where the bench says so, else the first two serving rows in
    file order (baseline first). Kernels are the captured shapes whose display label names the
    bench's model, else all of them.

    Returns:
        :func:`~profkit.analysis.kernel_vs_e2e` rows; empty when ``bench`` has no serving pair
        (with a warning naming why when rows were given).
    """
    if bench.empty or "total_output_tokens" not in bench:
        return pd.DataFrame()
    serving = bench[bench["total_output_tokens"].notna().to_numpy(dtype=bool)]
    if len(serving) < 2:
        return pd.DataFrame()
    flags = serving["autotune"].astype("boolean")
    known = not flags.isna().any() and flags.nunique() == 2
    pair = {} if known else {"baseline": str(serving["label"].iloc[0]), "treatment": str(serving["label"].iloc[1])}
    model = str(serving["model"].dropna().iloc[0]).rsplit("/", 1)[-1] if serving["model"].notna().any() else ""
    labels = labels or {}
    mine = speedups[speedups["shape"].map(lambda s: model in labels.get(s, "")).to_numpy(dtype=bool)] if model \
        else speedups
    try:
        return engine.kernel_vs_e2e(mine if len(mine) else speedups, serving, **pair)
    except ProfkitError as exc:
        warnings.warn(f"bench files given but no serving pair found: {exc}", stacklevel=2)
        return pd.DataFrame()
