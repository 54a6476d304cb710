"""Speedup of the tuned winner over the default, per bucket, one line per op and shape."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Iterable, Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from profkit.schema import require
from profkit.views._style import (NEUTRAL, SLOWER, add_note, empty_axes, figure_and_axes, log2_bucket_axis,
                                  mark_batch_sizes, series_colour, short_label, styled, timing_note, timings_of)


_SLOWER_BEYOND = "slower than default, beyond noise (flashinfer#3537)"
_SLOWER_TIE = "slower than default, within noise (a tie)"


@dataclasses.dataclass(frozen=True)
class SpeedupSeries:
    label: str
    buckets: tuple[int, ...]
    speedups: tuple[float, ...]
    slower: tuple[bool, ...]
    within_noise: tuple[bool, ...]


@dataclasses.dataclass(frozen=True)
class SpeedupInfo:
    """What the speedup curve draws."""

    series: tuple[SpeedupSeries, ...]
    noise_pct: float
    batch_sizes: tuple[int, ...] = ()
    timing: str = ""
    dropped_runs: int = 0


def first_run_only(frame: pd.DataFrame, runs: pd.DataFrame | None = None) -> tuple[pd.DataFrame, int]:
    """Rows of the first run of each (op, shape), and how many other runs were left out.

    "First" is :func:`profkit.analysis.first_runs`'s, the one meaning in every profkit figure and
    table: the earliest ``runs.started_at`` where ``runs`` is given, then the smallest run_id.
    """
    if "run_id" not in frame.columns or frame["run_id"].nunique() <= 1:  # one run (a grid's panel, often): first
        return frame, 0
    from profkit.analysis import first_runs, shapes_of

    f = frame if "shape" in frame.columns else frame.assign(shape=shapes_of(frame).to_numpy())
    if runs is None or not len(runs):  # no start times: the smallest run_id is first
        ids = f["run_id"].dropna().astype(str).unique()
        runs = pd.DataFrame({"run_id": ids, "started_at": [""] * len(ids)})
    keep = f["run_id"].isin(first_runs(f, runs)).to_numpy(dtype=bool) | f["run_id"].isna().to_numpy(dtype=bool)
    return frame[keep], int(frame.loc[~keep, "run_id"].nunique())


def _speedup_info(speedups: pd.DataFrame, *, op: str | None = None, labels: Mapping[str, str] | None = None,
                  batch_sizes: Iterable[int] = (), runs: pd.DataFrame | None = None) -> SpeedupInfo:
    """Build the curve's record from speedup_vs_default output (first run per op and shape)."""
    s = speedups
    if op is not None:
        s = s[(s["op"].astype("string") == op).fillna(False).to_numpy(dtype=bool)]
    s, dropped = first_run_only(s, runs)
    series = []
    for (op_name, shape), g in s.groupby(["op", "shape"], sort=True, observed=True, dropna=False):
        g = g.sort_values("bucket", kind="stable").drop_duplicates("bucket")
        series.append(SpeedupSeries(
            label=f"{op_name}  {short_label(str(shape), labels)}", buckets=tuple(int(b) for b in g["bucket"]),
            speedups=tuple(float(x) for x in g["speedup"]),
            slower=tuple(bool(x) for x in g["slower_than_default"].fillna(False)),
            within_noise=tuple(bool(x) for x in g["within_noise"].fillna(False))))
    band = float(np.nanmedian(s["noise_pct"].to_numpy(dtype=float))) if len(s) else np.nan
    return SpeedupInfo(series=tuple(series), noise_pct=band, batch_sizes=tuple(sorted({int(b) for b in batch_sizes})),
                       timing=timing_note(timings_of(s)), dropped_runs=dropped)


