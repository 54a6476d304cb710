"""What tuning bought beyond noise, per op: every serving and step comparison with its interval."""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from profkit.schema import require
from profkit.views._style import ACCENT, SLOWER, add_note, empty_axes, styled

# Colour only for verdicts beyond noise.
VERDICT_COLOURS = {"faster": ACCENT, "slower": SLOWER, "within_noise": "#c8c8c8"}
KINDS = (("serving", "serving\n(profkit verify)"), ("step", "model step\n(profkit step)"))


@dataclasses.dataclass(frozen=True)
class VerdictRow:
    """The measured points of one kind (serving or step) of one op."""

    kind: str
    effects_pct: tuple[float, ...]     # tuned / untuned time - 1, in percent (negative: faster)
    lows_pct: tuple[float, ...]
    highs_pct: tuple[float, ...]
    verdicts: tuple[str, ...]
    not_measurable: int = 0


@dataclasses.dataclass(frozen=True)
class VerdictPanel:
    """One op: its recommendation and its rows of points."""

    op: str
    recommendation: str
    rows: tuple[VerdictRow, ...]


def _verdict_info(evidence: pd.DataFrame, recommendations: Mapping[str, str] | None = None
                  ) -> tuple[VerdictPanel, ...]:
    """Panels per op (sorted), rows per kind that has points."""
    recommendations = recommendations or {}
    panels = []
    for op, g in evidence.groupby("op", sort=True):
        rows = []
        for kind, _ in KINDS:
            k = g[(g["kind"] == kind).to_numpy(dtype=bool)]
            if k.empty:
                continue
            drawn = k[(k["verdict"] != "not_measurable").to_numpy(dtype=bool)].sort_values("effect", kind="stable")
            pct = lambda c: tuple(float(x) for x in 100 * drawn[c].astype(float))  # noqa: E731
            rows.append(VerdictRow(kind=kind, effects_pct=pct("effect"), lows_pct=pct("effect_lo"),
                                   highs_pct=pct("effect_hi"), verdicts=tuple(drawn["verdict"].astype(str)),
                                   not_measurable=int(len(k) - len(drawn))))
        panels.append(VerdictPanel(op=str(op), recommendation=str(recommendations.get(op, "")), rows=tuple(rows)))
    return tuple(panels)


def _draw_panel(panel: VerdictPanel, ax: Axes) -> None:
    labels = dict(KINDS)
    ys = []
    for y, row in enumerate(panel.rows):
        ys.append(y)
        n = len(row.effects_pct)
        # Spread the points of a row over its height, in effect order, so they do not hide each other.
        jitter = np.linspace(-0.3, 0.3, n) if n > 1 else np.zeros(n)
        for verdict in ("within_noise", "slower", "faster"):
            sel = np.array([v == verdict for v in row.verdicts], dtype=bool)
            if not sel.any():
                continue
            x = np.asarray(row.effects_pct)[sel]
            lo, hi = np.asarray(row.lows_pct)[sel], np.asarray(row.highs_pct)[sel]
            # Intervals only for the verdicts beyond noise: hundreds of grey bars would hide them.
            err = None if verdict == "within_noise" else np.vstack([np.nan_to_num(x - lo), np.nan_to_num(hi - x)])
            colour = VERDICT_COLOURS[verdict]
            ax.errorbar(x, y + jitter[sel], xerr=err, fmt="o", ms=3.2, color=colour, ecolor=colour,
                        elinewidth=0.7, alpha=0.9 if verdict != "within_noise" else 0.7,
                        zorder=3 if verdict != "within_noise" else 2)
        counts = {v: row.verdicts.count(v) for v in ("faster", "slower", "within_noise")}
        text = (f"{counts['faster']} faster, {counts['slower']} slower, {counts['within_noise']} within noise"
                + (f"; {row.not_measurable} not measurable" if row.not_measurable else ""))
        ax.annotate(text, xy=(1.0, y), xycoords=("axes fraction", "data"), xytext=(6, 0), textcoords="offset points",
                    va="center", ha="left", fontsize="x-small", color="#333333", annotation_clip=False)
    ax.axvline(0.0, color="#444444", linewidth=0.8, zorder=1)
    drawn = [x for row in panel.rows for x in (*row.effects_pct, *row.lows_pct, *row.highs_pct) if np.isfinite(x)]
    if drawn:  # frame the measured range, 0 included, at least +-2%
        lo, hi = min(min(drawn), -2.0), max(max(drawn), 2.0)
        pad = 0.05 * (hi - lo)
        ax.set_xlim(lo - pad, hi + pad)
    else:
        ax.set_xlim(-2.0, 2.0)
    for y, row in enumerate(panel.rows):
        if not row.effects_pct:
            ax.text(0.5, y, "nothing measurable", transform=ax.get_yaxis_transform(), ha="center", va="center",
                    color="#777777", fontsize="small")
    ax.set_yticks(ys, [labels[row.kind] for row in panel.rows])
    ax.set_ylim(len(panel.rows) - 0.5, -0.5)
    ax.grid(axis="y", visible=False)
    title = panel.op + (f": {panel.recommendation}" if panel.recommendation else "")
    ax.set_title(title, loc="left")


