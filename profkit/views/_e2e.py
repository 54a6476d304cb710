"""Kernel speedups beside end-to-end serving deltas, and tuned vs untuned op timings."""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from profkit.schema import require
from profkit.views._format import number
from profkit.views._style import (ACCENT, SLOWER, add_note, empty_axes, figure_and_axes, log2_bucket_axis, owns,
                                  series_colour, short_label, split_axes, styled)

_BETTER = "#2e7d32"
_ONE_LINE = 48  # a kernel's "op shape" name longer than this takes two lines
_METRIC_NAMES = {"output_tok_s": "output throughput", "total_tok_s": "total throughput",
                 "request_throughput": "request throughput", "mean_ttft_ms": "mean TTFT",
                 "median_ttft_ms": "median TTFT", "p99_ttft_ms": "P99 TTFT", "mean_tpot_ms": "mean TPOT",
                 "mean_itl_ms": "mean ITL", "median_itl_ms": "median ITL", "p95_itl_ms": "P95 ITL",
                 "p99_itl_ms": "P99 ITL", "mean_e2e_ms": "mean E2E latency", "duration_s": "duration"}


@dataclasses.dataclass(frozen=True)
class KernelE2EInfo:
    """Bars of bigger-is-better improvement (percent), kernel rows first."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    improvements: tuple[float, ...]
    values: tuple[str, ...]       # "24.43 vs 28.98 ms" per bar
    note: str = ""
    kernel_where: str = ""        # "H200": where the kernels were timed
    serving_where: str = ""       # "B200, SGLang, gpt-oss-120b": where the serving pair ran


def _kernel_e2e_info(frame: pd.DataFrame, *, metrics=None, labels: Mapping[str, str] | None = None,
                     note: str = "", kernel_where: str = "", serving_where: str = "") -> KernelE2EInfo:
    """Pick the rows to draw: all kernel rows and the chosen e2e metrics."""
    f = frame
    if metrics is not None:
        f = f[(f["kind"] == "kernel") | f["metric"].isin(list(metrics))]
    names, kinds, imps, values = [], [], [], []
    for r in f.itertuples(index=False):
        if r.kind == "kernel":
            op, _, shape = str(r.metric).partition(" ")
            name = f"{op} {short_label(shape, labels)}"
            names.append(name if len(name) <= _ONE_LINE else f"{op}\n{short_label(shape, labels)}")
            # Milliseconds per layer summed over the whole run (every call it served), not one kernel call.
            values.append(f"{number(r.treatment, digits=4)} vs {number(r.baseline, digits=4)} ms")
        else:
            names.append(_METRIC_NAMES.get(r.metric, r.metric))
            values.append(f"{number(r.treatment)} vs {number(r.baseline)} {r.unit}")
        kinds.append(str(r.kind))
        imps.append(float(r.improvement_pct))
    return KernelE2EInfo(names=tuple(names), kinds=tuple(kinds), improvements=tuple(imps), values=tuple(values),
                         note=note, kernel_where=kernel_where, serving_where=serving_where)


def _span(values) -> str:
    """'+0.1% to +18.3%', or the one value."""
    lo, hi = min(values), max(values)
    return f"{lo:+.1f}%" if lo == hi else f"{lo:+.1f}% to {hi:+.1f}%"


def _takeaway(info: KernelE2EInfo, kind: str) -> str:
    """A panel's title: where it was measured and what its bars add up to."""
    imps = info.improvements
    if kind == "kernel":
        where = f" on {info.kernel_where}" if info.kernel_where else ""
        return (f"Kernels{where}, tuned vs default: {_span(imps)}\n"
                "(ms per layer over the run, weighted by the buckets served)")
    where = f" on {info.serving_where}" if info.serving_where else ""
    up = [v for v in imps if v > 0]
    down = [(n, v) for n, v in zip(info.names, imps) if v < 0]
    text = f"Serving{where}, autotune on vs off:\n{len(up)} of {len(imps)} metrics improved"
    text += f" ({_span(up)})" if up else ""
    return text + (f"\nworse: {', '.join(f'{n} {v:+.1f}%' for n, v in down)}" if down else "")


