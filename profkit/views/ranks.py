"""The picks of each rank or boot, per bucket: who agrees, and what the odd picks cost (``plot_rank_picks``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from profkit.schema import require
from profkit.views._style import (SLOWER, add_note, categorical_bucket_axis, cells, empty_axes, figure_and_axes,
                                  short_label, styled)

# A cell's state, worst first: the costliest of the tuner's picks in the bucket decides its colour.
_STATES = ("slower", "not_measurable", "other", "best")
_FACE = {"slower": SLOWER, "not_measurable": "white", "other": "#ffcc80", "best": "#cfd8dc"}
_WORDS = {"best": "the best pick", "other": "another pick, within noise of the best",
          "slower": "another pick, slower beyond noise", "not_measurable": "another pick, not measurable"}


@dataclasses.dataclass(frozen=True)
class RankPicksInfo:
    """Blocks of rows (one block per op and shape, one row per tuner) x buckets, a state per cell."""

    blocks: tuple[str, ...]
    tuners: tuple[tuple[str, ...], ...]
    cells: tuple[tuple[tuple[int, str, int, float], ...], ...]  # per block: (row, state, picks, regret_pct) per bucket
    buckets: tuple[tuple[int, ...], ...]                          # per block, aligned with its cells
    differ: int                                                   # buckets with more than one pick
    costly: int                                                   # ... whose worst pick is slower beyond noise


def _rank_picks_info(tunings: pd.DataFrame, *, labels: Mapping[str, str] | None = None) -> RankPicksInfo:
    t = tunings.dropna(subset=["bucket"])
    verdict = t["verdict"].astype("string")
    state = pd.Series("other", index=t.index).mask((verdict == "not_measurable").fillna(False), "not_measurable") \
        .mask((verdict == "slower").fillna(False), "slower").mask(t["best"].fillna(False).astype(bool), "best")
    t = t.assign(_state=state.map(_STATES.index), _pick=t["runner"].astype(str) + ":" + t["tactic"].astype(str))
    blocks, tuners, cells, buckets = [], [], [], []
    differ = costly = 0
    for (op, shape), g in t.groupby(["op", "shape"], sort=True, dropna=False):
        names = g.drop_duplicates("tuner").sort_values("tuner")
        rows = {int(k): i for i, k in enumerate(names["tuner"])}
        per = g.groupby(["tuner", "bucket"]).agg(state=("_state", "min"), picks=("_pick", "nunique"),
                                                 regret=("regret_pct", "max")).reset_index()
        blocks.append(f"{op}  {short_label(str(shape), labels)}")
        tuners.append(tuple(str(x) for x in names["label"]))
        cells.append(tuple((rows[int(r.tuner)], _STATES[int(r.state)], int(r.picks), float(r.regret))
                           for r in per.itertuples(index=False)))
        buckets.append(tuple(int(b) for b in per["bucket"]))
        by_bucket = g.groupby("bucket")
        differ += int((by_bucket["_pick"].nunique() > 1).sum())
        costly += int(by_bucket["_state"].min().eq(_STATES.index("slower")).sum())
    return RankPicksInfo(blocks=tuple(blocks), tuners=tuple(tuners), cells=tuple(cells), buckets=tuple(buckets),
                         differ=differ, costly=costly)


@styled
def plot_rank_picks(tunings: pd.DataFrame, *, labels: Mapping[str, str] | None = None, title: str = "",
                    ax: Axes | None = None) -> Figure:
    """Plot what each rank or boot picked per bucket: the best pick, another within noise, or one that costs.

    One block of rows per op and shape (one row per tuner: a rank of a run, or one fresh-process tuning), one
    cell per bucket (equal widths). The colour is the tuner's pick against the bucket's best pick (the
    fastest geometric mean over the runs that timed it), judged by the comparison rule; a red cell prints the
    regret (percent), a number elsewhere counts the tuner's distinct picks where it tuned the bucket more than once.

    Args:
        tunings: ``RankAnswers.tunings`` of :func:`profkit.analysis.ranks.repeated_tunings` (one GPU's).
        labels: display names per shape label.
        title: the first line of the title (e.g. the GPU).
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.
    """
    require(tunings, ("op", "shape", "bucket", "tuner", "label", "runner", "tactic", "best", "regret_pct", "verdict"),
            "tunings")
    info = _rank_picks_info(tunings, labels=labels)
    rows = sum(len(t) + 1 for t in info.tuners)
    fig, ax = figure_and_axes(ax, figsize=(11.0, 2.4 + 0.2 * max(rows, 1)))
    if not info.blocks:
        empty_axes(ax, "no op and shape was tuned by two runs or more")
        return fig
    _draw_rank_picks(info, ax, title)
    return fig


def _draw_rank_picks(info: RankPicksInfo, ax: Axes, title: str) -> None:
    y, ticks, names, headers = 0.0, [], [], []
    plain, hatched = [], []  # cells: x, y, width, height, colour; hatched: not measurable
    x = categorical_bucket_axis(ax, {b for row in info.buckets for b in row})
    for block, tuners, row_cells, buckets in zip(info.blocks, info.tuners, info.cells, info.buckets):
        ticks.append(y)
        names.append(block)
        headers.append(y)
        for (row, state, picks, regret), bucket in zip(row_cells, buckets):
            top = y + 1 + row
            (hatched if state == "not_measurable" else plain).append((x[bucket] - 0.5, top - 0.42, 1.0, 0.84,
                                                                      _FACE[state]))
            text = f"{regret:+.1f}" if state == "slower" and math.isfinite(regret) else str(picks) if picks > 1 else ""
            if text:
                ax.text(x[bucket], top, text, ha="center", va="center", fontsize=6, clip_on=True,
                        color="white" if state == "slower" else "#333333")
        ticks += [y + 1 + i for i in range(len(tuners))]
        names += list(tuners)
        y += len(tuners) + 1.6
    cells(ax, plain, edgecolor="#dddddd", linewidth=0.6)
    cells(ax, hatched, edgecolor="#dddddd", linewidth=0.6, hatch="...")
    ax.tick_params(axis="x", labelrotation=90)
    ax.set_ylim(y - 0.6, -0.6)
    ax.set_yticks(ticks, names)
    for tick, at in zip(ax.get_yticklabels(), ticks):
        if at in headers:
            tick.set_fontweight("bold")
    ax.tick_params(axis="y", length=0)
    ax.grid(False)
    ax.legend(handles=[Patch(facecolor=_FACE[s], edgecolor="#999999", hatch="..." if s == "not_measurable" else None,
                             label=_WORDS[s]) for s in ("best", "other", "slower", "not_measurable")],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    head = f"{title}: " if title else ""
    ax.set_title(f"{head}the picks of each rank or boot per bucket\n{info.differ} buckets with more than one pick, "
                 f"{info.costly} where one costs beyond noise")
    add_note(ax, "bold: op and shape; each row below it one tuning process (a rank of a run, or a fresh-process "
                 "tuning); red cells print the regret t(pick) / t(best) - 1 in percent, judged on the runs that timed "
                 "both; a number elsewhere: distinct picks of that tuner (it tuned the bucket more than once)",
             below_pt=52)
