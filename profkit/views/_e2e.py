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
from profkit.views._style import (ACCENT, SLOWER, add_note, empty_axes, figure_and_axes, log2_bucket_axis,
                                  series_colour, short_label, styled)

_BETTER = "#2e7d32"
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
            names.append(f"kernel {op} {short_label(shape, labels)}")
            # Milliseconds per layer summed over the whole run (every call it served), not one kernel call.
            values.append(f"{number(r.treatment, digits=4)} vs {number(r.baseline, digits=4)} ms per layer over the run")
        else:
            names.append(_METRIC_NAMES.get(r.metric, r.metric))
            values.append(f"{number(r.treatment)} vs {number(r.baseline)} {r.unit}")
        kinds.append(str(r.kind))
        imps.append(float(r.improvement_pct))
    return KernelE2EInfo(names=tuple(names), kinds=tuple(kinds), improvements=tuple(imps), values=tuple(values),
                         note=note, kernel_where=kernel_where, serving_where=serving_where)


def _draw_bars(info: KernelE2EInfo, ax: Axes, *, title: str) -> None:
    """Horizontal bigger-is-better bars of one kind (kernel or end to end), each labelled with its numbers."""
    pos = np.arange(len(info.names))
    colours = [ACCENT if k == "kernel" else (_BETTER if v >= 0 else SLOWER)
               for k, v in zip(info.kinds, info.improvements)]
    ax.barh(pos, info.improvements, color=colours, height=0.65)
    ax.axvline(0, color="#444444", linewidth=0.8)
    span = max(abs(v) for v in info.improvements) or 1.0
    for y, v, text in zip(pos, info.improvements, info.values):
        ax.annotate(f"{v:+.1f}%  ({text})", xy=(v, y), xytext=(4 if v >= 0 else -4, 0), textcoords="offset points",
                    ha="left" if v >= 0 else "right", va="center", fontsize=6.5)
    ax.set_xlim(-span * 2.4 if min(info.improvements) < 0 else -span * 0.1, span * 2.4)
    ax.set_yticks(pos, info.names)
    ax.invert_yaxis()
    ax.set_xlabel("improvement (%), bigger is better")
    ax.grid(axis="y", visible=False)
    ax.set_title(title)


def _part(info: KernelE2EInfo, kind: str) -> KernelE2EInfo:
    keep = [i for i, k in enumerate(info.kinds) if (k == "kernel") == (kind == "kernel")]
    pick = lambda values: tuple(values[i] for i in keep)  # noqa: E731
    return dataclasses.replace(info, names=pick(info.names), kinds=pick(info.kinds),
                               improvements=pick(info.improvements), values=pick(info.values))


def _draw_kernel_e2e(info: KernelE2EInfo, ax: Axes) -> None:
    """Kernel rows and end-to-end rows in two panels (never on one axis), the caveat above both."""
    if not info.names:
        empty_axes(ax, "no kernel or end-to-end rows")
        return
    parts = [(kind, _part(info, kind)) for kind in ("kernel", "e2e")]
    parts = [(kind, part) for kind, part in parts if part.names]
    # Each panel says where it was measured: serving numbers from another GPU never share an axis
    # (or a title) with the kernels.
    titles = {"kernel": "Kernels" + (f" on {info.kernel_where}" if info.kernel_where else "")
                        + ": tuned vs default\n(weighted by the buckets served)",
              "e2e": "Serving" + (f" on {info.serving_where}" if info.serving_where else "") + ":\nautotune on vs off"}
    if len(parts) == 1:
        _draw_bars(parts[0][1], ax, title=titles[parts[0][0]])
        add_note(ax, info.note)
        return
    if ax.figure.axes == [ax] and not ax.has_data():
        # A figure of our own: two panels side by side, the caveat as the figure's title.
        fig = ax.figure
        ax.remove()
        panels = fig.subplots(1, 2)
        fig.suptitle("Different sources: read side by side, not as cause and effect. " + info.note,
                     fontsize="small", color=SLOWER, wrap=True)
    else:
        # A given Axes: the two panels share its place in the grid.
        grid = ax.get_subplotspec().subgridspec(1, 2, wspace=0.6)
        ax.set_subplotspec(grid[0])
        panels = (ax, ax.figure.add_subplot(grid[1]))
        add_note(ax, "Different sources, not cause and effect. " + info.note)
    for (kind, part), panel in zip(parts, panels):
        _draw_bars(part, panel, title=titles[kind])


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
    rows = max(sum(k == "kernel" for k in info.kinds), sum(k != "kernel" for k in info.kinds), 1)
    fig, ax = figure_and_axes(ax, figsize=(12.0, 1.8 + 0.3 * rows))
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