def _draw_bars(info: KernelE2EInfo, ax: Axes, *, title: str) -> None:
    """Horizontal bigger-is-better bars of one kind (kernel or end to end), each labelled with its numbers.

    Every label starts right of the bar's end or of zero, so a negative bar's label never runs
    into the names on the left.
    """
    pos = np.arange(len(info.names))
    colours = [ACCENT if k == "kernel" else (_BETTER if v >= 0 else SLOWER)
               for k, v in zip(info.kinds, info.improvements)]
    ax.barh(pos, info.improvements, color=colours, height=0.65)
    ax.axvline(0, color="#444444", linewidth=0.8)
    span = max(abs(v) for v in info.improvements) or 1.0
    for y, v, text in zip(pos, info.improvements, info.values):
        ax.annotate(f"{v:+.1f}%  ({text})", xy=(max(v, 0.0), y), xytext=(4, 0), textcoords="offset points",
                    ha="left", va="center", fontsize="x-small")
    low, high = min(min(info.improvements), 0.0), max(max(info.improvements), 0.0)
    ax.set_xlim(low - 0.05 * span, high + 0.9 * span)  # room right of the longest bar for its label
    ax.set_yticks(pos, info.names)
    ax.invert_yaxis()
    ax.set_xlabel("improvement (%), bigger is better")
    ax.grid(axis="y", visible=False)
    ax.set_title(title, loc="left", fontsize="medium")


def _part(info: KernelE2EInfo, kind: str) -> KernelE2EInfo:
    keep = [i for i, k in enumerate(info.kinds) if (k == "kernel") == (kind == "kernel")]
    pick = lambda values: tuple(values[i] for i in keep)  # noqa: E731
    return dataclasses.replace(info, names=pick(info.names), kinds=pick(info.kinds),
                               improvements=pick(info.improvements), values=pick(info.values))


def _draw_kernel_e2e(info: KernelE2EInfo, ax: Axes) -> None:
    """Kernel rows above end-to-end rows (two panels, never one axis), the caveat above both."""
    if not info.names:
        empty_axes(ax, "no kernel or end-to-end rows")
        return
    parts = [(kind, _part(info, kind)) for kind in ("kernel", "e2e")]
    parts = [(kind, part) for kind, part in parts if part.names]
    fig, own = ax.figure, owns(ax)
    # One above the other, so both get the figure's width for their names and labels; each panel
    # says where it was measured: serving numbers from another GPU never share an axis with the kernels.
    panels = split_axes(ax, len(parts), vertical=True, ratios=[len(p.names) + 2.5 for _, p in parts], space=0.5)
    for (kind, part), panel in zip(parts, panels):
        _draw_bars(part, panel, title=_takeaway(part, kind))
    if len(parts) == 1:
        add_note(ax, info.note)
    elif own:
        fig.suptitle("Different sources: read side by side, not as cause and effect. " + info.note,
                           fontsize="small", color=SLOWER, wrap=True)
    else:
        add_note(panels[-1], "Different sources, not cause and effect. " + info.note, below_pt=44)


@styled
def plot_kernel_vs_e2e(frame: pd.DataFrame, *, metrics=("output_tok_s", "mean_ttft_ms", "mean_itl_ms",
                                                         "median_itl_ms", "p99_itl_ms"),
                       labels: Mapping[str, str] | None = None, note: str = "", kernel_where: str = "",
                       serving_where: str = "", ax: Axes | None = None) -> Figure:
    """Plot weighted kernel speedups beside the end-to-end deltas of a serving pair.

    One horizontal bar per row, all as bigger-is-better percent, in two panels that never share
    an axis: kernels on the left (blue: default vs tuned milliseconds per layer summed over the
    run, weighted by the decode and prefill buckets it hits), the serving pair on the right (green/red: metrics
    that improved/worsened), each panel titled with where it was measured. Kernels and serving
    usually come from different GPUs or ops (the shipped case: H200 GEMMs beside B200 MoE
    serving); ``note`` states that above the panels.
    Each bar is labelled with its value and the two raw numbers. With ``ax`` given, the two
    panels share that Axes' place in its grid.

    Args:
        frame: output of :func:`profkit.analysis.kernel_vs_e2e` (or :func:`~profkit.analysis.e2e_delta`).
        metrics: e2e metrics to draw (None: all); kernel rows are always drawn.
        labels: display names per shape label.
        note: caveat printed under the axes, e.g. that kernels and serving ran on other GPUs.
        kernel_where: where the kernels were timed, for the kernel panel's title (e.g. "H200").
        serving_where: where the serving pair ran, for its panel's title (e.g. "B200, SGLang, gpt-oss-120b").
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.
    """
    require(frame, ("kind", "metric", "baseline", "treatment", "improvement_pct", "unit"), "kernel_vs_e2e")
    info = _kernel_e2e_info(frame, metrics=metrics, labels=labels, note=note, kernel_where=kernel_where,
                            serving_where=serving_where)
    rows = sum(name.count("\n") + 1 for name in info.names)
    fig, ax = figure_and_axes(ax, figsize=(10.0, 2.6 + 0.3 * rows))
    _draw_kernel_e2e(info, ax)
    return fig


