"""One look for every profkit figure: rc settings applied with rc_context, colours, axes helpers.

Two styles: ``screen`` (the default: 9 pt text, run ids in titles and notes) and ``doc`` (for
design documents: larger type, no run ids). :func:`use_style` selects one for the figures drawn
inside its ``with`` block; nothing global changes.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import warnings
from typing import Callable, Iterable, Mapping, Sequence

import matplotlib as mpl
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.category import StrCategoryFormatter
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, FixedLocator, Formatter, FuncFormatter, StrMethodFormatter

from profkit.printable import printable

# Readable in print: 9 pt text, no top/right spines, light grid, text kept as text in SVG.
RC = {
    "font.size": 9, "axes.titlesize": 10, "axes.titleweight": "bold", "axes.labelsize": 9,
    "xtick.labelsize": 8, "ytick.labelsize": 8, "legend.fontsize": 7.5, "legend.frameon": False,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "axes.axisbelow": True, "grid.alpha": 0.3,
    "grid.linewidth": 0.6, "lines.linewidth": 1.4, "lines.markersize": 4.5, "figure.dpi": 100,
    "savefig.dpi": 200, "svg.fonttype": "none", "axes.titley": 1.0,
}

# Design-document figures: the same look with larger type.
RC_DOC = {**RC, "font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "xtick.labelsize": 10,
          "ytick.labelsize": 10, "legend.fontsize": 9.5, "lines.linewidth": 1.6, "lines.markersize": 5.5}


@dataclasses.dataclass(frozen=True)
class Style:
    """A figure style: its rc settings and whether run ids appear in titles and notes."""

    name: str
    rc: Mapping
    run_ids: bool = True


STYLES = {"screen": Style("screen", RC), "doc": Style("doc", RC_DOC, run_ids=False)}
_STYLE: contextvars.ContextVar[Style] = contextvars.ContextVar("profkit_style", default=STYLES["screen"])


@contextlib.contextmanager
def use_style(name: str):
    """Draw the figures made inside the block in style ``name`` (``screen`` or ``doc``)."""
    if name not in STYLES:
        from profkit.errors import ProfkitError

        raise ProfkitError(f"unknown style {name!r}; use {' or '.join(STYLES)}")
    token = _STYLE.set(STYLES[name])
    try:
        yield STYLES[name]
    finally:
        _STYLE.reset(token)


def current_style() -> Style:
    """The style figures are drawn in now (``screen`` outside :func:`use_style`)."""
    return _STYLE.get()


def run_label(run_id) -> str:
    """``run_id`` where the style shows run ids, else ""."""
    return str(run_id) if run_id and current_style().run_ids else ""


DPI = 200  # PNG resolution of the report and README figures
SLOWER = "#c62828"     # slower than the default (flashinfer#3537)
NEUTRAL = "#9e9e9e"
ACCENT = "#1f4e79"
# Phases of tuning time in slate and brown, apart from the runner families below.
PHASES = {"measure_s": "#37474f", "prep_s": "#90a4ae", "jit_s": "#8d6e63", "other_s": "#e0e0e0"}
PHASE_LABELS = {"measure_s": "measure (candidates timed)", "prep_s": "runner prep (before its first candidate)",
                "jit_s": "JIT builds", "other_s": "other (inputs, bookkeeping)"}

# One colour family per runner, in every figure: cuBLAS / cuBLASLt / cuDNN / TinyGEMM, and the fp8
# and bf16 runners of one library apart. Tactics of a runner are shades of its family.
_FAMILIES = (("CublasltBf16", "Purples"), ("Cublaslt", "Purples"), ("CublasFp8", "Blues"), ("Cublas", "Blues"),
             ("CudnnBf16", "RdPu"), ("CudnnFp8", "Oranges"), ("Cudnn", "Oranges"), ("TinyGemm", "Greens"),
             ("Cutlass", "YlOrBr"), ("Trtllm", "BuGn"))
_OTHER = "Greys"
# Display names of the shipped runners (legends); others print as their class name.
RUNNER_NAMES = {"CublasFp8GemmRunner": "cuBLAS fp8", "CudnnFp8GemmRunner": "cuDNN fp8",
                "CublasltBf16GemmRunner": "cuBLASLt bf16", "CudnnBf16GemmRunner": "cuDNN bf16",
                "TinyGemmBf16GemmRunner": "TinyGEMM bf16"}


def _family(runner: str) -> str:
    return next((c for prefix, c in _FAMILIES if str(runner).startswith(prefix)), _OTHER)


def styled(fn: Callable) -> Callable:
    """Run a plot function inside ``rc_context`` of the current style's rc settings; nothing global changes.

    Every text the function drew then shows its names as the characters they hold (:func:`names_as_text`).
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with mpl.rc_context(current_style().rc):
            ax = kwargs.get("ax")
            before = _drawn_before(ax.figure) if ax is not None else {}
            fig = fn(*args, **kwargs)
            names_as_text(fig, before)
            return fig
    return wrapper


