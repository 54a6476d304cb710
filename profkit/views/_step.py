"""A model step's time per state (untuned, tuned, cache, torch) across batch sizes, from ``profkit step``."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from profkit.errors import ProfkitError
from profkit.schema import require
from profkit.views._style import ACCENT, add_note, empty_axes, figure_and_axes, log2_bucket_axis, styled

# Known states first, in this order; one colour and marker each in every figure.
STATE_ORDER = ("untuned", "tuned", "cache", "repaired", "advised", "planned", "ported", "blind", "v2-graph", "v2-eager",
               "torch")
STATE_COLOURS = {"untuned": "#616161", "tuned": ACCENT, "cache": "#4a9fd8", "repaired": "#2e7d32",
                 "advised": "#8e24aa", "planned": "#c2185b", "ported": "#f9a825", "blind": "#bcaaa4",
                 "v2-graph": "#00897b", "v2-eager": "#80cbc4",
                 "torch": "#e07b00"}
STATE_MARKERS = {"untuned": "o", "tuned": "s", "cache": "D", "repaired": "P", "advised": "X", "planned": "*",
                 "ported": "h", "blind": "d",
                 "v2-graph": "v", "v2-eager": "<", "torch": "^"}
STATE_LABELS = {"untuned": "untuned (FlashInfer fallback)", "tuned": "tuned (same process, after the tuning pass)",
                "cache": "cache (the tuned cache.json loaded)",
                "repaired": "repaired (the profkit repair file loaded)",
                "advised": "advised (the advise plan's cache loaded)",
                "planned": "planned (same process, tuned by the advise plan)",
                "ported": "ported (another GPU's shortlist re-timed here: profkit port)",
                "blind": "blind (another GPU's cache file as it is, made to load)",
                "v2-graph": "v2-graph (autotune_v2, CUDA graph, cold L2)",
                "v2-eager": "v2-eager (autotune_v2, eager)", "torch": "torch (plain torch linears)"}


_COLUMNS = ("model", "dtype", "phase", "tokens", "state", "step_ms")


@dataclasses.dataclass(frozen=True)
class StepTimesInfo:
    """Per state: the tokens of each point and its median, min and max over repetitions.

    With ``relative_to`` set, the values are step_ms divided by that state's median at the same
    tokens (points without it are left out); otherwise they are milliseconds.
    """

    model: str
    dtype: str
    phase: str
    states: tuple[str, ...]
    tokens: tuple[tuple[int, ...], ...]        # per state, ascending
    medians: tuple[tuple[float, ...], ...]
    lows: tuple[tuple[float, ...], ...]
    highs: tuple[tuple[float, ...], ...]
    repetitions: tuple[int, int] = (0, 0)      # fewest and most repetitions behind one point
    layers: int | None = None
    relative_to: str | None = None


def _pick(frame: pd.DataFrame, column: str, value: str | None, what: str) -> tuple[pd.DataFrame, str]:
    """Narrow to one value of ``column``; raise naming the choices when ambiguous or unknown."""
    choices = sorted(frame[column].dropna().astype(str).unique())
    if value is None:
        if len(choices) > 1:
            raise ProfkitError(f"{what} hold {len(choices)} {column}s; pass {column}= one of {', '.join(choices)}")
        value = choices[0] if choices else ""
    elif value not in choices:
        raise ProfkitError(f"{what} have no {column} {value!r}; {column}s: {', '.join(choices) or 'none'}")
    return frame[(frame[column].astype("string") == value).fillna(False).to_numpy(dtype=bool)], value


def _step_times_info(bench: pd.DataFrame, *, model: str, dtype: str, phase: str,
                     relative_to: str | None = None) -> StepTimesInfo:
    """Median and min-max of step_ms per (state, tokens), optionally divided by one state's median.

    Grouped in plain Python: a figure's few hundred rows cost pandas' per-call overhead many times over.
    """
    keep = (bench["state"].notna() & bench["tokens"].notna()).to_numpy(dtype=bool)
    groups: dict[tuple[str, int], list[float]] = {}
    for state, tokens, ms in zip(bench["state"].to_numpy(dtype=object)[keep], bench["tokens"].to_numpy()[keep],
                                 bench["step_ms"].to_numpy(dtype=float, na_value=np.nan)[keep]):
        groups.setdefault((str(state), int(tokens)), []).append(ms)
    stats = {key: (*_median_min_max(values), len(values)) for key, values in sorted(groups.items())}
    if relative_to is not None:
        base = {tokens: v[0] for (state, tokens), v in stats.items() if state == relative_to}
        stats = {(state, tokens): (*(x / base[tokens] for x in v[:3]), v[3])
                 for (state, tokens), v in stats.items() if tokens in base}
    present = {state for state, _ in stats}
    states = [s for s in STATE_ORDER if s in present] + sorted(present - set(STATE_ORDER))
    by_state = [[(tokens, v) for (s, tokens), v in stats.items() if s == state] for state in states]
    layers = pd.to_numeric(bench["layers"], errors="coerce").dropna() if "layers" in bench else pd.Series(dtype=float)
    sizes = [v[3] for v in stats.values()]
    return StepTimesInfo(
        model=model, dtype=dtype, phase=phase, states=tuple(states),
        tokens=tuple(tuple(t for t, _ in g) for g in by_state),
        medians=tuple(tuple(v[0] for _, v in g) for g in by_state),
        lows=tuple(tuple(v[1] for _, v in g) for g in by_state),
        highs=tuple(tuple(v[2] for _, v in g) for g in by_state),
        repetitions=(min(sizes), max(sizes)) if sizes else (0, 0),
        layers=int(layers.iloc[0]) if layers.nunique() == 1 else None, relative_to=relative_to)


def _median_min_max(values: list[float]) -> tuple[float, float, float]:
    """Of the values that are not NaN (NaN, NaN, NaN when none is), as pandas' groupby aggregates."""
    known = np.asarray(values, dtype=float)
    known = known[~np.isnan(known)]
    if not known.size:
        return np.nan, np.nan, np.nan
    return float(np.median(known)), float(known.min()), float(known.max())


