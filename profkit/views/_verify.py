"""Do the tuner's picks hold in serving? The tuner's speedup against the serving speedup, per bucket."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from profkit.schema import require
from profkit.views._style import ACCENT, NEUTRAL, SLOWER, empty_axes, figure_and_axes, styled

VERDICT_STYLE = {"faster": (ACCENT, "o", "pick faster than the default in serving"),
                 "within_noise": (NEUTRAL, "o", "within serving noise"),
                 "slower": (SLOWER, "v", "pick slower than the default in serving")}
# (right of x=1, above y=1) -> what the quadrant means.
QUADRANTS = {(True, True): "tuner: faster, serving: faster", (False, True): "tuner: slower, serving: faster",
             (False, False): "tuner: slower, serving: slower", (True, False): "tuner: faster, serving: slower"}
NOTE = ("One point per bucket and capture, at the bucket's own M. Bold: points per quadrant (right of 1: the tuner "
        "timed its pick faster than the default;\nabove 1: so did serving), with how many of them beyond noise. "
        "Colour: the serving verdict under the comparison rule (docs/comparison_rule.md); error bars: the p10-p90 band "
        "of the CUDA-graph replays.")


@styled
def plot_serving_vs_tuner(verdicts: pd.DataFrame, *, op: str | None = None, ax: Axes | None = None) -> Figure:
    """Per op: x = the tuner's speedup of its pick over the default, y = the same in serving.

    Args:
        verdicts: :func:`profkit.analysis.verify.bucket_verdicts` rows; each bucket at its own M
            is drawn (``at_bucket``).
        op: only this op (one panel); default one panel per op, side by side.
        ax: draw into this Axes instead of a new figure; several ops share its place in the grid.

    Points above y=1 held in serving; the colour is the serving verdict under the comparison rule
    (error bars: the p10-p90 band); each quadrant is labelled with its count and what it means.
    """
    require(verdicts, ("op", "at_bucket", "tuner_speedup", "serving_speedup", "serving_noise", "verdict"), "verdicts")
    v = verdicts[verdicts["at_bucket"].fillna(False).to_numpy(dtype=bool)]
    if op is not None:
        v = v[(v["op"] == op).to_numpy(dtype=bool)]
    ops = sorted(v["op"].dropna().unique())
    fig, ax = figure_and_axes(ax, figsize=(5.2 * max(1, len(ops)), 5.0))
    if not ops:
        empty_axes(ax, "no verify verdict at a bucket's own M" + (f" for {op}" if op else ""))
        return fig
    own = fig.axes == [ax] and not ax.has_data()
    if len(ops) == 1:
        panels = [ax]
    elif own:
        ax.remove()
        panels = list(fig.subplots(1, len(ops), squeeze=False)[0])
    else:
        grid = ax.get_subplotspec().subgridspec(1, len(ops), wspace=0.35)
        ax.set_subplotspec(grid[0])
        panels = [ax] + [fig.add_subplot(grid[i]) for i in range(1, len(ops))]
    for panel, name in zip(panels, ops):
        _draw(panel, v[(v["op"] == name).to_numpy(dtype=bool)], name)
    if own:
        handles, labels = {}, []
        for panel in panels:
            for h, lab in zip(*panel.get_legend_handles_labels()):
                handles.setdefault(lab, h)
        labels = [s[2] for s in VERDICT_STYLE.values() if s[2] in handles]
        fig.legend([handles[lab] for lab in labels], labels, loc="outside upper center", ncol=3)
        fig.text(0.01, 0.005, NOTE, fontsize=7, color="#555555", va="bottom")
        fig.get_layout_engine().set(rect=(0, 0.07, 1, 0.93))
    else:
        panels[0].legend(loc="upper left", fontsize=6.5)
    return fig


def _draw(ax: Axes, g: pd.DataFrame, op: str) -> None:
    x, y = g["tuner_speedup"].to_numpy(float), g["serving_speedup"].to_numpy(float)
    lo, hi = np.nanmin(np.r_[x, y, 1.0]), np.nanmax(np.r_[x, y, 1.0])
    pad = 0.1 * (hi - lo) + 0.005
    for verdict, (colour, marker, label) in VERDICT_STYLE.items():
        sel = (g["verdict"] == verdict).to_numpy(dtype=bool)
        if sel.any():
            ax.errorbar(x[sel], y[sel], yerr=y[sel] * g["serving_noise"].to_numpy(float)[sel], fmt=marker, ms=4.5,
                        color=colour, ecolor=colour, elinewidth=0.6, alpha=0.85, label=label, zorder=3)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(lo - pad, hi + pad)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color=NEUTRAL, lw=0.6, ls="--", zorder=1)
    held = (g["verdict"] == "faster").to_numpy(dtype=bool)
    lost = (g["verdict"] == "slower").to_numpy(dtype=bool)
    for (right, above), meaning in QUADRANTS.items():
        inside = ((x > 1) == right) & ((y > 1) == above)
        beyond = int((inside & (held if above else lost)).sum())
        where = dict(xy=(0.98 if right else 0.02, 0.98 if above else 0.02), xycoords="axes fraction",
                     ha="right" if right else "left", va="top" if above else "bottom", zorder=4,
                     color=SLOWER if right and not above else "#333333")
        ax.annotate(f"{int(inside.sum())}", fontsize=12, fontweight="bold", **where)
        ax.annotate(f"{meaning}\n({beyond} beyond noise)", xytext=(0, -17 if above else 17),
                    textcoords="offset points", fontsize=7, linespacing=1.2, **where)
    counts = g["verdict"].value_counts()
    ax.set_title(f"{op}: {int(counts.get('faster', 0))} faster, {int(counts.get('within_noise', 0))} within noise,\n"
                 f"{int(counts.get('slower', 0))} slower than the default in serving (of {len(g)})")
    ax.set_xlabel("tuner's speedup over the default (its own timer)")
    ax.set_ylabel("serving speedup over the default (CUDA graph)")