@styled
def plot_op_timings(between: pd.DataFrame, *, op: str | None = None, labels: Mapping[str, str] | None = None,
                    ax: Axes | None = None) -> Figure:
    """Plot tuned vs untuned op timings at M on and between buckets: is the bucket gain realised?

    x is M (log2, the timed values); y ``untuned_ms / tuned_ms`` (above 1: the tuned configs
    help). Filled markers sit at an M that equals a bucket, hollow ones between buckets; a black
    x marks an M where the tuned call did not run the bucket's winner (cuBLASLt bf16 keys
    include M, so its tuned configs apply only at exact bucket M). Small dashes give the
    speedup the tuner measured at that bucket.

    Args:
        between: output of :func:`profkit.analysis.between_buckets`.
        op: draw only this op.
        labels: display names per shape label.
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.
    """
    require(between, ("op", "shape", "m", "bucket", "at_bucket", "speedup", "bucket_speedup", "config_applied"),
            "between_buckets")
    b = between if op is None else between[(between["op"].astype("string") == op).fillna(False).to_numpy(dtype=bool)]
    fig, ax = figure_and_axes(ax, figsize=(8.0, 3.8))
    if b.empty:
        empty_axes(ax, "no op timings")
        return fig
    ax.axhline(1.0, color="#444444", linewidth=0.8)
    for i, ((op_name, shape), g) in enumerate(b.groupby(["op", "shape"], sort=True, observed=True)):
        g = g.sort_values("m")
        colour = f"C{i % 10}"
        m = g["m"].astype(float).to_numpy()
        y = g["speedup"].astype(float).to_numpy()
        at = g["at_bucket"].fillna(False).to_numpy(dtype=bool)
        ax.plot(m, y, color=colour, linewidth=1.0, label=f"{op_name}  {short_label(str(shape), labels)}")
        ax.scatter(m[at], y[at], color=colour, s=22, zorder=3)
        ax.scatter(m[~at], y[~at], facecolor="white", edgecolor=colour, s=22, linewidths=1.2, zorder=3)
        missed = (g["config_applied"].astype("boolean") == False).fillna(False).to_numpy(dtype=bool)  # noqa: E712
        ax.scatter(m[missed], y[missed], marker="x", color="black", s=16, linewidths=0.9, zorder=4)
        ax.scatter(m, g["bucket_speedup"].astype(float), marker="_", color=colour, s=60, zorder=2)
    log2_bucket_axis(ax, b["m"].astype(int), label="M (tokens) the op was called with", every_value=True)
    ax.set_ylabel("speedup, tuned vs untuned (x)\nuntuned_ms / tuned_ms")
    ops = ", ".join(sorted(b["op"].dropna().unique()))
    ax.set_title(f"Outside tuning: does the bucket's gain hold at M never profiled? ({ops})")
    handles, names = ax.get_legend_handles_labels()
    handles += [Line2D([], [], marker="o", linestyle="", color="black"),
                Line2D([], [], marker="o", linestyle="", markerfacecolor="white", markeredgecolor="black"),
                Line2D([], [], marker="_", linestyle="", color="black", markersize=9)]
    names += ["M = a bucket", "M between buckets", "tuner's bucket speedup"]
    if (b["config_applied"].astype("boolean") == False).fillna(False).any():  # noqa: E712  (only when drawn)
        handles.append(Line2D([], [], marker="x", linestyle="", color="black"))
        names.append("tuned call ran another runner/tactic")
    ax.legend(handles, names, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=6.5, borderaxespad=0)
    timing = "; ".join(sorted(b["timing"].dropna().unique())) if "timing" in b.columns else ""
    add_note(ax, f"op timed {timing}; the tuner timed candidates its own way (see the other figures)")
    return fig


@dataclasses.dataclass(frozen=True)
class StepSeries:
    """One model and dtype's step change per phase: tokens, percent, interval and verdict per size."""

    name: str                                   # "llama3-8b bf16"
    colour: object
    phases: tuple[tuple[str, pd.DataFrame], ...]
    measurable: bool                            # any size the rule could judge
    predicted: tuple[tuple[int, float], ...] = ()   # (tokens, predicted % of the untuned decode step)


