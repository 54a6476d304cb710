"""Tactic-choice map: the winning runner:tactic of every op x bucket, on a log2 bucket axis."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Iterable, Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from profkit.analysis import decode_tactic, shapes_of
from profkit.analysis._frames import require
from profkit.views._style import (SLOWER, add_note, bucket_edges, empty_axes, figure_and_axes, log2_bucket_axis,
                                  mark_batch_sizes, runner_colours, short_label, styled, timing_note, timings_of)

_ABBR = {"KERNEL_CFG": "c", "SPLIT_K_SLC": "s", "STAGES": "st", "TILEK": "tk", "SWIZZLE": "sw"}


@dataclasses.dataclass(frozen=True)
class TacticMapInfo:
    """What the tactic map draws; rows top to bottom, buckets ascending within a row."""

    rows: tuple[str, ...]
    buckets: tuple[tuple[int, ...], ...]
    winners: tuple[tuple[tuple[str, str], ...], ...]    # (runner, tactic) per bucket
    cell_text: tuple[tuple[str, ...], ...]              # compact tactic label per bucket
    speedups: tuple[tuple[float, ...], ...]             # default_ms / time_ms (NaN when untimed)
    slower_than_default: tuple[tuple[int, ...], ...]    # flagged buckets per row
    batch_sizes: tuple[int, ...] = ()
    timing: str = ""
    dropped_runs: int = 0


def compact_tactic(runner: str, tactic: str) -> str:
    """A short cell label: '#3' for index tactics, 'e7/s2/c21' for cuDNN engine+knobs."""
    fields = decode_tactic(runner, tactic)
    if fields["tactic_kind"] == "engine_knobs":
        knobs = fields["tactic_knobs"] or ""
        parts = [f"e{fields['tactic_engine']}"]
        for item in filter(None, (k.strip() for k in knobs.split(","))):
            name, _, value = item.partition("=")
            parts.append(f"{_ABBR.get(name, name[:2].lower())}{value}")
        return "/".join(parts)
    if fields["tactic_kind"] == "default":
        return "-1"
    return fields["tactic_desc"] or str(tactic)


def _tactic_map_info(winners: pd.DataFrame, *, op: str | None = None, labels: Mapping[str, str] | None = None,
                     batch_sizes: Iterable[int] = ()) -> TacticMapInfo:
    """Build the map's record from winners (analysis.winners, speedup_vs_default or a winners table)."""
    w = winners.copy()
    if op is not None:
        w = w[(w["op"].astype("string") == op).fillna(False).to_numpy(dtype=bool)]
    if "shape" not in w.columns:
        w["shape"] = shapes_of(w).to_numpy()
    default = "default_ms" if "default_ms" in w.columns else "default_time_ms" if "default_time_ms" in w.columns else None
    w["_default"] = pd.to_numeric(w[default], errors="coerce") if default else np.nan
    dropped = 0
    if "run_id" in w.columns and len(w):
        first = w.groupby(["op", "shape"], dropna=False, observed=True)["run_id"].transform("min")
        keep = (w["run_id"] == first).fillna(True).to_numpy(dtype=bool)
        dropped = int(w.loc[~keep, "run_id"].nunique())
        w = w[keep]
    rows, buckets, picks, texts, speedups, slower = [], [], [], [], [], []
    for (op_name, shape), g in w.groupby(["op", "shape"], sort=True, observed=True, dropna=False):
        g = g.dropna(subset=["bucket"]).sort_values("bucket", kind="stable").drop_duplicates("bucket")
        if g.empty:
            continue
        label = short_label(str(shape), labels)
        rows.append(f"{op_name}  {label}")
        buckets.append(tuple(int(b) for b in g["bucket"]))
        pairs = tuple((str(r), str(t)) for r, t in zip(g["runner"], g["tactic"]))
        picks.append(pairs)
        texts.append(tuple(compact_tactic(r, t) for r, t in pairs))
        sp = g["_default"].to_numpy(dtype=float) / g["time_ms"].to_numpy(dtype=float)
        speedups.append(tuple(float(x) for x in sp))
        slow = g["slower_than_default"].fillna(False).to_numpy(dtype=bool) if "slower_than_default" in g else sp < 1
        slower.append(tuple(int(b) for b, s in zip(g["bucket"], slow) if s))
    note = timing_note(timings_of(w))
    return TacticMapInfo(rows=tuple(rows), buckets=tuple(buckets), winners=tuple(picks), cell_text=tuple(texts),
                         speedups=tuple(speedups), slower_than_default=tuple(slower),
                         batch_sizes=tuple(sorted({int(b) for b in batch_sizes})), timing=note,
                         dropped_runs=dropped)