def _draw_speedup(info: SpeedupInfo, ax: Axes, *, legend: bool = True, note: bool = True, title: str | None = None,
                  band_label: str | None = None) -> None:
    """Lines of speedup per bucket; red markers only where the tuned choice was slower beyond noise."""
    if not info.series:
        empty_axes(ax, "no speedups: no bucket had its default timed")
        return
    if np.isfinite(info.noise_pct):
        ax.axhspan(1 - info.noise_pct / 100, 1 + info.noise_pct / 100, color=NEUTRAL, alpha=0.18, linewidth=0,
                   label=band_label or f"noise band ±{info.noise_pct:.1f}% (median)")
    ax.axhline(1.0, color="#444444", linewidth=0.8)
    cmap = [series_colour(i, len(info.series)) for i in range(len(info.series))]
    all_buckets = set()
    for colour, s in zip(cmap, info.series):
        ax.plot(s.buckets, s.speedups, marker="o", markersize=3, color=colour, label=s.label, zorder=3)
        all_buckets.update(s.buckets)
        # Colour only for verdicts beyond noise: a slower winner within noise is a tie, drawn grey.
        for beyond, face, edge, name in ((True, SLOWER, SLOWER, _SLOWER_BEYOND), (False, "white", NEUTRAL, _SLOWER_TIE)):
            pts = [(b, y) for b, y, sl, n in zip(s.buckets, s.speedups, s.slower, s.within_noise)
                   if sl and (not n) == beyond]
            if pts:
                xs, ys = zip(*pts)
                ax.scatter(xs, ys, s=34, marker="v", zorder=4, linewidths=1.2, edgecolor=edge, facecolor=face,
                           label=name)
    log2_bucket_axis(ax, all_buckets)
    ax.set_ylabel("speedup vs default (x)\ndefault_ms / time_ms")
    ax.set_title("Speedup of the tuned winner over the default, per bucket" if title is None else title)
    if info.batch_sizes:
        mark_batch_sizes(ax, info.batch_sizes)
    shown = dict(zip(*reversed(ax.get_legend_handles_labels())))  # one entry per label (markers drawn only)
    handles, names = list(shown.values()), list(shown)
    if legend:
        ax.legend(handles, names, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small", borderaxespad=0)
    if note:
        add_note(ax, ("timed " + info.timing) if info.timing else "")


@styled
def plot_speedup(speedups: pd.DataFrame, *, op: str | None = None, labels: Mapping[str, str] | None = None,
                 batch_sizes: Iterable[int] = (), runs: pd.DataFrame | None = None, legend: bool = True,
                 note: bool = True, title: str | None = None, band_label: str | None = None,
                 ax: Axes | None = None) -> Figure:
    """Plot the winner's speedup over the default across buckets, one line per op and shape.

    The x axis is the bucket (log2 M); the y axis ``default_ms / time_ms`` (above 1: tuning
    helped). Red triangles mark buckets where the tuned choice measured slower than the default
    beyond noise (flashinfer#3537); hollow grey ones are slower within the noise band (a tie), drawn
    grey around 1. Dashed lines mark engine batch sizes, e.g. a low-latency server's decode batch.

    Args:
        speedups: output of :func:`profkit.analysis.speedup_vs_default`; with several runs per
            op and shape the first run (:func:`profkit.analysis.first_runs`) is drawn.
        op: draw only this op.
        labels: display names per shape label.
        batch_sizes: engine batch sizes to mark.
        runs: the runs table, so "first run" is the earliest started (default: the smallest run_id).
        legend: draw the legend (right of the axes).
        note: draw the timing note under the axes.
        title: the axes title (default: what the figure shows).
        band_label: the noise band's legend text (default: its half-width).
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.
    """
    require(speedups, ("op", "shape", "bucket", "speedup", "slower_than_default", "within_noise", "noise_pct"),
            "speedups")
    info = _speedup_info(speedups, op=op, labels=labels, batch_sizes=batch_sizes, runs=runs)
    if info.dropped_runs:
        warnings.warn(f"{info.dropped_runs} further run(s) of the same op and shape were not drawn (first run_id "
                      "shown)", stacklevel=3)
    fig, ax = figure_and_axes(ax, figsize=(9.0, 3.8))
    _draw_speedup(info, ax, legend=legend, note=note, title=title, band_label=band_label)
    return fig