def names_as_text(fig, before: Mapping[int, str] | None = None) -> None:
    """Draw every text of ``fig`` as the characters it holds: names are data, never markup or controls.

    An op named ``gemm $\\frac{$`` would start matplotlib's mathtext (and fail to draw); an ESC,
    a carriage return or a bidi override would draw as a box or reorder the label. So every title,
    label, legend entry and annotation gets mathtext parsing off and :func:`profkit.printable.printable`
    escapes (line breaks kept), and tick labels from names (fixed, categorical or function
    formatters) the same through :class:`_PlainTicks`. Numeric tick formatters, whose mathtext
    (``10^{3}``) is matplotlib's own, are left as they are. ``before`` (id -> text) holds the texts
    and tick formatters of a figure the plot drew into (``ax=``) as they were: a caller's own stay
    untouched.
    """
    before = before or {}
    texts, axes = _texts_and_axes(fig)
    for text in texts:
        if before.get(id(text)) != text.get_text():
            text.set_text(printable(text.get_text(), newlines=True))
            text.set_parse_math(False)
    for axis in axes:
        for minor, formatter in ((False, axis.get_major_formatter()), (True, axis.get_minor_formatter())):
            if isinstance(formatter, _NAMED_TICKS) and id(formatter) not in before:
                (axis.set_minor_formatter if minor else axis.set_major_formatter)(_PlainTicks(formatter))


def _drawn_before(fig) -> dict[int, str | None]:
    """id -> text of every text of ``fig``, and id -> None of its axes' tick formatters."""
    texts, axes = _texts_and_axes(fig)
    formatters = {id(f): None for axis in axes for f in (axis.get_major_formatter(), axis.get_minor_formatter())}
    return {**formatters, **{id(t): t.get_text() for t in texts}}


def _texts_and_axes(fig) -> tuple[list[Text], list[Axis]]:
    """The texts of ``fig`` (titles, labels, legends, annotations; of an axis only its label: its tick labels
    come from its formatters) and its axes' x/y axes. One walk over the artists that never enters an axis's
    ticks (``Artist.findobj`` would create and walk every tick)."""
    texts, axes, stack = [], [], [fig]
    while stack:
        artist = stack.pop()
        if isinstance(artist, Axis):
            axes.append(artist)
            texts.append(artist.label)
            continue
        if isinstance(artist, Text):
            texts.append(artist)
        stack.extend(artist.get_children())
    return texts, axes


class _PlainTicks(Formatter):
    """A tick formatter whose labels (names) show as their characters: ``$`` escaped, controls as escapes."""

    def __init__(self, inner: Formatter):
        self.inner = inner

    def __call__(self, x, pos=None):
        return _plain_tick(self.inner(x, pos))

    def format_ticks(self, values):
        return [_plain_tick(label) for label in self.inner.format_ticks(values)]

    def set_axis(self, axis):
        super().set_axis(axis)
        self.inner.set_axis(axis)

    def set_locs(self, locs):
        self.inner.set_locs(locs)

    def get_offset(self):
        return self.inner.get_offset()


def _plain_tick(label: str) -> str:
    return printable(label, newlines=True).replace("$", r"\$")  # tick labels keep mathtext on: escape its sign


_NAMED_TICKS = (FixedFormatter, FuncFormatter, StrMethodFormatter, StrCategoryFormatter)