def _draw_step_times(info: StepTimesInfo, ax: Axes, *, labels: Mapping[str, str] | None = None,
                     legend: bool = True, note: bool = True, title: str | None = None) -> None:
    what = ", ".join(filter(None, (" ".join(filter(None, (info.model, info.dtype))), info.phase)))  # names kept whole
    if not any(info.tokens):
        empty_axes(ax, f"no step rows for {what}")
        return
    labels = {**STATE_LABELS, **(labels or {})}
    bars, caps, colours = [], [], []
    for i, state in enumerate(info.states):
        # Every state at its true batch size: no sideways offsets (on a log axis they read as other sizes).
        x = np.asarray(info.tokens[i], dtype=float)
        colour = STATE_COLOURS.get(state, f"C{(i + 4) % 10}")
        ax.plot(x, info.medians[i], color=colour, marker=STATE_MARKERS.get(state, "v"), markersize=4, linewidth=1.1,
                linestyle="--" if state == "cache" else "-", label=labels.get(state, state),
                zorder=3 + (state == "tuned"), alpha=0.9)
        bars += [((t, low), (t, high)) for t, low, high in zip(x, info.lows[i], info.highs[i])]
        caps += [(t, v) for t, low, high in zip(x, info.lows[i], info.highs[i]) for v in (low, high)]
        colours += [colour] * len(x)
    # Every state's min-max bars in one collection and their caps in another: an errorbar per state made
    # four artists and its own data limits on the log axis (about half the panel's build time).
    ax.add_collection(LineCollection(bars, colors=colours, linewidths=0.9, alpha=0.9, zorder=2.9))
    ax.scatter(*zip(*caps), marker="_", s=16, c=[c for c in colours for _ in (0, 1)], linewidths=0.9, alpha=0.9,
               zorder=2.9)
    tokens = sorted({t for ts in info.tokens for t in ts})
    xlabel = "decode batch size (tokens per step)" if info.phase == "decode" else f"{info.phase} tokens per step"
    log2_bucket_axis(ax, tokens, label=xlabel, every_value=True)
    if len(tokens) > 8:
        ax.tick_params(axis="x", labelrotation=45)
    if info.relative_to is None:
        ax.set_yscale("log")
        # Plain numbers at 1-2-5 steps read better than powers of ten over one or two decades.
        lo, hi = ax.get_ylim()
        ticks = [m * 10.0 ** e for e in range(-3, 5) for m in (1, 2, 5) if lo <= m * 10.0 ** e <= hi]
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_ylabel("step time (ms, log)")
        ax.set_title(f"{what}: step time per state" if title is None else title)
        if legend:
            ax.legend(loc="upper left", fontsize="x-small")
    else:
        ax.axhline(1.0, color="#444444", linewidth=0.8, zorder=1)
        ax.set_ylabel(f"step time / {info.relative_to}\nmedian (x); < 1 faster")
        ax.set_title(f"{what}: step time relative to {info.relative_to}" if title is None else title)
        if legend:
            ax.legend(loc="best", fontsize="x-small")
    if note:
        low, high = info.repetitions
        reps = f"{low}" if low == high else f"{low}-{high}"
        layers = f" of {info.layers} decoder layers" if info.layers else ""
        add_note(ax, f"profkit step: one step{layers} per point; marker = median of {reps} repetitions, bars = min "
                     "to max", below_pt=44 if len(tokens) > 8 else 30)


