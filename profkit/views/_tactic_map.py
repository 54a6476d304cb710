"""Tactic-choice map: the winning runner and tactic of every op x bucket, one equal cell per bucket."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Iterable, Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.transforms import ScaledTranslation

from profkit.analysis import decode_tactic, shapes_of
from profkit.schema import require
from profkit.views._speedup import first_run_only
from profkit.views._style import (SLOWER, add_note, bucket_of, categorical_bucket_axis, cells, empty_axes,
                                  figure_and_axes, runner_colour, runner_colours, runner_name, short_label, styled,
                                  timing_note, timings_of)

_ABBR = {"KERNEL_CFG": "c", "SPLIT_K_SLC": "s", "STAGES": "st", "TILEK": "tk", "SWIZZLE": "sw"}


@dataclasses.dataclass(frozen=True)
class TacticMapInfo:
    """What the tactic map draws; rows top to bottom, buckets ascending within a row."""

    rows: tuple[str, ...]
    buckets: tuple[tuple[int, ...], ...]
    winners: tuple[tuple[tuple[str, str], ...], ...]    # (runner, tactic) per bucket
    cell_text: tuple[tuple[str, ...], ...]              # compact tactic label per bucket
    speedups: tuple[tuple[float, ...], ...]             # default_ms / time_ms (NaN when untimed)
    slower_than_default: tuple[tuple[int, ...], ...]    # buckets slower than the default beyond noise, per row
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
                     batch_sizes: Iterable[int] = (), runs: pd.DataFrame | None = None) -> TacticMapInfo:
    """Build the map's record from winners (analysis.winners, speedup_vs_default or a winners table)."""
    w = winners.copy()
    if op is not None:
        w = w[(w["op"].astype("string") == op).fillna(False).to_numpy(dtype=bool)]
    if "shape" not in w.columns:
        w["shape"] = shapes_of(w).to_numpy()
    default = "default_ms" if "default_ms" in w.columns else "default_time_ms" if "default_time_ms" in w.columns else None
    w["_default"] = pd.to_numeric(w[default], errors="coerce") if default else np.nan
    w, dropped = first_run_only(w, runs)
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
        texts.append(_short_texts([compact_tactic(r, t) for r, t in pairs]))
        sp = g["_default"].to_numpy(dtype=float) / g["time_ms"].to_numpy(dtype=float)
        speedups.append(tuple(float(x) for x in sp))
        slow = g["slower_than_default"].fillna(False).to_numpy(dtype=bool) if "slower_than_default" in g else sp < 1
        if "within_noise" in g:  # colour only for verdicts beyond noise: a tie within noise is no flag
            slow = slow & ~g["within_noise"].fillna(False).to_numpy(dtype=bool)
        slower.append(tuple(int(b) for b, s in zip(g["bucket"], slow) if s))
    note = timing_note(timings_of(w))
    return TacticMapInfo(rows=tuple(rows), buckets=tuple(buckets), winners=tuple(picks), cell_text=tuple(texts),
                         speedups=tuple(speedups), slower_than_default=tuple(slower),
                         batch_sizes=tuple(sorted({int(b) for b in batch_sizes})), timing=note,
                         dropped_runs=dropped)