def step_change_keys() -> list[tuple[Line2D, str]]:
    """The marker keys of :func:`plot_step_change` (for a legend shared by a grid of its panels)."""
    return [(Line2D([], [], marker="o", linestyle="-", color="black"), "decode"),
            (Line2D([], [], marker="s", linestyle=":", color="black"), "prefill (same colour)"),
            (Line2D([], [], marker="o", linestyle="", color=SLOWER), "slower beyond noise"),
            (Line2D([], [], linestyle="--", color="black"), "predicted from the capture (decode M)")]


@styled
def plot_step_change(measured: pd.DataFrame, *, predicted: pd.DataFrame | None = None, state: str = "tuned",
                     legend: bool = True, note: bool = True, title: str | None = None,
                     ax: Axes | None = None) -> Figure:
    """Plot a model step's measured change, tuned vs untuned, beside the change the capture predicts.

    x is the step's tokens (decode batch, or prefill chunk; log2); y the step-time change in
    percent of the untuned step (negative: tuning made the step faster). One colour per model
    and dtype; circles are decode, squares prefill; error bars the comparison rule's interval
    (``effect_lo``/``effect_hi``; else the noise band); red-filled markers are slower beyond
    noise. Dashed lines are the change predicted from the tuning-pass capture (sum over linears
    and layers of winner minus default at each bucket).

    Args:
        measured: output of :func:`profkit.analysis.step.measured_step_change`.
        predicted: output of :func:`profkit.analysis.step.predict_step_change` with ``model`` and
            ``dtype`` columns added (optional).
        state: the state compared with the untuned baseline ("tuned" or "cache").
        legend: draw the legend (right of the axes).
        note: draw the note on the measurement under the axes.
        title: the axes title.
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.
    """
    require(measured, ("model", "dtype", "phase", "tokens", "state", "delta_pct", "noise_ms", "baseline_ms",
                       "slower"), "measured_step_change")
    m = measured[(measured["state"] == state).fillna(False).to_numpy(dtype=bool)]
    fig, ax = figure_and_axes(ax, figsize=(8.5, 3.8))
    if m.empty:
        empty_axes(ax, f"no {state!r} step rows")
        return fig
    ax.axhline(0, color="#444444", linewidth=0.8)
    n_series = m.groupby(["model", "dtype"]).ngroups
    for i, ((model, dtype), g) in enumerate(m.groupby(["model", "dtype"], sort=True)):
        colour = series_colour(i, n_series)
        for phase, marker in (("decode", "o"), ("prefill", "s")):
            h = g[g["phase"] == phase].sort_values("tokens")
            if h.empty:
                continue
            x = h["tokens"].astype(float).to_numpy()
            y = h["delta_pct"].astype(float).to_numpy()
            if "effect_lo" in h.columns:  # the comparison rule's interval (NaN where not measurable)
                err = np.abs(np.vstack([y - 100 * h["effect_lo"].astype(float).to_numpy(),
                                        100 * h["effect_hi"].astype(float).to_numpy() - y]))
            else:
                err = 100 * h["noise_ms"].astype(float).to_numpy() / h["baseline_ms"].astype(float).to_numpy()
            slow = h["slower"].fillna(False).to_numpy(dtype=bool)
            ax.errorbar(x, y, yerr=err, color=colour, marker=marker, markersize=3.5, linewidth=1.0, capsize=1.5,
                        elinewidth=0.7, label=f"{model} {dtype} {phase}" if phase == "decode" else None,
                        linestyle="-" if phase == "decode" else ":")
            ax.scatter(x[slow], y[slow], marker=marker, s=30, color=SLOWER, zorder=4)
        if predicted is not None and len(predicted):
            p = predicted[(predicted["model"] == model) & (predicted["dtype"] == dtype)]
            p = p.groupby("tokens", as_index=False)["predicted_delta_ms"].sum()
            base = g[g["phase"] == "decode"].set_index("tokens")["baseline_ms"]
            p = p[p["tokens"].isin(base.index)]
            if len(p):
                ax.plot(p["tokens"], 100 * p["predicted_delta_ms"].to_numpy() / base.loc[p["tokens"]].to_numpy(),
                        color=colour, linestyle="--", linewidth=0.9, alpha=0.8)
    log2_bucket_axis(ax, m["tokens"].astype(int), label="tokens per step (decode batch / prefill chunk)",
                     every_value=True)
    ax.tick_params(axis="x", labelrotation=45)
    ax.set_ylabel(f"step time change, {state}\nvs untuned (%); < 0 faster")
    ax.set_title("Does tuning pay off in a model step?" if title is None else title)
    handles, names = ax.get_legend_handles_labels()
    for handle, name in step_change_keys():
        handles.append(handle)
        names.append(name)
    if legend:
        ax.legend(handles, names, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small", borderaxespad=0)
    if note:
        add_note(ax, "profkit step: CUDA graph of the decoder layers; error bars = the comparison rule's 95% interval "
                     "(none where one pass of each state is not measurable)", below_pt=44)
    return fig
