"""Comparisons of decisions: winner flips across repeats, diffs of two captures, rank divergence."""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

import matplotlib as mpl
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from profkit.schema import require
from profkit.views._style import (NEUTRAL, SLOWER, add_note, bucket_edges, cells, empty_axes, figure_and_axes,
                                  log2_bucket_axis, short_label, styled)


@dataclasses.dataclass(frozen=True)
class WinnerFlipInfo:
    """Rows (op and shape) x buckets, coloured by flip rate across repeated runs."""

    rows: tuple[str, ...]
    buckets: tuple[tuple[int, ...], ...]
    flip_rates: tuple[tuple[float, ...], ...]    # NaN where only one run timed the bucket
    n_distinct: tuple[tuple[int, ...], ...]
    n_tunings: tuple[int, ...]                   # most tunings of any bucket in the row
    beyond_noise: tuple[tuple[bool, ...], ...] = ()  # the flip costs more than noise (winner_stability)


def _winner_flip_info(stability: pd.DataFrame, *, labels: Mapping[str, str] | None = None,
                      repeated_only: bool = True) -> WinnerFlipInfo:
    """Group winner_stability rows per op and shape."""
    s = stability
    rows, buckets, flips, distinct, runs, beyond = [], [], [], [], [], []
    for (op, shape), g in s.groupby(["op", "shape"], sort=True, observed=True, dropna=False):
        g = g.dropna(subset=["bucket"]).sort_values("bucket", kind="stable")
        if repeated_only and g["n_tunings"].max() < 2:
            continue
        rows.append(f"{op}  {short_label(str(shape), labels)}")
        buckets.append(tuple(int(b) for b in g["bucket"]))
        flips.append(tuple(float(x) for x in g["flip_rate"].astype(float)))
        distinct.append(tuple(int(x) for x in g["n_distinct"]))
        runs.append(int(g["n_tunings"].max()))
        noisy = g["within_noise"].fillna(True) if "within_noise" in g else pd.Series(False, index=g.index)
        beyond.append(tuple(bool(k > 1 and not n) for k, n in zip(g["n_distinct"], noisy)))
    return WinnerFlipInfo(rows=tuple(rows), buckets=tuple(buckets), flip_rates=tuple(flips),
                          n_distinct=tuple(distinct), n_tunings=tuple(runs), beyond_noise=tuple(beyond))


def _draw_winner_flips(info: WinnerFlipInfo, ax: Axes) -> None:
    """Cells per bucket: white = every run agreed, grey = winners differ within noise (a tie), red = a flip
    that costs more than noise; the count of distinct winners printed."""
    if not info.rows:
        empty_axes(ax, "no bucket was tuned more than once")
        return
    cmap = mpl.colormaps["Reds"]
    norm = mpl.colors.Normalize(0, 1)
    n = len(info.rows)
    everything = sorted({b for row in info.buckets for b in row})
    beyond_rows = info.beyond_noise or tuple((False,) * len(b) for b in info.buckets)
    plain, hatched = [], []  # cells: x, y, width, height, colour; hatched: tuned once
    for i, (buckets, flips, distinct, beyond) in enumerate(zip(info.buckets, info.flip_rates, info.n_distinct,
                                                               beyond_rows)):
        y = n - 1 - i
        for (left, right), flip, k, costly in zip(bucket_edges(buckets), flips, distinct, beyond):
            single = not math.isfinite(flip)
            face = ("#eeeeee" if single else "white" if flip == 0 else cmap(0.2 + 0.8 * flip) if costly
                    else _TIE)
            (hatched if single else plain).append((left, y - 0.42, right - left, 0.84, face))
            if k > 1:
                ax.text(math.sqrt(left * right), y, str(k), ha="center", va="center", fontsize=6.5, clip_on=True,
                        color="white" if costly and flip > 0.45 else "#333333")
    cells(ax, plain, edgecolor="#dddddd", linewidth=0.6)
    cells(ax, hatched, edgecolor="#dddddd", linewidth=0.6, hatch="...")
    ax.set_xlim(min(everything) / 2, max(everything) * 1.02)
    ax.set_ylim(-0.6, n - 0.4)
    log2_bucket_axis(ax, everything)
    ax.set_yticks(range(n), [f"{r}  ({k} tunings)" for r, k in zip(reversed(info.rows), reversed(info.n_tunings))])
    ax.grid(False)
    sm = mpl.cm.ScalarMappable(norm=norm, cmap=cmap)
    ax.figure.colorbar(sm, ax=ax, label="flip rate, flips beyond\nnoise (run pairs that disagree)", pad=0.01,
                       fraction=0.04)
    costly = sum(sum(row) for row in beyond_rows)
    flipped = sum(k > 1 for row in info.n_distinct for k in row)
    ax.set_title(f"Winner flips across repeated tunings:\n{flipped} buckets flip, {costly} beyond noise")
    add_note(ax, "number in a cell = distinct winners across the runs; light grey = the winners differ within noise "
                 "(a tie); hatched grey = tuned once")


