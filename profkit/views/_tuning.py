"""Tuning cost: stacked measure / prep / JIT / other seconds, and what the seconds bought."""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from profkit.errors import ProfkitError
from profkit.schema import require
from profkit.views._speedup import first_run_only
from profkit.views._style import (PHASE_LABELS, PHASES, add_note, empty_axes, figure_and_axes, short_label,
                                  series_colour, styled)


@dataclasses.dataclass(frozen=True)
class TuningTimeInfo:
    """Stacked seconds per bar; bars are ops/shapes (per="op") or buckets of one op (per="bucket")."""

    title: str
    bars: tuple[str, ...]
    seconds: tuple[tuple[str, tuple[float, ...]], ...]   # (phase column, seconds per bar)
    totals: tuple[float, ...]
    n_candidates: tuple[int, ...]
    per: str


def _tuning_time_info(breakdown: pd.DataFrame, *, per: str = "op", op: str | None = None,
                      shape: str | None = None, labels: Mapping[str, str] | None = None) -> TuningTimeInfo:
    """Sum the breakdown per op and shape (first run each) or per bucket of one op and shape."""
    b = breakdown
    if op is not None:
        b = b[(b["op"].astype("string") == op).fillna(False).to_numpy(dtype=bool)]
    if shape is not None:
        b = b[(b["shape"].astype("string") == shape).fillna(False).to_numpy(dtype=bool)]
    b, _ = first_run_only(b)
    phases = list(PHASES)
    if per == "op":
        g = b.groupby(["op", "shape"], sort=True, observed=True, dropna=False)
        names = [f"{o}  {short_label(str(s), labels)}" for o, s in g.groups.keys()]
        title = "Where tuning time went, per op and shape"
    elif per == "bucket":
        shapes = b[["op", "shape"]].drop_duplicates()
        if len(shapes) > 1:
            raise ProfkitError(f"per='bucket' needs one op and shape, found {len(shapes)}; pass op= and shape=")
        b = b.dropna(subset=["bucket"])
        g = b.groupby("bucket", sort=True, observed=True)
        names = [str(int(k)) for k in g.groups.keys()]
        title = ("Where tuning time went, per bucket" + (f": {shapes.iloc[0]['op']}  "
                 f"{short_label(str(shapes.iloc[0]['shape']), labels)}" if len(shapes) else ""))
    else:
        raise ProfkitError(f"per must be 'op' or 'bucket', got {per!r}")
    sums = g[phases + ["n_candidates"]].sum() if len(b) else pd.DataFrame(columns=phases + ["n_candidates"])
    seconds = tuple((p, tuple(float(x) for x in sums[p])) for p in phases)
    totals = tuple(float(x) for x in sums[phases].sum(axis=1)) if len(sums) else ()
    return TuningTimeInfo(title=title, bars=tuple(names), seconds=seconds, totals=totals,
                          n_candidates=tuple(int(x) for x in sums["n_candidates"]), per=per)