@styled
def plot_step_times(bench: pd.DataFrame, *, model: str | None = None, dtype: str | None = None,
                    phase: str = "decode", relative_to: str | None = None, labels: Mapping[str, str] | None = None,
                    legend: bool = True, note: bool = True, title: str | None = None,
                    ax: Axes | None = None) -> Figure:
    """Plot a model step's time per state (untuned, tuned, cache, torch) across batch sizes.

    x is the step's tokens (decode batch size, or prefill chunk; log2, every size a tick); y the
    step time in ms (log), the median over repetitions with min-to-max bars, or with
    ``relative_to`` that time divided by the named state's median at the same size (1: no
    change). One line per state, in one colour and marker per state in every figure: grey
    untuned (FlashInfer's fallback), dark blue tuned, light blue dashed cache (the tuned cache
    file loaded, in a fresh process or after FlashInfer's configs were cleared), orange torch linears. Every
    state sits at its true size (no sideways offsets on the log axis); the relative view separates them.

    Args:
        bench: ``profkit step`` rows (``profkit.read_bench(..., format="profkit-step")``: model,
            dtype, phase, tokens, state, step_ms, one row per repetition) of one run per state.
        model: the model to draw; needed when ``bench`` holds several.
        dtype: the dtype to draw; needed when the model was run in several.
        phase: "decode" or "prefill".
        relative_to: a state to divide by (e.g. "untuned"); None draws milliseconds.
        labels: legend text per state, replacing the defaults.
        legend: draw the legend (a grid of panels draws one for all).
        note: draw the note on repetitions under the axes.
        title: the axes title (default: model, dtype, phase and what y is).
        ax: draw into this Axes instead of a new figure.

    Returns:
        The Figure drawn into.

    Raises:
        ProfkitError: when model or dtype is ambiguous or not in ``bench``.
    """
    require(bench, _COLUMNS, "profkit step bench")
    b = bench[[c for c in (*_COLUMNS, "layers", "error") if c in bench.columns]]  # narrow first: rows are cut below
    if len(b):
        b, model = _pick(b, "model", model, "the step rows")
        b, dtype = _pick(b, "dtype", dtype, f"the {model} step rows")
    b = b[(b["phase"].astype("string") == phase).fillna(False).to_numpy(dtype=bool)]
    missing = b["step_ms"].isna().to_numpy(dtype=bool)
    if missing.any():
        errors = sorted({str(e) for e in b.loc[missing, "error"].dropna() if str(e)}) if "error" in b else []
        warnings.warn(f"{int(missing.sum())} step rows have no step_ms and are left out"
                      + (f" (error: {'; '.join(errors[:3])})" if errors else ""), stacklevel=3)
        b = b[~missing]
    if relative_to is not None and len(b) and not (b["state"] == relative_to).any():
        raise ProfkitError(f"relative_to={relative_to!r}: no such state in the {model} {dtype} {phase} rows; "
                           f"states: {', '.join(sorted(b['state'].dropna().astype(str).unique()))}")
    if relative_to is not None:
        unmatched = b[~b["tokens"].isin(b.loc[b["state"] == relative_to, "tokens"]).to_numpy(dtype=bool)]
        if len(unmatched):
            warnings.warn(f"{len(unmatched)} step rows at sizes {relative_to!r} was not timed at are left out "
                          f"(tokens {', '.join(str(int(t)) for t in sorted(unmatched['tokens'].unique()))})",
                          stacklevel=3)
    info = _step_times_info(b, model=model or "", dtype=dtype or "", phase=phase, relative_to=relative_to)
    fig, ax = figure_and_axes(ax, figsize=(8.0, 4.0))
    _draw_step_times(info, ax, labels=labels, legend=legend, note=note, title=title)
    return fig