@styled
def plot_winner_flips(stability: pd.DataFrame, *, labels: Mapping[str, str] | None = None,
                      ax: Axes | None = None) -> Figure:
    """Plot the winner-flip rate of every op x bucket across repeated tunings (runs or re-profiling calls).

    Rows are op and shape, cells buckets on a log2 M axis as in :func:`plot_tactic_map`. The
    colour is the share of run pairs whose winners differ (white: all runs agree); a number
    gives the count of distinct winners. Only op/shapes tuned two or more times are drawn.

    Args:
        stability: output of :func:`profkit.analysis.winner_stability`.
        labels: display names per shape label.
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.
    """
    require(stability, ("op", "shape", "bucket", "n_tunings", "n_distinct", "flip_rate"), "winner_stability")
    info = _winner_flip_info(stability, labels=labels)
    fig, ax = figure_and_axes(ax, figsize=(12.0, 1.6 + 0.34 * max(len(info.rows), 1)))
    _draw_winner_flips(info, ax)
    return fig


_TIE = "#e6e6e6"  # winners differ, but within noise: no colour for a tie
_CHANGE_STYLE = {"same": ("o", NEUTRAL), "tactic": ("o", "C0"), "runner": ("s", "C3"),
                 "only_a": ("x", "#555555"), "only_b": ("+", "#555555")}


@styled
def plot_diff(diff: pd.DataFrame, *, labels: Mapping[str, str] | None = None, names: tuple[str, str] = ("a", "b"),
              ax: Axes | None = None) -> Figure:
    """Plot a diff of two sets of decisions: which buckets changed, and what b's choice costs.

    x is the bucket (log2 M), y ``cost_pct`` (b's choice against a's, priced on the same
    measurements when the diff had candidates; positive: b's choice is slower). Marker shape
    and colour give the change: grey dot = same winner, blue circle = same runner, other
    tactic, red square = other runner, x/+ = only in a/b (drawn at 0). Several shapes share the
    axis, nudged sideways so their markers do not overlap; the note lists them.

    Args:
        diff: output of :func:`profkit.analysis.diff_winners`.
        labels: display names per shape label.
        names: display names of the two sides.
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.
    """
    require(diff, ("op", "shape", "bucket", "change", "cost_pct"), "diff")
    fig, ax = figure_and_axes(ax, figsize=(8.0, 3.6))
    d = diff.dropna(subset=["bucket"])
    if d.empty:
        empty_axes(ax, "nothing to compare")
        return fig
    groups = list(d.groupby(["op", "shape"], sort=True, observed=True))
    n = len(groups)
    for i, ((op, shape), g) in enumerate(groups):
        offset = 2 ** ((i - (n - 1) / 2) * 0.08)
        for change, (marker, colour) in _CHANGE_STYLE.items():
            h = g[g["change"] == change]
            if h.empty:
                continue
            y = h["cost_pct"].astype(float).fillna(0.0)
            ax.scatter(h["bucket"].astype(float) * offset, y, marker=marker, color=colour,
                       s=14 if change == "same" else 30, zorder=3, alpha=0.6 if change == "same" else 1.0)
    ax.axhline(0, color="#444444", linewidth=0.8)
    log2_bucket_axis(ax, d["bucket"].astype(int))
    ax.set_ylabel(f"cost of {names[1]}'s choice\nvs {names[0]}'s (%)")
    changed = int(d["changed"].fillna(False).sum())
    ax.set_title(f"{names[1]} vs {names[0]}: {changed} of {len(d)} decisions changed")
    present = set(d["change"].astype(str))
    handles = [Line2D([], [], marker=m, color=c, linestyle="", label=lab) for lab, (change, (m, c)) in
               zip(("same winner", "other tactic", "other runner", f"only in {names[0]}", f"only in {names[1]}"),
                   _CHANGE_STYLE.items()) if change in present]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=6.5, borderaxespad=0)
    priced = sorted({p for p in d.get("priced_on", pd.Series(dtype=str)).dropna() if p})
    by_op: dict[str, list[str]] = {}
    for (op, shape), _ in groups:
        by_op.setdefault(str(op), []).append(short_label(str(shape), labels))
    shapes = "; ".join(f"{op}: {', '.join(s)}" for op, s in by_op.items())
    runs = ""
    for side, name in (("run_a", names[0]), ("run_b", names[1])):
        ids = sorted(d[side].dropna().astype(str).unique()) if side in d.columns else []
        if ids:
            runs += f"\n{name}: {_count_ids(ids)}"
    add_note(ax, f"{shapes}; priced on {' / '.join(priced) or 'nothing (no times)'}{runs}")
    return fig


