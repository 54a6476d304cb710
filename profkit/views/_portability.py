"""One GPU's picks on another: per model (shape) and M, the carried pick against the target's own pick and its default."""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Mapping

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from profkit.errors import ProfkitError
from profkit.schema import require
from profkit.views._style import ACCENT, SLOWER, empty_axes, short_label, styled

# Colour only beyond noise; the same pick on both GPUs is a hollow grey point (its regret is zero by construction).
COLOURS = {"slower": SLOWER, "faster": ACCENT, "within_noise": "#c8c8c8", "same_pick": "#c8c8c8"}
# One marker per routing family, so the routings at one M tell apart where they overlap.
_MARKERS = (("tuner", "o"), ("balanced", "s"), ("zipf", "^"), ("hot", "D"))
_COLUMNS = ("op", "shape", "routing", "m", "source_gpu", "target_gpu", "regret", "regret_lo", "regret_hi",
            "regret_verdict", "vs_default", "vs_default_verdict")


@dataclasses.dataclass(frozen=True)
class PortabilityPanel:
    """One (op, shape): a point per (routing, M), changes in percent (positive: the carried pick is slower)."""

    op: str
    shape: str
    title: str
    ms: tuple[int, ...]
    routings: tuple[str, ...]
    regret_pct: tuple[float, ...]
    regret_lo_pct: tuple[float, ...]
    regret_hi_pct: tuple[float, ...]
    regret_verdicts: tuple[str, ...]
    vs_default_pct: tuple[float, ...]
    vs_default_verdicts: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class PortabilityInfo:
    """The panels of one (source GPU, target GPU) pair, sorted by op and panel title."""

    source_gpu: str
    target_gpu: str
    panels: tuple[PortabilityPanel, ...]


def gpu_name(gpu: str) -> str:
    """'H100' for 'NVIDIA H100 80GB HBM3': the GPU's model name without vendor and memory."""
    words = str(gpu).removeprefix("NVIDIA ").split()
    return words[0] if words and any(ch.isdigit() for ch in words[0]) else str(gpu)


def _portability_info(carried: pd.DataFrame, *, source_gpu: str | None, target_gpu: str | None,
                      labels: Mapping[str, str] | None) -> PortabilityInfo:
    """The panels of the one (source, target) pair in ``carried`` (or the one asked for)."""
    pairs = sorted({(str(s), str(t)) for s, t in zip(carried["source_gpu"], carried["target_gpu"])})
    wanted = [p for p in pairs if source_gpu in (None, p[0]) and target_gpu in (None, p[1])]
    if len(wanted) > 1:
        raise ProfkitError("carried picks of several GPU pairs; pass source_gpu= and target_gpu=, one of "
                           + ", ".join(f"{s} -> {t}" for s, t in pairs))
    if not wanted:
        if pairs:
            raise ProfkitError(f"no carried picks from {source_gpu or 'any GPU'} to {target_gpu or 'any GPU'}; "
                               "this frame has " + ", ".join(f"{s} -> {t}" for s, t in pairs))
        return PortabilityInfo(source_gpu=source_gpu or "", target_gpu=target_gpu or "", panels=())
    source, target = wanted[0]
    rows = carried[((carried["source_gpu"] == source) & (carried["target_gpu"] == target)).to_numpy(dtype=bool)]
    panels = []
    for (op, shape), g in rows.groupby(["op", "shape"], sort=True):
        g = g.sort_values(["m", "routing"], kind="stable")
        pct = lambda c: tuple(float(x) for x in 100 * g[c].astype(float))  # noqa: E731
        panels.append(PortabilityPanel(
            op=str(op), shape=str(shape), title=_model_name(str(shape), labels), ms=tuple(int(m) for m in g["m"]),
            routings=tuple(str(r) for r in g["routing"].fillna("")), regret_pct=pct("regret"),
            regret_lo_pct=pct("regret_lo"), regret_hi_pct=pct("regret_hi"),
            regret_verdicts=tuple(str(v) for v in g["regret_verdict"]), vs_default_pct=pct("vs_default"),
            vs_default_verdicts=tuple(str(v) for v in g["vs_default_verdict"])))
    return PortabilityInfo(source_gpu=source, target_gpu=target,
                           panels=tuple(sorted(panels, key=lambda p: (p.op, p.title))))


def _model_name(shape: str, labels: Mapping[str, str] | None) -> str:
    """An MoE shape as its model's name with the geometry after it; a GEMM shape as :func:`short_label` gives it."""
    if labels and shape in labels and not shape.startswith("N="):
        return f"{labels[shape]}\n{shape}"
    return short_label(shape, labels)


def _marker(routing: str) -> str:
    """The routing family's marker; a dense GEMM (no routing) is a plain circle."""
    if not routing:
        return "o"
    return next((m for prefix, m in _MARKERS if routing.startswith(prefix)), "v")


def _routing_order(routing: str) -> tuple[int, str]:
    """The tuner's routing first, then balanced, Zipf, hot experts, others."""
    return next((i for i, (prefix, _) in enumerate(_MARKERS) if routing.startswith(prefix)), len(_MARKERS)), routing


