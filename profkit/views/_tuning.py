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
from profkit.views._format import seconds
from profkit.views._speedup import first_run_only
from profkit.views._style import (PHASE_LABELS, PHASES, add_note, empty_axes, figure_and_axes, short_label,
                                  series_colour, styled)


@dataclasses.dataclass(frozen=True)
class TuningTimeInfo:
    """Stacked seconds per bar; bars are ops/shapes (per="op") or buckets of one op (per="bucket").

    ``takeaway`` is what the bars say, one line per op (per="op") or one for the op (per="bucket"):
    the seconds, the phase most of them went to, and (per bucket) the few buckets holding most.
    """

    title: str
    bars: tuple[str, ...]
    seconds: tuple[tuple[str, tuple[float, ...]], ...]   # (phase column, seconds per bar)
    totals: tuple[float, ...]
    n_candidates: tuple[int, ...]
    per: str
    takeaway: str = ""
    ops: tuple[str, ...] = ()         # per="op": the op of each bar (bars then name the shape only)


_PHASE_WORDS = {"measure_s": "measuring candidates", "prep_s": "runner prep", "jit_s": "JIT builds",
                "other_s": "other"}
# A phase whose largest segment is under this share of the tallest bar is not drawn (it would not
# show, and its legend entry would name nothing visible); the note gives its seconds.
_VISIBLE = 0.005


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
        names = [short_label(str(s), labels) for _, s in g.groups.keys()]
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
    ops = tuple(str(k[0]) for k in g.groups.keys()) if per == "op" else ()
    takeaway = (_op_takeaway(sums[phases], list(ops)) if per == "op" else
                _bucket_takeaway(sums[phases], names)) if len(sums) else ""
    return TuningTimeInfo(title=title, bars=tuple(names), seconds=seconds, totals=totals,
                          n_candidates=tuple(int(x) for x in sums["n_candidates"]), per=per, takeaway=takeaway,
                          ops=ops)


def _mostly(phase_sums: pd.Series) -> str:
    """'91% measuring candidates': the phase that took the most of these seconds."""
    total = float(phase_sums.sum())
    top = phase_sums.idxmax()
    return f"{float(phase_sums[top]) / total:.0%} {_PHASE_WORDS[top]}" if total > 0 else "no time recorded"


def _op_takeaway(sums: pd.DataFrame, ops: list) -> str:
    """One line per op: the seconds of its shapes (one tuning call each) and where most went."""
    lines = []
    for name in dict.fromkeys(ops):
        rows = sums[[o == name for o in ops]]
        totals = rows.sum(axis=1)
        span = (seconds(totals.iloc[0]) if len(rows) == 1 else
                f"{seconds(totals.min()).removesuffix(' s')}-{seconds(totals.max())} per shape")
        lines.append(f"{name}: {span}, {_mostly(rows.sum())}")
    return "\n".join(lines)


def _bucket_takeaway(sums: pd.DataFrame, buckets: list[str]) -> str:
    """The op's seconds, where most went, and the fewest buckets (at most 3) holding half of them."""
    totals = sums.sum(axis=1).to_numpy(dtype=float)
    total = float(totals.sum())
    line = f"{seconds(total)} over {len(buckets)} buckets, {_mostly(sums.sum())}"
    order = np.argsort(-totals, kind="stable")
    top = next((order[:k] for k in range(1, 4) if totals[order[:k]].sum() >= total / 2), None)
    if top is None or len(top) == len(buckets) or total <= 0:
        return line
    names = [buckets[i] for i in sorted(top)]
    which = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return line + f"\nbucket{'s' if len(names) > 1 else ''} {which} took {totals[top].sum() / total:.0%} of it"


def _short(value: float) -> str:
    return f"{1000 * value:.0f} ms" if value < 1 else seconds(value)


