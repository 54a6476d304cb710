"""Figures of several panels, composed from the plot functions' ``ax=`` and their switches.

Each panel is drawn by a ``plot_*`` told what to leave out (``legend=False``, ``note=False``,
``title=...``); the grid then draws one shared legend from the handles the panels drew. No
artist of a panel is edited afterwards.
"""

from __future__ import annotations

from typing import Callable, Mapping

import pandas as pd
from matplotlib.figure import Figure

from profkit import views as _style
from profkit.views import plot_step_times


def _only(frame: pd.DataFrame, column: str, value) -> pd.DataFrame:
    return frame[(frame[column] == value).fillna(False).to_numpy(dtype=bool)]


@_style.styled
def per_op(frame: pd.DataFrame, draw: Callable) -> Figure:
    """One panel per op, stacked, each drawn with ``draw(rows_of_one_op, ax)`` (the composition case)."""
    ops = sorted(frame["op"].dropna().unique()) or [None]
    fig = Figure(figsize=(9.0, 3.4 * len(ops)), layout="constrained")
    axes = fig.subplots(len(ops), 1, squeeze=False)[:, 0]
    for op, ax in zip(ops, axes):
        draw(_only(frame, "op", op) if op else frame, ax)
    return fig


@_style.styled
def small_multiples(frame: pd.DataFrame, draw: Callable, *, labels: Mapping[str, str], block: str = "op",
                    panel: str = "shape", ncols: int = 5, xlabel: str = "", ylabel: str = "", note: str = "",
                    log2_ticks: tuple[int, ...] | None = (1, 16, 256, 4096), keys=()) -> Figure:
    """Per ``block`` value (op), a grid of small panels, one per ``panel`` value (shape), sharing axes.

    Each panel is drawn by ``draw(rows_of_one_panel, ax, title)``: a ``plot_*`` called with
    ``legend=False``, ``note=False`` and ``title=title``. The figure draws one legend under the
    panels from their handles (each label once) with ``note`` as its title, and one x and y label.
    """
    blocks = sorted(frame[block].dropna().unique())
    values = {b: sorted(_only(frame, block, b)[panel].dropna().unique(), key=lambda v: labels.get(v, v))
              for b in blocks}
    ncols = min(ncols, max(len(v) for v in values.values()))
    rows = {b: -(-len(values[b]) // ncols) for b in blocks}
    fig = Figure(figsize=(12.0 if ncols > 2 else 10.0, sum(1.9 * n + 0.5 for n in rows.values()) + 0.7),
                 layout="constrained")
    subfigs = fig.subfigures(len(blocks), 1, squeeze=False, height_ratios=[1.9 * rows[b] + 0.5 for b in blocks])[:, 0]
    legend: dict[str, object] = {}
    for b, sub in zip(blocks, subfigs):
        mine = _only(frame, block, b)
        timing = _style.timing_note(_style.timings_of(mine)) if block == "op" else ""
        sub.suptitle(f"{b}" + (f"   (timed {timing.partition(': ')[2]})" if timing else ""), fontsize="small",
                     fontweight="bold", x=0.01, ha="left")
        grid, first = sub.add_gridspec(rows[b], ncols), None
        for i, value in enumerate(values[b]):  # only the panels drawn: an Axes is about 10 ms to make, hidden or not
            ax = sub.add_subplot(grid[divmod(i, ncols)], sharex=first, sharey=first)
            first = first or ax
            draw(_only(mine, panel, value), ax, _style.short_label(value, labels))
            ax.title.set_fontsize("x-small")
            ax.title.set_fontweight("normal")
            for handle, name in zip(*ax.get_legend_handles_labels()):
                if not name.startswith("_") and not name.startswith(f"{b} "):
                    legend.setdefault(name, handle)
            ax.set_xlabel("")
            ax.set_ylabel("")
            ax.label_outer()
        if log2_ticks and first is not None and first.get_xscale() == "log":  # shared: the block's panels take them
            first.set_xticks(list(log2_ticks), [str(t) for t in log2_ticks])
        sub.supxlabel(xlabel, fontsize="x-small")
    fig.supylabel(ylabel, fontsize="x-small")
    for handle, name in keys:
        legend.setdefault(name, handle)
    if legend:
        fig.legend(list(legend.values()), list(legend), loc="outside lower center", ncol=min(len(legend), 4),
                   fontsize="x-small", title=note or None, title_fontsize="x-small")
    return fig


@_style.styled
def step_times_grid(rows: pd.DataFrame, *, model: str, dtype: str, ms: bool = True) -> Figure:
    """Decode and prefill side by side, ms above and relative to untuned below (each column's x axis shared,
    labelled once; each row's y label once, on the left); one legend, one note. ``ms=False``: the relative row
    only, where untuned was timed (a step set's question: the new state against untuned)."""
    phases = [p for p in ("decode", "prefill") if (rows["phase"] == p).any()] or ["decode"]
    relative = ("untuned",) if (rows["state"] == "untuned").any() else ()
    scales = ((None,) if ms or not relative else ()) + relative
    fig = Figure(figsize=(11.0, 3.5 * len(scales)), layout="constrained")
    axes = fig.subplots(len(scales), len(phases), squeeze=False, sharex="col", width_ratios=[3, 1][:len(phases)])
    for col, phase in enumerate(phases):
        for row, relative_to in enumerate(scales):
            plot_step_times(rows, model=model, dtype=dtype, phase=phase, relative_to=relative_to,
                            legend=(row, col) == (0, 0), note=(row, col) == (len(scales) - 1, 0),
                            title=None if col == 0 else phase + (f" / {relative_to}" if relative_to else ""),
                            ax=axes[row, col])
            if row < len(scales) - 1:
                axes[row, col].set_xlabel("")
            if col:
                axes[row, col].set_ylabel("")
    return fig