def figure_and_axes(ax: Axes | None, *, figsize=(7.0, 3.6)) -> tuple[Figure, Axes]:
    """The Axes to draw into: ``ax`` itself, or one Axes of a new constrained-layout Figure."""
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def runner_colours(labels: Iterable[tuple[str, str]]) -> dict[tuple[str, str], tuple]:
    """A colour per (runner, tactic): the runner's family (:func:`runner_colour`), a shade per tactic."""
    labels = sorted(set(labels), key=lambda rt: (rt[0], _tactic_order(rt[1])))
    by_runner: dict[str, list[str]] = {}
    for runner, tactic in labels:
        by_runner.setdefault(runner, []).append(tactic)
    out = {}
    for runner, tactics in by_runner.items():
        cmap = mpl.colormaps[_family(runner)]
        n = len(tactics)
        for i, tactic in enumerate(tactics):
            out[(runner, tactic)] = cmap(0.3 + 0.5 * i / (n - 1) if n > 1 else 0.6)
    return out


def _tactic_order(tactic: str):
    try:
        return (0, int(tactic), "")
    except (TypeError, ValueError):
        return (1, 0, str(tactic))


def runner_colour(runner: str) -> tuple:
    """The runner's one colour (points, legends): the middle of its family."""
    return mpl.colormaps[_family(runner)](0.65)


def series_colour(i: int, n: int):
    """Line colour of series ``i`` of ``n`` (shapes, models): one dark slate when alone, tab10 otherwise."""
    return "#37474f" if n == 1 else f"C{i % 10}"


def runner_name(runner: str) -> str:
    """'cuBLAS fp8' for CublasFp8GemmRunner; other runners by class name."""
    return RUNNER_NAMES.get(str(runner), str(runner))


def log2_bucket_axis(ax: Axes, buckets: Iterable[int], *, axis: str = "x", label: str = "bucket (M, tokens)",
                     every_value: bool = False) -> None:
    """A log2 axis with bucket values as ticks: powers of two (thinned), or ``every_value``."""
    values = sorted({int(b) for b in buckets if b is not None and b > 0})
    set_scale = ax.set_xscale if axis == "x" else ax.set_yscale
    set_scale("log", base=2)
    if not values:
        return
    ticks = values if every_value else ([v for v in values if _is_power_of_two(v)] or values)
    if len(ticks) > 14:
        ticks = ticks[::2]
    # A locator and its labels, no Tick made yet: a grid of panels may set other ticks next (set_xticks made one
    # Tick, about 1 ms, per value here); the data's own buckets lie in the axis's limits already.
    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(FixedLocator(ticks))
    (ax.xaxis if axis == "x" else ax.yaxis).set_major_formatter(FixedFormatter([str(v) for v in ticks]))
    if axis == "x":
        ax.set_xlabel(label)
        ax.minorticks_off()
    else:
        ax.set_ylabel(label)


def _is_power_of_two(v: int) -> bool:
    return v > 0 and (v & (v - 1)) == 0


def cells(ax: Axes, boxes: Sequence[tuple[float, float, float, float, object]], *, edgecolor, linewidth: float,
          hatch: str | None = None, alpha: float | None = None) -> None:
    """Rectangles ``(x, y, width, height, facecolor)`` drawn into ``ax`` as one collection (a heat map's cells).

    One artist for hundreds of cells: a Rectangle patch each cost about 1 ms to add (its data limits)
    and 0.4 ms to draw. ``hatch`` hatches every cell: draw hatched cells with a call of their own.
    """
    if boxes:
        corners = [((x, y), (x + w, y), (x + w, y + h), (x, y + h)) for x, y, w, h, _ in boxes]
        ax.add_collection(PolyCollection(corners, facecolors=[c for *_, c in boxes], edgecolors=edgecolor,
                                         linewidths=linewidth, hatch=hatch, alpha=alpha))


def categorical_bucket_axis(ax: Axes, buckets: Iterable[int], *, label: str = "bucket (M, tokens)") -> dict[int, int]:
    """One equal cell per bucket on x, labelled with its M; returns the position of each bucket."""
    values = sorted({int(b) for b in buckets})
    ax.set_xticks(range(len(values)), [str(v) for v in values], rotation=90 if len(values) > 24 else 0)
    ax.set_xlim(-0.5, len(values) - 0.5)
    ax.set_xlabel(label)
    ax.minorticks_off()
    return {b: i for i, b in enumerate(values)}


def bucket_of(m: int, buckets: Iterable[int]) -> int | None:
    """The bucket FlashInfer's GEMMs run M in: the smallest bucket >= M (None above the largest)."""
    return next((b for b in sorted(buckets) if b >= m), None)