def _step_series(m: pd.DataFrame, predicted: pd.DataFrame | None) -> list[StepSeries]:
    """Each (model, dtype) of one state's rows, with the capture's predicted decode change where given."""
    groups = list(m.groupby(["model", "dtype"], sort=True))
    out = []
    for i, ((model, dtype), g) in enumerate(groups):
        phases = tuple((phase, g[g["phase"] == phase].sort_values("tokens")) for phase in ("decode", "prefill")
                       if (g["phase"] == phase).any())
        verdicts = g["verdict"].astype("string").fillna("not_measurable")
        pred = ()
        if predicted is not None and len(predicted):
            p = predicted[(predicted["model"] == model) & (predicted["dtype"] == dtype)]
            p = p.groupby("tokens", as_index=False)["predicted_delta_ms"].sum()
            base = g[g["phase"] == "decode"].set_index("tokens")["baseline_ms"]
            p = p[p["tokens"].isin(base.index)]
            pred = tuple((int(t), 100 * float(d) / float(base.loc[t])) for t, d in
                         zip(p["tokens"], p["predicted_delta_ms"]))
        out.append(StepSeries(name=f"{model} {dtype}", colour=series_colour(i, len(groups)), phases=phases,
                              measurable=bool((verdicts != "not_measurable").any()), predicted=pred))
    return out


def _step_takeaway(rows: pd.DataFrame, series: list[StepSeries], state: str) -> str:
    """What one panel says: the rule's counts over its sizes, and the capture's prediction where it has one."""
    verdict = rows["verdict"].astype("string").fillna("not_measurable")
    measurable = rows[(verdict != "not_measurable").to_numpy(dtype=bool)]
    if measurable.empty:
        pred = [v for s in series for _, v in s.predicted]
        return (f"{state} vs untuned: {len(rows)} sizes not measurable\n(too few passes of each state)"
                + (f"\nthe capture predicted {min(pred):+.1f}% to {max(pred):+.1f}%" if pred else ""))
    faster = measurable[(measurable["verdict"] == "faster").to_numpy(dtype=bool)]
    slower = int((measurable["verdict"] == "slower").sum())
    gain = -faster["delta_pct"].astype(float)
    text = (f"{state} vs untuned: faster beyond noise\nat {len(faster)} of {len(measurable)} sizes"
            + (f" ({gain.min():.0f}-{gain.max():.0f}% faster)" if len(faster) else "") + f", slower at {slower}")
    return text + (f"\n{len(rows) - len(measurable)} not measurable" if len(rows) > len(measurable) else "")


def _draw_step_panel(rows: pd.DataFrame, series: list[StepSeries], ax: Axes, *, state: str,
                     title: str | None) -> set[str]:
    """The series of one panel; returns the marker keys it drew (for the legend)."""
    drawn = set()
    ax.axhline(0, color="#444444", linewidth=0.8)
    for s in series:
        for phase, h in s.phases:
            marker, line = ("o", "-") if phase == "decode" else ("s", ":")
            drawn.add(phase)
            x = h["tokens"].astype(float).to_numpy()
            y = h["delta_pct"].astype(float).to_numpy()
            err = None
            if "effect_lo" in h.columns:  # the comparison rule's interval (NaN where not measurable)
                lo, hi = (100 * h[c].astype(float).to_numpy() for c in ("effect_lo", "effect_hi"))
                err = np.abs(np.vstack([y - lo, hi - y]))
            ax.errorbar(x, y, yerr=err, color=s.colour, marker="none", linewidth=1.0, capsize=1.5, elinewidth=0.7,
                        linestyle=line, label=s.name if phase == s.phases[0][0] else None)
            verdict = h["verdict"].astype("string").fillna("not_measurable").to_numpy(dtype=str)
            beyond = np.isin(verdict, ["faster", "slower"])
            slow = verdict == "slower"
            for sel, face, key in ((beyond & ~slow, s.colour, "beyond"), (~beyond, "white", "within"),
                                   (slow, SLOWER, "slower")):
                if sel.any():
                    drawn.add(key)
                    ax.scatter(x[sel], y[sel], marker=marker, s=18, facecolor=face, edgecolor=s.colour if
                               key != "slower" else SLOWER, linewidths=0.9, zorder=4)
        if s.predicted:
            drawn.add("predicted")
            t, v = zip(*s.predicted)
            ax.plot(t, v, color=s.colour, linestyle="--", linewidth=0.9, alpha=0.8)
    log2_bucket_axis(ax, rows["tokens"].astype(int), label="tokens per step (decode batch / prefill chunk)")
    ticks = _spaced(rows["tokens"].astype(int))
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.tick_params(axis="x", labelrotation=45)
    ax.set_ylabel(f"step time change, {state}\nvs untuned (%); < 0 faster")
    takeaway = _step_takeaway(rows, series, state)
    ax.set_title(f"{title}\n{takeaway}" if title else takeaway, loc="left", fontsize="medium")
    return drawn


