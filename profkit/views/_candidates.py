"""Candidate spread: every candidate FlashInfer timed per bucket, with the winner and the default."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Iterable, Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from profkit.analysis import default_rows, flashinfer_rows, shapes_of
from profkit.errors import ProfkitError
from profkit.schema import require
from profkit.views._style import (SLOWER, add_note, empty_axes, figure_and_axes, log2_bucket_axis, run_label,
                                  runner_colour, runner_name, short_label, styled)

# The relative axis frames the band where tuning decisions are made: candidates up to this much
# slower than the winner; slower ones are drawn as marks on the top edge and counted in the note.
RELATIVE_TOP = 1.3


@dataclasses.dataclass(frozen=True)
class CandidateSpreadInfo:
    """What the spread plot draws: one point per candidate, y relative to the bucket's winner."""

    title: str
    buckets: tuple[int, ...]
    runners: tuple[str, ...]
    points: tuple[tuple[int, str, float], ...]     # (bucket, runner, y)
    winners: tuple[tuple[int, float], ...]         # (bucket, y)
    defaults: tuple[tuple[int, float], ...]        # (bucket, y)
    relative: bool
    timing: str = ""
    dropped: int = 0
    highlight: int | None = None
    run: str = ""                                  # the run drawn ("" where the style hides run ids)
    default_timings: int = 1                       # most default timings behind one bucket's diamond (median)


def select_one(frame: pd.DataFrame, *, op: str | None, shape: str | None, run_id: str | None,
               what: str = "candidates") -> tuple[pd.DataFrame, str, str, str]:
    """Narrow a frame to one op, shape and run; raise naming the choices when ambiguous."""
    f = frame
    if "shape" not in f.columns:
        f = f.assign(shape=shapes_of(f).to_numpy())
    ops = sorted(f["op"].dropna().unique())
    if op is None:
        if len(ops) != 1:
            raise ProfkitError(f"{what} hold {len(ops)} ops; pass op= one of {', '.join(ops) or 'none'}")
        op = ops[0]
    f = f[(f["op"].astype("string") == op).fillna(False).to_numpy(dtype=bool)]
    shapes = sorted(f["shape"].dropna().unique())
    if shape is None:
        if len(shapes) != 1:
            raise ProfkitError(f"{op} was tuned for {len(shapes)} shapes; pass shape= one of {', '.join(shapes) or 'none'}")
        shape = shapes[0]
    f = f[(f["shape"].astype("string") == shape).fillna(False).to_numpy(dtype=bool)]
    if f.empty:
        raise ProfkitError(f"no {what} for {op} shape {shape!r}; shapes: {', '.join(shapes) or 'none'}")
    runs = sorted(f["run_id"].dropna().unique()) if "run_id" in f.columns else []
    if run_id is None and len(runs) > 1:
        run_id = runs[0]
        warnings.warn(f"{op} {shape}: {len(runs)} runs; showing {run_id} (pass run_id= to choose)", stacklevel=4)
    if run_id is not None:
        f = f[(f["run_id"].astype("string") == run_id).fillna(False).to_numpy(dtype=bool)]
        if f.empty:
            raise ProfkitError(f"{op} {shape}: run {run_id!r} has no {what}; runs: {', '.join(runs)}")
    return f, op, shape, run_id or (runs[0] if runs else "")


def _candidate_spread_info(candidates: pd.DataFrame, *, op=None, shape=None, run_id=None,
                           runners: Iterable[str] | None = None, relative: bool = True,
                           highlight: int | None = None, labels: Mapping[str, str] | None = None
                           ) -> CandidateSpreadInfo:
    """Build the spread record for one op, shape and run."""
    c, op, shape, run_id = select_one(candidates, op=op, shape=shape, run_id=run_id)
    fi = flashinfer_rows(c)
    times = fi["time_ms"].to_numpy(dtype=float)
    ok = fi[np.isfinite(times)]
    dropped = int(len(fi) - len(ok))
    best = ok.groupby("bucket", observed=True)["time_ms"].min()
    if runners is not None:
        wanted = set(runners)
        ok = ok[ok["runner"].isin(wanted).to_numpy(dtype=bool)]
    scale = (lambda b: best.get(b, np.nan)) if relative else (lambda b: 1e-3)  # absolute: microseconds
    points = tuple((int(b), str(r), float(t / scale(b))) for b, r, t in zip(ok["bucket"], ok["runner"], ok["time_ms"]))
    winners = tuple((int(b), float(t / scale(b))) for b, t in best.items())
    d = default_rows(c)
    d = d[np.isfinite(d["time_ms"].to_numpy(dtype=float))]
    # One default per bucket: a capture that tuned a shape in several calls timed it once per call.
    per_bucket = d.groupby("bucket", observed=True)["time_ms"].agg(["median", "size"])
    defaults = tuple((int(b), float(t / scale(b))) for b, t in per_bucket["median"].items() if b in best.index)
    default_timings = int(per_bucket["size"].max()) if len(per_bucket) else 0
    timing = str(c["timing"].dropna().iloc[0]) if "timing" in c.columns and c["timing"].notna().any() else ""
    run = run_label(run_id)
    title = f"{op}  {short_label(shape, labels)}"
    return CandidateSpreadInfo(title=title, run=run, default_timings=default_timings, buckets=tuple(int(b) for b in best.index),
                               runners=tuple(sorted({p[1] for p in points})), points=points, winners=winners,
                               defaults=defaults, relative=relative, timing=timing, dropped=dropped,
                               highlight=highlight)