def bucket_edges(buckets: Iterable[int]) -> list[tuple[float, float]]:
    """(left, right) per ascending bucket on a log2 axis: bucket b covers (previous bucket, b].

    FlashInfer's GEMM ops round M up to the next bucket, so a bucket's cell spans from the
    bucket below it; the smallest bucket gets a cell one octave wide.
    """
    values = sorted(int(b) for b in buckets)
    edges = []
    for i, b in enumerate(values):
        left = values[i - 1] if i else b / 2
        edges.append((float(left), float(b)))
    return edges


def timing_note(timings: Mapping[str, Iterable[str]]) -> str:
    """'fp8_gemm: eager, hot L2, mean of 10; bf16_gemm: cuda_graph, cold L2, median of 10'."""
    parts = []
    for op, values in sorted(timings.items()):
        values = sorted({str(v) for v in values if v is not None and str(v) != "<NA>"})
        if values:
            parts.append(f"{op}: {' / '.join(values)}")
    return "; ".join(parts)


def timings_of(frame, op_column: str = "op", timing_column: str = "timing") -> dict[str, list[str]]:
    if frame is None or timing_column not in frame.columns or op_column not in frame.columns:
        return {}
    out: dict[str, list[str]] = {}
    for op, timing in frame[[op_column, timing_column]].drop_duplicates().itertuples(index=False):
        if op is None or pd.isna(op):  # None, NaN or pd.NA: a timing of no known op
            continue
        out.setdefault(str(op), []).append(None if pd.isna(timing) else timing)
    return out


def add_note(ax: Axes, text: str, *, below_pt: float = 30) -> None:
    """A small grey note ``below_pt`` points under the axes (timing method, caveats); further down with larger type."""
    below_pt *= float(current_style().rc.get("font.size", 9)) / 9.0
    if text:
        ax.annotate(text, xy=(0, 0), xycoords="axes fraction", xytext=(0, -below_pt), textcoords="offset points",
                    fontsize=7, color="#555555", ha="left", va="top", annotation_clip=False, wrap=True)


def empty_axes(ax: Axes, message: str) -> None:
    """Draw the 'nothing to show' state and warn, as Optuna does for empty studies."""
    warnings.warn(message, stacklevel=3)
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center", color=NEUTRAL, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def mark_batch_sizes(ax: Axes, batch_sizes: Iterable[int], *, label_prefix: str = "bs") -> None:
    """Dashed verticals at engine batch sizes (decode concurrency, prefill tokens)."""
    for bs in sorted({int(b) for b in batch_sizes}):
        ax.axvline(bs, color="#333333", linestyle="--", linewidth=0.9, alpha=0.8, zorder=5)
        ax.annotate(f"{label_prefix} {bs}", xy=(bs, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 2),
                    textcoords="offset points", fontsize=6.5, va="bottom", ha="center", color="#333333",
                    annotation_clip=False)


def short_label(label: str, labels: Mapping[str, str] | None) -> str:
    """A shape's display name with its GEMM shape: ``llama3-8b qkv (N=6144, K=4096)``; the label itself when unnamed."""
    label = str(label)
    shape = label.replace(" ", ", ") if label.startswith("N=") else label
    if labels and label in labels and labels[label] != label:
        return f"{labels[label]} ({shape})"
    return shape



def split_axes(ax: Axes, n: int, *, vertical: bool = False, ratios=None, space: float = 0.35) -> list[Axes]:
    """``n`` panels in ``ax``'s place: a figure of the plot's own is re-gridded; a caller's Axes shares its grid cell."""
    if n <= 1:
        return [ax]
    shape, ratio = ((n, 1), "height_ratios") if vertical else ((1, n), "width_ratios")
    fig = ax.figure
    if fig.axes == [ax] and not ax.has_data():
        ax.remove()
        return list(fig.subplots(*shape, squeeze=False, gridspec_kw={ratio: ratios}).ravel())
    grid = ax.get_subplotspec().subgridspec(*shape, **{ratio: ratios, "hspace" if vertical else "wspace": space})
    ax.set_subplotspec(grid[0])
    return [ax] + [fig.add_subplot(grid[i]) for i in range(1, n)]


def owns(ax: Axes) -> bool:
    """Whether ``ax`` is the only, empty Axes of its figure (a figure the plot made): figure-level legends go there."""
    return ax.figure.axes == [ax] and not ax.has_data()