def _spaced(tokens, gap: float = 0.5) -> list[int]:
    """The sizes to label on a log2 axis: powers of two first, then any other at least ``gap`` octaves from them."""
    values = sorted({int(t) for t in tokens if t > 0}, key=lambda v: (v & (v - 1) != 0, v))
    kept: list[int] = []
    for v in values:
        if all(abs(np.log2(v / k)) >= gap for k in kept):
            kept.append(v)
    return sorted(kept)


_STEP_KEYS = {"decode": (dict(marker="o", linestyle="-"), "decode"),
              "prefill": (dict(marker="s", linestyle=":"), "prefill (same colour)"),
              "beyond": (dict(marker="o", linestyle=""), "filled: beyond noise"),
              "within": (dict(marker="o", linestyle="", markerfacecolor="white"), "hollow: within noise or not measurable"),
              "slower": (dict(marker="o", linestyle="", color=SLOWER), "slower beyond noise"),
              "predicted": (dict(linestyle="--"), "predicted from the capture (decode M)")}


_STEP_NOTE = ("profkit step: CUDA graph of the decoder layers; error bars = the comparison rule's 95% interval "
              "(none where not measurable)")


@styled
def plot_step_change(measured: pd.DataFrame, *, predicted: pd.DataFrame | None = None, state: str = "tuned",
                     legend: bool = True, note: bool = True, title: str | None = None,
                     ax: Axes | None = None) -> Figure:
    """Plot a model step's measured change, tuned vs untuned, beside the change the capture predicts.

    x is the step's tokens (decode batch, or prefill chunk; log2); y the step-time change in
    percent of the untuned step (negative: tuning made the step faster). One colour per model
    and dtype; lines with circles are decode, dotted with squares prefill; error bars the
    comparison rule's interval (``effect_lo``/``effect_hi``). A marker is filled where the rule's
    ``verdict`` is beyond noise, hollow where within noise or not measurable, red where slower.
    Dashed lines are the change predicted from the tuning-pass capture (sum over linears and
    layers of winner minus default at each bucket). Series the rule could judge at some size
    are drawn apart from those it could judge at none (e.g. one pass of each state), each panel
    titled with what it says (the rule's counts, or the prediction).

    Args:
        measured: output of :func:`profkit.analysis.step.measured_step_change`.
        predicted: output of :func:`profkit.analysis.step.predict_step_change` with ``model`` and
            ``dtype`` columns added (optional).
        state: the state compared with the untuned baseline ("tuned" or "cache").
        legend: draw the legend (under the panels, or in the first panel given ``ax``).
        note: draw the note on the measurement under the axes.
        title: a first title line above each panel's takeaway.
        ax: draw into this Axes instead of a new figure; two panels share its place in the grid.

    Returns:
        The Figure drawn into.
    """
    require(measured, ("model", "dtype", "phase", "tokens", "state", "delta_pct", "baseline_ms", "verdict"),
            "measured_step_change")
    m = measured[(measured["state"] == state).fillna(False).to_numpy(dtype=bool)]
    fig, own = (ax.figure, owns(ax)) if ax is not None else (None, True)
    fig, ax = figure_and_axes(ax, figsize=(11.0, 5.0))
    if m.empty:
        empty_axes(ax, f"no {state!r} step rows")
        return fig
    series = _step_series(m, predicted)
    groups = [g for g in ([s for s in series if s.measurable], [s for s in series if not s.measurable]) if g]
    panels = split_axes(ax, len(groups))
    drawn = set()
    for group, panel in zip(groups, panels):
        names = {s.name for s in group}
        rows = m[(m["model"].astype(str) + " " + m["dtype"].astype(str)).isin(names).to_numpy(dtype=bool)]
        drawn |= _draw_step_panel(rows, group, panel, state=state, title=title)
    if legend:
        handles, names = [], []
        for panel in panels:
            for h, n in zip(*panel.get_legend_handles_labels()):
                handles.append(h)
                names.append(n)
        for key, (style, text) in _STEP_KEYS.items():
            if key in drawn:
                handles.append(Line2D([], [], **{"color": "#555555", **style}))
                names.append(text)
        if own:  # the note as its title: under one panel it would push the other aside
            fig.legend(handles, names, loc="outside lower center", ncol=min(len(names), 5), fontsize="x-small",
                       title=_STEP_NOTE if note else None, title_fontsize="x-small")
        else:
            panels[0].legend(handles, names, loc="best", fontsize="x-small")
    if note and not (legend and own):
        add_note(panels[0], _STEP_NOTE, below_pt=44)
    return fig