def _draw_tuning_time(info: TuningTimeInfo, ax: Axes, *, title: str | None = None, note: bool = True,
                      whole_figure: bool = False) -> None:
    """Stacked bars: horizontal per op/shape, vertical per bucket; phases too small to see are left out."""
    if not info.bars:
        empty_axes(ax, "no tuning rows")
        return
    # Per op: its bars under a row that names it, so a bar names only its shape.
    heads = [i for i, o in enumerate(info.ops) if i == 0 or info.ops[i - 1] != o]
    pos = np.arange(len(info.bars)) + np.searchsorted(heads, np.arange(len(info.bars)), side="right")
    base = np.zeros(len(info.bars))
    tallest = max(info.totals) or 1.0
    hidden = []
    for phase, secs in info.seconds:
        values = np.asarray(secs)
        if values.max(initial=0.0) < _VISIBLE * tallest:
            if values.any():
                hidden.append(f"{_PHASE_WORDS[phase]} {_short(float(values.sum()))}")
            continue
        if info.per == "op":
            ax.barh(pos, values, left=base, color=PHASES[phase], label=PHASE_LABELS[phase], height=0.7)
        else:
            ax.bar(pos, values, bottom=base, color=PHASES[phase], label=PHASE_LABELS[phase], width=0.8)
        base += values
    if info.per == "op":
        ax.set_yticks(pos, info.bars)
        ax.set_xlabel("tuning wall time (s)")
        for y, total, n in zip(pos, info.totals, info.n_candidates):
            ax.annotate(f"{total:.1f} s, {n} cand.", xy=(total, y), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize="x-small")
        for i in heads:
            ax.annotate(info.ops[i], xy=(0, pos[i] - 1), xytext=(2, 0), textcoords="offset points", va="center",
                        fontweight="bold", fontsize="small")
        ax.set_xlim(0, tallest * 1.22)
        ax.set_ylim(pos[-1] + 0.6, -0.6 if heads else pos[0] - 0.6)
        ax.grid(axis="y", visible=False)
    else:
        ax.set_xticks(pos, info.bars, rotation=90)
        ax.set_xlabel("bucket (M)")
        ax.set_ylabel("tuning wall time (s)")
        ax.grid(axis="x", visible=False)
    if info.per == "bucket":
        text = f"{info.title if title is None else title}: {info.takeaway}"
    else:
        text = "\n".join(filter(None, (title, info.takeaway)))
    if whole_figure:  # long bar names leave the axes narrow: the takeaway spans the figure
        ax.figure.suptitle(text, x=0.01, ha="left", fontsize="medium", fontweight="bold")
    else:
        ax.set_title(text, loc="left")
    if whole_figure and info.per == "op":  # in one row under the bars, clear of their labels
        handles, names = ax.get_legend_handles_labels()
        if names:  # nothing drawn has a name (every phase too small to see): no legend
            ax.figure.legend(handles, names, loc="outside lower center", ncol=len(names), fontsize="x-small")
    elif ax.get_legend_handles_labels()[1]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small", borderaxespad=0)
    if note:  # the phases too small to draw on a line of their own: wrapped at the figure's edge, "138 ms" broke
        add_note(ax, "buckets' own windows; each call adds a few ms outside them. profkit's extra default timing "
                     "is not included" + (f".\nToo small to draw: {', '.join(hidden)}" if hidden else ""),
                 below_pt=30 if info.per == "op" else 52)


@styled
def plot_tuning_time(breakdown: pd.DataFrame, *, per: str = "op", op: str | None = None, shape: str | None = None,
                     labels: Mapping[str, str] | None = None, title: str | None = None, note: bool = True,
                     ax: Axes | None = None) -> Figure:
    """Plot where tuning time went: measuring candidates vs runner prep, JIT and the rest.

    Each bar stacks ``measure_s`` (candidates timed), ``prep_s`` (before each runner's first
    candidate: cuDNN plan builds for cuDNN runners), ``jit_s`` (FlashInfer compiling modules) and
    ``other_s``; a phase too small to see in any bar is left out and named in the note.
    ``per="op"`` draws one horizontal bar per op and shape (total seconds and candidate count
    at its end); ``per="bucket"`` one vertical bar per bucket of one op and shape. The title
    says what the bars add up to: per op, the seconds per shape and the phase most went to; per
    bucket, the op's seconds, that phase and the few buckets that hold half of them or more.

    Args:
        breakdown: output of :func:`profkit.analysis.tuning_breakdown` (``by="bucket"``); with
            several runs per op and shape the first run_id is drawn.
        per: "op" or "bucket".
        op: only this op (required with per="bucket" when several).
        shape: only this shape.
        labels: display names per shape label.
        title: per="op": a first title line above the takeaway; per="bucket": what the bars are,
            before the takeaway (default: the op and shape).
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
    whole_figure = ax is None
    fig, ax = figure_and_axes(ax, figsize=size)
    _draw_tuning_time(info, ax, title=title, note=note, whole_figure=whole_figure)
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
