"""A tuning plan (``profkit.analysis.advise``) drawn: :func:`plot_plan`.

The plan comes from analysis (:func:`profkit.analysis.advise.advise`; the report's is the
``Results.plan``, laid out by ``profkit.report.plan_section``); this module only
draws it. The files ``profkit advise`` writes (plan.py, blocklist.json, the engines' switches,
plan.md) are written by :mod:`profkit.outputs.engine_plans`, never here.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from profkit.analysis.advise import Plan
from profkit.views._style import ACCENT, NEUTRAL, SLOWER, categorical_bucket_axis, figure_and_axes, styled


@styled
def plot_plan(plan: Plan, *, op: str | None = None, ax=None) -> Figure:
    """Per bucket (one equal cell each): tuning seconds (tuned by the plan: dark, left out: grey), and
    the step time per pass each bucket's tuning buys as the plan counts it (red line, right axis):
    gains the comparison rule calls beyond noise, and, where the rule cannot judge the tuner's single
    timings, gains above the plan's stated threshold (the plan's buckets say which: ``verdict``, ``counted``)."""
    b = plan.buckets if op is None else plan.buckets[plan.buckets["op"] == op]
    fig, ax = figure_and_axes(ax, figsize=(8.0, 3.8))
    per = b.groupby("bucket", observed=True).agg(tuning_s=("tuning_s", "sum"), value_ms=("value_ms", "sum"),
                                                tuned=("tuned", "any")).reset_index()
    where = categorical_bucket_axis(ax, per["bucket"].astype(int).tolist())
    x = [where[int(v)] for v in per["bucket"]]
    tuned = per["tuned"].to_numpy(dtype=bool)
    ax.bar(x, per["tuning_s"], width=0.85, color=[ACCENT if t else NEUTRAL for t in tuned], edgecolor="white")
    ax.set_ylabel("tuning s (all shapes)")
    twin = ax.twinx()
    twin.plot(x, 1000.0 * per["value_ms"], color=SLOWER, marker="o", ms=3.5)
    twin.set_ylabel(f"us per pass bought by tuning\n({_counted_words(b)})", color=SLOWER)
    twin.set_ylim(bottom=min(0.0, twin.get_ylim()[0]))
    twin.grid(False)
    handles = [Patch(color=ACCENT, label="tuned by the plan")] if tuned.any() else []
    handles += [Patch(color=NEUTRAL, label="left out")] if not tuned.all() else []
    ax.legend(handles=handles + [Line2D([], [], color=SLOWER, marker="o", ms=3.5, label="gain of tuning it")],
              loc="upper left", fontsize=7)
    name = op or ", ".join(plan.ops["op"])
    ops = plan.ops if op is None else plan.ops[plan.ops["op"] == op]
    full, planned = float(ops["full_s"].sum()), float(ops["planned_s"].sum())
    ax.set_title(f"{name}: the plan tunes {int(tuned.sum())} of {len(per)} buckets, "
                 f"{planned:.0f} s of {full:.0f} s of tuning")
    return fig


def _counted_words(buckets) -> str:
    """Which gains the red line holds, in the plan's own terms (its ``verdict`` per bucket)."""
    verdict = buckets["verdict"].astype("string") if "verdict" in buckets else None
    if verdict is not None and (verdict == "not_measurable").fillna(False).any():
        return "beyond noise; not measurable:\nabove the stated threshold"
    return "beyond noise"
