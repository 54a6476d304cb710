"""MoE figures: the picks' tactic parts per bucket, the op's speedup and the picks' regret per routing, the step.

Each takes :mod:`profkit.analysis.moe` frames: :func:`plot_moe_tactics` (``tactic_parts``),
:func:`plot_moe_routing` (``routing_sensitivity``), :func:`plot_moe_step` (``step_changes`` and
``step_predictions``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from profkit.schema import require
from profkit.views._style import (ACCENT, NEUTRAL, SLOWER, add_note, categorical_bucket_axis, cells, empty_axes,
                                  log2_bucket_axis, run_label, styled)

# The rows of the tactic grid: (column of tactic_parts, label).
_PARTS = (("tile", "row tile (tokens/expert padded to)"), ("gemm1_tile", "GEMM1 tile (gather + SwiGLU)"),
          ("gemm1_swizzle", "GEMM1 swizzle"), ("gemm2_tile", "GEMM2 tile (finalize)"),
          ("gemm2_cluster", "GEMM2 CTA cluster"), ("gemm2_raster", "GEMM2 raster along"))
_ROUTING_COLOURS = {"tuner": ACCENT, "balanced": "#2e7d32", "zipf": "#ef6c00", "hot": "#6a1b9a"}


def _routing_colour(name: str) -> str:
    return _ROUTING_COLOURS.get(str(name).split("-")[0], NEUTRAL)


@styled
def plot_moe_tactics(parts: pd.DataFrame, *, run_id: str | None = None, across_runs: pd.DataFrame | None = None,
                     title: str | None = None, ax: Axes | None = None) -> Figure:
    """What the tuner picked per bucket, part by part: one row per tactic part, one column per bucket.

    Args:
        parts: :func:`profkit.analysis.moe.tactic_parts` (one run, or pass ``run_id``).
        across_runs: :func:`profkit.analysis.moe.picks_across_runs`; adds a bottom row with how many
            distinct picks the repeated runs made per bucket and how far apart they are.
    """
    require(parts, ("run_id", "bucket", "tile"), "tactic parts")
    if run_id is None and parts["run_id"].nunique() > 1:
        run_id = sorted(parts["run_id"].unique())[0]
    p = parts if run_id is None else parts[parts["run_id"] == run_id]
    rows = list(_PARTS) + ([("runs", "picks across runs")] if across_runs is not None else [])
    fig = ax.figure if ax is not None else Figure(figsize=(max(7.0, 0.42 * len(p) + 3.0), 0.42 * len(rows) + 1.4),
                                                 layout="constrained")
    ax = ax or fig.add_subplot()
    if p.empty:
        empty_axes(ax, "no fused-MoE picks")
        return fig
    pos = categorical_bucket_axis(ax, p["bucket"].astype(int))
    parts, runs_row = [], []  # cells: x, y, width, height, colour; the parts' colours drawn light
    for y, (column, _) in enumerate(rows):
        if column == "runs":
            runs = across_runs.set_index(across_runs["bucket"].astype(int))
            for b, x in pos.items():
                if b in runs.index:
                    r = runs.loc[b]
                    flip = int(r["distinct_picks"]) > 1
                    text = f"{int(r['distinct_picks'])}" + (f"\n{r['spread_pct']:.1f}%" if flip else "")
                    runs_row.append((x - 0.5, y - 0.5, 1.0, 1.0, "#fff3e0" if flip else "#f1f8e9"))
                    ax.text(x, y, text, ha="center", va="center", fontsize=6.5, clip_on=True)
            continue
        values = p[column].astype(str).tolist()
        palette = {v: f"C{i % 10}" for i, v in enumerate(sorted(set(values), key=_natural))}
        for b, value, default in zip(p["bucket"].astype(int), values, p["default"].fillna(False)):
            parts.append((pos[b] - 0.5, y - 0.5, 1.0, 1.0, palette[value]))
            ax.text(pos[b], y, value.replace("x", "\u00d7"), ha="center", va="center", fontsize=6.5, clip_on=True,
                    fontweight="bold" if default else "normal")
    cells(ax, parts, edgecolor="white", linewidth=1.0, alpha=0.28)
    cells(ax, runs_row, edgecolor="white", linewidth=1.0)
    ax.set_yticks(range(len(rows)), [label for _, label in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.grid(False)
    if title is None and across_runs is not None and len(across_runs):
        flips = across_runs[across_runs["distinct_picks"] > 1]
        title = (f"What the tuner picked per bucket; {int(across_runs['runs'].max())} runs differ at "
                 f"{len(flips)} of {len(across_runs)} buckets"
                 + (f", by at most {flips['spread_pct'].max():.1f}%" if len(flips) else ""))
    ax.set_title(title or "What the tuner picked per bucket, part by part")
    defaults = int(p["default"].fillna(False).sum())
    run = run_label(p["run_id"].iloc[0])  # "" in the doc style: no run ids
    note = "; ".join(x for x in (f"run {run}" if run else "",
                                 f"{defaults} bucket(s) kept the default (bold)" if defaults else "") if x)
    if across_runs is not None:
        note += ("; " if note else "") + "bottom row: distinct picks over the repeated runs, and the slowest one's extra time"
    add_note(ax, note, below_pt=32)
    return fig


def _natural(text: str):
    return tuple(int(t) if t.isdigit() else t for t in str(text).replace("x", " ").split())


@styled
def plot_moe_routing(sensitivity: pd.DataFrame, *, title: str | None = None, ax: Axes | None = None) -> Figure:
    """Left: the tuned op's speedup over the default per M, one line per routing. Right: the pick's regret.

    Args:
        sensitivity: :func:`profkit.analysis.moe.routing_sensitivity` of one shape (one run).
        ax: draw only the left panel (the speedups) into this Axes.
    """
    require(sensitivity, ("routing", "m", "serving_speedup", "regret", "verdict", "imbalance"), "routing sensitivity")
    fig, left, right = _panels(ax, width_ratios=(1.0, 1.0))
    if sensitivity.empty:
        empty_axes(left, "no MoE verify rows")
        return fig
    _draw_speedups(sensitivity, left)
    if right is None:
        return fig
    _draw_regret(sensitivity, right)
    shape = sensitivity["shape"].iloc[0] if "shape" in sensitivity.columns else ""
    worst = sensitivity.loc[sensitivity["regret"].idxmax()]
    fig.suptitle(title or f"MoE {shape}: the pick is {sensitivity['serving_speedup'].min():.2f}-"
                 f"{sensitivity['serving_speedup'].max():.2f}x faster than the default under every routing,\n"
                 f"and at most {100 * worst['regret']:.1f}% slower than that routing's fastest candidate",
                 fontsize=9.5, fontweight="bold")
    return fig


def _panels(ax: Axes | None, *, width_ratios) -> tuple[Figure, Axes, Axes | None]:
    """A new two-panel figure, or the given Axes alone (the second panel is then left out)."""
    if ax is not None:
        return ax.figure, ax, None
    fig = Figure(figsize=(10.0, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=width_ratios)
    return fig, left, right


def _draw_speedups(sensitivity: pd.DataFrame, ax: Axes) -> None:
    for name, g in sensitivity.groupby("routing", sort=True):
        g = g.sort_values("m")
        label = f"{name} (max/mean {g['imbalance'].median():.1f}x)"
        ax.plot(g["m"], g["serving_speedup"], marker="o", color=_routing_colour(name), label=label)
        slower = g[g["verdict"] == "slower"]
        ax.scatter(slower["m"], slower["serving_speedup"], color=SLOWER, zorder=3, s=30)
    ax.axhline(1.0, color="black", linewidth=0.8)
    log2_bucket_axis(ax, sensitivity["m"].astype(int), label="M (tokens)")
    ax.set_ylabel("speedup of the pick over the default (x)")
    ax.set_ylim(bottom=min(0.95, float(sensitivity["serving_speedup"].min()) - 0.05))
    ax.legend(loc="best", title="routing (median expert imbalance)", title_fontsize=7)
    ax.set_title("Tuned vs untuned op time")


def _draw_regret(sensitivity: pd.DataFrame, ax: Axes) -> None:
    for name, g in sensitivity.groupby("routing", sort=True):
        g = g.sort_values("m")
        ax.plot(g["m"], 100 * g["regret"], marker="o", color=_routing_colour(name), label=name)
    ax.axhline(0.0, color="black", linewidth=0.8)
    log2_bucket_axis(ax, sensitivity["m"].astype(int), label="M (tokens)")
    ax.set_ylabel("pick vs the routing's fastest candidate (%)")
    ax.set_ylim(bottom=-0.5)
    ax.set_title("Does the pick hold under each routing?")
    add_note(ax, "serving times: CUDA graph replays, weights and inputs rotated past L2; "
                 "red dots: pick slower than the default beyond noise", below_pt=32)


@styled
def plot_moe_step(changes: pd.DataFrame, predictions: pd.DataFrame | None = None, *,
                  states=("tuned", "cache", "repaired"), title: str | None = None, ax: Axes | None = None) -> Figure:
    """Left: the step's change against untuned per size, with the A/A pair. Right: predicted against measured.

    Args:
        changes: :func:`profkit.analysis.moe.step_changes` of one model (states = series labels).
        predictions: :func:`profkit.analysis.moe.step_predictions` rows (any states) to plot on the right.
        ax: draw only the left panel (the measured changes) into this Axes.
    """
    require(changes, ("phase", "tokens", "state", "delta_pct", "noise_ms", "baseline_ms"), "step changes")
    fig, left, right = _panels(ax, width_ratios=(1.6, 1.0))
    c = changes.assign(size=changes["phase"].astype(str).str[0] + changes["tokens"].astype(str))
    _draw_measured(c, left, states)
    if right is None:
        return fig
    _draw_predicted(predictions, right, states)
    model = changes["model"].iloc[0] if "model" in changes.columns and len(changes) else ""
    tuned = c[c["state"].isin(states)]
    called = tuned[tuned["verdict"] == "faster"] if "verdict" in tuned.columns else tuned[tuned["beyond_noise"]]
    sizes = tuned.groupby(["phase", "tokens"]).ngroups
    faster = called.groupby(["phase", "tokens"]).ngroups
    span = f"{-called['delta_pct'].max():.0f}-{-called['delta_pct'].min():.0f}% " if len(called) else ""
    fig.suptitle(title or f"{model}: the tuned MoE makes the step {span}faster at {faster} of {sizes} sizes "
                 "(beyond noise)", fontsize=9.5, fontweight="bold")
    return fig


def _draw_measured(c: pd.DataFrame, ax: Axes, states) -> None:
    order = list(dict.fromkeys(c.sort_values(["phase", "tokens"])["size"]))
    x = {s: i for i, s in enumerate(order)}
    shown = [s for s in (*states, *sorted(s for s in c["state"].unique() if s.startswith("untuned")))
             if s in set(c["state"])]
    width = 0.8 / max(len(shown), 1)
    for i, state in enumerate(shown):
        g = c[c["state"] == state]
        xs = np.array([x[s] for s in g["size"]]) - 0.4 + width * (i + 0.5)
        if "effect_lo" in g.columns:  # the comparison rule's interval (profkit.analysis.verdict)
            err = np.abs(np.vstack([g["delta_pct"] - 100 * g["effect_lo"], 100 * g["effect_hi"] - g["delta_pct"]]))
            called = g["verdict"].isin(["faster", "slower"]).to_numpy(dtype=bool)
        else:
            err, called = 100 * g["noise_ms"] / g["baseline_ms"], g["beyond_noise"].fillna(False).to_numpy(dtype=bool)
        colour = NEUTRAL if state.startswith("untuned") else f"C{i}"
        bars = ax.bar(xs, g["delta_pct"], width=width, color=colour,
                      label=f"{state} (A/A)" if colour == NEUTRAL else state)
        for bar, beyond in zip(bars, called):
            if not beyond:  # within noise: drawn hollow
                bar.set_facecolor("white")
                bar.set_edgecolor(colour)
        ax.errorbar(xs, g["delta_pct"], yerr=err, fmt="none", ecolor="black", elinewidth=0.6, capsize=1.5)
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(order)), order, rotation=60, fontsize=7)
    ax.set_xlabel("step size (d = decode batch, p = prefill tokens)")
    ax.set_ylabel("step time vs untuned (%)")
    ax.legend(loc="lower left", ncol=max(len(shown), 1))
    ax.grid(axis="x", visible=False)
    ax.set_title("Measured, interleaved (95% intervals; hollow: within noise)")


def _draw_predicted(predictions: pd.DataFrame | None, ax: Axes, states) -> None:
    if predictions is None or predictions.empty:
        empty_axes(ax, "no predictions")
        return
    p = predictions.dropna(subset=["predicted_verify_ms", "measured_delta_ms"])
    lim = 1.1 * float(np.nanmax(np.abs(np.r_[p["predicted_verify_ms"], p["measured_delta_ms"]]))) or 1.0
    line = np.array([-lim, 0.0])
    ax.fill_between(line, line * 1.5, line / 1.5, color="#e3f2fd", label="within 1.5x")
    ax.plot(line, line, color="black", linewidth=0.8)
    for i, (state, g) in enumerate(p.groupby("state", sort=False)):
        ax.scatter(g["measured_delta_ms"], g["predicted_verify_ms"], s=18, label=f"{state}: verify",
                   color=f"C{list(states).index(state) if state in states else i}")
    ax.set_xlim(-lim, 0.05 * lim)
    ax.set_ylim(-lim, 0.05 * lim)
    ax.set_xlabel("measured step change (ms)")
    ax.set_ylabel("predicted from verify (ms)")
    ax.legend(loc="upper left")
    agree = int(p["sign_agrees"].fillna(False).sum())
    ax.set_title(f"Verify's prediction: sign right at {agree}/{len(p)}")
