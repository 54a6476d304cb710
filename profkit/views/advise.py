"""A tuning plan (``profkit.analysis.advise``) drawn: its figure and its section of the report.

The files ``profkit advise`` writes (plan.py, blocklist.json, the engines' switches, plan.md)
are written by :mod:`profkit.outputs.engine_plans`, never here.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from profkit.analysis.advise import Plan
from profkit.outputs.engine_plans import plan_markdown, plan_table
from profkit.views._html import slug
from profkit.views._style import ACCENT, NEUTRAL, SLOWER, categorical_bucket_axis, figure_and_axes, styled


MAX_OP_FIGURES = 8  # the report draws one plan figure per op up to this many ops, else one for all


@styled
def plot_plan(plan: Plan, *, op: str | None = None, ax=None) -> Figure:
    """Per bucket (one equal cell each): tuning seconds (tuned by the plan: dark, left out: grey), and
    the step time per pass each bucket's tuning buys beyond noise (red line, right axis)."""
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
    twin.set_ylabel("us per pass bought by tuning\n(beyond noise)", color=SLOWER)
    twin.set_ylim(bottom=min(0.0, twin.get_ylim()[0]))
    twin.grid(False)
    handles = [Patch(color=ACCENT, label="tuned by the plan")] if tuned.any() else []
    handles += [Patch(color=NEUTRAL, label="left out")] if not tuned.all() else []
    ax.legend(handles=handles + [Line2D([], [], color=SLOWER, marker="o", ms=3.5, label="gain of tuning it")],
              loc="upper left", fontsize=7)
    name = _plain_text(op or ", ".join(plan.ops["op"]))
    ops = plan.ops if op is None else plan.ops[plan.ops["op"] == op]
    full, planned = float(ops["full_s"].sum()), float(ops["planned_s"].sum())
    ax.set_title(f"{name}: the plan tunes {int(tuned.sum())} of {len(per)} buckets, "
                 f"{planned:.0f} s of {full:.0f} s of tuning")
    return fig


def advise_section(plan: Plan) -> tuple[str, list[tuple[str, Figure]]]:
    """The report section: its markdown and its figures (name, Figure), one figure per op."""
    text = plan_markdown(plan).replace("# Tuning plan", "## Tuning plan", 1)
    return text, [(slug(f"advise-{op}"), plot_plan(plan, op=op)) for op in plan.ops["op"]]


def advise_report_section(ctx):
    """A section builder for :data:`profkit.views.report.SECTIONS`: the plan of the report's captures.

    The plan is the one with no step cost beyond noise (by serving timings where the report has
    verify verdicts, else the tuner's), with the budgets table beside it: one figure per op up to
    :data:`MAX_OP_FIGURES` ops, else one figure of all. None when the captures hold no tuning; the
    reason in one line when advise cannot plan them.
    """
    from profkit.analysis.advise import advise, budget_frontier
    from profkit.errors import ProfkitError
    from profkit.views import report

    verdicts = getattr(ctx, "verdicts", None)
    serving = {"verify": verdicts} if verdicts is not None and len(verdicts) else {}
    if ctx.data.tables.tuning.empty:
        return None
    try:
        plan = advise(ctx.data.tables, **serving)
    except ProfkitError as exc:
        return report.Section("Tuning plan (profkit advise)", f"No plan: {_one_line(exc)}")
    frontier = budget_frontier(plan)
    ops = list(plan.ops["op"])
    caption = ("Tuning seconds per bucket (dark: tuned by the plan, grey: left out) and the step time per pass "
               "each bucket's tuning buys beyond noise.")
    if len(ops) <= MAX_OP_FIGURES:
        verdicts = [f"- {_one_line(v)}" for v in plan.ops["verdict"]]
        figures = tuple(report.FigureSpec(slug(f"advise_{op}"), f"Tuning plan for {op}", caption,
                                          draw=lambda op=op: plot_plan(plan, op=op)) for op in ops)
    else:  # hundreds of ops (many processes): one figure of all, the verdicts in the table
        decisions = plan.ops["decision"].value_counts()
        verdicts = [f"- {len(ops)} ops: " + ", ".join(f"{int(n)} {d}" for d, n in decisions.items())
                    + f"; tuning {plan.full_s:.1f} s -> {plan.planned_s:.1f} s (every op in the advise_plan table)."]
        figures = (report.FigureSpec("advise", f"Tuning plan for all {len(ops)} ops", caption + " Summed over ops.",
                                     draw=lambda: plot_plan(plan)),)
    text = "\n".join([f"Gains by {plan.gain_source} timings, costs from the tuning table; one pass = one call of "
                      "every captured shape at every bucket. `profkit advise` writes the switches.", ""]
                     + verdicts + [f"- {_one_line(n)}" for n in plan.notes])
    tables = (report.Table(plan_table(plan), "advise_plan", sort_by="full_tuning_s", what="longest full tuning first"),
              report.Table(frontier, "advise_budgets", what="at most Y% slower per pass"))
    return report.Section("Tuning plan (profkit advise)", text, figures=figures, tables=tables)


def _one_line(text) -> str:
    """One line of the section's Markdown list: a name's line breaks become spaces."""
    return " ".join(str(text).splitlines())


def _plain_text(text: str) -> str:
    """Text matplotlib draws as it is: ``$`` would start mathtext (and an unbalanced one fails to draw)."""
    return text.replace("$", r"\$")