def _dodged(ms: np.ndarray, routings: tuple[str, ...]) -> np.ndarray:
    """M moved a little left or right per routing (a log2 axis), so the routings at one M do not hide each other."""
    names = sorted(set(routings), key=_routing_order)
    offsets = dict(zip(names, np.linspace(-0.18, 0.18, len(names)) if len(names) > 1 else [0.0]))
    return ms * np.exp2([offsets[r] for r in routings])


def _draw_points(ax: Axes, panel: PortabilityPanel, values, verdicts, lows=None, highs=None) -> None:
    """One point per (routing, M), coloured by its verdict; intervals only beyond noise."""
    x = _dodged(np.asarray(panel.ms, dtype=float), panel.routings)
    y = np.asarray(values, dtype=float)
    for verdict in ("same_pick", "within_noise", "faster", "slower"):  # beyond noise drawn last, on top
        for routing in sorted(set(panel.routings), key=_routing_order):
            sel = np.array([v == verdict and r == routing for v, r in zip(verdicts, panel.routings)], dtype=bool)
            if not sel.any():
                continue
            colour = COLOURS.get(verdict, COLOURS["within_noise"])
            beyond = verdict in ("slower", "faster")
            err = None
            if beyond and lows is not None:
                lo, hi = np.asarray(lows, dtype=float)[sel], np.asarray(highs, dtype=float)[sel]
                err = np.vstack([np.nan_to_num(y[sel] - lo), np.nan_to_num(hi - y[sel])])
            ax.errorbar(x[sel], y[sel], yerr=err, fmt=_marker(routing), ms=4.2 if beyond else 3.4,
                        color=colour, ecolor=colour, elinewidth=0.8, linestyle="",
                        markerfacecolor="white" if verdict == "same_pick" else colour,
                        zorder=4 if beyond else 2, alpha=1.0 if beyond else 0.85)
    ax.axhline(0.0, color="#444444", linewidth=0.8, zorder=1)


def _draw_panel(panel: PortabilityPanel, top: Axes, bottom: Axes, *, title: str) -> None:
    _draw_points(top, panel, panel.regret_pct, panel.regret_verdicts, panel.regret_lo_pct, panel.regret_hi_pct)
    _draw_points(bottom, panel, panel.vs_default_pct, panel.vs_default_verdicts)
    counts = {v: panel.regret_verdicts.count(v) for v in ("slower", "faster", "same_pick")}
    top.text(0.02, 0.97, f"{counts['slower']} slower, {counts['faster']} faster, {counts['same_pick']} same pick "
             f"of {len(panel.ms)}", transform=top.transAxes, ha="left", va="top", fontsize="small",
             color=SLOWER if counts["slower"] else "#333333")
    slower = [i for i, v in enumerate(panel.regret_verdicts) if v == "slower"]
    if slower:  # the worst point beyond noise, named
        i = max(slower, key=lambda j: panel.regret_pct[j])
        right = panel.ms[i] > np.sqrt(min(panel.ms) * max(panel.ms))  # label on the side with room
        routing = f"\n({panel.routings[i]} routing)" if panel.routings[i] else ""
        top.annotate(f"{panel.regret_pct[i]:+.0f}% at M={panel.ms[i]}{routing}",
                     xy=(panel.ms[i], panel.regret_pct[i]), xytext=(-7 if right else 7, 0), textcoords="offset points",
                     fontsize="x-small", color=SLOWER, ha="right" if right else "left", va="center")
    vs = {v: panel.vs_default_verdicts.count(v) for v in ("slower", "faster")}
    bottom.text(0.02, 0.03, f"{vs['faster']} faster, {vs['slower']} slower of {len(panel.ms)}",
                transform=bottom.transAxes, ha="left", va="bottom", fontsize="small",
                color=SLOWER if vs["slower"] else "#333333")
    top.set_title(title, fontsize="small")
    for ax in (top, bottom):
        ax.set_xscale("log", base=2)
        ticks = [t for t in (1, 4, 16, 64, 256, 1024, 4096) if min(panel.ms) <= t <= max(panel.ms)] or list(panel.ms)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
    bottom.set_xlabel("M (tokens)")


def _blocks(panels: tuple[PortabilityPanel, ...], *, width: int = 4) -> list[list[PortabilityPanel]]:
    """The panels in rows of at most ``width``, each op starting a new row, so no figure runs off the page."""
    blocks: list[list[PortabilityPanel]] = []
    for op in dict.fromkeys(p.op for p in panels):
        mine = [p for p in panels if p.op == op]
        blocks += [mine[i:i + width] for i in range(0, len(mine), width)]
    return blocks


def _shared_row(fig: Figure, grid, row: int, n: int) -> list[Axes]:
    """``n`` Axes in ``grid``'s row ``row``, sharing the first one's y axis."""
    first = fig.add_subplot(grid[row, 0])
    return [first] + [fig.add_subplot(grid[row, j], sharey=first) for j in range(1, n)]


