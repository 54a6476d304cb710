"""Do the tuner's picks hold in serving? The tuner's speedup against the serving speedup, per bucket."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from profkit.analysis._frames import require
from profkit.views._style import ACCENT, NEUTRAL, SLOWER, styled

VERDICT_STYLE = {"faster": (ACCENT, "o", "faster than the default in serving"),
                 "within_noise": (NEUTRAL, "o", "within serving noise"),
                 "slower": (SLOWER, "v", "slower than the default in serving")}


@styled
def plot_serving_vs_tuner(verdicts: pd.DataFrame) -> Figure:
    """One panel per op: x = the tuner's speedup of its pick over the default, y = the serving one.

    Args:
        verdicts: :func:`profkit.analysis.verify.bucket_verdicts` rows; each bucket at its own M.

    Points above y=1 held in serving; the colour is the serving verdict against the p10-p90 bands
    (error bars); each quadrant is labelled with its count.
    """
    require(verdicts, ("op", "at_bucket", "tuner_speedup", "serving_speedup", "serving_noise", "verdict"), "verdicts")
    v = verdicts[verdicts["at_bucket"].fillna(False)]
    ops = sorted(v["op"].unique())
    fig = Figure(figsize=(4.4 * max(1, len(ops)), 4.6), layout="constrained")
    axes = fig.subplots(1, max(1, len(ops)), squeeze=False)[0]
    for ax, op in zip(axes, ops):
        g = v[v["op"] == op]
        x, y = g["tuner_speedup"].to_numpy(float), g["serving_speedup"].to_numpy(float)
        lo, hi = np.nanmin(np.r_[x, y, 1.0]), np.nanmax(np.r_[x, y, 1.0])
        pad = 0.08 * (hi - lo) + 0.005
        for verdict, (colour, marker, label) in VERDICT_STYLE.items():
            sel = (g["verdict"] == verdict).to_numpy()
            if not sel.any():
                continue
            ax.errorbar(x[sel], y[sel], yerr=y[sel] * g["serving_noise"].to_numpy(float)[sel], fmt=marker, ms=4.5,
                        color=colour, ecolor=colour, elinewidth=0.6, alpha=0.85, label=label)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.axvline(1.0, color="black", lw=0.8)
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(lo - pad, hi + pad)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color=NEUTRAL, lw=0.6, ls="--")
        for qx, qy, ha, va in ((1, 1, "right", "top"), (0, 1, "left", "top"), (0, 0, "left", "bottom"),
                               (1, 0, "right", "bottom")):
            n = int((((x > 1) == bool(qx)) & ((y > 1) == bool(qy))).sum())
            ax.text(0.98 if qx else 0.02, 0.98 if qy else 0.02, f"{n}", transform=ax.transAxes, ha=ha, va=va,
                    fontsize=11, fontweight="bold", color="#444444")
        counts = g["verdict"].value_counts()
        ax.set_title(f"{op}: {counts.get('slower', 0)} slower, {counts.get('faster', 0)} faster of {len(g)}")
        ax.set_xlabel("tuner's speedup over the default (its own timer)")
        ax.set_ylabel("serving speedup (CUDA graph)")
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="outside upper center", ncol=3)
    fig.get_layout_engine().set(rect=(0, 0.07, 1, 0.93))
    fig.text(0.01, 0.005, "One point per bucket at its own M; bold numbers count the points per quadrant (right "
             "of 1: the tuner expected a gain; above 1: it held).\nColour: serving verdict against the default, "
             "by the p10-p90 bands of the graph replays (error bars).", fontsize=7, color="#555555", va="bottom")
    return fig