def _draw_tactic_map(info: TacticMapInfo, ax: Axes, *, legend: bool = True) -> None:
    """Draw the map: one row per op/shape, one cell per bucket spanning (previous bucket, bucket]."""
    if not info.rows:
        empty_axes(ax, "no winners to map")
        return
    colours = runner_colours(pair for row in info.winners for pair in row)
    n = len(info.rows)
    all_buckets = sorted({b for row in info.buckets for b in row})
    for i, (buckets, picks, texts, slow) in enumerate(zip(info.buckets, info.winners, info.cell_text,
                                                        info.slower_than_default)):
        y = n - 1 - i
        for (left, right), pick, text, bucket in zip(bucket_edges(buckets), picks, texts, buckets):
            flagged = bucket in slow
            ax.add_patch(Rectangle((left, y - 0.42), right - left, 0.84, facecolor=colours[pick],
                                   edgecolor=SLOWER if flagged else "white", linewidth=1.6 if flagged else 0.6,
                                   hatch="////" if flagged else None, label=f"{bucket}"))
            if math.log2(right / left) >= 0.55:
                ax.text(math.sqrt(left * right), y, text, ha="center", va="center", fontsize=5.5,
                        color=_ink(colours[pick]), clip_on=True)
    ax.set_xlim(min(all_buckets) / 2, max(all_buckets) * 1.02)
    ax.set_ylim(-0.6, n - 0.4)
    log2_bucket_axis(ax, all_buckets)
    ax.set_yticks(range(n), list(reversed(info.rows)))
    ax.grid(False)
    ax.set_title("Which runner:tactic won each bucket")
    if info.batch_sizes:
        mark_batch_sizes(ax, info.batch_sizes)
    if legend:
        text_of = {p: t for row, texts in zip(info.winners, info.cell_text) for p, t in zip(row, texts)}
        handles = [Patch(facecolor=colours[p], label=f"{p[0]}: {text_of[p]}") for p in colours]
        if any(info.slower_than_default):
            handles.append(Patch(facecolor="white", edgecolor=SLOWER, hatch="////",
                                 label="slower than default (flashinfer#3537)"))
        # The timing note is the legend's title: a note under the axes would collide with it.
        leg = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, -0.16), ncol=4, fontsize=6,
                        handlelength=1.2, borderaxespad=0, columnspacing=1.0,
                        title=("timed " + info.timing) if info.timing else None, title_fontsize=6.5)
        leg._legend_box.align = "left"
    else:
        add_note(ax, ("timed " + info.timing) if info.timing else "")


def _ink(rgba) -> str:
    r, g, b = rgba[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "white"


@styled
def plot_tactic_map(winners: pd.DataFrame, *, op: str | None = None, labels: Mapping[str, str] | None = None,
                    batch_sizes: Iterable[int] = (), legend: bool = True, ax: Axes | None = None) -> Figure:
    """Plot the winning runner:tactic of every op x bucket.

    Each row is one op and problem shape; each cell one bucket, spanning from the bucket below
    to its own value on a log2 M axis (FlashInfer's GEMM ops round M up to the next bucket). The
    colour is the (runner, tactic): a hue per runner family, shades per tactic; wide cells print
    the tactic ('#3' = heuristic index, 'e7/s2/c21' = cuDNN engine 7, SPLIT_K_SLC 2, KERNEL_CFG
    21). Red hatched cells measured slower than the default. Dashed lines mark engine batch
    sizes.

    Args:
        winners: output of :func:`profkit.analysis.winners` or
            :func:`~profkit.analysis.speedup_vs_default`, or a winners table. With several runs of
            one op and shape, the first run_id is drawn (compare runs with
            :func:`plot_winner_flips`).
        op: draw only this op.
        labels: display names per shape label, e.g. ``{"N=6144 K=4096": "llama3-8b qkv"}``.
        batch_sizes: engine batch sizes (tokens per call) to mark.
        legend: draw the legend outside the right edge.
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.
    """
    require(winners, ("op", "profile", "bucket", "runner", "tactic", "time_ms"), "winners")
    info = _tactic_map_info(winners, op=op, labels=labels, batch_sizes=batch_sizes)
    if info.dropped_runs:
        warnings.warn(f"{info.dropped_runs} further run(s) of the same op and shape were not drawn: the map "
                      "shows the first run_id of each; compare runs with plot_winner_flips", stacklevel=3)
    n_legend = len({p for row in info.winners for p in row}) + 1 if legend else 0
    fig, ax = figure_and_axes(ax, figsize=(10.0, 1.6 + 0.34 * max(len(info.rows), 1) + 0.14 * (n_legend // 4 + 1)))
    _draw_tactic_map(info, ax, legend=legend)
    return fig