def _draw_candidate_spread(info: CandidateSpreadInfo, ax: Axes, *, top: float | None = None) -> None:
    """Scatter every candidate (spread per runner within its bucket), star the winner, diamond the default."""
    if not info.points:
        empty_axes(ax, "no candidates with a finite time")
        return
    top = (top or RELATIVE_TOP) if info.relative else None
    clip = (lambda y: min(y, top)) if top else (lambda y: y)  # noqa: E731
    n = len(info.runners)
    above = 0
    for i, runner in enumerate(info.runners):
        # Within a bucket's own octave (x is log2 M), runners side by side: the spread reads as one bucket.
        offset = 2 ** ((i - (n - 1) / 2) * 0.12)
        pts = [(b * offset, y) for b, r, y in info.points if r == runner]
        xs, ys = zip(*pts)
        inside = [y <= top for y in ys] if top else [True] * len(ys)
        above += inside.count(False)
        ax.scatter([x for x, ok in zip(xs, inside) if ok], [y for y, ok in zip(ys, inside) if ok], s=9,
                   color=runner_colour(runner), alpha=0.55, linewidths=0, label=runner_name(runner), zorder=2)
        if not all(inside):
            ax.scatter([x for x, ok in zip(xs, inside) if not ok], [top] * inside.count(False), s=14, marker="^",
                       color=runner_colour(runner), alpha=0.8, linewidths=0, zorder=2, clip_on=False)
    wx, wy = zip(*info.winners)
    ax.scatter(wx, wy, marker="*", s=70, color="black", zorder=4, label="winner")
    if info.defaults:
        dx, dy = zip(*info.defaults)
        ax.scatter(dx, [clip(y) for y in dy], marker="D", s=22, facecolor="white", edgecolor=SLOWER, linewidths=1.2,
                   zorder=5, label="default (runners[0], tactic -1)", clip_on=False)
    if info.highlight is not None:
        ax.axvspan(info.highlight / 2 ** 0.3, info.highlight * 2 ** 0.3, color="#fff59d", alpha=0.6, zorder=0)
    log2_bucket_axis(ax, info.buckets)
    ax.set_xlim(min(info.buckets) / 1.6, max(info.buckets) * 1.6)
    if info.relative:
        ys = [y for _, _, y in info.points] + [y for _, y in info.defaults]
        highest = max(ys) if ys else top
        ax.set_ylim(0.99, max(1.05, min(highest, top)) + 0.01)
        ax.set_ylabel("time / winner's time (x)")
        ax.yaxis.set_major_formatter(_times())
    else:
        ax.set_ylabel("time (us)")
    ax.set_title(f"Every candidate per bucket: {info.title}", loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small", markerscale=1.2, borderaxespad=0)
    note = "; ".join(x for x in (f"run {info.run}" if info.run else "",
                                  f"timed {info.timing}" if info.timing else "") if x)
    if info.default_timings > 1:
        note += f"; default: median of up to {info.default_timings} timings (one per tuning call)"
    if above:
        note += (f"{'; ' if note else ''}{above} candidates slower than {top:g}x the winner drawn as marks on the "
                 "top edge")
    if info.dropped:
        note += f"; {info.dropped} candidates without a finite time (failed) not drawn"
    add_note(ax, note)


def _times() -> FuncFormatter:
    """Tick labels '1x', '1.05x', '1.1x'."""
    return FuncFormatter(lambda value, pos=None: f"{value:.3g}x")



@styled
def plot_candidates(candidates: pd.DataFrame, *, op: str | None = None, shape: str | None = None,
                    run_id: str | None = None, runners: Iterable[str] | None = None, relative: bool = True,
                    highlight: int | None = None, labels: Mapping[str, str] | None = None,
                    top: float | None = None, ax: Axes | None = None) -> Figure:
    """Plot every candidate FlashInfer timed, bucket by bucket, for one op, shape and run.

    The x axis is the bucket (log2); the y axis each candidate's time divided by the bucket's
    winner (1x = the winner), framing the band where decisions are made (up to ``top``, default
    1.3x: slower candidates are marks on the top edge, counted in the note), or microseconds with
    ``relative=False``. Colours are runner families, runners side by side within each bucket;
    the black star is the winner, the red diamond profkit's timing of the default (runners[0],
    tactic -1). Candidates without a finite time are counted in the note, not drawn.

    Args:
        candidates: a candidates table.
        op: the op (needed when the table holds several).
        shape: the problem shape label (needed when the op was tuned for several).
        run_id: the run (default: the first, with a warning, when several).
        runners: draw only these runners (the winner star is still the overall winner).
        relative: y as time / winner time (True) or milliseconds.
        highlight: a bucket to shade (the explorer's selection).
        labels: display names per shape label.
        top: the relative axis' upper end (x the winner's time).
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.

    Raises:
        ProfkitError: when op, shape or run is ambiguous or matches nothing.
    """
    require(candidates, ("run_id", "op", "profile", "bucket", "runner", "tactic", "time_ms"), "candidates")
    info = _candidate_spread_info(candidates, op=op, shape=shape, run_id=run_id, runners=runners,
                                  relative=relative, highlight=highlight, labels=labels)
    if info.dropped:
        warnings.warn(f"{info.dropped} candidates omitted: their time_ms is not finite (failed or oom)",
                      stacklevel=3)
    fig, ax = figure_and_axes(ax, figsize=(9.0, 3.8))
    _draw_candidate_spread(info, ax, top=top)
    return fig