@styled
def plot_verdicts(evidence: pd.DataFrame, *, recommendations: Mapping[str, str] | None = None,
                  ax: Axes | None = None) -> Figure:
    """Plot, per op, every comparison of tuned against untuned that its verdict rests on.

    One panel per op (its own x range, so a 1% change and a 30% one both read). Rows: serving
    (``profkit verify``: the tuner's pick against the default at each bucket's M) and the model
    step (``profkit step``: the tuned cache against untuned at each size). x is the change of
    time with tuning in percent (negative: faster); points beyond noise with the comparison rule's
    95% interval. Blue: faster beyond noise, red: slower beyond noise, light grey: within noise;
    points that are not measurable (one pass of each state) are counted right of the row, not
    drawn.

    Args:
        evidence: :func:`profkit.analysis.recommend.verdict_evidence` (op, kind, effect, effect_lo,
            effect_hi, verdict).
        recommendations: the recommendation per op, shown in its panel's title.
        ax: draw into this Axes instead of a new figure; several ops share its place in the grid.

    Returns:
        The Figure drawn into.
    """
    require(evidence, ("op", "kind", "effect", "effect_lo", "effect_hi", "verdict"), "verdict evidence")
    panels = _verdict_info(evidence, recommendations)
    heights = [max(len(p.rows), 1) * 0.55 + 0.55 for p in panels] or [1.0]
    own = ax is None
    fig = Figure(figsize=(10.0, sum(heights) + 0.9), layout="constrained") if own else ax.figure
    if not panels:
        empty_axes(ax if ax is not None else fig.add_subplot(), "no serving or step comparisons")
        return fig
    if own:
        axes = list(fig.subplots(len(panels), 1, squeeze=False, height_ratios=heights)[:, 0])
    else:  # the panels share the given Axes' place in its grid
        grid = ax.get_subplotspec().subgridspec(len(panels), 1, height_ratios=heights, hspace=0.6)
        ax.set_subplotspec(grid[0])
        axes = [ax] + [fig.add_subplot(grid[i]) for i in range(1, len(panels))]
    for panel, a in zip(panels, axes):
        _draw_panel(panel, a)
    axes[-1].set_xlabel("time with tuning vs without (%); < 0: tuning made it faster")
    handles = [Line2D([], [], marker="o", linestyle="", color=c, label=label)
               for c, label in ((VERDICT_COLOURS["faster"], "faster beyond noise"),
                                (VERDICT_COLOURS["slower"], "slower beyond noise"),
                                (VERDICT_COLOURS["within_noise"], "within noise"))]
    if own:
        fig.legend(handles=handles, loc="outside upper center", ncol=3, fontsize="small")
    else:
        axes[0].legend(handles=handles, loc="upper left", fontsize="x-small")
    add_note(axes[-1], "bars: the comparison rule's 95% interval of each point beyond noise (docs/comparison_rule.md)",
             below_pt=30)
    return fig