def _draw_tuning_time(info: TuningTimeInfo, ax: Axes, *, title: str | None = None, note: bool = True) -> None:
    """Stacked bars: horizontal per op/shape, vertical per bucket."""
    if not info.bars:
        empty_axes(ax, "no tuning rows")
        return
    pos = np.arange(len(info.bars))
    base = np.zeros(len(info.bars))
    for phase, secs in info.seconds:
        values = np.asarray(secs)
        if not values.any():
            continue
        if info.per == "op":
            ax.barh(pos, values, left=base, color=PHASES[phase], label=PHASE_LABELS[phase], height=0.7)
        else:
            ax.bar(pos, values, bottom=base, color=PHASES[phase], label=PHASE_LABELS[phase], width=0.8)
        base += values
    if info.per == "op":
        ax.set_yticks(pos, info.bars)
        ax.invert_yaxis()
        ax.set_xlabel("tuning wall time (s)")
        for y, total, n in zip(pos, info.totals, info.n_candidates):
            ax.annotate(f"{total:.1f} s, {n} cand.", xy=(total, y), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize="x-small")
        ax.set_xlim(0, max(info.totals) * 1.22)
        ax.grid(axis="y", visible=False)
    else:
        ax.set_xticks(pos, info.bars, rotation=90)
        ax.set_xlabel("bucket (M)")
        ax.set_ylabel("tuning wall time (s)")
        ax.grid(axis="x", visible=False)
    ax.set_title(info.title if title is None else title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small", borderaxespad=0)
    if note:
        add_note(ax, "buckets' own windows; each call adds a few ms outside them. profkit's extra default timing "
                     "is not included", below_pt=30 if info.per == "op" else 52)


@styled
def plot_tuning_time(breakdown: pd.DataFrame, *, per: str = "op", op: str | None = None, shape: str | None = None,
                     labels: Mapping[str, str] | None = None, title: str | None = None, note: bool = True,
                     ax: Axes | None = None) -> Figure:
    """Plot where tuning time went: measuring candidates vs runner prep, JIT and the rest.

    Each bar stacks ``measure_s`` (candidates timed), ``prep_s`` (before each runner's first
    candidate: cuDNN plan builds), ``jit_s`` (FlashInfer compiling modules) and ``other_s``.
    ``per="op"`` draws one horizontal bar per op and shape (total seconds and candidate count
    at its end); ``per="bucket"`` one vertical bar per bucket of one op and shape.

    Args:
        breakdown: output of :func:`profkit.analysis.tuning_breakdown` (``by="bucket"``); with
            several runs per op and shape the first run_id is drawn.
        per: "op" or "bucket".
        op: only this op (required with per="bucket" when several).
        shape: only this shape.
        labels: display names per shape label.
        title: the axes title (default: what the bars are).
        note: draw the note on what the seconds cover under the axes.
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.

    Raises:
        ProfkitError: for an unknown ``per``, or per="bucket" over several shapes.
    """
    require(breakdown, ("op", "shape", "bucket", "measure_s", "prep_s", "jit_s", "other_s", "n_candidates"),
            "tuning_breakdown")
    info = _tuning_time_info(breakdown, per=per, op=op, shape=shape, labels=labels)
    size = (9.0, 1.3 + 0.22 * max(len(info.bars), 1)) if per == "op" else (8.0, 3.4)
    fig, ax = figure_and_axes(ax, figsize=size)
    _draw_tuning_time(info, ax, title=title, note=note)
    return fig


@styled
def plot_tuning_value(value: pd.DataFrame, *, labels: Mapping[str, str] | None = None, legend: bool = True,
                      note: bool = True, title: str | None = None, ax: Axes | None = None) -> Figure:
    """Plot cumulative tuning time against the time it saves, one line per op and shape.

    Each line walks the buckets in order (1, 2, 4, ...): x is the tuning seconds spent so far,
    y the microseconds one call at each bucket so far saves against the default. A flat stretch
    is tuning time that bought nothing; a drop is a bucket where the tuned choice was slower.

    Args:
        value: output of :func:`profkit.analysis.tuning_value`; first run per op and shape drawn.
        labels: display names per shape label.
        legend: draw the legend (right of the axes).
        note: draw the note on what a saving is under the axes.
        title: the axes title.
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.
    """
    require(value, ("op", "shape", "bucket", "cum_tuning_s", "cum_saved_us"), "tuning_value")
    v, _ = first_run_only(value)
    fig, ax = figure_and_axes(ax, figsize=(7.5, 3.8))
    if v.empty:
        empty_axes(ax, "no buckets with both a tuning time and a speedup")
        return fig
    groups = list(v.groupby(["op", "shape"], sort=True, observed=True))
    for i, ((op, shape), g) in enumerate(groups):
        g = g.sort_values("bucket")
        ax.plot(np.r_[0.0, g["cum_tuning_s"]], np.r_[0.0, g["cum_saved_us"]], drawstyle="steps-post",
                color=series_colour(i, len(groups)), label=f"{op}  {short_label(str(shape), labels)}")
    ax.axhline(0, color="#444444", linewidth=0.8)
    ax.set_xlabel("cumulative tuning wall time (s), buckets in ascending order")
    ax.set_ylabel("saved per call, summed over\nbuckets so far (us)")
    ax.set_title("What tuning time bought" if title is None else title)
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small", borderaxespad=0)
    if note:
        add_note(ax, "saving = default_ms - winner's time_ms at each bucket, one call per bucket")
    return fig