def _draw_tactic_map(info: TacticMapInfo, ax: Axes, *, legend: bool = True) -> None:
    """Draw the map: one row per op/shape, one equal cell per bucket (categorical axis)."""
    if not info.rows:
        empty_axes(ax, "no winners to map")
        return
    colours = runner_colours(pair for row in info.winners for pair in row)
    n = len(info.rows)
    pos = categorical_bucket_axis(ax, (b for row in info.buckets for b in row))
    plain, flagged = [], []  # cells: x, y, width, height, colour; flagged: slower than the default beyond noise
    for i, (buckets, picks, texts, slow) in enumerate(zip(info.buckets, info.winners, info.cell_text,
                                                        info.slower_than_default)):
        y = n - 1 - i
        for pick, text, bucket in zip(picks, texts, buckets):
            x = pos[bucket]
            (flagged if bucket in slow else plain).append((x - 0.5, y - 0.45, 1.0, 0.9, colours[pick]))
            ax.text(x, y, text, ha="center", va="center", fontsize=5.5 if len(text) < 7 else 4.6,
                    color=_ink(colours[pick]), clip_on=True)
    cells(ax, plain, edgecolor="white", linewidth=0.8)
    cells(ax, flagged, edgecolor=SLOWER, linewidth=1.4, hatch="////")
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_yticks(range(n), list(reversed(info.rows)))
    ax.grid(False)
    ax.set_title("Which runner and tactic won each bucket")
    for bs in info.batch_sizes:
        b = bucket_of(bs, pos)
        if b is not None:
            ax.axvline(pos[b], color="#333333", linestyle="--", linewidth=0.9, zorder=5)
            ax.annotate(f"bs {bs}", xy=(pos[b], 1.0), xycoords=("data", "axes fraction"), xytext=(0, 2),
                        textcoords="offset points", fontsize=6.5, ha="center", va="bottom")
    note = ("timed " + info.timing) if info.timing else ""
    if not legend:
        add_note(ax, note)
        return
    runners = sorted({p[0] for p in colours})
    handles = [Patch(facecolor=runner_colour(r), label=runner_name(r)) for r in runners]
    if any(info.slower_than_default):
        handles.append(Patch(facecolor="white", edgecolor=SLOWER, hatch="////",
                             label="slower than default beyond noise (flashinfer#3537)"))
    # Anchored a fixed distance under the tick labels, so no gap grows with the figure's height.
    below = ax.transAxes + ScaledTranslation(0, -34 / 72, ax.figure.dpi_scale_trans)
    leg = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, 0.0), bbox_transform=below,
                    ncol=len(handles), fontsize=7, handlelength=1.2, borderaxespad=0, columnspacing=1.2,
                    title=("colour = runner; shade and cell text = tactic ('#3' heuristic index, 'e0/c12' cuDNN "
                           "engine 0, KERNEL_CFG 12; T1, T2: long tactics, numbered within their row)"
                           + ("\n" + note.replace("; ", "\n") if note else "")), title_fontsize=6.5)
    leg._legend_box.align = "left"


_CELL_CHARS = 9  # longer tactic labels (e.g. the fused MoE's tile tuples) do not fit a cell


def _short_texts(texts: list[str]) -> tuple[str, ...]:
    """Cell labels that fit: a label too long for a cell becomes T1, T2, ... (same tactic, same label) within its row."""
    index: dict[str, str] = {}
    out = []
    for text in texts:
        if len(text) > _CELL_CHARS:
            text = index.setdefault(text, f"T{len(index) + 1}")
        out.append(text)
    return tuple(out)


def _ink(rgba) -> str:
    r, g, b = rgba[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "white"


@styled
def plot_tactic_map(winners: pd.DataFrame, *, op: str | None = None, labels: Mapping[str, str] | None = None,
                    batch_sizes: Iterable[int] = (), legend: bool = True, runs: pd.DataFrame | None = None,
                    ax: Axes | None = None) -> Figure:
    """Plot the winning runner:tactic of every op x bucket.

    Each row is one op and problem shape; each bucket one equal cell on a categorical axis
    labelled with its M (FlashInfer's GEMM ops round M up to the next bucket), so the wide
    buckets from 768 up read as well as the powers of two. The colour family is the runner
    (one per runner in every profkit figure; fp8 and bf16 runners apart), the shade and the
    cell text the tactic ('#3' = heuristic index, 'e7/s2/c21' = cuDNN engine 7, SPLIT_K_SLC 2,
    KERNEL_CFG 21). Red hatched cells measured slower than the default beyond noise (where the
    frame has ``within_noise``; a tie within noise is not flagged). Dashed lines mark the bucket
    of each engine batch size.

    Args:
        winners: output of :func:`profkit.analysis.winners` or
            :func:`~profkit.analysis.speedup_vs_default`, or a winners table. With several runs of
            one op and shape, the first run (:func:`profkit.analysis.first_runs`) is drawn (compare
            runs with :func:`plot_winner_flips`).
        op: draw only this op.
        labels: display names per shape label, e.g. ``{"N=6144 K=4096": "llama3-8b qkv"}``.
        batch_sizes: engine batch sizes (tokens per call) to mark.
        legend: draw the runner legend under the axes.
        runs: the runs table, so "first run" is the earliest started (default: the smallest run_id).
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.
    """
    require(winners, ("op", "profile", "bucket", "runner", "tactic", "time_ms"), "winners")
    info = _tactic_map_info(winners, op=op, labels=labels, batch_sizes=batch_sizes, runs=runs)
    if info.dropped_runs:
        warnings.warn(f"{info.dropped_runs} further run(s) of the same op and shape were not drawn: the map "
                      "shows the first run_id of each; compare runs with plot_winner_flips", stacklevel=3)
    # Room for the row labels beside 20 readable cells: the width grows with the longest label.
    width = max(10.0, 7.5 + 0.065 * max((len(r) for r in info.rows), default=0))
    fig, ax = figure_and_axes(ax, figsize=(width, 1.5 + 0.3 * max(len(info.rows), 1) + (0.5 if legend else 0)))
    _draw_tactic_map(info, ax, legend=legend)
    return fig
