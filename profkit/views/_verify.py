"""Do the tuner's picks hold in serving? The tuner's speedup against the serving speedup, per bucket."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from profkit.schema import require
from profkit.views._style import ACCENT, NEUTRAL, SLOWER, empty_axes, figure_and_axes, owns, split_axes, styled

VERDICT_STYLE = {"faster": (ACCENT, "o", "pick faster than the default in serving"),
                 "within_noise": (NEUTRAL, "o", "within serving noise"),
                 "not_measurable": (NEUTRAL, "s", "serving not measurable"),
                 "slower": (SLOWER, "v", "pick slower than the default in serving")}
TUNER_KEYS = ((True, "tuner's own times: beyond noise too"),
              (False, "tuner's own times: within noise or not measurable"))
# (tuner verdict, serving verdict), both beyond noise -> (corner: right of x=1, above y=1), what it means.
QUADRANTS = {("faster", "faster"): ((True, True), "tuner: faster, serving: faster"),
             ("slower", "faster"): ((False, True), "tuner: slower, serving: faster"),
             ("slower", "slower"): ((False, False), "tuner: slower, serving: slower"),
             ("faster", "slower"): ((True, False), "tuner: faster, serving: slower")}
NOTE = ("One point per bucket and capture, at the bucket's own M. Bold: buckets per corner where both the tuner's "
        "own times and serving differ from the default beyond noise (docs/comparison_rule.md); a bucket within "
        "noise\non either side is counted apart. Colour: the serving verdict; filled: the tuner's verdict is beyond "
        "noise too; error bars: the p10-p90 band of the CUDA-graph replays.")


@styled
def plot_serving_vs_tuner(verdicts: pd.DataFrame, *, op: str | None = None, ax: Axes | None = None) -> Figure:
    """Per op: x = the tuner's speedup of its pick over the default, y = the same in serving.

    Args:
        verdicts: :func:`profkit.analysis.verify.bucket_verdicts` rows; each bucket at its own M
            is drawn (``at_bucket``). ``verdict`` (serving) and ``tuner_verdict`` (the tuner's own
            times) are the comparison rule's.
        op: only this op (one panel); default one panel per op, side by side.
        ax: draw into this Axes instead of a new figure; several ops share its place in the grid.

    Points above y=1 held in serving; the colour is the serving verdict, a filled marker a tuner
    verdict beyond noise (error bars: the p10-p90 band). Each corner is labelled with the buckets
    in it whose two verdicts are both beyond noise; the title counts how many of those agree and
    how many buckets are within noise on a side.
    """
    require(verdicts, ("op", "at_bucket", "tuner_speedup", "serving_speedup", "serving_noise", "verdict",
                       "tuner_verdict"), "verdicts")
    v = verdicts[verdicts["at_bucket"].fillna(False).to_numpy(dtype=bool)]
    if op is not None:
        v = v[(v["op"] == op).to_numpy(dtype=bool)]
    ops = sorted(v["op"].dropna().unique())
    fig, ax = figure_and_axes(ax, figsize=(5.2 * max(1, len(ops)), 5.2))
    if not ops:
        empty_axes(ax, "no verify verdict at a bucket's own M" + (f" for {op}" if op else ""))
        return fig
    own = owns(ax)
    panels = split_axes(ax, len(ops))
    for panel, name in zip(panels, ops):
        _draw(panel, v[(v["op"] == name).to_numpy(dtype=bool)], name)
    handles = {}
    for panel in panels:
        for h, lab in zip(*panel.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    labels = [s[2] for s in VERDICT_STYLE.values() if s[2] in handles]
    beyond = _beyond(v["tuner_verdict"])
    keys = [(Line2D([], [], marker="o", linestyle="", color="#555555", markerfacecolor="#555555" if filled else "white"),
             text) for filled, text in TUNER_KEYS if (beyond == filled).any()]
    entries = [handles[lab] for lab in labels] + [h for h, _ in keys], labels + [t for _, t in keys]
    if own:
        fig.legend(*entries, loc="outside upper center", ncol=min(len(entries[0]), 5))
        fig.text(0.01, 0.005, NOTE, fontsize=7, color="#555555", va="bottom")
        fig.get_layout_engine().set(rect=(0, 0.08, 1, 0.92))
    else:
        panels[0].legend(*entries, loc="upper left", fontsize=6.5)
    return fig


def _beyond(verdict: pd.Series) -> np.ndarray:
    return verdict.astype("string").isin(["faster", "slower"]).fillna(False).to_numpy(dtype=bool)


def _draw(ax: Axes, g: pd.DataFrame, op: str) -> None:
    x, y = g["tuner_speedup"].to_numpy(float), g["serving_speedup"].to_numpy(float)
    serving = g["verdict"].astype("string").fillna("not_measurable").to_numpy(dtype=str)
    tuner = g["tuner_verdict"].astype("string").fillna("not_measurable").to_numpy(dtype=str)
    filled = _beyond(g["tuner_verdict"])
    lo, hi = np.nanmin(np.r_[x, y, 1.0]), np.nanmax(np.r_[x, y, 1.0])
    pad = 0.1 * (hi - lo) + 0.005
    for verdict, (colour, marker, label) in VERDICT_STYLE.items():
        for fill in (True, False):
            sel = (serving == verdict) & (filled == fill)
            if sel.any():
                ax.errorbar(x[sel], y[sel], yerr=y[sel] * g["serving_noise"].to_numpy(float)[sel], fmt=marker, ms=4.5,
                            color=colour, ecolor=colour, markerfacecolor=colour if fill else "white", elinewidth=0.6,
                            alpha=0.85, zorder=3, label=label)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(lo - pad, hi + pad)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color=NEUTRAL, lw=0.6, ls="--", zorder=1)
    counts = {}
    for (t, s), ((right, above), meaning) in QUADRANTS.items():
        counts[(t, s)] = n = int(((tuner == t) & (serving == s)).sum())
        where = dict(xy=(0.98 if right else 0.02, 0.98 if above else 0.02), xycoords="axes fraction",
                     ha="right" if right else "left", va="top" if above else "bottom", zorder=4,
                     color=SLOWER if t != s else "#333333")
        ax.annotate(f"{n}", fontsize=12, fontweight="bold", **where)
        ax.annotate(meaning, xytext=(0, -17 if above else 17), textcoords="offset points", fontsize=7, **where)
    both = sum(counts.values())
    agree = counts[("faster", "faster")] + counts[("slower", "slower")]
    ax.set_title(f"{op}\nbeyond noise on both timers: {both} of {len(g)} buckets\n"
                 f"serving agrees at {agree}, not at {both - agree}; {len(g) - both} within noise", fontsize="small")
    ax.set_xlabel("tuner's speedup over the default (its own timer)")
    ax.set_ylabel("serving speedup over the default (CUDA graph)")