def _count_ids(ids: list[str]) -> str:
    """'r1, r2' or 'r1, r2 and 6 more runs'."""
    return ", ".join(ids[:2]) + (f" and {len(ids) - 2} more runs" if len(ids) > 2 else "")


@styled
def plot_rank_divergence(divergence: pd.DataFrame, *, labels: Mapping[str, str] | None = None,
                         ax: Axes | None = None) -> Figure:
    """Plot where tensor-parallel ranks chose different winners, and whether it matters.

    x is the bucket (log2 M), y ``regret_pct``: the worst slowdown on some rank of running
    another rank's winner. Grey dots: all ranks agree. Hollow markers: ranks disagree within
    the noise band (a coin flip between equals); filled red: beyond it. Grey bars show each
    bucket's noise band.

    Args:
        divergence: output of :func:`profkit.analysis.rank_divergence`.
        labels: display names per shape label.
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.
    """
    require(divergence, ("op", "shape", "bucket", "agree", "regret_pct", "noise_pct", "within_noise"),
            "rank_divergence")
    fig, ax = figure_and_axes(ax, figsize=(8.0, 3.6))
    d = divergence.dropna(subset=["bucket"])
    if d.empty:
        empty_axes(ax, "fewer than two ranks: nothing to compare")
        return fig
    groups = list(d.groupby(["op", "shape"], sort=True, observed=True))
    n = len(groups)
    for i, ((op, shape), g) in enumerate(groups):
        offset = 2 ** ((i - (n - 1) / 2) * 0.1)
        x = g["bucket"].astype(float).to_numpy() * offset
        colour = f"C{i % 10}"
        ax.vlines(x, 0, g["noise_pct"].astype(float), color=NEUTRAL, linewidth=3, alpha=0.35, zorder=1)
        agree = g["agree"].fillna(True).to_numpy(dtype=bool)
        noisy = g["within_noise"].fillna(True).to_numpy(dtype=bool)
        y = g["regret_pct"].astype(float).to_numpy()
        ax.scatter(x[agree], y[agree], s=10, color=NEUTRAL, zorder=2)
        ax.scatter(x[~agree & noisy], y[~agree & noisy], s=40, facecolor="white", edgecolor=colour,
                   linewidths=1.4, zorder=3)
        ax.scatter(x[~agree & ~noisy], y[~agree & ~noisy], s=40, color=SLOWER, edgecolor=colour, zorder=3)
        ax.plot([], [], color=colour, marker="o", linestyle="", label=f"{op}  {short_label(str(shape), labels)}")
    log2_bucket_axis(ax, d["bucket"].astype(int))
    ax.set_ylabel("regret of another rank's\nwinner (%)")
    n_dis = int((~d["agree"].fillna(True).astype(bool)).sum())
    n_beyond = int((~d["agree"].fillna(True).astype(bool) & ~d["within_noise"].fillna(True).astype(bool)).sum())
    ranks = ", ".join(sorted(set(d["ranks"].dropna()))) if "ranks" in d.columns else ""
    ax.set_title(f"Per-rank divergence: {n_dis} of {len(d)} buckets disagree, {n_beyond} beyond noise")
    handles, names = ax.get_legend_handles_labels()
    disagree = ~d["agree"].fillna(True).astype(bool)
    noisy = d["within_noise"].fillna(True).astype(bool)
    kinds = [((~disagree).any(), Line2D([], [], marker="o", linestyle="", color=NEUTRAL), "ranks agree"),
             ((disagree & noisy).any(), Line2D([], [], marker="o", linestyle="", markerfacecolor="white",
                                               markeredgecolor="black"), "disagree, within noise"),
             ((disagree & ~noisy).any(), Line2D([], [], marker="o", linestyle="", color=SLOWER),
              "disagree, beyond noise"),
             (True, Line2D([], [], color=NEUTRAL, linewidth=3, alpha=0.35), "noise band")]
    handles += [h for drawn, h, _ in kinds if drawn]  # only the markers that are drawn
    names += [n for drawn, _, n in kinds if drawn]
    ax.legend(handles, names, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=6.5, borderaxespad=0)
    add_note(ax, f"ranks {ranks}; each rank tuned independently and priced the others' winners on its own "
                 "measurements")
    return fig