def _label_rows(top: Axes, bottom: Axes, info: PortabilityInfo) -> None:
    source, target = gpu_name(info.source_gpu), gpu_name(info.target_gpu)
    top.set_ylabel(f"vs the {target}'s own pick (%)\n> 0: the {source}'s pick is slower")
    bottom.set_ylabel(f"vs the {target}'s default (%)\n< 0: the {source}'s pick is faster")


def _frame(axes_row) -> None:
    """One y range per row, 0 included, at least +-2%."""
    lows, highs = zip(*(a.get_ylim() for a in axes_row))
    lo, hi = min(min(lows), -2.0), max(max(highs), 2.0)
    for a in axes_row:
        a.set_ylim(lo, hi)


@styled
def plot_portability(carried: pd.DataFrame, *, source_gpu: str | None = None, target_gpu: str | None = None,
                     labels: Mapping[str, str] | None = None, title: str | None = None,
                     ax: Axes | None = None) -> Figure:
    """Plot one GPU's picks timed on another: against the target's own pick (top) and its default (bottom).

    One column per (op, shape) (an MoE model), at most four to a row and each op on rows of its own, x the token
    count M (log2), one point per routing (marker) and M.
    Top: the regret, the carried pick's time over the target's own pick's (each against the default timed in its
    own process), in percent: above 0 the carried pick is slower. Bottom: the carried pick against the target's
    default, in percent: below 0 it is faster. Red: slower beyond noise, blue: faster beyond noise, grey: within
    noise, hollow grey: the same pick on both GPUs. Beyond-noise regrets carry the comparison rule's 95% interval.

    Args:
        carried: :func:`profkit.analysis.portability.carried_picks`.
        source_gpu, target_gpu: the pair to draw when ``carried`` holds several.
        labels: display names per shape (the catalogue's ``labels``: MoE geometries to model names).
        title: the figure's title (the report states its takeaway there); default: what is drawn.
        ax: draw into this Axes' place in its grid instead of a new figure.

    Returns:
        The Figure drawn into.

    Raises:
        ProfkitError: when ``carried`` holds several GPU pairs and none was chosen, or not the one asked for.
    """
    require(carried, _COLUMNS, "carried picks")
    info = _portability_info(carried, source_gpu=source_gpu, target_gpu=target_gpu, labels=labels)
    blocks = _blocks(info.panels)
    cols = max((len(b) for b in blocks), default=1)
    if ax is None:
        fig = Figure(figsize=(max(7.0, 3.9 * cols + 1.0), 1.2 + 5.6 * max(len(blocks), 1)), layout="constrained")
        grid = fig.add_gridspec(2 * max(len(blocks), 1), cols)
    else:
        fig = ax.figure
        grid = ax.get_subplotspec().subgridspec(2 * max(len(blocks), 1), cols, hspace=0.35, wspace=0.25)
        ax.remove()
    if not info.panels:
        empty_axes(fig.add_subplot(grid[:, :]), "no pick carried from one GPU to another")
        return fig
    several_ops = len({p.op for p in info.panels}) > 1
    for b, block in enumerate(blocks):
        tops, bottoms = _shared_row(fig, grid, 2 * b, len(block)), _shared_row(fig, grid, 2 * b + 1, len(block))
        for panel, top, bottom in zip(block, tops, bottoms):
            _draw_panel(panel, top, bottom,
                        title=f"{panel.op.split('::')[0]}: {panel.title}" if several_ops else panel.title)
        for row in (tops, bottoms):
            _frame(row)
            for a in row[1:]:
                a.tick_params(labelleft=False)
        _label_rows(tops[0], bottoms[0], info)
    source, target = gpu_name(info.source_gpu), gpu_name(info.target_gpu)
    families: dict[str, list[str]] = {}
    for r in sorted({r for p in info.panels for r in p.routings if r}, key=_routing_order):
        families.setdefault(_marker(r), []).append(r)
    handles = [Line2D([], [], marker="o", linestyle="", color=COLOURS[v], markerfacecolor=face, label=label)
               for v, face, label in (("slower", COLOURS["slower"], "slower beyond noise"),
                                      ("faster", COLOURS["faster"], "faster beyond noise"),
                                      ("within_noise", COLOURS["within_noise"], "within noise"),
                                      ("same_pick", "white", f"the same pick as the {target}'s"))]
    handles += [Line2D([], [], marker=marker, linestyle="", color="#555555", markerfacecolor="none",
                       label=f"{'/'.join(names)} routing") for marker, names in families.items()]
    title = title or f"The {source}'s picks timed on the {target}: against the {target}'s own pick and its default"
    # A long title wraps at the figure's width (about 0.62 em per bold character).
    chars = int(fig.get_figwidth() * 72 / (0.62 * float(mpl.rcParams["font.size"])))
    fig.suptitle(textwrap.fill(title, max(chars, 40)), fontsize="medium", fontweight="bold")
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 8), fontsize="x-small",
               title="Each pick is priced against the default timed in its own verify process, so the two processes' "
                     "drift cancels; serving times (profkit verify: CUDA graph replays); bars: the comparison rule's "
                     "95% interval (docs/comparison_rule.md)", title_fontsize="x-small")
    return fig
