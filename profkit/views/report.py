"""The profkit report: figures (PNG, SVG), tables (CSV), index.md and a self-contained index.html.

The layers: :func:`profkit.sources.datadir.read_datadir` reads a data directory into a
``DataDir``; :func:`profkit.analysis.overview.overview` runs the analyses into an ``Overview``;
this module only lays them out: figure specs, the three answers on the first screen, the
sections and the Markdown and HTML writers. It opens no input file.

Adding a section
----------------
A page is the list :data:`SECTIONS` of section builders, in page order. A builder is a function
``build(ctx: ReportContext) -> Section | None``: it reads frames from ``ctx.data`` (the
``DataDir``) and ``ctx.results`` (the ``Overview``), calls public ``profkit.analysis`` functions
for anything else, and returns a :class:`Section` (title, Markdown text, figures, tables, and one
line per figure it left out saying why), or None when the data has nothing for it. Tables are
shortened on the page and written whole as CSV beside it. For example::

    from profkit import analysis
    from profkit.views import report

    def runner_share(ctx):                           # tables in -> Markdown + figures + tables out
        cost = analysis.runner_cost(ctx.data.tables.candidates)
        if cost.empty:
            return None                              # nothing to say: the section is left out
        return report.Section(
            "Where measuring time went per runner", "Candidates timed and seconds spent, per runner.",
            tables=(report.Table(cost, "runner_cost", sort_by="measure_s", what="most seconds first"),))

    report.SECTIONS.insert(report.SECTIONS.index(report.serving_section), runner_share)
    # or, for one report only: build_report(data, out, sections=[*report.SECTIONS[:-1], runner_share,
    #                                                             report.SECTIONS[-1]])

A section that needs a new input file (a verify table, an advise plan) gets it read in
``profkit/sources/datadir.py``: one field of ``DataDir`` and one reader there, empty when the
directory lacks the file, so the builder returns None. Its computation is a public function in
``profkit/analysis/``, and its figure a ``plot_*`` in ``profkit/views/`` drawn by a
:class:`FigureSpec` (``FigureSpec(name, title, caption, draw=lambda: plot_x(frame, ...))``).
Nothing else changes: the table of contents, the CSV files, ``--only`` and both writers pick
the section up.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import io
import re
import sys
import warnings
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from profkit._versions import cudnn_version
from profkit.analysis import step as step_analysis
from profkit.analysis import verify as verify_analysis
from profkit.analysis.overview import Overview, overview
from profkit.errors import ProfkitError
from profkit.outputs import atomic
from profkit.views import _format, _html, _style
from profkit.views._candidates import plot_candidates
from profkit.views._compare import plot_diff, plot_rank_divergence, plot_winner_flips
from profkit.views._e2e import plot_kernel_vs_e2e, plot_op_timings, plot_step_change
from profkit.views._speedup import plot_speedup
from profkit.views._step import STATE_ORDER, plot_step_times
from profkit.views._tactic_map import plot_tactic_map
from profkit.views._tuning import plot_tuning_time, plot_tuning_value
from profkit.views._verify import plot_serving_vs_tuner
from profkit.views.advise import advise_report_section

# The two figures the README shows (``profkit report --only tactic_map,speedup``).
README_FIGURES = ("tactic_map", "speedup")
_ENV = ("gpu", "driver", "cuda", "torch", "flashinfer", "cudnn", "cublas", "cudnn_frontend", "python", "host")
_TOP = 10


# -- the pieces of a page -----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class FigureSpec:
    """One figure: file name (no extension), title, caption, and a function that draws it."""

    name: str
    title: str
    caption: str
    draw: Callable[[], Figure]

    def __post_init__(self):  # the name becomes a file name and an HTML id: op and model names are not safe
        object.__setattr__(self, "name", _html.slug(self.name))


@dataclasses.dataclass(frozen=True, eq=False)
class Table:
    """A table shown shortened on the page and written whole as ``<name>.csv``.

    Attributes:
        frame: the full table (analysis columns; units in the names).
        name: CSV file name without extension.
        sort_by: the column that says what matters; the page shows the ``top`` rows by it.
        ascending: sort order of ``sort_by`` (False: largest first).
        top: rows shown on the page (all when the table is no longer).
        what: what the shown rows are, e.g. "slowest against the default".
    """

    frame: pd.DataFrame
    name: str
    sort_by: str | None = None
    ascending: bool = False
    top: int = _TOP
    what: str = ""

    def __post_init__(self):  # the name becomes a file name and a link
        object.__setattr__(self, "name", _html.slug(self.name))

    def shown(self) -> pd.DataFrame:
        f = self.frame
        if self.sort_by is not None and self.sort_by in f.columns and len(f) > self.top:
            key = pd.to_numeric(f[self.sort_by], errors="coerce")
            f = f.iloc[np.argsort(key.to_numpy(dtype=float) * (1 if self.ascending else -1), kind="stable")]
        return f.head(self.top)

    def footer(self) -> str:
        if len(self.frame) <= self.top or not self.top:
            return f"All {len(self.frame)} rows in [{self.name}.csv]({self.name}.csv)."
        what = f" ({self.what})" if self.what else ""
        return (f"Top {self.top} of {len(self.frame)} rows{what}; {len(self.frame) - self.top} more in "
                f"[{self.name}.csv]({self.name}.csv).")


@dataclasses.dataclass(frozen=True)
class Section:
    """One section of the page, from one builder of :data:`SECTIONS`.

    Attributes:
        title: the heading (also the table of contents entry).
        text: Markdown: paragraphs, ``- `` lists, `code`, **bold** and [links](#anchor).
        figures: the figures, in order.
        tables: the tables, after the figures.
        omitted: one line per figure left out, saying why (drawn as a note, not an empty figure).
    """

    title: str
    text: str = ""
    figures: tuple[FigureSpec, ...] = ()
    tables: tuple[Table, ...] = ()
    omitted: tuple[str, ...] = ()

    @property
    def anchor(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")


@dataclasses.dataclass(frozen=True, eq=False)
class ReportContext:
    """What a section builder reads: the data directory's frames and the analyses over them."""

    data: object
    results: Overview

    @functools.cached_property
    def verdicts(self) -> pd.DataFrame:
        """Per-(run, op, shape, M) verdicts (``bucket_verdicts``) of the verify tables of shipped tunings.

        Tables of the policy study (a ``policy`` column) are left out: :func:`verify_section`
        shows them per policy. Empty without a verify table.
        """
        v = self.data.verify
        v = v[~_policy_rows(v)]
        return verify_analysis.bucket_verdicts(v) if len(v) else pd.DataFrame()

    @property
    def labels(self) -> dict:
        return dict(self.data.labels)

    def named(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with shape labels ('N=6144 K=4096') replaced by display names ('llama3-8b qkv')."""
        if "shape" not in frame.columns:
            return frame
        return frame.assign(shape=frame["shape"].map(lambda s: self.data.labels.get(s, s)))

    def subset(self, op: str | None = None) -> str:
        """The data the headline speedups come from: '10 GEMM shapes x 20 buckets (first run each)'."""
        s = self.results.speedups
        if op is not None:
            s = s[(s["op"] == op).to_numpy(dtype=bool)]
        shapes = s["shape"].nunique()
        per = s.groupby("shape")["bucket"].nunique()
        buckets = f"{int(per.iloc[0])} buckets" if per.nunique() == 1 and len(per) else f"{len(s)} buckets in all"
        return f"{_count(shapes, 'GEMM shape')} x {buckets}, first run each"

    def figure(self, name: str) -> str:
        """A Markdown link to a figure of the page by its name."""
        return f"[{name.replace('_', ' ')}](#fig-{_html.slug(name)})"


def _count(n: int, noun: str) -> str:
    """``1 call``, ``2 calls``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _spread_s(values: pd.Series) -> str:
    """``35.5 s`` for one value, ``19.3-49.0 s (median 38.1 s)`` for several."""
    if len(values) == 1:
        return f"{values.iloc[0]:.1f} s"
    return f"{values.min():.1f}-{values.max():.1f} s (median {values.median():.1f} s)"


def _only(frame: pd.DataFrame, column: str, value) -> pd.DataFrame:
    return frame[(frame[column] == value).fillna(False).to_numpy(dtype=bool)]


# -- the first screen: the reviewers' three questions ------------------------------------------
def _full_calls(ctx: ReportContext) -> pd.DataFrame:
    """Tuning calls of the first runs that profiled every bucket of their shape, with whether the split is known."""
    r = ctx.results
    if r.breakdown.empty or r.calls.empty:
        return pd.DataFrame()
    per_call = r.breakdown.groupby(["run_id", "call"], observed=True).size().rename("n_buckets").reset_index()
    every = r.calls.merge(per_call, on=["run_id", "call"], how="inner")
    t = ctx.data.tables.tuning
    timed = t[t["kind"].eq("profile").fillna(False).to_numpy(dtype=bool)].groupby(["run_id", "call"])["measure_s"]
    known = timed.apply(lambda s: bool(s.notna().any())).rename("split_known").reset_index()
    every = every.merge(known, on=["run_id", "call"], how="left")
    every["first_run"] = every["run_id"].isin(r.first_runs).to_numpy(dtype=bool)
    top = every.groupby("op")["n_buckets"].transform("max")
    return every[(every["n_buckets"] == top).to_numpy(dtype=bool)]


def tuning_time_lines(ctx: ReportContext) -> list[str]:
    """One line per op: how long a full tuning call took, and where the time went when known."""
    lines = []
    full = _full_calls(ctx)
    for op, g in (full.groupby("op", sort=True) if len(full) else []):
        first = g[g["first_run"].to_numpy(dtype=bool)]
        later = g[~g["first_run"].to_numpy(dtype=bool)]
        shown = first if len(first) else g
        line = (f"`{op}`: one call tuning all {int(shown['n_buckets'].max())} buckets took "
                f"{_spread_s(shown['wall_s'])} over {_count(len(shown), 'call')}")
        if shown["split_known"].fillna(False).all():
            wall = shown["wall_s"].sum()
            line += (f"; measuring candidates was {shown['measure_s'].sum() / wall:.0%} of it, runner "
                     f"preparation (cuDNN plan builds) {shown['prep_s'].sum() / wall:.0%}")
        else:
            line += "; the split into measuring and plan building is unknown (these tuning rows have no phase times)"
        if len(later) and len(first):
            line += f". Later runs of the same shapes (repeats, other ranks): {_spread_s(later['wall_s'])}"
        lines.append(line + ".")
    tp = ctx.results.step_tuning
    if len(tp):
        lines.append(f"A model's tuning pass (all its linears, one forward at the largest bucket) took "
                     f"{_spread_s(tp['tuning_s'])} ({', '.join(f'{m} {d}' for m, d in zip(tp['model'], tp['dtype']))}).")
    return lines


def speedup_lines(ctx: ReportContext) -> list[str]:
    """One line per op: the winner against FlashInfer's default, per bucket."""
    lines = []
    for op, g in ctx.results.speedups.groupby("op", sort=True):
        slow = g["slower_than_default"].fillna(False).to_numpy(dtype=bool)
        beyond = int((slow & ~g["within_noise"].fillna(False).to_numpy(dtype=bool)).sum())
        lines.append(f"`{op}`: the winner beat the default by a median {g['speedup'].median():.3f}x, at most "
                     f"{g['speedup'].max():.3f}x ({ctx.subset(op)}); {_count(int(slow.sum()), 'bucket')} timed "
                     f"slower than the default, {beyond} of them beyond the noise band.")
    return lines


def low_latency_lines(ctx: ReportContext) -> list[str]:
    """Small M: serving verify at M <= 8, the tuner's speedup at buckets <= 8, outside tuning at the smallest M, the step."""
    r = ctx.results
    lines = verify_low_latency_lines(ctx)
    small = r.speedups[(r.speedups["bucket"] <= 8).fillna(False).to_numpy(dtype=bool)]
    for op, g in small.groupby("op", sort=True):
        lines.append(f"`{op}` at buckets 1-8 (decode batch 1-8), by the tuner's timer: median {g['speedup'].median():.3f}x, "
                     f"{g['speedup'].min():.3f}-{g['speedup'].max():.3f}x over {_count(len(g), 'bucket')}.")
    if len(r.between):
        m = int(r.between["m"].min())
        b = _only(r.between, "m", m)
        lines.append(f"Outside tuning (CUDA graph, rotating inputs) at M={m}: tuned vs untuned "
                     f"{b['speedup'].min():.2f}-{b['speedup'].max():.2f}x over {len(b)} (op, shape) pairs.")
    tuned = _only(r.step_measured, "state", "tuned") if len(r.step_measured) else r.step_measured
    if len(tuned):
        dec = tuned[((tuned["phase"] == "decode") & (tuned["tokens"] <= 8)).fillna(False).to_numpy(dtype=bool)]
        if len(dec):
            lines.append(f"A decoder step at batch 1-8, tuned vs untuned: {dec['delta_pct'].min():+.1f}% to "
                         f"{dec['delta_pct'].max():+.1f}% ({int(dec['slower'].sum())} of {len(dec)} slower beyond noise).")
    return lines


def verify_low_latency_lines(ctx: ReportContext) -> list[str]:
    """Per op, from the verify table at M <= 8: the tuner's pick against the default in serving."""
    v = ctx.verdicts
    small = v[(v["m"] <= 8).fillna(False).to_numpy(dtype=bool)] if len(v) else v
    lines = []
    for op, g in (small.groupby("op", sort=True) if len(small) else []):
        counts = g["verdict"].value_counts()
        ms = ", ".join(str(int(m)) for m in sorted(g["m"].unique()))
        lines.append(f"`{op}` in serving at M = {ms} (profkit verify: CUDA graph replays, rotating inputs): the "
                     f"tuner's pick ran a median {g['serving_speedup'].median():.3f}x the default's speed; "
                     f"**{int(counts.get('faster', 0))} faster, {int(counts.get('slower', 0))} slower** beyond noise "
                     f"and {int(counts.get('within_noise', 0))} within noise, of "
                     f"{_count(len(g), '(capture, shape, M) point')}.")
    return lines


def serving_lines(ctx: ReportContext) -> list[str]:
    """The serving pair's off/on deltas, and where they come from."""
    e2e = ctx.results.e2e
    if e2e.empty:
        return []
    rows = e2e[(e2e["kind"] == "e2e").to_numpy(dtype=bool)].set_index("metric")
    parts = [f"{name} {_format.number(rows.loc[m, 'baseline'])} -> {_format.number(rows.loc[m, 'treatment'])} "
             f"{rows.loc[m, 'unit']} ({rows.loc[m, 'improvement_pct']:+.1f}%)"
             for m, name in (("output_tok_s", "output throughput"), ("mean_itl_ms", "mean ITL"),
                             ("mean_ttft_ms", "mean TTFT")) if m in rows.index]
    models = ", ".join(sorted(ctx.data.bench["model"].dropna().astype(str).unique()))
    return [f"Serving pair, autotune off -> on ({models or 'model not stated'}): {'; '.join(parts)}."]


def glance(ctx: ReportContext) -> Section:
    """The first screen: how long tuning takes, whether it can be off, whether it helps low latency."""
    r = ctx.results
    q1 = tuning_time_lines(ctx) or ["No tuning rows in the data."]
    off = ["Yes. In the engines: SGLang `--disable-flashinfer-autotune`, vLLM `--no-enable-flashinfer-autotune`. "
           "Untuned, FlashInfer runs each op's `runners[0]` with tactic -1 (the default), so turning tuning off "
           "gives up exactly the winner-over-default speedup" + (":" if len(r.speedups) else
                                                                  "; this data has no default timing (e.g. "
                                                                  "read from logs), so what off costs is unknown here.")]
    off += speedup_lines(ctx) + serving_lines(ctx)
    q3 = low_latency_lines(ctx) or ["Unknown from this data: no bucket at or below 8 has its default timed, and "
                                    "there are no op timings or step results."]
    # Link only the figures this data draws.
    see_time = [ctx.figure("tuning_time")] if len(r.breakdown) else []
    see_off = ([ctx.figure("speedup")] if len(r.speedups) else []) + (
        [ctx.figure("kernel_vs_e2e")] if len(r.e2e) else [])
    see_low = [ctx.figure("step_change")] if len(r.step_measured) else [ctx.figure("speedup")] if len(r.speedups) \
        else [ctx.figure("op_timings")] if len(r.between) else []
    see_low = ([ctx.figure("serving_vs_tuner")] if len(ctx.verdicts) else []) + see_low  # its lines come first
    blocks = [("How long does tuning take?", q1, see_time),
              ("Can it be switched off, and what does off cost?", off, see_off),
              ("Does it help low-latency (small batch) cases?", q3, see_low)]
    text = []
    for question, lines, figures in blocks:
        shown = f" (figure: {', '.join(figures)})" if figures else ""
        text += [f"**{question}**{shown}", ""] + [f"- {line}" for line in lines] + [""]
    return Section("At a glance", "\n".join(text).strip())


# -- section builders ---------------------------------------------------------------------------
def tactic_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.speedups.empty and r.winners.empty:
        return None
    figures = [FigureSpec("tactic_map", "Which runner and tactic won each bucket",
                          "One row per op and GEMM shape (first run each), one equal cell per bucket (its M "
                          "below). Colour family = runner, shade and cell text = tactic; red hatched cells timed "
                          "slower than the default.",
                          lambda: plot_tactic_map(r.speedups if len(r.speedups) else r.winners, labels=ctx.labels))]
    if len(r.speedups):
        top = r.speedups.sort_values("speedup", ascending=False).iloc[0]
        figures.append(FigureSpec(
            "candidates", "Every candidate of one shape",
            f"Every candidate of {top['op']} {ctx.labels.get(top['shape'], top['shape'])}, the shape and run of "
            f"the largest speedup ({top['speedup']:.3f}x at bucket {int(top['bucket'])}, shaded).",
            lambda: plot_candidates(ctx.data.tables.candidates, op=top["op"], shape=top["shape"],
                                    run_id=top["run_id"], highlight=int(top["bucket"]), labels=ctx.labels)))
    omitted = () if len(r.speedups) else ("Every candidate of one shape: not drawn: it shows the shape of the largest "
                                           "speedup, and no bucket had its default timed.",)
    winners = ctx.named(r.speedups[["op", "shape", "bucket", "runner", "tactic", "time_ms", "default_ms", "speedup",
                                    "noise_pct", "within_noise"]]) if len(r.speedups) else pd.DataFrame()
    tables = (Table(winners, "winners", sort_by="speedup", what="largest speedup first"),) if len(winners) else ()
    return Section("Tactic choices", "What FlashInfer's autotuner picked, bucket by bucket.", tuple(figures), tables,
                   omitted)


def speedup_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.speedups.empty:
        return Section("Speedup over the default", omitted=("Speedup: not drawn: no bucket had its default timed "
                                                              "(captures with time_default=False, logs, caches).",))
    fig = FigureSpec("speedup", "Speedup of the winner over the default",
                     "default_ms / time_ms per bucket by the tuner's own timer, one panel per op and one line per "
                     "shape, with the noise band; triangles mark winners that timed slower than the default.",
                     lambda: _small_multiples(r.speedups, lambda f, ax: plot_speedup(f, ax=ax), labels=ctx.labels))
    slow = r.speedups[r.speedups["slower_than_default"].fillna(False).to_numpy(dtype=bool)]
    tables = ()
    if len(slow):
        tables = (Table(ctx.named(slow[["op", "shape", "bucket", "runner", "tactic", "time_ms", "default_ms",
                                        "speedup", "noise_pct", "within_noise"]]),
                        "slower_than_default", sort_by="speedup", ascending=True, what="slowest first"),)
    text = "\n".join(f"- {line}" for line in speedup_lines(ctx))
    text += ("\n\nBuckets slower than the default (flashinfer#3537): within noise = the gap lies inside the "
             "noise band, a tie rather than a regression.") if len(slow) else ""
    return Section("Speedup over the default", text, (fig,), tables)


def tuning_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.breakdown.empty:
        return None
    first = r.breakdown[r.breakdown["run_id"].isin(r.first_runs).to_numpy(dtype=bool)]
    timed = ctx.data.tables.tuning["measure_s"].notna().any()
    figures = [FigureSpec("tuning_time", "Where tuning time went",
                          "Tuning wall seconds per op and shape (first run each), split into measuring candidates, "
                          "runner preparation (cuDNN plan builds), JIT and the rest." if timed else
                          "Tuning wall seconds per op and shape (first run each). These tuning rows carry no phase "
                          "times (e.g. read from a debug log), so the whole bar is unsplit, not 'other'.",
                          lambda: plot_tuning_time(first, labels=ctx.labels))]
    omitted = []
    if len(r.value):
        figures.append(FigureSpec("tuning_value", "What tuning time bought",
                                  "Per op, one small panel per shape: cumulative tuning seconds against the "
                                  "microseconds one call per bucket saves, bucket by bucket.",
                                  lambda: _small_multiples(r.value, lambda f, ax: plot_tuning_value(f, ax=ax),
                                                           labels=ctx.labels)))
    else:
        omitted.append("What tuning time bought: not drawn: no bucket has both a tuning time and a speedup.")
    tables = ()
    if len(r.worth):
        tables = (Table(ctx.named(r.worth[["op", "shape", "tuning_s", "measure_s", "median_speedup", "max_speedup",
                                           "n_slower", "saved_us_per_pass", "saved_pct_per_pass",
                                           "break_even_passes"]]),
                        "worth_tuning", sort_by="break_even_passes", ascending=True,
                        what="fewest passes to break even first"),)
    text = "\n".join(f"- {line}" for line in tuning_time_lines(ctx))
    if len(r.worth):
        text += ("\n\nOne pass = one call at every tuned bucket; break-even passes = passes whose saving repays the "
                 "tuning time.")
    return Section("Tuning time", text, tuple(figures), tables, tuple(omitted))


def outside_tuning_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.between.empty:
        return Section("Outside tuning", omitted=("Tuned vs untuned op timings: not drawn: the data has no "
                                                  "op_timings.parquet.",))
    b = r.between
    fig = FigureSpec("op_timings", "Tuned vs untuned outside tuning",
                     "The op timed at M on and between buckets, with and without the tuned configs (CUDA graph, "
                     "rotating inputs), one panel per op.",
                     lambda: _per_op(b, lambda f, ax: plot_op_timings(f, labels=ctx.labels, ax=ax)))
    g = b.groupby(["op", "at_bucket"])["speedup"].agg(["median", "min", "max", "count"]).reset_index()
    g = g.rename(columns={"median": "median_speedup", "min": "min_speedup", "max": "max_speedup", "count": "n"})
    text = (f"Tuned vs untuned (untuned_ms / tuned_ms): median {b.loc[b['at_bucket'], 'speedup'].median():.3f}x at "
            f"bucket M, {b.loc[~b['at_bucket'], 'speedup'].median():.3f}x between buckets "
            f"(min {b['speedup'].min():.3f}x), over {_count(b['shape'].nunique(), 'shape')}.")
    return Section("Outside tuning", text, (fig,), (Table(g, "outside_tuning_summary"),
                                                    Table(ctx.named(b), "outside_tuning", sort_by="speedup",
                                                          ascending=True, what="slowest tuned first", top=0)))


def step_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.step_measured.empty:
        return Section("Decoder step", omitted=("Decoder step figures: not drawn: the data has no `profkit step` "
                                                "results (step.jsonl).",))
    figures = [FigureSpec("step_change", "Decoder step: tuned vs untuned",
                          "Measured change of a decoder step (profkit step), tuned vs untuned, one panel per model "
                          "and dtype, with the repetitions' noise, and the change the tuning-pass capture predicts.",
                          lambda: _small_multiples(
                              r.step_measured, lambda f, ax: plot_step_change(f, predicted=r.step_predicted, ax=ax),
                              labels={}, block="model", panel="dtype", every_tick=True))]
    for (model, dtype), rows in r.step_rows.groupby(["model", "dtype"], sort=True):
        states = ", ".join(s for s in STATE_ORDER if (rows["state"] == s).any())
        figures.append(FigureSpec(
            f"step_times_{model}_{dtype}", f"Step time per state: {model} {dtype}",
            f"Step time of {model} {dtype} ({states}) across decode batch sizes (left) and prefill chunks (right): "
            "milliseconds on top, relative to untuned below (< 1: faster than FlashInfer's untuned fallback). "
            "Markers are medians over the repetitions, bars min to max.",
            lambda rows=rows, model=model, dtype=dtype: _step_times_grid(rows, model=model, dtype=dtype)))
    m = r.step_measured
    tuned = _only(m, "state", "tuned")
    text = (f"Each state against untuned: tuned ran in the same process after the tuning pass, cache in a fresh "
            f"process that loaded its cache.json, torch with plain torch linears. Tuned vs untuned: "
            f"{tuned['delta_pct'].min():+.1f}% to {tuned['delta_pct'].max():+.1f}% (median "
            f"{tuned['delta_pct'].median():+.1f}%) over {len(tuned)} (model, dtype, size) points; {int(tuned['slower'].sum())} "
            "slower beyond noise (noise = the larger max-min spread of the two states' repetitions).") \
        if len(tuned) else ""
    tables = [Table(m[["model", "dtype", "phase", "tokens", "state", "step_ms", "baseline_ms", "delta_pct",
                       "noise_ms", "beyond_noise", "slower"]], "step_change", sort_by="delta_pct",
                    what="largest slowdown first")]
    text += "\n\n" + _break_even_text(ctx)
    if len(r.step_break_even):
        tables.append(Table(r.step_break_even, "break_even", sort_by="steps_to_break_even", ascending=True,
                            what="soonest break-even first"))
    return Section("Decoder step", text.strip(), tuple(figures), tuple(tables))


def _break_even_text(ctx: ReportContext) -> str:
    """When does tuning pay for itself, per model and dtype, in the data's numbers."""
    r = ctx.results
    tuned = _only(r.step_measured, "state", "tuned")
    be = r.step_break_even
    lines = ["**When does tuning pay for itself?** Tuning wall time divided by the time the tuned step saves = "
             "steps before the tuning pass pays for itself (serving time = those steps at the tuned step time). "
             "Only sizes where tuned is faster beyond noise count: elsewhere tuning never pays back.", ""]
    for (model, dtype), g in tuned.groupby(["model", "dtype"], sort=True):
        mine = be[((be["model"] == model) & (be["dtype"] == dtype)).to_numpy(dtype=bool)] if len(be) else be
        saving = f"saves time beyond noise at {len(mine)} of {len(g)} sizes"
        if len(mine):
            saving += (f", breaking even after {_format.number(mine['steps_to_break_even'].min())} to "
                       f"{_format.number(mine['steps_to_break_even'].max())} steps "
                       f"({_format.seconds(mine['serving_s_to_break_even'].min())} to "
                       f"{_format.seconds(mine['serving_s_to_break_even'].max())} of serving at that size)")
        spent = r.step_tuning[((r.step_tuning["model"] == model) & (r.step_tuning["dtype"] == dtype)).to_numpy(dtype=bool)]
        tuning = f"tuning {spent['tuning_s'].iloc[0]:.1f} s, " if len(spent) else "no tuning capture, "
        lines.append(f"- {model} {dtype}: {tuning}{saving}; slower beyond noise at {int(g['slower'].sum())}.")
    layers = sorted({int(x) for x in r.step_rows["layers"].dropna()}) if "layers" in r.step_rows else []
    if len(layers) == 1:
        full = [f"{name} has {ctx.data.model_layers[name]}" for name in sorted(tuned["model"].unique())
                if name in ctx.data.model_layers]
        lines += ["", f"A step here is the {layers[0]} timed decoder layers, not the whole model"
                  + (f" ({', '.join(full)})" if full else "") + ": if the saving per layer held in every layer, a "
                  "full model would break even in proportionally fewer steps."]
    return "\n".join(lines)


_NEW_STATES = ("repaired", "advised", "planned", "v2-graph", "v2-eager")


def _policy_rows(verify: pd.DataFrame) -> np.ndarray:
    """Rows of the policy study (verify tables with a ``policy``)."""
    if "policy" not in verify.columns:
        return np.zeros(len(verify), dtype=bool)
    return verify["policy"].notna().to_numpy(dtype=bool)


def _policy_tuning_s(provenance) -> pd.DataFrame:
    """(policy, op, tuning_s) per tuning call of the policy study, from its provenance.json ``runs``."""
    rows = [{"policy": run["policy"], "op": str(run.get("name", "")).partition("-")[0], "tuning_s": run["tune_call_s"]}
            for p in provenance.values() for run in (p.get("runs") or [])
            if isinstance(run, dict) and {"policy", "tune_call_s"} <= set(run)]
    return pd.DataFrame(rows, columns=["policy", "op", "tuning_s"])


def _step_comparisons(ctx: ReportContext) -> list[tuple[str, str, str, pd.DataFrame]]:
    """:func:`profkit.analysis.step.step_comparisons` of every step row of the data (tuning-pass sets and the others)."""
    frames = [f for f in (ctx.data.step, ctx.data.step_other) if len(f) and {"state", "source"} <= set(f)]
    return step_analysis.step_comparisons(pd.concat(frames, ignore_index=True)) if frames else []


def verify_section(ctx: ReportContext) -> Section | None:
    """Do the tuner's picks hold in serving? (profkit verify, the policy table, repaired/advised steps.)"""
    v, policy = ctx.verdicts, _policy_rows(ctx.data.verify)
    if v.empty and not policy.any():
        return None
    figures, tables, omitted, text = [], [], [], []
    if len(v):
        summary = verify_analysis.op_summary(v)
        shipped = ctx.data.verify[~policy]
        text.append(f"Each capture's top candidates by the tuner's times, its winner and FlashInfer's default "
                    f"(runners[0], tactic -1) re-timed outside the tuner the way engines run decode (CUDA graph "
                    f"replays, inputs rotated over more than L2) by `profkit verify`: "
                    f"{_count(shipped['source'].nunique(), 'verify table')} of "
                    f"{_count(shipped['run_id'].nunique(), 'captured tuning run')}. Each bucket counts once per "
                    "run, at its own M; faster / slower = beyond the p10-p90 bands of both.")
        text += ["\n".join(f"- `{row.op}`: of {row.buckets} buckets the tuner's pick was **{row.faster} faster, {row.slower} "
                 f"slower** and {row.within_noise} within noise of the default in serving; median speedup "
                 f"{row.median_tuner_speedup:.3f}x by the tuner's timer, {row.median_serving_speedup:.3f}x in "
                 f"serving; median regret against the serving-best candidate {row.median_regret:.2%}; tuner/serving "
                 f"rank agreement (Spearman) {row.median_rank_agreement:.2f}."
                 for row in summary.itertuples(index=False))]
        figures.append(FigureSpec(
            "serving_vs_tuner", "Do the tuner's picks hold in serving?",
            "Per bucket (at its own M): the tuner's speedup of its pick over the default (x) against the serving "
            "speedup (y), with the p10-p90 band. Right of 1 the tuner expected a gain; below 1 serving lost it "
            "(red corner). Bold numbers count each quadrant.", lambda: plot_serving_vs_tuner(v)))
        tables.append(Table(summary.assign(median_regret_pct=(100 * summary["median_regret"]).round(2),
                                           median_rank_agreement=summary["median_rank_agreement"].round(2)).drop(
            columns="median_regret"), "verify_summary"))
        shown = ctx.named(v.assign(serving_noise_pct=100 * v["serving_noise"], regret_pct=100 * v["regret"]))
        tables.append(Table(shown[["run_id", "op", "shape", "m", "bucket", "pick_runner", "pick_tactic",
                                   "tuner_speedup", "serving_speedup", "serving_noise_pct", "verdict", "regret_pct"]],
                            "verify_verdicts", sort_by="serving_speedup", ascending=True,
                            what="the pick slowest against the default first; M between buckets included"))
    if policy.any():
        study = ctx.data.verify[policy]
        # One tuning per verify table: the study names its runs by policy and layer, in every process alike.
        study = study.assign(run_id=study["source"].astype(str).str.rpartition("/")[0])
        policies = verify_analysis.policy_table(study, _policy_tuning_s(ctx.data.provenance))
        text.append("Measurement policies (the policy study: each policy tuned the linears inside `profkit.capture`, "
                    "then `profkit verify` timed its picks the same way; buckets over the study's processes):\n"
                    + "\n".join(f"- `{r.policy}` {r.op} ({_count(r.shapes, 'shape')}, {r.buckets} buckets): "
                                 f"**{r.slower} slower** than the default in serving beyond noise, {r.faster} faster; "
                                 f"median serving speedup {r.median_serving_speedup:.3f}x"
                                 for r in policies.itertuples(index=False))
                    + "\n\nTuning seconds in the table are summed over the study's tuning calls; the first policy tuned "
                      "in a process also pays the cuDNN plan builds, so compare them only across process orders.")
        tables.append(Table(policies.assign(median_regret_pct=(100 * policies["median_regret"]).round(2),
                                            tuning_s=policies["tuning_s"].round(1)).drop(columns="median_regret"),
                            "verify_policies", sort_by="slower", ascending=True, top=len(policies)))
    comparisons, step_lines = _step_comparisons(ctx), []
    for where, model, dtype, rows in comparisons:
        states = [s for s in STATE_ORDER if (rows["state"] == s).any()]
        new = ", ".join(s for s in states if s in _NEW_STATES)
        if not new:
            continue
        step_lines.append(_repaired_step_line(rows, title=f"{model} {dtype} step ({where})"))
        figures.append(FigureSpec(
            _figure_name(where, model, dtype), f"Decoder step, {new} against untuned and tuned: {model} {dtype} ({where})",
            f"Step time of {model} {dtype} ({', '.join(states)}) from {where}, across decode batch sizes (left) "
            "and prefill chunks (right): milliseconds on top, relative to untuned below. Markers are medians over "
            "the repetitions, bars min to max.",
            lambda rows=rows, model=model, dtype=dtype: _step_times_grid(rows, model=model, dtype=dtype)))
    if step_lines:
        text.append("Decoder step (`profkit step`; each step run against the untuned of its own process where "
                    "every run of its set timed untuned, else against the set's untuned across processes; noise: "
                    "the larger max-min spread of the two states' repetitions; where a state ran untuned's kernels "
                    "at every linear (`picks`), its difference to untuned is drift, not a kernel choice):\n"
                    + "\n".join(line for line in step_lines if line))
        text.append(_drift_line(comparisons))
    text.append(_prediction_lines(ctx, comparisons))
    if not step_lines:
        omitted.append("Repaired/advised step figures: not drawn: no step set holds a repaired, advised, planned or "
                       "v2 state.")
    return Section("Do the tuner's picks hold in serving?", "\n\n".join(t for t in text if t),
                   tuple(figures), tuple(tables), tuple(omitted))


def _drift_line(comparisons: list) -> str:
    """How far a state's step moved between its passes in one process, in the step runs that repeat a state."""
    rows = [rows for *_, rows in comparisons]
    drift = step_analysis.pass_drift(pd.concat(rows, ignore_index=True)) if rows else pd.DataFrame()
    if drift.empty:
        return ""
    parts = []
    for phase, d in drift.groupby("phase", sort=True):
        within = 100 * d["within_ms"] / d["step_ms"]
        parts.append(f"by a median {d['drift_pct'].median():.2f}% at {phase} (up to {d['drift_pct'].max():.2f}%; the "
                     f"spread inside one pass: a median {within.median():.2f}%)")
    return (f"Between-pass drift ({_count(drift['source'].nunique(), 'step run')} that repeat a state, e.g. "
            "`--states untuned,cache,untuned,cache`): the median of one state's pass, same kernels and sizes, moved "
            + "; ".join(parts) + ". A state timed once after another (A then B) cannot tell a change of that "
            "size from drift; the interleaved sets pool the passes, so their noise holds it.")


def _figure_name(where: str, model: str, dtype: str) -> str:
    """A figure name from the step set's path: ``h200-verify_step-v2_llama3-8b-fp8-v2-graph``."""
    name = re.sub(r"[^A-Za-z0-9.-]+", "_", where).strip("_")
    return name if model in name and dtype in name else f"{name}_{model}_{dtype}"


def _prediction_lines(ctx: ReportContext, comparisons: list) -> str:
    """Per model and dtype: how often the step change predicted from verify, and from the capture, has
    the measured tuned-vs-untuned sign (empty without verified tuning-pass captures); ``comparisons``
    (:func:`_step_comparisons`) add the step runs that loaded the verified pass's cache."""
    r, data = ctx.results, ctx.data
    if r.step_measured.empty or data.verify.empty:
        return ""
    from_verify = verify_analysis.verify_step_changes(data.verify, r.step_rows, captures=data.step_captures,
                                                      linears=data.linears)
    if from_verify.empty:
        return ""
    served = step_analysis.sign_agreement(r.step_measured, from_verify).set_index(["model", "dtype"])
    tuner = step_analysis.sign_agreement(r.step_measured, r.step_predicted).set_index(["model", "dtype"])
    lines = []
    for (model, dtype), a in served.iterrows():
        t = tuner.loc[(model, dtype)] if (model, dtype) in tuner.index else None
        by_tuner = (f"; from the capture's own timings {t['agree']} of {t['sizes']} ({t['agree_beyond_noise']} of "
                    f"{t['beyond_noise']})") if t is not None else ""
        lines.append(f"- {model} {dtype}: predicted from verify, the tuned step's change has the measured sign at "
                     f"**{a['agree']} of {a['sizes']} sizes** ({a['agree_beyond_noise']} of the {a['beyond_noise']} "
                     f"measured beyond noise){by_tuner}.")
    for where, model, dtype, rows in comparisons:
        # Only sets whose cache state loaded the verified tuning pass's own cache.json.
        measured = step_analysis.cache_change(rows, cache=f"h200/step/{model}-{dtype}/cache.json")
        if measured.empty:
            continue
        a = step_analysis.sign_agreement(measured, from_verify, state="cache")
        mine = a[(a["model"] == model) & (a["dtype"] == dtype)]
        if len(mine):
            a = mine.iloc[0]
            lines.append(f"- {model} {dtype}, against the tuned cache.json vs untuned of {where}: predicted from verify, "
                         f"the sign holds at **{a['agree']} of {a['sizes']} sizes** ({a['agree_beyond_noise']} of the "
                         f"{a['beyond_noise']} measured beyond noise).")
    return ("Step change predicted from the linears' serving timings (each linear's pick at the step's M minus "
            "the default, times the layers) against the measured tuned-vs-untuned change:\n" + "\n".join(lines))


def _repaired_step_line(rows: pd.DataFrame, *, title: str) -> str:
    """Per new state (repaired, advised, ...): sizes faster / slower beyond noise than untuned and the tuned cache."""
    tuned = next((s for s in ("cache", "tuned") if (rows["state"] == s).any()), None)
    baselines = [b for b in ("untuned", tuned) if b is not None and (rows["state"] == b).any()]
    changes = {b: step_analysis.measured_step_change(rows, baseline=b) for b in baselines}
    same = step_analysis.same_kernels(rows) if "untuned" in baselines else pd.DataFrame(columns=["state", "same"])
    parts = []
    for state in (s for s in _NEW_STATES if (rows["state"] == s).any()):
        against = []
        for baseline, m in changes.items():
            g = _only(m, "state", state)
            against.append(f"vs {baseline} {int((g['beyond_noise'] & ~g['slower']).sum())} faster, "
                           f"{int(g['slower'].sum())} slower")
        mine = same[(same["state"] == state).to_numpy(dtype=bool)]
        if len(mine):
            against.append(f"ran untuned's kernels at every linear at {int(mine['same'].sum())} of {len(mine)} sizes")
        elif not baselines:
            fallback = _only(step_analysis.fallback_sizes(rows), "state", state)
            against.append("no untuned or tuned rows in this set" + (
                f"; ran tactic -1 (FlashInfer's fallback) at every linear at {int(fallback['fallback'].sum())} of "
                f"{len(fallback)} sizes" if len(fallback) else ""))
        parts.append(f"**{state}** {'; '.join(against)}")
    sizes = int(rows.groupby(["phase", "tokens"]).ngroups)
    return f"- {title}, sizes of {sizes} beyond noise: " + " | ".join(parts) + "." if parts else ""


def serving_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.e2e.empty:
        return Section("Kernels beside serving", omitted=(
            "Kernel vs end-to-end: not drawn: no serving pair was given (`profkit report DATA --bench off.txt "
            "--bench on.txt`, baseline first).",))
    fig = FigureSpec("kernel_vs_e2e", "Kernel speedup beside end-to-end serving",
                     "Left: weighted kernel speedups of the captured GEMMs. Right: the serving pair's deltas. When "
                     "they come from different GPUs or ops, the figure says so: read them side by side, not as "
                     "cause and effect.",
                     lambda: plot_kernel_vs_e2e(r.e2e, labels=ctx.labels, note=_e2e_note(ctx)))
    return Section("Kernels beside serving", "\n".join(f"- {line}" for line in serving_lines(ctx)), (fig,),
                   (Table(r.e2e[["kind", "metric", "unit", "baseline", "treatment", "improvement_pct", "note"]],
                          "kernel_vs_e2e"),))


def repeats_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    figures, tables, omitted, text = [], [], [], []
    repeated = r.stability[(r.stability["n_tunings"] > 1).fillna(False).to_numpy(dtype=bool)] if len(r.stability) \
        else r.stability
    if len(repeated):
        flipped = repeated[(repeated["n_distinct"] > 1).to_numpy(dtype=bool)]
        text.append(f"Across repeated tunings (runs, and calls that re-profiled), {len(flipped)} of {len(repeated)} "
                    f"buckets changed winner; the worst flip costs {repeated['regret_pct'].max():.2f}% "
                    f"({int((~repeated['within_noise'].fillna(True).astype(bool)).sum())} beyond noise).")
        figures.append(FigureSpec("winner_flips", "Winner flips across repeated tunings",
                                  "Share of run pairs whose winner differs, per bucket, for shapes tuned more than "
                                  "once.", lambda: plot_winner_flips(r.stability, labels=ctx.labels)))
        tables.append(Table(ctx.named(flipped[["op", "shape", "bucket", "n_tunings", "winners", "flip_rate",
                                               "regret_pct", "noise_pct", "within_noise"]]),
                            "winner_flips", sort_by="regret_pct", what="costliest flip first"))
    else:
        omitted.append("Winner flips: not drawn: no bucket was tuned more than once.")
    if len(r.diff):
        figures.append(FigureSpec("diff", "First run against the next run",
                                  "Which buckets changed winner between the first run of each shape and the next "
                                  "run of it, and what the other choice costs, priced on the first run's "
                                  "measurements.", lambda: plot_diff(r.diff, labels=ctx.labels,
                                                                     names=("first run", "next run"))))
    else:
        omitted.append("Diff of two runs: not drawn: no shape was tuned in a second run.")
    if len(r.ranks):
        dis = r.ranks[~r.ranks["agree"].fillna(True).to_numpy(dtype=bool)]
        text.append(f"Ranks disagree in {len(dis)} of {len(r.ranks)} buckets, "
                    f"{int((~dis['within_noise'].fillna(True).astype(bool)).sum())} beyond noise.")
        figures.append(FigureSpec("rank_divergence", "Per-rank divergence",
                                  "Buckets where ranks (independent tunings) chose different winners, and the "
                                  "regret.", lambda: plot_rank_divergence(r.ranks, labels=ctx.labels)))
        if len(dis):
            tables.append(Table(ctx.named(dis[["op", "shape", "bucket", "winners", "regret_pct", "noise_pct",
                                               "within_noise"]]), "rank_divergence", sort_by="regret_pct",
                                what="costliest first"))
    else:
        omitted.append("Per-rank divergence: not drawn: fewer than two ranks in the data.")
    if len(r.cache_diff):
        changed = int(r.cache_diff["changed"].sum())
        text.append(f"Each capture's winners against the cache.json FlashInfer wrote in the same process: {changed} "
                    f"of {len(r.cache_diff)} decisions differ.")
    if not figures and not text:
        return Section("Repeats and ranks", omitted=tuple(omitted))
    return Section("Repeats and ranks", "\n".join(f"- {line}" for line in text), tuple(figures), tuple(tables),
                   tuple(omitted))


def provenance_section(ctx: ReportContext) -> Section:
    data = ctx.data
    lines = [f"{_count(len(data.tables.runs), 'run')} read from `{data.root}`."]
    for where, prov in data.provenance.items():
        env = prov.get("env", {})
        flags = ", ".join(prov.get("flags", []) or []) or "none"
        lines.append(f"- `{where}`: started {env.get('started_at', '?')}, flags {flags}, command "
                     f"`{env.get('command', '?')}`")
    if data.problems:
        lines += ["", f"**{_count(len(data.problems), 'file')} could not be read** and {'was' if len(data.problems) == 1 else 'were'} "
                  "skipped:"] + [f"- `{p}`" for p in data.problems]
    return Section("Provenance", "\n".join(lines), tables=(Table(_env_table(data), "environment"),))


SECTIONS: list[Callable[[ReportContext], Section | None]] = [
    glance, tactic_section, speedup_section, tuning_section, outside_tuning_section, step_section,
    verify_section, advise_report_section, serving_section, repeats_section, provenance_section,
]


def _env_table(data) -> pd.DataFrame:
    runs = data.tables.runs
    rows = []
    for col in (c for c in _ENV if c in runs.columns):
        values = sorted({cudnn_version(v) if col == "cudnn" else str(v) for v in runs[col].dropna()})
        rows.append({"field": "cuDNN" if col == "cudnn" else col, "value": ", ".join(values) if values else "?"})
    return pd.DataFrame(rows, columns=["field", "value"])


def _e2e_note(ctx: ReportContext) -> str:
    """Where the kernels and the serving pair come from, in the data's own words."""
    runs, bench = ctx.data.tables.runs, ctx.data.bench
    gpus = ", ".join(sorted(runs["gpu"].dropna().astype(str).unique())) or "an unrecorded GPU"
    ops = ", ".join(sorted(ctx.results.speedups["op"].dropna().unique()))
    models = ", ".join(sorted(bench["model"].dropna().astype(str).unique())) or "an unnamed model"
    serving_gpus = ", ".join(sorted(bench["gpu"].dropna().astype(str).unique())) if "gpu" in bench else ""
    # The shipped files open with "# source: <url> (B200, gpt-oss-120b; 'PR: ...')": keep the shared part.
    said = "; ".join(dict.fromkeys(re.split(r"[;)]", n.partition("(")[2])[0].strip()
                                   for n in ctx.data.bench_notes.values() if "(" in n))
    where = (f"on {serving_gpus}" if serving_gpus else f"(the bench files say: {said})" if said
             else "(GPU not recorded in the bench files)")
    return f"Kernels: {ops} captured on {gpus}. Serving: {models} {where}."


@_style.styled
def _per_op(frame: pd.DataFrame, draw: Callable) -> Figure:
    """One panel per op, stacked, each drawn with ``ax=`` (the composition case)."""
    ops = sorted(frame["op"].dropna().unique()) or [None]
    fig = Figure(figsize=(8.5, 3.6 * len(ops)), layout="constrained")
    axes = fig.subplots(len(ops), 1, squeeze=False)[:, 0]
    for op, ax in zip(ops, axes):
        draw(_only(frame, "op", op) if op else frame, ax)
    return fig


@_style.styled
def _small_multiples(frame: pd.DataFrame, draw: Callable, *, labels, block: str = "op", panel: str = "shape",
                     ncols: int = 5, every_tick: bool = False) -> Figure:
    """Per ``block`` value (op), a row of small panels, one per ``panel`` value (shape), sharing axes.

    Each panel is drawn by ``draw(rows_of_one_panel, ax)`` (a ``plot_*`` with ``ax=``). Then the
    panels' titles become the panel value, their axis labels one label per block, their legends
    one legend under the figure (series named after the block left out: the panel title says it),
    and their notes (the first panel's; timing notes go to the block title) that legend's title.
    """
    blocks = sorted(frame[block].dropna().unique())
    values = {b: sorted(_only(frame, block, b)[panel].dropna().unique(), key=lambda v: labels.get(v, v)) for b in blocks}
    ncols = min(ncols, max(len(v) for v in values.values()))
    rows = {b: -(-len(values[b]) // ncols) for b in blocks}
    fig = Figure(figsize=(12.0 if ncols > 2 else 10.0, sum(2.0 * n + 0.5 for n in rows.values()) + 0.6),
                 layout="constrained")
    subfigs = fig.subfigures(len(blocks), 1, squeeze=False, height_ratios=[2.0 * rows[b] + 0.5 for b in blocks])[:, 0]
    legend: dict[str, object] = {}
    notes: list[str] = []
    ylabel = ""
    for b, sub in zip(blocks, subfigs):
        mine = _only(frame, block, b)
        timing = _style.timing_note(_style.timings_of(mine)) if block == "op" else ""
        sub.suptitle(f"{b}" + (f"   (timed {timing.partition(': ')[2]})" if timing else ""), fontsize=10,
                     fontweight="bold", x=0.01, ha="left")
        axes = sub.subplots(rows[b], ncols, sharex=True, sharey=True, squeeze=False)
        names = None
        for i, ax in enumerate(axes.flat):
            if i >= len(values[b]):
                ax.set_visible(False)
                continue
            value = values[b][i]
            draw(_only(mine, panel, value), ax)
            names = names or (ax.get_xlabel(), ax.get_ylabel().replace("\n", " "))
            if ax.get_legend() is not None:
                for handle, text in zip(ax.get_legend().legend_handles, ax.get_legend().get_texts()):
                    name = re.sub(r"noise band ±[\d.]+% \(median\)", "noise band (each shape's median)",
                                  text.get_text())
                    if not name.startswith(f"{b} "):
                        legend.setdefault(name, handle)
                ax.get_legend().remove()
            for text in list(ax.texts):
                if not notes and text.get_text() and not text.get_text().startswith(("timed ", "bs ")) \
                        and getattr(text, "xycoords", None) == "axes fraction":
                    notes.append(text.get_text())
                text.remove()
            ax.set_title(labels.get(value, value), fontsize=8, fontweight="normal")
            if ax.get_xscale() == "log" and not every_tick:
                ax.set_xticks([1, 16, 256, 4096], ["1", "16", "256", "4096"])
            ax.label_outer()
        sub.supxlabel(names[0], fontsize=8)
        ylabel = names[1]
        for ax in axes.flat:
            ax.set_xlabel("")
            ax.set_ylabel("")
    fig.supylabel(ylabel, fontsize=8)
    if legend:
        fig.legend(list(legend.values()), list(legend), loc="outside lower center", ncol=min(len(legend), 5),
                   fontsize=7, title=notes[0] if notes else None, title_fontsize=7)
    return fig


@_style.styled
def _step_times_grid(rows: pd.DataFrame, *, model: str, dtype: str) -> Figure:
    """Decode and prefill side by side, ms above and relative to untuned below; one legend, one note."""
    phases = [p for p in ("decode", "prefill") if (rows["phase"] == p).any()] or ["decode"]
    scales = (None, "untuned") if (rows["state"] == "untuned").any() else (None,)
    fig = Figure(figsize=(11.0, 3.8 * len(scales)), layout="constrained")
    axes = fig.subplots(len(scales), len(phases), squeeze=False, width_ratios=[3, 1][:len(phases)])
    for col, phase in enumerate(phases):
        for row, relative_to in enumerate(scales):
            ax = axes[row, col]
            plot_step_times(rows, model=model, dtype=dtype, phase=phase, relative_to=relative_to, ax=ax)
            if (row, col) != (0, 0) and ax.get_legend() is not None:
                ax.get_legend().remove()
            if (row, col) != (len(scales) - 1, 0):
                for text in list(ax.texts):
                    text.remove()
            if col:
                ax.set_title(f"{phase}" + (f" / {relative_to}" if relative_to else ""))
    return fig


# -- pages --------------------------------------------------------------------------------------
def build_report(data, out: str | Path, *, results: Overview | None = None,
                 sections: Sequence[Callable[[ReportContext], Section | None]] | None = None,
                 formats: Iterable[str] = ("png", "svg"), only: Iterable[str] | None = None, index: bool = True,
                 progress: bool = True) -> list[Path]:
    """Lay out ``data``'s analyses: write the figures, tables (CSV) and index.md / index.html into ``out``.

    Args:
        data: from :func:`profkit.sources.datadir.read_datadir`.
        out: output directory (created).
        results: the analyses (default: :func:`profkit.analysis.overview.overview` of ``data``).
        sections: section builders in page order (default :data:`SECTIONS`).
        formats: figure formats to write ("png", "svg", "pdf").
        only: figure names to draw (default all; see the page for names).
        index: also write the pages and the tables' CSV files.
        progress: show a tqdm progress bar on stderr.

    Returns:
        The files written: figures, then CSV tables, then index.md and index.html last.

    Raises:
        ProfkitError: for an unknown figure name in ``only`` or format.
    """
    from tqdm.auto import tqdm

    out = Path(out)
    formats = tuple(formats)
    bad = [f for f in formats if f not in ("png", "svg", "pdf")]
    if bad:
        raise ProfkitError(f"unknown figure format(s) {', '.join(bad)}; use png, svg or pdf")
    bar = tqdm(total=3, desc="profkit report", unit="step", file=sys.stderr, disable=not progress, leave=False)
    bar.set_postfix_str("analysis")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ctx = ReportContext(data=data, results=results if results is not None else overview(data))
        bar.update()
        built = [s for s in (build(ctx) for build in (SECTIONS if sections is None else sections)) if s is not None]
        names = [f.name for s in built for f in s.figures]
        if only is not None:
            only = list(only)
            unknown = [n for n in only if n not in names]
            if unknown:
                raise ProfkitError(f"unknown figure(s) {', '.join(unknown)}; this data has {', '.join(names)}")
            built = [dataclasses.replace(s, figures=tuple(f for f in s.figures if f.name in only)) for s in built]
        bar.total = 2 + sum(len(s.figures) for s in built)
        atomic.make_folder(out)
        written: list[Path] = []
        pngs: dict[str, bytes] = {}
        for spec in (f for s in built for f in s.figures):
            bar.set_postfix_str(spec.name)
            fig = spec.draw()
            for fmt in formats:
                path = out / f"{spec.name}.{fmt}"
                if fmt == "png":
                    buf = io.BytesIO()
                    fig.savefig(buf, format="png", dpi=_style.DPI, metadata=_metadata("png"))
                    pngs[spec.name] = buf.getvalue()
                    atomic.write_bytes(path, pngs[spec.name])
                else:
                    buf = io.BytesIO()
                    fig.savefig(buf, format=fmt, dpi=_style.DPI, metadata=_metadata(fmt))
                    atomic.write_bytes(path, buf.getvalue())
                written.append(path)
            if index and spec.name not in pngs:
                buf = io.BytesIO()
                fig.savefig(buf, format="png", dpi=_style.DPI, metadata=_metadata("png"))
                pngs[spec.name] = buf.getvalue()
            bar.update()
    if index:
        bar.set_postfix_str("pages")
        for table in (t for s in built for t in s.tables):
            path = out / f"{table.name}.csv"
            atomic.write_text(path, table.frame.to_csv(index=False))
            written.append(path)
        img = "png" if "png" in formats else formats[0]
        md = out / "index.md"
        atomic.write_text(md, markdown_page(data, built, img=img))
        page = out / "index.html"
        atomic.write_text(page, html_page(data, built, pngs))
        written += [md, page]
    bar.update()
    bar.close()
    return written


def _metadata(fmt: str) -> dict:
    """Deterministic files: no creation date in PNG/SVG/PDF metadata."""
    if fmt == "png":
        return {"Software": None}
    if fmt == "svg":
        return {"Date": None}
    return {"CreationDate": None}


_INTRO = "What FlashInfer's autotuner picked, why, what tuning cost, and whether it paid off."


def markdown_table(table: Table) -> str:
    """The table's shown rows as GitHub-flavoured Markdown, numbers formatted, with its footer."""
    shown = _format.display_frame(table.shown())
    cols = list(shown.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in shown.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines + ["", table.footer()])


def markdown_page(data, sections: Sequence[Section], *, img: str = "png") -> str:
    """index.md: intro, table of contents, then every section with its figures and tables."""
    parts = ["# profkit report", "", f"{_INTRO} Data: `{data.root}`.", "", "Contents:"]
    parts += [f"- [{s.title}](#{s.anchor})" for s in sections] + [""]
    for s in sections:
        parts += [f"## {s.title}", ""]
        if s.text:
            parts += [s.text, ""]
        for spec in s.figures:
            parts += [f"<a id='fig-{spec.name}'></a>", f"### {spec.title}", "", spec.caption, "",
                      f"![{spec.title}]({spec.name}.{img})", ""]
        for note in s.omitted:
            parts += [f"*{note}*", ""]
        for table in s.tables:
            if table.top:
                parts += [markdown_table(table), ""]
            else:
                parts += [table.footer(), ""]
    return _html.markdown_safe("\n".join(parts))  # names from captures carry no HTML into index.md


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
table{border-collapse:collapse;font-size:12px;margin:.5em 0 .3em}th,td{border-bottom:1px solid #ddd;padding:2px 8px;
text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}img{max-width:100%}
figure{margin:1em 0 2em}figcaption{color:#555;font-size:13px}code{font-size:12px;background:#f6f6f6;padding:0 2px}
nav{font-size:14px;columns:2}.note{color:#777;font-style:italic}.foot{font-size:12px;color:#555;margin-bottom:1.5em}
.glance{display:grid;grid-template-columns:repeat(3,1fr);gap:10px;margin:.5em 0 1em}.glance img{border:1px solid #eee}
.glance a{font-size:12px;color:#333;text-decoration:none}"""


def html_page(data, sections: Sequence[Section], pngs: dict) -> str:
    """index.html: the Markdown page's content, self-contained (figures embedded as PNG)."""
    esc = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>profkit report</title>",
             f"<style>{_CSS}</style></head><body><h1>profkit report</h1>",
             f"<p>{esc(_INTRO)} Data: <code>{esc(str(data.root))}</code>.</p>",
             "<nav>" + _html_text("\n".join(f"- [{s.title}](#{s.anchor})" for s in sections)) + "</nav>"]
    for i, s in enumerate(sections):
        parts.append(f"<h2 id='{s.anchor}'>{esc(s.title)}</h2>" + _html_text(s.text))
        if i == 0:
            parts.append(_glance_strip(sections, pngs))
        for spec in s.figures:
            src = f"data:image/png;base64,{_b64(pngs[spec.name])}" if spec.name in pngs else ""
            parts.append(f"<figure id='fig-{spec.name}'><h3>{esc(spec.title)}</h3>"
                         f"<img alt='{esc(spec.title)}' src='{src}'><figcaption>{esc(spec.caption)}</figcaption>"
                         "</figure>")
        for note in s.omitted:
            parts.append(f"<p class='note'>{_inline(esc(note))}</p>")
        for table in s.tables:
            if table.top:
                parts.append(_format.display_frame(table.shown()).to_html(index=False, border=0, escape=True))
            parts.append(f"<p class='foot'>{_inline(esc(table.footer()))}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _glance_strip(sections: Sequence[Section], pngs: dict) -> str:
    """Thumbnails of the figures the first screen's answers point to, linked to the figures."""
    # The first figure each answer points to ("**question** (figure: [..](#fig-name), ...)").
    wanted = [m.group(1) for line in sections[0].text.splitlines() if line.startswith("**")
              for m in [re.search(r"\(#fig-([\w.-]+)\)", line)] if m]
    seen = [name for name in dict.fromkeys(wanted) if name in pngs]
    if not seen:
        return ""
    titles = {f.name: f.title for s in sections for f in s.figures}
    cells = "".join(f"<a href='#fig-{n}'><img alt='{html.escape(titles.get(n, n))}' "
                    f"src='data:image/png;base64,{_b64(pngs[n])}'><br>{html.escape(titles.get(n, n))}</a>"
                    for n in seen[:3])
    return f"<div class='glance'>{cells}</div>"


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode("ascii")


def _inline(escaped: str) -> str:
    """`code`, **bold** and [text](href) in already escaped text; only http(s) and relative links."""
    return _html.inline(escaped)


def _html_text(text: str) -> str:
    """The small Markdown the sections write: paragraphs and ``- `` lists."""
    out, items = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("- "):
            items.append(f"<li>{_inline(html.escape(line[2:]))}</li>")
            continue
        if items:
            out.append("<ul>" + "".join(items) + "</ul>")
            items = []
        if line.strip():
            out.append(f"<p>{_inline(html.escape(line))}</p>")
    return "".join(out)
